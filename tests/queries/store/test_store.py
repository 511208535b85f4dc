"""The store under real failures: idempotent re-ingest, all-or-nothing ingest calls, garbage collection of strays,
and a writer killed with SIGKILL in the middle of writing."""
from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

import queries.store.store as store_mod
from queries.ingest import IngestError, ingest
from queries.store import MANIFEST, Store, keyindex

REPO = Path(__file__).resolve().parents[3]
FIX = Path(__file__).resolve().parents[2] / "fixtures"
SWF = FIX / "swf" / "tiny.swf"
PAI = FIX / "alibaba" / "pai"
SAMPLES = FIX / "canonical" / "samples.csv"
NODES = FIX / "canonical" / "nodes.csv"


def snapshot(root: Path) -> dict:
    """Everything a reader can see, in a comparable form (ingest ids and log rows are per run by design)."""
    st = Store(root)
    out = {t: st.read(t).sort(pl.all()) for t in ("jobs", "samples", "nodes")}
    out["rejects"] = st.read("rejects").drop("ingest_id").sort(pl.all())
    return out


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[k].equals(b[k]) for k in a)


def data_files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != ".lock"}


def manifest_files(root: Path) -> set[str]:
    """Live files plus those the last commit retired (deleted one commit later, for in-flight readers), each file
    of a table keyed by job with its key hashes beside it (``keyindex.sidecar``)."""
    m = Store(root).manifest()
    rels = {rel for files in m["tables"].values() for rel in files} | set(m.get("retired", []))
    return rels | {rel + keyindex.SIDECAR_SUFFIX for rel in rels if rel.split("/")[0] in keyindex.INDEXED}


def test_retired_files_outlive_one_commit_then_go(tmp_path):
    import polars as pl
    import datetime as dt

    st = Store(tmp_path)
    jobs = pl.DataFrame({"cluster": ["c"], "job_id": ["1"], "submit": [dt.datetime(2026, 1, 1)]})
    with st.transaction() as tx:
        tx.upsert("jobs", jobs)
    first = set(st.manifest()["tables"]["jobs"])
    with st.transaction() as tx:
        tx.upsert("jobs", jobs)  # rewrites the partition: the first file is retired, not deleted
    assert set(st.manifest()["retired"]) == first
    # the file and its key hashes
    assert all((tmp_path / r).exists() and keyindex.sidecar(tmp_path / r).exists() for r in first)
    with st.transaction() as tx:
        tx.append("ingest_log", pl.DataFrame({"ingest_id": ["x"]}))
    assert not any((tmp_path / r).exists() or keyindex.sidecar(tmp_path / r).exists() for r in first)


def populate(root: Path) -> None:
    ingest([SWF], root, procs_per_node=2)
    ingest([PAI], root, fmt="pai", cluster="pai")
    ingest([SAMPLES, NODES], root, cluster="lab")


def test_reingest_is_idempotent_and_other_clusters_append(tmp_path):
    root = tmp_path / "store"
    populate(root)
    before = snapshot(root)
    assert before["jobs"].height == 7 + 4 and before["samples"].height == 2
    assert before["nodes"].height == 4 + 3 + 3 and before["rejects"].height == 5 + 6 + 3
    log_before = Store(root).read("ingest_log").height

    populate(root)
    after = snapshot(root)
    assert same(before, after)
    assert Store(root).read("ingest_log").height == log_before + 4  # the log records every run
    assert data_files(root) == manifest_files(root) | {MANIFEST}  # replaced files were collected

    ingest([SWF], root, cluster="second", procs_per_node=2)
    jobs = Store(root).read("jobs")
    assert jobs.height == before["jobs"].height + 7
    first = jobs.filter(pl.col("cluster") == "tc-tiny").sort(pl.all())
    assert first.equals(before["jobs"].filter(pl.col("cluster") == "tc-tiny"))
    assert (jobs.group_by("cluster", "job_id").len()["len"] == 1).all()


def test_reingested_job_that_changed_month_is_not_kept_twice(tmp_path):
    """A corrected export moves j1 from January into February: its January row must go (and j2 stay)."""
    root = tmp_path / "store"
    first, fixed = tmp_path / "first.csv", tmp_path / "fixed.csv"
    first.write_text("job_id,submit,req_cpus\nj1,2024-01-31T23:00:00Z,1\nj2,2024-01-15T00:00:00Z,1\n")
    fixed.write_text("job_id,submit,req_cpus\nj1,2024-02-01T01:00:00Z,2\n")
    ingest([first], root, cluster="c")
    ingest([fixed], root, cluster="c")
    jobs = Store(root).read("jobs").sort("job_id")
    assert jobs.select("job_id", "req_cpus").rows() == [("j1", 2.0), ("j2", 1.0)]
    assert data_files(root) == manifest_files(root) | {MANIFEST}


def _truncated_gz(path: Path) -> Path:
    data = gzip.compress(SWF.read_bytes() * 50)
    path.write_bytes(data[: len(data) // 2])
    return path


def test_failed_second_file_leaves_store_byte_identical(tmp_path):
    root = tmp_path / "store"
    populate(root)
    manifest, files, before = (root / MANIFEST).read_bytes(), data_files(root), snapshot(root)
    good = tmp_path / "good.swf"
    good.write_bytes(SWF.read_bytes())
    with pytest.raises(IngestError, match="gzip"):
        ingest([good, _truncated_gz(tmp_path / "cut.swf.gz")], root, cluster="new")
    assert (root / MANIFEST).read_bytes() == manifest
    assert data_files(root) == files
    assert same(snapshot(root), before)


def test_write_failure_mid_transaction_rolls_back(tmp_path, monkeypatch):
    """A real OS error while writing: the partition directory of the second file's cluster is a regular file,
    so creating it fails after the first file's parts were written."""
    root = tmp_path / "store"
    populate(root)
    manifest, files, before = (root / MANIFEST).read_bytes(), data_files(root), snapshot(root)
    (root / "jobs" / "cluster=blocked").write_text("not a directory")
    blocker = "jobs/cluster=blocked"
    other = tmp_path / "other.swf"
    other.write_bytes(SWF.read_bytes())
    csv = tmp_path / "blocked.csv"
    csv.write_text("cluster,job_id,submit\nblocked,1,2024-01-01T00:00:00Z\n")
    with pytest.raises(OSError):
        ingest([SWF, csv], root)  # one call: the tiny log (its own cluster) is written, then 'blocked' fails
    assert (root / MANIFEST).read_bytes() == manifest
    assert data_files(root) == files | {blocker}  # the first file's new parts were removed by the abort
    assert same(snapshot(root), before)

    # the same through an exception injected into the Parquet writer after its first file
    calls = {"n": 0}
    real = store_mod._write_parquet

    def flaky(df, path, *rest):
        calls["n"] += 1
        if calls["n"] > 1:
            raise RuntimeError("disk on fire")
        real(df, path, *rest)

    monkeypatch.setattr(store_mod, "_write_parquet", flaky)
    with pytest.raises(RuntimeError, match="disk on fire"):
        ingest([other], root, cluster="fresh", procs_per_node=2)
    assert calls["n"] == 2
    assert (root / MANIFEST).read_bytes() == manifest
    assert data_files(root) == files | {blocker}
    assert same(snapshot(root), before)


def test_stray_files_are_ignored_then_collected(tmp_path):
    root = tmp_path / "store"
    populate(root)
    before = snapshot(root)
    part_dir = next((root / "jobs").glob("cluster=*/month=*"))
    strays = [part_dir / "part-deadbeef.parquet", part_dir / "part-cafe.parquet.tmp",
              root / f"{MANIFEST}.0123.tmp", root / "nodes" / "cluster=lab" / "part-orphan.parquet",
              part_dir / "part-deadbeef.parquet.keys", part_dir / "part-cafe.parquet.keys.tmp"]
    pl.DataFrame({"job_id": ["ghost"], "cluster": ["tc-tiny"]}).write_parquet(strays[0])
    for s in strays[1:]:
        s.write_bytes(b"half-written")
    assert same(snapshot(root), before)  # readers only follow the manifest
    ingest([SAMPLES], root, cluster="lab")
    assert not any(s.exists() for s in strays)
    assert same(snapshot(root), before)


def _big_swf(path: Path, n: int) -> None:
    # one month of jobs, so the writer spends its time on a single large partition
    lines = "\n".join(f"{i} {i % 2_000_000} {i % 97} {i % 3600} 4 {i % 3000} -1 4 7200 -1 1 {i % 50} 1 -1 1 1 -1 -1"
                      for i in range(1, n + 1))
    path.write_text("; UnixStartTime: 1000000000\n" + lines + "\n")


KILLER = """
import sys
from queries.ingest import ingest
ingest([sys.argv[1]], sys.argv[2], cluster="big")
"""


def _run_and_kill_mid_write(big: Path, root: Path, live: set[str]) -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen([sys.executable, "-c", KILLER, str(big), str(root)], cwd=REPO, env=os.environ.copy(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    killed_while: list[str] = []
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        new = [p for p in (root / "jobs").rglob("*") if p.is_file() and str(p.relative_to(root)) not in live]
        if new:  # the writer has started on new files and the manifest does not name them yet
            proc.send_signal(signal.SIGKILL)
            killed_while = sorted(p.name for p in new)
            break
        time.sleep(0.002)
    proc.wait(30)
    proc.communicate()
    return proc, killed_while


def test_sigkill_mid_write_leaves_previous_store_readable(tmp_path):
    root = tmp_path / "store"
    populate(root)
    manifest, before = (root / MANIFEST).read_bytes(), snapshot(root)
    live = manifest_files(root)
    big = tmp_path / "big.swf"
    for n in (300_000, 1_000_000):  # a bigger file if the writer outran the poll (it never has, but CI is slow)
        _big_swf(big, n)
        proc, killed_while = _run_and_kill_mid_write(big, root, live)
        if killed_while:
            break
        root, manifest, before, live = _fresh(tmp_path, n)  # that ingest completed: start over, bigger
    assert killed_while, f"writer finished before it could be killed (rc={proc.returncode})"
    assert proc.returncode == -signal.SIGKILL
    assert (root / MANIFEST).read_bytes() == manifest
    assert same(snapshot(root), before)
    strays = data_files(root) - manifest_files(root) - {MANIFEST}
    assert strays, "the killed writer left its partial files behind (expected; collected by the next commit)"
    ingest([SWF], root, procs_per_node=2)  # the lock died with the process; the next commit collects strays
    assert data_files(root) == manifest_files(root) | {MANIFEST}
    assert same(snapshot(root), before)


def _fresh(tmp_path: Path, n: int):
    root = tmp_path / f"store-{n}"
    populate(root)
    return root, (root / MANIFEST).read_bytes(), snapshot(root), manifest_files(root)


def test_layout_is_partitioned_by_cluster_and_month_and_read_by_duckdb(tmp_path):
    """Jobs by cluster and submit month, samples by cluster and sample month, each file sorted by its key; the
    DuckDB views of ``queries.connect`` show exactly the rows ``Store.read`` does."""
    import queries

    root = tmp_path / "store"
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("cluster,job_id,submit\n"
                    "a,j3,2024-01-31T23:59:59Z\na,j1,2024-01-02T00:00:00Z\na,j2,2024-02-01T00:00:00Z\n"
                    "b,j1,2024-03-15T12:00:00Z\nb,j0,2024-03-01T00:00:00Z\n")
    samples = tmp_path / "samples.csv"
    samples.write_text("cluster,job_id,ts,interval_s,cpu_used\n"
                       "a,j3,2024-02-01T00:00:10Z,60,1\na,j3,2024-01-31T23:59:59Z,60,1\na,j1,2024-01-02T00:01:00Z,60,2\n")
    ingest([jobs, samples], root, fmt="auto")
    live = Store(root).manifest()["tables"]

    def dirs(table):
        return sorted(r.rsplit("/", 1)[0] for r in live[table])

    assert dirs("jobs") == ["jobs/cluster=a/month=2024-01", "jobs/cluster=a/month=2024-02",
                            "jobs/cluster=b/month=2024-03"]
    assert dirs("samples") == ["samples/cluster=a/month=2024-01", "samples/cluster=a/month=2024-02"]
    expected = {"jobs/cluster=a/month=2024-01": ["j1", "j3"], "jobs/cluster=a/month=2024-02": ["j2"],
                "jobs/cluster=b/month=2024-03": ["j0", "j1"]}
    for rel in live["jobs"]:
        f = pl.read_parquet(root / rel)
        assert f["job_id"].to_list() == expected[rel.rsplit("/", 1)[0]], rel  # sorted by job_id
        assert f["cluster"].n_unique() == 1 and f["submit"].dt.strftime("%Y-%m").n_unique() == 1
    jan = pl.read_parquet(root / next(r for r in live["samples"] if "2024-01" in r))
    assert jan.select("job_id", "ts").rows() == sorted(jan.select("job_id", "ts").rows())
    con = queries.connect(root)
    try:
        for table in ("jobs", "samples"):
            via_duckdb = con.sql(f"select * from {table}").pl().sort(pl.all())
            assert via_duckdb.equals(Store(root).read(table).sort(pl.all())), table
    finally:
        con.close()


def test_sacct_reingest_is_idempotent_and_another_cluster_appends(tmp_path):
    """The same dump twice under one cluster keeps one copy; under a second cluster the same job ids are new
    jobs of that cluster (jobs are keyed by cluster and id)."""
    root = tmp_path / "store"
    dump = FIX / "sacct" / "gpu_cluster.txt"
    ingest([dump], root, cluster="a")
    before = snapshot(root)
    ingest([dump], root, cluster="a")
    assert same(snapshot(root), before)
    ingest([dump], root, cluster="b")
    jobs = Store(root).read("jobs")
    assert jobs.group_by("cluster").len().sort("cluster").rows() == [("a", 5), ("b", 5)]
    assert jobs.filter(pl.col("cluster") == "a").sort(pl.all()).equals(before["jobs"])
    assert sorted(jobs.filter(pl.col("cluster") == "b")["job_id"]) == sorted(before["jobs"]["job_id"])
    assert data_files(root) == manifest_files(root) | {MANIFEST}


def test_jobs_in_key_order_and_shuffled_give_the_same_files(tmp_path):
    """Rows already in job id order take the stable integer sort by partition; shuffled ones the full sort by
    (cluster, month, job id). Both must write the same partitions with the same rows in the same order, the
    jobs without a submit time in ``month=unknown``."""
    import datetime as dt

    n = 3000
    ids = [f"{1_000_000 + i}" for i in range(n)]  # equal length: string order is numeric order
    submit = [None if i % 500 == 7 else dt.datetime(2026, 1 + (i * 7919) % 5, 1 + i % 28, tzinfo=dt.timezone.utc)
              for i in range(n)]
    jobs = pl.DataFrame({"cluster": ["a" if i % 3 else "b" for i in range(n)], "job_id": ids, "submit": submit},
                        schema_overrides={"submit": pl.Datetime("us", "UTC")})
    shuffled = jobs.sample(fraction=1.0, shuffle=True, seed=5)
    assert jobs["job_id"].is_sorted() and not shuffled["job_id"].is_sorted()
    out = {}
    for name, frame in (("sorted", jobs), ("shuffled", shuffled)):
        root = tmp_path / name
        with Store(root).transaction() as tx:
            tx.upsert("jobs", frame)
        out[name] = {r.rsplit("/", 1)[0]: pl.read_parquet(root / r).select("cluster", "job_id", "submit")
                     for r in Store(root).manifest()["tables"]["jobs"]}
    assert out["sorted"].keys() == out["shuffled"].keys()
    assert {"jobs/cluster=a/month=unknown", "jobs/cluster=b/month=unknown"} <= out["sorted"].keys()
    for part, frame in out["sorted"].items():
        assert frame.equals(out["shuffled"][part]), part
        assert frame["job_id"].is_sorted(), part
        month = part.rsplit("=", 1)[1]
        got = frame["submit"].dt.strftime("%Y-%m").fill_null("unknown").unique().to_list()
        assert got == [month], part
    assert sum(f.height for f in out["sorted"].values()) == n
