"""Fuzzing every ingest format with mutated real rows (hypothesis): bad input never escapes.

Seeds are small files of each format (the fixtures, a hand-made ``sacct --json`` document, and - through
``shared_data`` - the first rows of the real exports). Each example mutates several rows of a seed (truncation,
byte flips, wrong delimiters, huge / negative / NaN / inf numbers, swapped fields such as end before start,
control and right-to-left characters, a field 300 bytes long, duplicated or dropped lines; JSON records get typed
mutations at random paths) and then maybe the whole file (BOM, CRLF, lone CR, no final newline, gzip, truncated or
bit-flipped gzip, a cut). Every mutated row and every file-level mutation counts as one input.

Two sources have seeds of their own. ``--format prometheus``: a hand-made ``query_range`` response (two jobs on two
nodes, a gap, a restarted exporter, a series of no job) ingested with ``--job-label jobid`` into a store holding
both jobs; typed mutations of series and labels (``mutate_json``), of the points themselves (``mutate_points``:
timestamps and values beyond float, NaN, wrong types, broken pairs) and of the text (a 5,000-digit integer, the
row mutations above); every series that matches no job must be a rejected row the summary counts. jobstats
summaries in sacct's ``AdminComment``: a sacct text dump whose summaries alone are corrupted (``mutate_summary``:
the decoded JSON mutated and re-encoded, base64 or gzip bytes flipped, either truncated, a zip bomb one byte over
``jobstats.MAX_JSON_BYTES`` and a summary exactly at it, markers and streams that are no summary); every row must
stay accepted, a bad summary being a field reject (``kind='field'``, a reason) on its row's line.

For every input file, ``ingest`` into a store either
- succeeds with ``read = accepted + rejected``, and the store holds exactly that many rejects of the file, each
  with a reason and its raw text; or
- raises ``IngestError`` whose message is one line naming the file, and every file of the store is
  byte-identical to before (sha256 of each).
Anything else (a traceback of any other exception) fails the test, and hypothesis shrinks it to a minimal input.

Default run: derandomised (the same inputs every run), >= 2,000 inputs. ``QUOTALOOP_FUZZ_EXAMPLES=N`` sets the
examples per test and ``QUOTALOOP_FUZZ_SEED`` randomises; ``scripts/fuzz`` runs the long campaign (>= 20,000).
"""
from __future__ import annotations

import base64
import copy
import functools
import gzip
import hashlib
import json
import os
import re
import zlib
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings, strategies as st

from queries.ingest import IngestError, ingest, jobstats, parse_file
from queries.store import Store
from test_ingest_jobstats import GPU_JOB, MULTI_CPU, ONE_IDLE, hms, summary
from test_ingest_prometheus import JOBS_DUMP, T0, grid, response, series
from test_ingest_sacct_json import base_job, step
from real_stores import JOBINFO_FIELDS

FIX = Path(__file__).resolve().parents[2] / "fixtures"
EXAMPLES = int(os.environ.get("QUOTALOOP_FUZZ_EXAMPLES") or 15)
RANDOM_SEED = os.environ.get("QUOTALOOP_FUZZ_SEED")
MIN_INPUTS = 2000 if EXAMPLES >= 14 else 0  # what the default run must reach (a smaller N is a smoke run)
STORE_EVERY = 4
SHRINK = os.environ.get("QUOTALOOP_FUZZ_SHRINK", "1") != "0"  # 0: report a failure at once, unshrunk
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=RANDOM_SEED is None,
                suppress_health_check=list(HealthCheck), print_blob=True,
                phases=list(Phase) if SHRINK else [p for p in Phase if p != Phase.shrink])
COUNTED = {"inputs": 0, "files": 0, "failed": 0}

HUGE_NUMBERS = [b"1e19", b"1e26", b"1e300", b"-1", b"-1e30", b"NaN", b"nan", b"inf", b"-inf", b"Infinity",
                b"99999999999999999999999999", b"0", b"-0", b"1.5", b"", b"0x10", b"1_000", b"9223372036854775808",
                b"-9223372036854775809", b"1e-320", b"4294967296", "\u0663".encode(), "\uff11".encode()]
HOSTILE_TEXT = [b"\x00", b"\x1b[31m", "\u202e".encode(), "\u200f".encode(), "\ufeff".encode(), b"\r", b"\t",
                b"\x7f", b"\xff\xfe", b"\xc3(", b'"', b"'", b"\\", b"=cmd|' /C calc'!A0", "\U0001f4a9".encode(),
                b"\xed\xa0\x80", b"x" * 300, b"\n", b";", b"|", b",", b" "]
DELIMITERS = [b",", b"|", b"\t", b";", b" ", "\u2603".encode(), b""]
FILE_MUTATIONS = ["none"] * 6 + ["bom", "crlf", "cr", "no-final-newline", "gzip", "gzip-cut", "gzip-flip", "cut"]
NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def tree_hash(root: Path) -> dict[str, str]:
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".lock"}


# ------------------------------------------------------------------------------------------------ mutations
def mutate_line(draw, line: bytes, delimiter: bytes, numbers=HUGE_NUMBERS) -> bytes:
    kind = draw(st.sampled_from(["truncate", "flip", "delimiter", "number", "number", "swap", "inject", "blank"]))
    pos = draw(st.integers(0, max(len(line), 1)))
    if kind == "truncate":
        return line[:pos]
    if kind == "flip" and line:
        i = min(pos, len(line) - 1)
        return line[:i] + bytes([line[i] ^ draw(st.integers(1, 255))]) + line[i + 1:]
    if kind == "delimiter":
        return line.replace(delimiter, draw(st.sampled_from(DELIMITERS)))
    if kind == "number":
        spans = [m.span() for m in NUMBER.finditer(line)]
        if spans:
            a, b = spans[draw(st.integers(0, len(spans) - 1))]
            return line[:a] + draw(st.sampled_from(numbers)) + line[b:]
    fields = line.split(delimiter)
    if kind == "swap" and len(fields) > 1:  # end before start, user in the state column, ...
        i, j = draw(st.integers(0, len(fields) - 1)), draw(st.integers(0, len(fields) - 1))
        fields[i], fields[j] = fields[j], fields[i]
        return delimiter.join(fields)
    if kind == "blank" and fields:
        fields[draw(st.integers(0, len(fields) - 1))] = b""
        return delimiter.join(fields)
    return line[:pos] + draw(st.sampled_from(HOSTILE_TEXT)) + line[pos:]


def mutate_rows(draw, data: bytes, delimiter: bytes, numbers=HUGE_NUMBERS) -> tuple[bytes, int]:
    """Several rows mutated (the header too, now and then), rows duplicated or dropped: ``(bytes, inputs)``,
    inputs = the rows changed (a row mutated twice counts once), a duplicated or dropped row being one."""
    lines = [(line, False) for line in data.split(b"\n")]
    for _ in range(draw(st.integers(1, 40))):
        # the first line (a header, mostly) one time in ten: a broken header refuses the whole file
        i = 0 if len(lines) == 1 or draw(st.integers(0, 9)) == 0 else draw(st.integers(1, len(lines) - 1))
        op = draw(st.sampled_from(["mutate"] * 8 + ["duplicate", "drop"]))
        if op == "duplicate":
            lines.insert(i, (lines[i][0], True))
        elif op == "drop" and len(lines) > 1:
            del lines[i]
            lines[max(i - 1, 0)] = (lines[max(i - 1, 0)][0], True)  # its neighbour stands for the gap
        else:
            lines[i] = (mutate_line(draw, lines[i][0], delimiter, numbers), True)
    return b"\n".join(line for line, _ in lines), sum(changed for _, changed in lines)


def mutate_file(draw, data: bytes, name: str) -> tuple[bytes, str, int]:
    kind = draw(st.sampled_from(FILE_MUTATIONS))
    if kind == "bom":
        data = b"\xef\xbb\xbf" + data
    elif kind == "crlf":
        data = data.replace(b"\n", b"\r\n")
    elif kind == "cr":
        data = data.replace(b"\n", b"\r")
    elif kind == "no-final-newline":
        data = data.rstrip(b"\n")
    elif kind == "cut":
        data = data[:draw(st.integers(0, len(data)))]
    elif kind.startswith("gzip"):
        data, name = gzip.compress(data, mtime=0), name + ".gz"
        if kind == "gzip-cut":
            data = data[:draw(st.integers(0, len(data) - 1))]
        elif kind == "gzip-flip":
            i = draw(st.integers(0, len(data) - 1))
            data = data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1:]
    return data, name, int(kind != "none")


HOSTILE_JSON = [None, True, False, 0, -1, 1.5, 1e19, 1e300, -1e300, float("inf"), float("-inf"), float("nan"),
                10**30, -(10**30), "", "x", "\u202e", "\x00", "\ud800", "9" * 40, "COMPLETED", [], {}, [1, "a"],
                {"set": True, "number": 1e300}, {"set": True, "infinite": True}, {"number": "x"},
                {"set": "yes", "number": 5}, [[[]]], {"current": ["COMPLETED"]}, {"job": {"x": 1}},
                [{"type": "gres", "name": 5, "count": "x"}], [{"type": "cpu", "count": 1e300}]]


def mutate_json(draw, doc: dict, records=lambda doc: doc["jobs"], top: str = "meta",
                add_keys=("cluster", "name", "time", "tres", "steps", "zz"), values=HOSTILE_JSON
                ) -> tuple[dict, int]:
    """Typed mutations: at a random path inside a random record (``records(doc)``, a list), replace a value, drop
    a key or add one; one time in ten the path starts at the document's ``top`` key instead."""
    jobs = records(doc)
    n = draw(st.integers(1, 30))
    hostile = lambda: copy.deepcopy(draw(st.sampled_from(values)))  # noqa: E731 - never shared, never cyclic
    for _ in range(n):
        if not jobs:
            jobs.append(hostile())
            continue
        i = draw(st.integers(0, len(jobs) - 1))
        parent, key = (doc, top) if top in doc and draw(st.integers(0, 9)) == 0 else (jobs, i)
        while isinstance(parent[key], (dict, list)) and parent[key] and draw(st.booleans()):
            node = parent[key]
            parent, key = node, (draw(st.sampled_from(sorted(node))) if isinstance(node, dict)
                                 else draw(st.integers(0, len(node) - 1)))
        op = draw(st.sampled_from(["replace", "replace", "replace", "drop", "add"]))
        if op == "drop" and isinstance(parent, dict):
            del parent[key]
        elif op == "add" and isinstance(parent[key], dict):
            parent[key][draw(st.sampled_from(add_keys))] = hostile()
        else:
            parent[key] = hostile()
    return doc, n


# ------------------------------------------------------------------------------------------------ the check
class Target:
    """One store per seed. Every ``STORE_EVERY``-th input file goes through ``ingest`` into it (so a failed ingest
    is checked against a store that holds something); the others through ``parse_file``, the same parse and
    checks without the write (the write is the slow part, and it only ever sees frames a parse accepted)."""

    def __init__(self, root: Path, options: dict):
        self.root, self.store, self.options, self.n = root, root / "store", options, 0

    def check(self, data: bytes, name: str, inputs: int, store: bool | None = None) -> dict | None:
        """The suite's invariants over one input file; what it saw (None: the file was refused whole): counts,
        ``rejects`` (rows and fields, ``kind`` telling them apart), ``jobs`` of the file and the summary's
        ``notes``, for a seed's own further checks."""
        self.n += 1
        path = self.root / f"{self.n:05d}-{name}"
        path.write_bytes(data)
        store = self.n % STORE_EVERY == 1 if store is None else store
        before = tree_hash(self.store) if store else None
        COUNTED["inputs"] += inputs
        COUNTED["files"] += 1
        try:
            if store:
                (s,) = ingest([path], self.store, **self.options)
            else:
                options = dict(self.options)
                _, parsed = parse_file(path, options.pop("fmt", "auto"), **options)
        except IngestError as exc:
            COUNTED["failed"] += 1
            msg = str(exc)
            assert not re.search(r"[\x00-\x1f\x7f]", msg), repr(msg)  # one line, no control character
            assert msg.startswith(str(path)), msg
            if store:
                assert tree_hash(self.store) == before, f"failed ingest changed the store: {msg}"
            return None
        finally:
            path.unlink()
        if not store:
            assert parsed.rows_read == parsed.rows_accepted + parsed.rejects.height
            rej = pl.concat([parsed.rejects.with_columns(pl.lit("row").alias("kind")),
                             parsed.field_rejects.with_columns(pl.lit("field").alias("kind"))], how="diagonal_relaxed")
            seen = {"read": parsed.rows_read, "accepted": parsed.rows_accepted, "rejected": parsed.rejects.height,
                    "jobs": parsed.jobs, "notes": parsed.notes}
        else:
            assert s.rows_read == s.rows_accepted + s.rows_rejected
            rej = Store(self.store).read("rejects").filter(pl.col("source_file") == str(path))
            # a rejected row, or a rejected field of an accepted row (a jobstats summary): counted apart
            assert rej.filter(pl.col("kind").fill_null("row") == "row").height == s.rows_rejected
            assert rej.filter(pl.col("kind") == "field").height == s.fields_rejected
            jobs = Store(self.store).read("jobs")  # the store still reads
            seen = {"read": s.rows_read, "accepted": s.rows_accepted, "rejected": s.rows_rejected,
                    "jobs": jobs.filter(pl.col("source_file") == str(path)), "notes": s.notes}
        assert rej["reason"].is_not_null().all() and (rej["reason"].str.len_chars() > 0).all()
        assert rej["raw"].is_not_null().all()
        return seen | {"rejects": rej}


def text_seed(path: Path, limit_lines: int | None = None) -> bytes:
    data = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    return b"".join(data.splitlines(keepends=True)[:limit_lines]) if limit_lines else data


def json_seed() -> dict:
    return {"meta": {"slurm": {"cluster": "c1"}}, "jobs": [
        base_job(),
        base_job(job_id=101, steps=[step("101.batch", 3600, 1800, 4, mem_max=2**31, util_ave=50, util_max=70,
                                         gpumem=2**33)]),
        base_job(job_id=102, array={"job_id": 102, "task_id": 3}, state={"current": "FAILED"}),
        base_job(job_id=103, tres={}, required={"CPUs": 8, "memory_per_cpu": {"set": True, "number": 1000}}),
    ]}


def fuzz_text(tmp_path_factory, key: str, data: bytes, name: str, delimiter: bytes, options: dict):
    target = Target(tmp_path_factory.mktemp(key), options)

    @FUZZ
    @given(st.data())
    def run(d):
        rows, n = mutate_rows(d.draw, data, delimiter)
        out, out_name, m = mutate_file(d.draw, rows, name)
        target.check(out, out_name, n + m)

    if RANDOM_SEED is not None:
        run = seed(int(RANDOM_SEED))(run)
    run()


def fuzz_json(tmp_path_factory, key: str, doc: dict, name: str):
    target = Target(tmp_path_factory.mktemp(key), {})

    @FUZZ
    @given(st.data())
    def run(d):
        mutated, n = mutate_json(d.draw, json.loads(json.dumps(doc)))
        text = json.dumps(mutated).encode()
        m = 0
        if d.draw(st.integers(0, 3)) == 0:  # now and then the bytes too: truncated or broken JSON
            text, _ = mutate_rows(d.draw, text, b",")
            m = 1
        out, out_name, k = mutate_file(d.draw, text, name)
        target.check(out, out_name, n + m + k)

    if RANDOM_SEED is not None:
        run = seed(int(RANDOM_SEED))(run)
    run()


# ------------------------------------------------------------------------------------------------ seeds
HAND_MADE = {  # key: (file, name it is ingested under, delimiter, options)
    "sacct": (FIX / "sacct" / "gpu_cluster.txt", "sacct.txt", b"|", {}),
    "swf": (FIX / "swf" / "tiny.swf", "tiny.swf", b" ", {}),
    "openb-pods": (FIX / "alibaba" / "openb" / "openb_pod_list_tiny.csv", "openb_pod_list_tiny.csv", b",", {}),
    "openb-nodes": (FIX / "alibaba" / "openb" / "openb_node_list_tiny.csv", "openb_node_list_tiny.csv", b",", {}),
    "pai-jobs": (FIX / "alibaba" / "pai" / "pai_job_table.csv", "pai_job_table.csv", b",", {}),
    "pai-machines": (FIX / "alibaba" / "pai" / "pai_machine_spec.csv", "pai_machine_spec.csv", b",", {}),
    "csv-jobs": (FIX / "canonical" / "jobs.csv", "jobs.csv", b",", {}),
    "csv-samples": (FIX / "canonical" / "samples.csv", "samples.csv", b",", {}),
    "scontrol": (FIX / "scontrol" / "nodes.txt", "nodes.txt", b" ", {}),
}
REAL = {  # key: (path under shared data, name, delimiter, options, lines kept)
    "real-sacct": ("sacct/slurm-jobinfo/sacct.txt", "sacct.txt", "\u2603".encode(),
                   {"fmt": "sacct", "fields": JOBINFO_FIELDS}, 40),
    "real-swf": ("swf/HPC2N-2002-2.2-cln.swf.gz", "hpc2n.swf", b" ", {}, 60),
    "real-openb": ("gpu-clusters/alibaba-gpu-v2023/openb_pod_list_default.csv", "openb_pod_list_default.csv", b",",
                   {}, 40),
    "real-pai": ("gpu-clusters/alibaba-gpu-v2020/pai_machine_spec.csv", "pai_machine_spec.csv", b",", {}, 40),
    "real-scontrol": ("sacct/slurm-jobinfo/scontrol.txt", "scontrol.txt", b" ", {}, 40),
}


@pytest.mark.parametrize("key", sorted(HAND_MADE))
def test_fuzz_hand_made(tmp_path_factory, key):
    path, name, delimiter, options = HAND_MADE[key]
    fuzz_text(tmp_path_factory, key, path.read_bytes(), name, delimiter, options)


def test_fuzz_sacct_json(tmp_path_factory):
    fuzz_json(tmp_path_factory, "sacct-json", json_seed(), "sacct.json")


@pytest.mark.parametrize("key", sorted(REAL))
def test_fuzz_real_rows(tmp_path_factory, shared_data, key):
    rel, name, delimiter, options, lines = REAL[key]
    fuzz_text(tmp_path_factory, key, text_seed(shared_data / rel, lines), name, delimiter, options)


def test_fuzz_real_sacct_json(tmp_path_factory, shared_data):
    doc = json.loads((shared_data / "sacct" / "sarc-json" / "clusters" / "mila_1706227200.json").read_text())
    fuzz_json(tmp_path_factory, "real-sacct-json", doc, "mila.json")


SEEDS_10MB = {**{k: (v[0], v[1], v[3]) for k, v in HAND_MADE.items()}, "sacct-json": (None, "sacct.json", {})}


@pytest.mark.parametrize("key", sorted(SEEDS_10MB))
def test_a_10_mb_line(tmp_path, key):
    """A 10 MB line in the middle of each seed (a run-away field, a binary blob): rejected or refused."""
    path, name, options = SEEDS_10MB[key]
    target = Target(tmp_path, options)
    if path is None:  # JSON: a record whose job name is 10 MB long, on the document's one line
        doc = json_seed()
        doc["jobs"][1]["name"] = "z" * 10_000_000
        target.check(json.dumps(doc).encode(), name, 1, store=True)
        return
    data = path.read_bytes()
    middle = data.find(b"\n", len(data) // 2) + 1
    target.check(data[:middle] + b"A" * 5_000_000 + b"9" * 5_000_000 + b"\n" + data[middle:], name, 1, store=True)


# ------------------------------------------------------------------------------------------------ Prometheus
PROM_HOSTILE = HOSTILE_JSON + [
    10**400, [10**400, "1"], [T0, "1e400"], [T0, "-0"], [T0, 5], [str(T0), "5"], [T0], [T0, "5", 1], [None, "1"],
    [float("nan"), "1"], [T0, "+Inf"], [T0, "101"], "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_PROF_SM_ACTIVE", "nvidia_gpu_jobId", "301", "0", "g01:9400", {"__name__": "nvidia_gpu_jobId"},
    [[T0, "301"], [T0 + 30, "0"]], {"resultType": "matrix", "result": []}, "matrix", "vector", "error"]
PROM_KEYS = ("__name__", "jobid", "hpc_job", "Hostname", "gpu", "instance", "cluster", "minor_number", "values",
             "metric", "resultType", "zz")
# a 5,000-digit integer: more than Python's int parsing allows (a ValueError from json.loads, not a decode error)
PROM_NUMBERS = HUGE_NUMBERS + [b"1" * 5000, b"1" * 400, b"1e400", b"Infinity", b"-Infinity"]


PROM_TS = [10**400, -(10**400), 1e300, -1, float("nan"), float("inf"), None, True, str(T0), T0 + 0.5, 0, 1e11]
PROM_VALUES = ["NaN", "+Inf", "-Inf", "1e400", "-1", "-0", "101", "", "x", "1" * 400, "0x10", 5, None, [], "\u0663"]


def mutate_points(draw, doc: dict) -> int:
    """Points of the series hit directly (a typed mutation seldom walks that deep): the timestamp or the value
    replaced (integers beyond float, NaN, strings, ...), or the pair broken. Returns the points changed."""
    result = doc.get("data", {}).get("result") if isinstance(doc.get("data"), dict) else None
    if not isinstance(result, list):
        return 0
    pts = [s["values"] for s in result if isinstance(s, dict) and isinstance(s.get("values"), list) and s["values"]]
    if not pts:
        return 0
    n = draw(st.integers(1, 6))
    for _ in range(n):
        values = pts[draw(st.integers(0, len(pts) - 1))]
        j = draw(st.integers(0, len(values) - 1))
        point = values[j] if isinstance(values[j], list) and len(values[j]) == 2 else [T0, "1"]
        what = draw(st.sampled_from(["ts", "ts", "value", "value", "pair"]))
        if what == "ts":
            values[j] = [draw(st.sampled_from(PROM_TS)), point[1]]
        elif what == "value":
            values[j] = [point[0], draw(st.sampled_from(PROM_VALUES))]
        else:
            values[j] = copy.deepcopy(draw(st.sampled_from(PROM_HOSTILE)))
    return n


def prometheus_seed() -> dict:
    """Jobs 301 (node g01) and 302 (node g02), two GPUs each, 10 steps: utilisation with a gap, frame-buffer
    memory, an exporter restart of 302's GPU 0 (two series, overlapping), and a series of a GPU no job held."""
    return response([
        series("DCGM_FI_DEV_GPU_UTIL", "301", "g01", 0, grid(0, 270, lambda s: 80 + s % 7)),
        series("DCGM_FI_DEV_GPU_UTIL", "301", "g01", 1, [p for p in grid(0, 270, lambda s: 40) if p[0] != T0 + 90]),
        series("DCGM_FI_DEV_FB_USED", "301", "g01", 0, grid(0, 270, lambda s: 1000 + s)),
        series("DCGM_FI_DEV_GPU_UTIL", "302", "g02", 0, grid(0, 150, lambda s: 10), instance="exp-a:9400"),
        series("DCGM_FI_DEV_GPU_UTIL", "302", "g02", 0, grid(120, 270, lambda s: 60), instance="exp-b:9400"),
        series("DCGM_FI_DEV_GPU_UTIL", "302", "g02", 1, grid(0, 270, lambda s: 100)),
        series("DCGM_FI_DEV_GPU_UTIL", None, "g03", 0, grid(0, 270, lambda s: 0)),
    ])


def prometheus_text(doc) -> bytes:
    """The response as JSON with one series a line, so that the text-level mutations hit series."""
    return json.dumps(doc).replace(', {"metric": ', ',\n{"metric": ').encode()


def test_fuzz_prometheus(tmp_path_factory):
    """``--format prometheus`` (query_range JSON, ``--job-label jobid``) into a store that already holds the two
    jobs: typed mutations of series, labels and points, then now and then of the text (numbers beyond float
    and int parsing, cut or flipped bytes). Besides the suite's invariants: every series that matches no job is
    a rejected row and the summary reports how many."""
    target = Target(tmp_path_factory.mktemp("prometheus"), {"fmt": "prometheus", "job_label": "jobid"})
    (target.root / "jobs.txt").write_text(JOBS_DUMP)
    ingest([target.root / "jobs.txt"], target.store, fmt="sacct", timezone="UTC")
    doc = prometheus_seed()

    @FUZZ
    @given(st.data())
    def run(d):
        n = m = 0
        mutated = json.loads(json.dumps(doc))
        if d.draw(st.integers(0, 3)):
            mutated, n = mutate_json(d.draw, mutated, records=lambda x: x["data"]["result"], top="data",
                                     add_keys=PROM_KEYS, values=PROM_HOSTILE)
        if d.draw(st.booleans()):
            n += mutate_points(d.draw, mutated)
        text = prometheus_text(mutated)
        if d.draw(st.integers(0, 7)) == 0:  # an integer of 5,000 digits: beyond what json.loads will parse
            spans = [x.span() for x in NUMBER.finditer(text)]
            a, b = spans[d.draw(st.integers(0, len(spans) - 1))] if spans else (0, 0)
            text, m = text[:a] + b"1" * 5000 + text[b:], 1
        elif not n or d.draw(st.integers(0, 2)) == 0:  # text-level: mostly a JSON error, refused whole
            text, m = mutate_rows(d.draw, text, b",", PROM_NUMBERS)
        out, out_name, k = mutate_file(d.draw, text, "query_range.json")
        seen = target.check(out, out_name, n + m + k)
        if seen is not None:
            rej = seen["rejects"]
            unmatched = rej.filter((pl.col("kind") == "row") & pl.col("reason").str.contains("matches no job"))
            noted = [x for x in seen["notes"] if "matched no job" in x]
            assert noted == ([f"{unmatched.height} series matched no job (rejected)"] if unmatched.height else [])

    if RANDOM_SEED is not None:
        run = seed(int(RANDOM_SEED))(run)
    run()


# ------------------------------------------------------------------------------------------------ jobstats
JOBSTATS_ROWS = [  # job id, nodes, node list, cpus, gpus, ReqMem, TotalCPU s, MaxRSS bytes, AdminComment, document
    ("101", 1, "g01", 16, 4, "128G", 7150, 60 * 2**30, summary(GPU_JOB), GPU_JOB),
    ("102", 2, "c[01-02]", 64, 0, "128G", 78000, 15 * 2**30, summary(MULTI_CPU), MULTI_CPU),
    ("103", 1, "g02", 8, 2, "64G", 3600, 9 * 2**30, summary(ONE_IDLE), ONE_IDLE),
    ("104", 1, "c04", 4, 0, "8G", 10, 2**30, "JS1:Short", None),
    ("105", 1, "c05", 4, 0, "8G", 100, 2**30, "JS1:None", None),
    ("107", 1, "c06", 4, 0, "8G", 1000, 2 * 2**30, "ticket 42: node drained", None),  # not a summary
]
JOBSTATS_HEAD = ("JobID|JobName|User|Account|Partition|State|Submit|Start|End|Elapsed|NNodes|NodeList|ReqCPUS|"
                 "AllocCPUS|ReqMem|AllocTRES|TotalCPU|MaxRSS|AdminComment")


def jobstats_line(row, admin: str) -> str:
    """The allocation row and its batch step (sacct text, as test_ingest_jobstats writes them)."""
    jid, nodes, nl, cpus, gpus, mem, cpu_s, rss, _, _ = row
    tres = f"cpu={cpus},mem={mem},node={nodes}" + (f",gres/gpu={gpus}" if gpus else "")
    return (f"{jid}|job{jid}|alice|org/a|p|COMPLETED|2026-11-01T09:00:00|2026-11-01T10:00:00|2026-11-01T11:00:00|"
            f"01:00:00|{nodes}|{nl}|{cpus}|{cpus}|{mem}|{tres}|{hms(cpu_s)}||{admin}\n"
            f"{jid}.batch|batch|||p|COMPLETED|2026-11-01T10:00:00|2026-11-01T10:00:00|2026-11-01T11:00:00|"
            f"01:00:00|1|{nl}||{cpus}|||{hms(cpu_s)}|{rss // 1024}K|")


SUMMARY_HOSTILE = [None, True, False, "", "12", "NaN", -1, -1e-9, 1e300, 10**400, float("nan"), float("inf"),
                   float("-inf"), 2**63, 1e19, 100.0001, 0, 1.5, [], {}, [1], {"0": 1}, {"²": 50}, {"-1": 5},
                   {"01": 5, "1": 7}, {"0" * 8: 1}, {"x": 1}, "\u202e", "\x00"]
SUMMARY_KEYS = ("nodes", "gpus", "total_time", "cpus", "used_memory", "total_memory", "gpu_utilization",
                "gpu_used_memory", "gpu_total_memory", "²", "zz")
B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
NOT_B64 = "!*-_.~ $%"  # never the dump's delimiter: only the summary goes bad
MARKERS = ["JS1:", "JS1:short", "JS1:Shor", "JS1:NoneX", "JS1:====", "JS1:" + "A" * (jobstats.MAX_ENCODED_CHARS + 4)]
SUMMARY_MUTATIONS = ["json"] * 6 + ["b64-flip", "b64-flip", "gzip-flip", "gzip-flip", "b64-cut", "gzip-cut",
                                    "bomb", "at-cap", "marker", "zlib", "plain"]


@functools.cache
def padded(doc_json: str, size: int) -> str:
    """A summary whose JSON is ``doc_json`` padded with spaces to ``size`` bytes (a bomb when over the cap)."""
    raw = doc_json.encode()
    return "JS1:" + base64.b64encode(gzip.compress(raw + b" " * (size - len(raw)), mtime=0)).decode()


def mutate_summary(draw, doc: dict | None) -> tuple[str, bool | None]:
    """The summary of a row whose document is ``doc`` (None: a marker), corrupted -> ``(AdminComment, verdict)``:
    True = it must be rejected, False = it must still be used, None = either (a typed JSON mutation may leave a
    valid document)."""
    kind = draw(st.sampled_from(SUMMARY_MUTATIONS))
    own = doc is not None
    doc = copy.deepcopy(doc if own else GPU_JOB)
    if kind == "json":  # types, huge / negative / NaN numbers, missing or extra keys, at random paths; re-encoded
        root = {"doc": doc}
        for _ in range(draw(st.integers(1, 4))):
            parent, key = root, "doc"
            while isinstance(parent[key], dict) and parent[key] and draw(st.integers(0, 3)):
                parent, key = parent[key], draw(st.sampled_from(sorted(parent[key])))
            op = draw(st.sampled_from(["replace", "replace", "drop", "add"]))
            if op == "drop" and parent is not root:
                del parent[key]
            elif op == "add" and isinstance(parent[key], dict):
                parent[key][draw(st.sampled_from(SUMMARY_KEYS))] = copy.deepcopy(draw(st.sampled_from(SUMMARY_HOSTILE)))
            else:
                parent[key] = copy.deepcopy(draw(st.sampled_from(SUMMARY_HOSTILE)))
        return summary(root["doc"]), None
    if kind == "marker":
        return draw(st.sampled_from(MARKERS)), True
    if kind == "zlib":  # a zlib stream instead of gzip: inflated all the same
        return "JS1:" + base64.b64encode(zlib.compress(json.dumps(doc).encode())).decode(), None
    if kind == "plain":  # JSON without gzip
        return "JS1:" + base64.b64encode(json.dumps(doc).encode()).decode(), True
    if kind == "bomb":  # inflates to one byte more than the cap: cut off there
        return padded(json.dumps(doc), jobstats.MAX_JSON_BYTES + 1), True
    if kind == "at-cap":  # exactly the cap: still a summary (used when it is the row's own)
        return padded(json.dumps(doc), jobstats.MAX_JSON_BYTES), False if own else None
    body = summary(doc)[4:].encode()  # the row's own summary (or GPU_JOB's for JS1:Short / JS1:None), intact
    if kind == "b64-flip":
        i = draw(st.integers(0, len(body) - 1))
        c = draw(st.sampled_from(list(B64) + [ord(x) for x in NOT_B64]))
        return "JS1:" + (body[:i] + bytes([c]) + body[i + 1:]).decode(), True if chr(c) in NOT_B64 else None
    if kind == "b64-cut":
        return "JS1:" + body[:draw(st.integers(0, len(body) - 1))].decode(), True
    raw = base64.b64decode(body)
    if kind == "gzip-flip":
        i = draw(st.integers(0, len(raw) - 1))
        raw = raw[:i] + bytes([raw[i] ^ draw(st.integers(1, 255))]) + raw[i + 1:]
        return "JS1:" + base64.b64encode(raw).decode(), None
    return "JS1:" + base64.b64encode(raw[:draw(st.integers(0, len(raw) - 1))]).decode(), True  # gzip-cut


def test_fuzz_jobstats_summaries(tmp_path_factory):
    """sacct text whose AdminComment carries jobstats summaries, each example corrupting several summaries
    (``mutate_summary``) and maybe the file's framing (BOM, CRLF, gzip). Besides the suite's invariants: every row
    stays accepted; a job's ``jobstats`` is rejected/untrusted exactly where a field reject (kind 'field', field
    AdminComment, a reason) names its line; a summary that must fail is ``rejected``, one that must pass is
    ``ok``; a comment that is no summary stays null."""
    target = Target(tmp_path_factory.mktemp("jobstats"), {"fmt": "sacct"})
    line_of = {row[0]: 2 + 2 * k for k, row in enumerate(JOBSTATS_ROWS)}  # the header is line 1

    @FUZZ
    @given(st.data())
    def run(d):
        admins, verdict = {row[0]: row[8] for row in JOBSTATS_ROWS}, {}
        picks = d.draw(st.lists(st.sampled_from([r for r in JOBSTATS_ROWS if r[8].startswith("JS1:")]),
                                min_size=1, max_size=8))
        for row in picks:  # a row picked twice: the last mutation stands (each starts from the intact summary)
            admins[row[0]], verdict[row[0]] = mutate_summary(d.draw, row[9])
        text = "\n".join([JOBSTATS_HEAD] + [jobstats_line(r, admins[r[0]]) for r in JOBSTATS_ROWS]) + "\n"
        data = text.encode()
        framing = d.draw(st.sampled_from(["none", "none", "none", "bom", "crlf", "no-final-newline", "gzip"]))
        name = "sacct.txt"
        if framing == "bom":
            data = b"\xef\xbb\xbf" + data
        elif framing == "crlf":
            data = data.replace(b"\n", b"\r\n")
        elif framing == "no-final-newline":
            data = data.rstrip(b"\n")
        elif framing == "gzip":
            data, name = gzip.compress(data, mtime=0), name + ".gz"
        seen = target.check(data, name, len(verdict) + (framing != "none"))
        assert seen is not None, "a dump whose summaries alone are bad was refused"
        assert seen["rejected"] == 0 and seen["accepted"] == seen["read"] == 2 * len(JOBSTATS_ROWS)
        jobs = dict(zip(seen["jobs"]["job_id"], seen["jobs"]["jobstats"]))
        assert len(jobs) == len(JOBSTATS_ROWS), jobs
        fields = seen["rejects"].filter(pl.col("kind") == "field")
        assert set(fields["field"]) <= {"AdminComment"} and fields["line"].is_unique().all()
        flagged = {jid for jid, st_ in jobs.items() if st_ in ("rejected", "untrusted")}
        assert set(fields["line"]) == {line_of[j] for j in flagged}, (fields, jobs)
        assert jobs["107"] is None
        for jid, v in verdict.items():
            if v is True:
                assert jobs[jid] == "rejected", (jid, admins[jid][:200], fields)
            elif v is False:
                assert jobs[jid] == "ok", (jid, fields)
        for jid in set(jobs) - set(verdict) - {"107"}:  # untouched summaries are still read
            assert jobs[jid] == {"JS1:Short": "short", "JS1:None": "none"}.get(admins[jid], "ok"), (jid, jobs)

    if RANDOM_SEED is not None:
        run = seed(int(RANDOM_SEED))(run)
    run()


def test_the_run_covered_enough_inputs(shared_data):
    """The default run fuzzes at least 2,000 inputs (when every fuzz test above ran in this session), and
    some of them were refused as a whole file, so both branches of the check were exercised. The count includes
    the real-row seeds, so without ../shared/data (a fresh clone) it skips with shared_data's reason."""
    if COUNTED["files"] < len(HAND_MADE) * EXAMPLES:
        pytest.skip(f"only part of the fuzz suite ran ({COUNTED})")
    print(f"fuzz: {COUNTED['inputs']} inputs in {COUNTED['files']} files, {COUNTED['failed']} refused whole")
    assert COUNTED["inputs"] >= MIN_INPUTS and COUNTED["failed"] > 0, COUNTED
