"""Slurm's node list, ``scontrol show -o nodes`` (one node per line) or ``scontrol show nodes`` (one record per
node over several indented lines, records apart by blank lines): the cluster's real node x CPU x GPU layout, so the
simulator replays a sacct log on the machine it ran on instead of a layout inferred from the jobs' hostlists.

A record is ``Key=value`` pairs; a key is a word that starts a whitespace-separated token and is followed by ``=``
(so ``CfgTRES=cpu=28,mem=128500M`` is one pair and ``OS=Linux 5.4.0 #1 SMP`` keeps its spaces). Per node:

| column | from (first present) |
|---|---|
| ``node`` | ``NodeName`` (required; a name seen twice is rejected the second time) |
| ``cpus`` | ``CfgTRES`` ``cpu=``, else ``CPUTot`` (required) |
| ``mem_bytes`` | ``CfgTRES`` ``mem=`` (Slurm's K/M/G/T suffixes are powers of 1024; no suffix = MiB), else ``RealMemory`` (MiB); none = null |
| ``gpus`` | ``CfgTRES`` ``gres/gpu=``, else the sum of the ``Gres`` ``gpu[:type]:N`` entries; none = 0 |
| ``gpu_type`` | the types of ``gres/gpu:TYPE=`` / ``gpu:TYPE:N`` entries, ``|``-joined in order of appearance; none = null |
| ``partition`` | the first of ``Partitions`` (a node in several partitions appears once: the nodes table keys by node) |
| ``state`` | ``State``: ``down`` if any of its flags is DOWN (or NOT_RESPONDING ``*``), else ``drain`` if DRAIN / DRAINING / DRAINED, else ``alloc`` for ALLOCATED / MIXED / COMPLETING, else ``idle`` for IDLE, else the base state in lower case |

The file names no cluster: ``quotaloop ingest --cluster NAME`` puts the nodes under the cluster whose jobs ran
on them. Rows read = node records; each is accepted or rejected with its line (the ``NodeName`` line), field and
reason. Invariant: a node's ``cpus`` and ``gpus`` are finite and >= 0, ``mem_bytes`` null or > 0.
"""
from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from ..store import schema
from .canonical import read_text
from .pipeline import IngestError, Parsed

_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_]*)=")
_UNITS = {"": 1024 ** 2, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4, "P": 1024 ** 5}
_MEM = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)$", re.I)
_GRES_GPU = re.compile(r"^gpu(?::([^:(]+))?:(\d+)")  # gpu:N, gpu:TYPE:N, gpu:TYPE:N(S:0-1)


def sniff(head: bytes, name: str) -> bool:
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"NodeName=")


def _pairs(text: str) -> dict[str, str]:
    keys = list(_KEY.finditer(text))
    return {m.group(1): text[m.end():(keys[i + 1].start() if i + 1 < len(keys) else len(text))].strip()
            for i, m in enumerate(keys)}


def _records(text: str):
    """(line number of its NodeName, raw text) per node record."""
    start, lines = None, []
    for no, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if line.lstrip().startswith("NodeName="):
            if start is not None:
                yield start, " ".join(lines)
            start, lines = no, [line.strip()]
        elif line.strip() and start is not None:
            lines.append(line.strip())
        elif line.strip():  # text before the first record: not a node list
            yield no, line.strip()
    if start is not None:
        yield start, " ".join(lines)


class _Bad(ValueError):
    def __init__(self, field: str, reason: str):
        super().__init__(reason)
        self.field = field


def _number(value: str, field: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise _Bad(field, f"not a number: {value}") from None
    if not (x >= 0 and x != float("inf")):
        raise _Bad(field, f"not a count >= 0: {value}")
    return x


def _mem_bytes(value: str, field: str, default_unit: str = "") -> float:
    m = _MEM.match(value.strip())
    if not m:
        raise _Bad(field, f"not a memory size: {value}")
    x = float(m.group(1)) * _UNITS[(m.group(2) or default_unit).upper()]
    if x <= 0:
        raise _Bad(field, f"not a memory size > 0: {value}")
    return x


def _tres(value: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in value.split(",") if "=" in item)


def _state(value: str) -> str | None:
    if not value:
        return None
    flags = [f.upper() for f in re.split(r"[+]", value.rstrip("*$~#!%@^-"))]
    if value.endswith("*") or any(f in ("DOWN", "NOT_RESPONDING", "FAIL") for f in flags):
        return "down"
    if any(f.startswith("DRAIN") for f in flags):
        return "drain"
    if flags[0] in ("ALLOCATED", "MIXED", "COMPLETING"):
        return "alloc"
    return "idle" if flags[0] == "IDLE" else flags[0].lower()


def _node(rec: str) -> dict:
    kv = _pairs(rec)
    name = kv.get("NodeName", "")
    if not name:
        raise _Bad("NodeName", "required value missing" if "NodeName" in kv else "not a scontrol node record")
    tres = _tres(kv.get("CfgTRES", ""))
    if "cpu" in tres:
        cpus = _number(tres["cpu"], "CfgTRES.cpu")
    elif "CPUTot" in kv:
        cpus = _number(kv["CPUTot"], "CPUTot")
    else:
        raise _Bad("CPUTot", "no CPU count (CfgTRES cpu= or CPUTot)")
    if "mem" in tres:
        mem = _mem_bytes(tres["mem"], "CfgTRES.mem")
    elif kv.get("RealMemory"):
        mem = _mem_bytes(kv["RealMemory"], "RealMemory", "M")
    else:
        mem = None
    types: list[str] = []
    if "gres/gpu" in tres:
        gpus = _number(tres["gres/gpu"], "CfgTRES.gres/gpu")
        types = [k.split(":", 1)[1] for k in tres if k.startswith("gres/gpu:")]
    else:
        gpus = 0.0
        for entry in re.split(r",(?![^(]*\))", kv.get("Gres", "")):
            m = _GRES_GPU.match(entry.strip())
            if m:
                gpus += float(m.group(2))
                if m.group(1) and m.group(1) not in types:
                    types.append(m.group(1))
            elif entry.strip().startswith("gpu"):
                raise _Bad("Gres", f"not a GPU count: {entry.strip()}")
    parts = [p for p in kv.get("Partitions", "").split(",") if p]
    return {"node": name, "partition": parts[0] if parts else None, "cpus": cpus, "gpus": gpus,
            "gpu_type": "|".join(types) or None, "mem_bytes": mem, "state": _state(kv.get("State", ""))}


def parse(path: str | Path, **_options) -> Parsed:
    """A ``scontrol show [-o] nodes`` dump -> the nodes table (see the module docstring)."""
    path = Path(path)
    text, _bad_utf8 = read_text(path)
    rows, rejects, seen = [], [], set()
    n_read = 0
    for line, rec in _records(text):
        n_read += 1
        try:
            row = _node(rec)
            if row["node"] in seen:
                raise _Bad("NodeName", f"duplicate node {row['node']}")
        except _Bad as exc:
            rejects.append({"line": line, "field": exc.field, "reason": str(exc), "raw": rec})
            continue
        seen.add(row["node"])
        rows.append(row)
    rej = pl.DataFrame(rejects, schema={"line": pl.Int64, "field": pl.String, "reason": pl.String, "raw": pl.String})
    if n_read and not rows:
        first = rejects[0]
        raise IngestError(path, f"no valid scontrol node record; first problem: {first['reason']}",
                          line=first["line"], field=first["field"])
    nodes = schema.conform(pl.DataFrame(rows, schema={"node": pl.String, "partition": pl.String, "cpus": pl.Float64,
                                                      "gpus": pl.Float64, "gpu_type": pl.String,
                                                      "mem_bytes": pl.Float64, "state": pl.String}), "nodes")
    return Parsed(rows_read=n_read, rows_accepted=len(rows), nodes=nodes, rejects=rej)
