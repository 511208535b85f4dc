"""Stores built from the real exports in ../shared/data through the real ingest path, for the dashboard tests
(``test_dashboard_real_matrix.py``, ``test_e2e_browser.py``).

Each entry of ``SOURCES`` is one store: the files ingested together and the ingest options the other real-data
tests use (``test_queries_real.py``, ``test_ingest_sacct_real.py``). ``build`` writes a store under ``root`` and
returns its path, or raises ``NotIngestible`` with the ingest's one-line reason when the source does not ingest
(a source whose ingest fails is skipped by the matrix, which says so).
"""
from __future__ import annotations

from pathlib import Path

from queries.ingest import IngestError, ingest

AWS_FIELDS = ("State,JobID,ReqCPUS,ReqMem,ReqNodes,Constraints,Submit,Eligible,Start,Elapsed,Suspended,End,"
              "ExitCode,DerivedExitCode,AllocNodes,NCPUS,MaxDiskRead,MaxDiskWrite,MaxPages,MaxRSS,MaxVMSize,"
              "CPUTime,UserCPU,SystemCPU,TotalCPU")
JOBINFO_FIELDS = ("JobID,JobName,User,Partition,NodeList,NNodes,ncpus,NTasks,State,Submit,start,end,timelimit,"
                  "elapsed,TotalCPU,UserCPU,SystemCPU,ReqMem,MaxRSS,TRESUsageInTot,TRESUsageOutTot,MaxDiskWrite,"
                  "MaxDiskRead,MaxRSSNode,MaxDiskWriteNode,MaxDiskReadNode,Comment")  # from its README.md


class NotIngestible(Exception):
    """The source does not ingest (the message is the ingest's own one-line error)."""


def _sarc(d: Path) -> list[Path]:
    return sorted((d / "sacct" / "sarc-json" / "clusters").glob("*.json"))


# name -> (files under ../shared/data, ingest options); HPC2N's SWF counts processors, two per node
SOURCES = {
    "hpc2n": (lambda d: [d / "swf" / "HPC2N-2002-2.2-cln.swf.gz"], dict(procs_per_node=2)),
    "kth": (lambda d: [d / "swf" / "KTH-SP2-1996-2.1-cln.swf.gz"], {}),
    "sacct-aws": (lambda d: [d / "sacct" / "aws-hpc-cost-simulator" / "sacct-output-v1.txt"],
                  dict(cluster="aws", fields=AWS_FIELDS)),
    "sacct-jobinfo": (lambda d: [d / "sacct" / "slurm-jobinfo" / "sacct.txt"],
                      dict(cluster="jobinfo", fields=JOBINFO_FIELDS)),
    "sarc-json": (_sarc, {}),
    "openb": (lambda d: [d / "gpu-clusters" / "alibaba-gpu-v2023" / "openb_node_list_all_node.csv",
                         d / "gpu-clusters" / "alibaba-gpu-v2023" / "openb_pod_list_default.csv"], {}),
    "pai-2020": (lambda d: [d / "gpu-clusters" / "alibaba-gpu-v2020"], dict(fmt="pai", cluster="pai")),
    "philly": (lambda d: [d / "gpu-clusters" / "philly-helios" / "philly_subset_jobs_attempts.json"], {}),
}


def build(name: str, shared_data: Path, root: Path) -> Path:
    """Ingest source ``name`` into ``root / name`` (once: an existing store is reused) and return the store."""
    files, options = SOURCES[name]
    store = Path(root) / name
    if (store / "_manifest.json").exists():
        return store
    try:
        ingest(files(Path(shared_data)), store, **options)
    except IngestError as exc:
        raise NotIngestible(str(exc)) from exc
    return store
