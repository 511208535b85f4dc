"""A small, deterministic store for the dashboard tests (written through the real ``Store`` transaction).

Cluster ``tiny``: 4 nodes x 8 GPUs x 64 CPUs x 512 GiB, partition ``gpu``. Teams (accounts):
``lab/vision/detect`` (alice, bob), ``lab/vision/seg`` (carol), ``lab/nlp/llm`` (dave, erin).
Each user runs jobs back to back on fixed GPU lanes (two 4-GPU lanes per node), so allocations never exceed a
node. Every job's usage is a constant fraction of its request (listed in ``USERS``), which makes waste exact:
``gpu_seconds_wasted = req_gpus * elapsed_s * (1 - util)``. Bob's job names contain ``bob-private`` so access
tests can prove they never reach alice's page. One of erin's jobs is named like a spreadsheet formula, another
``<script>alert(1)</script>``: both must come out inert.
"""
from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import polars as pl

from queries.store import Store

CLUSTER = "tiny"
T0 = dt.datetime(2026, 11, 2, tzinfo=dt.timezone.utc)
DAYS = 7
GIB = 1024.0 ** 3
# user -> (account, lane list [(node, lane)], gpu utilisation, cpu utilisation, mem utilisation)
USERS = {
    "alice": ("lab/vision/detect", [("tiny-n1", 0)], 0.80, 0.50, 0.50),
    "bob": ("lab/vision/detect", [("tiny-n1", 1)], 0.20, 0.10, 0.20),
    "carol": ("lab/vision/seg", [("tiny-n2", 0), ("tiny-n2", 1)], 0.50, 0.30, 0.40),
    "dave": ("lab/nlp/llm", [("tiny-n3", 0), ("tiny-n3", 1)], 0.90, 0.70, 0.60),
    "erin": ("lab/nlp/llm", [("tiny-n4", 0)], 0.05, 0.05, 0.10),
}
CLASSES = ("training", "debug", "eval")


def jobs_frame(seed: int = 7) -> pl.DataFrame:
    rng = random.Random(seed)
    rows = []
    for user, (account, lanes, gpu_u, cpu_u, mem_u) in USERS.items():
        n = 0
        for node, _lane in lanes:
            t = T0 + dt.timedelta(minutes=rng.randint(0, 120))
            while t < T0 + dt.timedelta(days=DAYS - 1):
                n += 1
                cls = CLASSES[n % 3]
                gpus = float(rng.choice([1, 2, 4]))
                hours = {"training": rng.choice([4, 8, 12]), "debug": 0.5, "eval": 2}[cls]
                wait_s = float(rng.choice([0, 60, 600, 3600]))
                submit = t - dt.timedelta(seconds=wait_s)
                end = t + dt.timedelta(hours=hours)
                state = "COMPLETED" if n % 7 else "FAILED"
                name = f"{user}-{cls}-{n}" if user != "bob" else f"bob-private-{cls}-{n}"
                if user == "erin" and n == 2:
                    name = "=HYPERLINK(\"http://x\")"
                if user == "erin" and n == 4:
                    name = "<script>alert(1)</script>"
                req_cpus, req_mem = 16.0 * gpus, 64 * GIB * gpus
                elapsed = hours * 3600.0
                rows.append(dict(
                    cluster=CLUSTER, job_id=f"{user[0]}{n:04d}", job_name=name, user=user, account=account,
                    partition="gpu", qos="normal", job_class=cls, state=state, exit_code="0:0",
                    submit=submit, start=t, end=end, elapsed_s=elapsed, time_limit_s=elapsed * 2,
                    nodes=1, node_list=node, req_cpus=req_cpus, req_gpus=gpus, gpu_type="a100",
                    req_mem_bytes=req_mem, alloc_cpus=req_cpus, alloc_gpus=gpus, alloc_mem_bytes=req_mem,
                    cpu_seconds_used=req_cpus * elapsed * cpu_u, max_rss_bytes=req_mem * mem_u,
                    mean_gpu_util=gpu_u, max_gpu_util=min(1.0, gpu_u + 0.1), max_cpu_util=min(1.0, cpu_u + 0.1),
                    gpu_mem_used_bytes=40 * GIB * gpu_u, min_runtime_s=3600.0 if cls == "training" else 0.0,
                    priority=1.0, source="csv", source_file="fixture",
                    # lane is informational: which 4-GPU half of the node the job sat on
                ))
                t = end + dt.timedelta(minutes=rng.randint(5, 90))
    return pl.DataFrame(rows)


def nodes_frame() -> pl.DataFrame:
    return pl.DataFrame([dict(cluster=CLUSTER, node=f"tiny-n{i}", partition="gpu", cpus=64.0, gpus=8.0,
                              gpu_type="a100", mem_bytes=512 * GIB, state="idle") for i in range(1, 5)])


def samples_frame(jobs: pl.DataFrame) -> pl.DataFrame:
    """Hourly samples for the first training job of each user, at the job's constant utilisation."""
    rows = []
    first = jobs.filter(pl.col("job_class") == "training").group_by("user").agg(pl.all().first())
    for job in first.iter_rows(named=True):
        t = job["start"]
        while t < job["end"]:
            rows.append(dict(cluster=CLUSTER, job_id=job["job_id"], ts=t, interval_s=3600.0,
                             cpu_used=job["cpu_seconds_used"] / job["elapsed_s"],
                             mem_bytes=job["max_rss_bytes"], gpu_util=job["mean_gpu_util"],
                             gpu_mem_bytes=job["gpu_mem_used_bytes"]))
            t += dt.timedelta(hours=1)
    return pl.DataFrame(rows)


def build(root: str | Path, seed: int = 7) -> Path:
    """Write the fixture store into ``root`` and return it."""
    root = Path(root)
    jobs = jobs_frame(seed)
    with Store(root).transaction() as tx:
        tx.upsert("jobs", jobs)
        tx.upsert("samples", samples_frame(jobs))
        tx.replace_nodes(CLUSTER, nodes_frame())
    return root
