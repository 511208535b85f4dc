"""Fuzzing every ingest format with mutated real rows (hypothesis): bad input never escapes.

Seeds are small files of each format (the fixtures, a hand-made ``sacct --json`` document, and - through
``shared_data`` - the first rows of the real exports). Each example mutates several rows of a seed (truncation,
byte flips, wrong delimiters, huge / negative / NaN / inf numbers, swapped fields such as end before start,
control and right-to-left characters, a field 300 bytes long, duplicated or dropped lines; JSON records get typed
mutations at random paths) and then maybe the whole file (BOM, CRLF, lone CR, no final newline, gzip, truncated or
bit-flipped gzip, a cut). Every mutated row and every file-level mutation counts as one input.

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

import copy
import gzip
import hashlib
import json
import os
import re
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings, strategies as st

from queries.ingest import IngestError, ingest, parse_file
from queries.store import Store
from test_ingest_sacct_json import base_job, step
from test_ingest_sacct_real import JOBINFO_FIELDS

FIX = Path(__file__).parent / "fixtures"
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
def mutate_line(draw, line: bytes, delimiter: bytes) -> bytes:
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
            return line[:a] + draw(st.sampled_from(HUGE_NUMBERS)) + line[b:]
    fields = line.split(delimiter)
    if kind == "swap" and len(fields) > 1:  # end before start, user in the state column, ...
        i, j = draw(st.integers(0, len(fields) - 1)), draw(st.integers(0, len(fields) - 1))
        fields[i], fields[j] = fields[j], fields[i]
        return delimiter.join(fields)
    if kind == "blank" and fields:
        fields[draw(st.integers(0, len(fields) - 1))] = b""
        return delimiter.join(fields)
    return line[:pos] + draw(st.sampled_from(HOSTILE_TEXT)) + line[pos:]


def mutate_rows(draw, data: bytes, delimiter: bytes) -> tuple[bytes, int]:
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
            lines[i] = (mutate_line(draw, lines[i][0], delimiter), True)
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


def mutate_json(draw, doc: dict) -> tuple[dict, int]:
    """Typed mutations: at a random path inside a random record, replace a value, drop a key or add one."""
    jobs = doc["jobs"]
    n = draw(st.integers(1, 30))
    hostile = lambda: copy.deepcopy(draw(st.sampled_from(HOSTILE_JSON)))  # noqa: E731 - never shared, never cyclic
    for _ in range(n):
        if not jobs:
            jobs.append(hostile())
            continue
        i = draw(st.integers(0, len(jobs) - 1))
        parent, key = (doc, "meta") if "meta" in doc and draw(st.integers(0, 9)) == 0 else (jobs, i)
        while isinstance(parent[key], (dict, list)) and parent[key] and draw(st.booleans()):
            node = parent[key]
            parent, key = node, (draw(st.sampled_from(sorted(node))) if isinstance(node, dict)
                                 else draw(st.integers(0, len(node) - 1)))
        op = draw(st.sampled_from(["replace", "replace", "replace", "drop", "add"]))
        if op == "drop" and isinstance(parent, dict):
            del parent[key]
        elif op == "add" and isinstance(parent[key], dict):
            parent[key][draw(st.sampled_from(["cluster", "name", "time", "tres", "steps", "zz"]))] = hostile()
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

    def check(self, data: bytes, name: str, inputs: int, store: bool | None = None) -> None:
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
            return
        finally:
            path.unlink()
        if not store:
            assert parsed.rows_read == parsed.rows_accepted + parsed.rejects.height
            rej = pl.concat([parsed.rejects, parsed.field_rejects], how="diagonal_relaxed")
        else:
            assert s.rows_read == s.rows_accepted + s.rows_rejected
            rej = Store(self.store).read("rejects").filter(pl.col("source_file") == str(path))
            # a rejected row, or a rejected field of an accepted row (a jobstats summary): counted apart
            assert rej.filter(pl.col("kind").fill_null("row") == "row").height == s.rows_rejected
            assert rej.filter(pl.col("kind") == "field").height == s.fields_rejected
            Store(self.store).read("jobs")  # the store still reads
        assert rej["reason"].is_not_null().all() and (rej["reason"].str.len_chars() > 0).all()
        assert rej["raw"].is_not_null().all()


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
}
REAL = {  # key: (path under shared data, name, delimiter, options, lines kept)
    "real-sacct": ("sacct/slurm-jobinfo/sacct.txt", "sacct.txt", "\u2603".encode(),
                   {"fmt": "sacct", "fields": JOBINFO_FIELDS}, 40),
    "real-swf": ("swf/HPC2N-2002-2.2-cln.swf.gz", "hpc2n.swf", b" ", {}, 60),
    "real-openb": ("gpu-clusters/alibaba-gpu-v2023/openb_pod_list_default.csv", "openb_pod_list_default.csv", b",",
                   {}, 40),
    "real-pai": ("gpu-clusters/alibaba-gpu-v2020/pai_machine_spec.csv", "pai_machine_spec.csv", b",", {}, 40),
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


def test_the_run_covered_enough_inputs():
    """The default run fuzzes at least 2,000 inputs (when every fuzz test above ran in this session), and
    some of them were refused as a whole file, so both branches of the check were exercised."""
    if COUNTED["files"] < len(HAND_MADE) * EXAMPLES:
        pytest.skip(f"only part of the fuzz suite ran ({COUNTED})")
    print(f"fuzz: {COUNTED['inputs']} inputs in {COUNTED['files']} files, {COUNTED['failed']} refused whole")
    assert COUNTED["inputs"] >= MIN_INPUTS and COUNTED["failed"] > 0, COUNTED
