"""``scontrol show [-o] nodes`` -> the nodes table (``queries.ingest.scontrol``): every column hand-checked on real
``scontrol`` output shapes (spaces inside values, typed GRES, state flags, the multi-line form), every bad record
rejected with its line and field and the rest kept, and the real slurm-jobinfo dump giving the layout a replay
then uses instead of one inferred from hostlists."""
from __future__ import annotations

import re

import polars as pl
import pytest

from dashboard.cli import main
from queries.ingest import IngestError, scontrol
from queries.store import Store

GIB = 1024 ** 3
ONE_LINE = (
    "NodeName=gpu001 Arch=x86_64 CoresPerSocket=32 CPUAlloc=16 CPUTot=64 CPULoad=3.2 AvailableFeatures=a100 "
    "ActiveFeatures=a100 Gres=gpu:a100:4(S:0-1) NodeAddr=gpu001 NodeHostName=gpu001 Version=23.02.7 "
    "OS=Linux 5.14.0-362.el9.x86_64 #1 SMP PREEMPT_DYNAMIC Tue Nov 7 2023 RealMemory=515000 AllocMem=0 "
    "FreeMem=500000 Sockets=2 Boards=1 State=MIXED+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A "
    "MCS_label=N/A Partitions=gpu,preempt BootTime=2024-01-01T00:00:00 SlurmdStartTime=2024-01-01T00:00:10 "
    "LastBusyTime=2024-01-02T00:00:00 CfgTRES=cpu=64,mem=515000M,billing=64,gres/gpu=4,gres/gpu:a100=4 "
    "AllocTRES=cpu=16 CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 "
    "ExtSensorsTemp=n/s Reason=maintenance window [root@2024-01-02T00:00:00]"
)


def write(tmp_path, text: str, name: str = "nodes.txt"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_a_full_one_line_record(tmp_path):
    res = scontrol.parse(write(tmp_path, ONE_LINE + "\n"))
    assert (res.rows_read, res.rows_accepted, res.rejects.height) == (1, 1, 0)
    row = res.nodes.row(0, named=True)
    # CfgTRES wins over CPUTot / RealMemory / Gres; 515000 MiB; the typed entry names the model
    assert (row["node"], row["cpus"], row["gpus"], row["gpu_type"]) == ("gpu001", 64.0, 4.0, "a100")
    assert row["mem_bytes"] == 515000 * 1024 ** 2
    assert (row["partition"], row["state"]) == ("gpu", "drain")


def test_fallbacks_without_cfgtres_and_the_states(tmp_path):
    text = "\n".join([
        "NodeName=a CPUTot=32 RealMemory=1024 Gres=gpu:v100:2(S:0),gpu:t4:1,shard:8 State=IDLE",
        "NodeName=b CPUTot=16 State=IDLE* Partitions=cpu",       # '*': not responding
        "NodeName=c CPUTot=8 State=ALLOCATED Gres=(null)",
        "NodeName=d CPUTot=8 State=DOWN+DRAIN",
        "NodeName=e CPUTot=8 State=FUTURE",
        "NodeName=f CfgTRES=cpu=24,mem=2G,billing=24 CPUTot=99 Gres=gpu:3",
    ]) + "\n"
    res = scontrol.parse(write(tmp_path, text))
    n = {r["node"]: r for r in res.nodes.iter_rows(named=True)}
    assert n["a"]["cpus"] == 32 and n["a"]["mem_bytes"] == GIB and n["a"]["gpus"] == 3 and n["a"]["gpu_type"] == "v100|t4"
    assert n["b"]["gpus"] == 0 and n["b"]["gpu_type"] is None and n["b"]["mem_bytes"] is None
    assert [n[k]["state"] for k in "abcde"] == ["idle", "down", "alloc", "down", "future"]
    assert n["b"]["partition"] == "cpu" and n["a"]["partition"] is None
    assert (n["f"]["cpus"], n["f"]["mem_bytes"], n["f"]["gpus"]) == (24.0, 2 * GIB, 3.0)


def test_the_multi_line_form_is_the_same_layout(tmp_path):
    one = "NodeName=x CPUTot=8 RealMemory=4096 State=IDLE\nNodeName=y CPUTot=4 Gres=gpu:2 State=IDLE\n"
    multi = ("NodeName=x Arch=x86_64 CoresPerSocket=4\n   CPUAlloc=0 CPUTot=8\n   RealMemory=4096 State=IDLE\n\n"
             "NodeName=y Arch=x86_64\n   CPUTot=4 Gres=gpu:2\n   State=IDLE\n\n")
    a, b = scontrol.parse(write(tmp_path, one, "a.txt")), scontrol.parse(write(tmp_path, multi, "b.txt"))
    assert a.nodes.equals(b.nodes) and a.nodes.height == 2
    assert b.rows_read == 2


def test_bad_records_are_rejected_with_line_and_field_and_the_rest_kept(tmp_path):
    text = "\n".join([
        "NodeName=ok1 CPUTot=8",
        "NodeName=bad1 CPUTot=eight",
        "NodeName=bad2 RealMemory=10",                 # no CPU count anywhere
        "NodeName=bad3 CPUTot=8 CfgTRES=cpu=8,mem=lots",
        "NodeName=ok1 CPUTot=16",                      # the same name again
        "NodeName=bad4 CPUTot=8 Gres=gpu:a100:x",
        "NodeName=ok2 CPUTot=4",
    ]) + "\n"
    res = scontrol.parse(write(tmp_path, text))
    assert res.rows_read == 7 == res.rows_accepted + res.rejects.height
    assert res.nodes["node"].to_list() == ["ok1", "ok2"] and res.nodes["cpus"].to_list() == [8.0, 4.0]
    got = [(r["line"], r["field"]) for r in res.rejects.iter_rows(named=True)]
    assert got == [(2, "CPUTot"), (3, "CPUTot"), (4, "CfgTRES.mem"), (5, "NodeName"), (6, "Gres")]
    assert "duplicate node ok1" in res.rejects["reason"][3] and res.rejects["raw"][0] == "NodeName=bad1 CPUTot=eight"


def test_nothing_valid_is_one_error_naming_file_line_and_field(tmp_path):
    p = write(tmp_path, "NodeName=a CPUTot=x\nNodeName=b CPUTot=y\n")
    with pytest.raises(IngestError) as exc:
        scontrol.parse(p)
    msg = str(exc.value)
    assert msg.endswith("nodes.txt:1: CPUTot: no valid scontrol node record; first problem: not a number: x")


def test_ingest_detects_it_and_writes_the_nodes_and_rejects(tmp_path, capsys):
    p = write(tmp_path, ONE_LINE + "\nNodeName=broken CPUTot=-4\n")
    store = tmp_path / "store"
    assert main(["ingest", "--store", str(store), "--cluster", "hpc", str(p)]) == 0
    out = capsys.readouterr().out
    assert "scontrol: read 2 = accepted 1 + rejected 1" in out and "1 nodes" in out
    s = Store(store)
    nodes = s.read("nodes")
    assert nodes["cluster"].to_list() == ["hpc"] and nodes["gpus"].to_list() == [4.0]
    rej = s.read("rejects")
    assert rej.height == 1 and rej["line"][0] == 2 and rej["field"][0] == "CPUTot"


def test_the_real_slurm_jobinfo_dump_gives_the_replay_its_layout(shared_data, tmp_path, capsys):
    d = shared_data / "sacct" / "slurm-jobinfo"
    raw = (d / "scontrol.txt").read_text().splitlines()
    res = scontrol.parse(d / "scontrol.txt")
    assert res.rows_read == len(raw) == res.rows_accepted and res.rejects.is_empty()
    # independent reading of the same lines: CfgTRES's cpu= and mem=
    cpus = sum(float(re.search(r"cpu=(\d+)", line).group(1)) for line in raw)
    unit = {"M": 1024 ** 2, "G": 1024 ** 3}  # the dump's suffixes (Slurm's are powers of 1024)
    mem = sum(float(m.group(1)) * unit[m.group(2)] for m in (re.search(r"mem=([\d.]+)([MG])", x) for x in raw))
    assert res.nodes["cpus"].sum() == cpus and res.nodes["mem_bytes"].sum() == mem
    assert res.nodes["node"].n_unique() == len(raw)
    # into the store of that cluster's sacct log: a replay then uses it instead of inferring one from hostlists
    from real_stores import build
    from dashboard.whatif import loader

    store = build("sacct-jobinfo", shared_data, tmp_path)
    assert loader.layout_inferred(store, "jobinfo")
    assert main(["ingest", "--store", str(store), "--cluster", "jobinfo", str(d / "scontrol.txt")]) == 0
    capsys.readouterr()
    assert not loader.layout_inferred(store, "jobinfo")
    nodes = loader.replay_nodes(store, "jobinfo")
    assert nodes.height == len(raw) and nodes["cpus"].sum() == pytest.approx(cpus)
    used = Store(store).read("jobs")["node_list"].drop_nulls()
    assert used.len() > 0
    assert pl.Series(res.nodes["node"]).is_in(["mycluster2-node111"]).any()  # a node the log's jobs ran on
