"""Node drains and failures as a manager writes them: ``NODES@TIME`` specs and a drain file.

- ``NODES@TIME[..END]``: NODES is a node name, a comma list or a Slurm hostlist (``gpu[001-004]``,
  ``h100-[001-003,007],a100-002``: ``engine.replay.expand_hostlist``); TIME and the optional END are instants
  like every other (ISO time or YYYY-MM-DD, UTC; seconds on a numeric trace's clock). Each node drains at TIME
  (``NodeEvent`` kind ``drain``: no new work, each running job requeued once it has run its min runtime, the
  node down once empty) and returns at END, else ``repair_time_s`` after it emptied.
- ``PROCS@TIME..END`` on a processor-count pool (``--procs``, one node: nothing to name): PROCS processors drain
  at TIME and return at END (``config.CapacityEvent``, ``engine.capacity``: no new work on them, running jobs
  keep running); END is required (a processor count has no node to empty and repair).
- A drain file: CSV with the header ``node,start,end,reason`` (``end`` and ``reason`` may be empty; ``node`` may
  be a hostlist; ``#`` lines are comments), one drain window per row - what ``sinfo -R`` / ``sacctmgr show
  event`` list. No export under ../shared/data carries timestamped node events (the store's ``nodes.state`` is a
  state without a time), so the file is written by hand or from those commands.

Invariants: pure parsing (no simulation); an event list is in the order written; errors are ``ConfigError``
with one line naming the spec or file line.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

from .config import CapacityEvent, ConfigError, NodeEvent, instant
from .replay import expand_hostlist

KINDS = ("drain", "fail")


def _when(text: str, what: str):
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        return instant(text, what)
    if not math.isfinite(seconds):
        raise ConfigError(f"{what}: not an instant: {text!r}")
    return seconds


def _nodes(text: str, what: str) -> list[str]:
    names = expand_hostlist(text.strip())
    if not names:
        raise ConfigError(f"{what}: no node named (use a name, a comma list or a hostlist like gpu[001-004])")
    return names


def parse_spec(spec: str, kind: str = "drain") -> list[NodeEvent]:
    """``NODES@TIME`` or ``NODES@TIME..END`` -> one event per node."""
    if kind not in KINDS:
        raise ConfigError(f"drain kind: {kind!r} is not one of {'|'.join(KINDS)}")
    nodes, at, when = str(spec).rpartition("@")
    if not at or not nodes.strip() or not when.strip():
        raise ConfigError(f"--drain {spec!r}: expected NODES@TIME (e.g. gpu[001-004]@2026-11-25T06:00)")
    start_text, dots, end_text = when.partition("..")
    start = _when(start_text, f"--drain {spec!r} TIME")
    end = _when(end_text, f"--drain {spec!r} END") if dots else None
    return [NodeEvent(start, n, kind, end) for n in _nodes(nodes, f"--drain {spec!r}")]


def parse_procs_spec(spec: str) -> CapacityEvent:
    """``PROCS@TIME..END`` -> one processor drain (processor-count mode)."""
    count, at, when = str(spec).rpartition("@")
    start_text, dots, end_text = when.partition("..")
    if not at or not dots or not start_text.strip() or not end_text.strip():
        raise ConfigError(f"--drain {spec!r}: under --procs expected PROCS@TIME..END "
                          "(e.g. 20@1997-03-01..1997-03-02: 20 processors for that day)")
    try:
        procs = int(count.strip())
    except ValueError:
        procs = 0
    if procs < 1:
        raise ConfigError(f"--drain {spec!r}: PROCS must be a whole number of processors >= 1 under --procs "
                          "(one pool, no node names)")
    start = _when(start_text, f"--drain {spec!r} TIME")
    end = _when(end_text, f"--drain {spec!r} END")
    if isinstance(end, float) != isinstance(start, float) or end < start:
        raise ConfigError(f"--drain {spec!r} END: before TIME (or not the same kind of instant)")
    return CapacityEvent(start, procs, end)


def load_file(path, kind: str = "drain") -> list[NodeEvent]:
    """A drain file (``node,start,end,reason``) -> events, in file order."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the drain file: {exc.strerror or exc}") from None
    rows = [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip() and not line.lstrip().startswith("#")]
    if not rows:
        raise ConfigError(f"{path}: empty drain file (expected the header node,start,end,reason)")
    header = [h.strip().lower() for h in next(csv.reader([rows[0][1]]))]
    if header[:2] != ["node", "start"] or not set(header) <= {"node", "start", "end", "reason"}:
        raise ConfigError(f"{path}, line {rows[0][0]}: expected the header node,start,end,reason, got {rows[0][1]!r}")
    out: list[NodeEvent] = []
    for i, line in rows[1:]:
        values = next(csv.reader([line]))
        if len(values) > len(header):
            raise ConfigError(f"{path}, line {i}: {len(values)} fields, the header has {len(header)}")
        rec = dict(zip(header, (v.strip() for v in values)))
        where = f"{path}, line {i}"
        if not rec.get("start"):
            raise ConfigError(f"{where}, field start: empty")
        start = _when(rec["start"], f"{where}, field start")
        end = _when(rec["end"], f"{where}, field end") if rec.get("end") else None
        if end is not None and (isinstance(end, float) != isinstance(start, float) or end < start):
            raise ConfigError(f"{where}, field end: before start (or not the same kind of instant)")
        out.extend(NodeEvent(start, n, kind, end) for n in _nodes(rec.get("node", ""), f"{where}, field node"))
    return out
