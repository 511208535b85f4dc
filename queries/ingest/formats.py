"""The ingest formats, in one registry: a format's name -> where its reader and its detector live.

``quotaloop ingest --format`` and ``quotaloop simulate --format`` take their ``choices`` from here,
``detect_format`` tries the detectors in ``detect_rank`` order and ``parse_file`` calls the reader, so adding a
format is one module (``parse(path, **options) -> Parsed`` and, to be detected, ``sniff(head, filename)``) and
one ``Format(...)`` line below (or ``register`` at run time: a plug-in, a test's toy format).

Invariants:
- A name is registered once (``register`` refuses a second one); ``names()`` keeps registration order, which
  is the order the CLI lists them in.
- Readers and detectors are imported on first use, by module name: listing the formats (building the CLI's
  parser) imports no format module.
- ``detection_order()`` tries specific signatures before catch-alls: Parquet's magic bytes first, plain
  sacct text (any delimited table with a JobID column) last.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module


@dataclass(frozen=True)
class Format:
    """One ingest format: its ``--format`` name (also the ``source`` of the jobs it writes), the module holding
    its reader, the reader's and the detector's function names there (``sniff`` None: only by ``--format``),
    its place in detection, and whether it is a job log the simulator can replay (``simulate --workload``)."""

    name: str
    module: str
    parse: str
    sniff: str | None
    detect_rank: int
    job_log: bool = False

    def reader(self):
        """``parse(path, **options) -> Parsed``."""
        return getattr(import_module(self.module), self.parse)

    def detector(self):
        """``sniff(head: bytes, filename: str) -> bool``, or None for a format that is never detected."""
        return None if self.sniff is None else getattr(import_module(self.module), self.sniff)


_HERE = __name__.rpartition(".")[0]  # queries.ingest

REGISTRY: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    """Add ``fmt``; ``ValueError`` if its name is taken or is ``auto`` (the CLI's "detect it")."""
    if fmt.name in REGISTRY or fmt.name == "auto":
        raise ValueError(f"ingest format {fmt.name!r} is already registered")
    REGISTRY[fmt.name] = fmt
    return fmt


for _fmt in (
    Format("sacct", f"{_HERE}.sacct", "parse", "sniff", detect_rank=90, job_log=True),
    Format("sacct-json", f"{_HERE}.sacct_json", "parse", "sniff", detect_rank=20, job_log=True),
    Format("swf", f"{_HERE}.swf", "parse", "sniff", detect_rank=40, job_log=True),
    Format("pai", f"{_HERE}.alibaba", "parse_pai", "sniff_pai", detect_rank=60),
    Format("openb", f"{_HERE}.openb", "parse_openb", "sniff_openb", detect_rank=50),
    Format("csv", f"{_HERE}.canonical", "parse_csv", "sniff_csv", detect_rank=80, job_log=True),
    Format("parquet", f"{_HERE}.canonical", "parse_parquet", "sniff_parquet", detect_rank=10, job_log=True),
    Format("samples", f"{_HERE}.canonical", "parse_samples", "sniff_samples", detect_rank=70),
    Format("prometheus", f"{_HERE}.prometheus", "parse", "sniff", detect_rank=30),
    Format("scontrol", f"{_HERE}.scontrol", "parse", "sniff", detect_rank=35),
    Format("philly", f"{_HERE}.philly", "parse", "sniff", detect_rank=25, job_log=True),
):
    register(_fmt)


def names() -> tuple[str, ...]:
    """Every format's name, in registration order."""
    return tuple(REGISTRY)


def job_log_names() -> tuple[str, ...]:
    """The formats ``simulate --workload`` replays (job logs; not samples, nodes-only or trace tables)."""
    return tuple(name for name, fmt in REGISTRY.items() if fmt.job_log)


def detection_order() -> list[Format]:
    """The detectable formats, in the order ``detect_format`` tries them."""
    return sorted((fmt for fmt in REGISTRY.values() if fmt.sniff is not None), key=lambda fmt: fmt.detect_rank)
