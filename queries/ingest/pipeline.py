"""The ingest pipeline: parse scheduler exports (each format's reader, from ``formats``) and write them into a store.

Every format module exposes ``parse(path, **options) -> Parsed`` and a ``sniff(head: bytes, filename: str) ->
bool``, named in the registry ``formats`` (the CLI's ``--format`` choices, the detection order). A parser never
writes; ``ingest`` writes all files of one call in one store transaction, so a failure
anywhere leaves the previous store intact. The same transaction refreshes the usage rollup of every job it
touched (``queries.analytics.rollup``).

Invariants (checked here for every file, whatever the parser):
- ``rows_read == rows_accepted + rows_rejected``;
- every rejected row is kept in ``rejects`` with file, line, field, reason and raw text;
- a rejected *field* of an accepted row (a parser's ``field_rejects``: a malformed jobstats summary, a
  Prometheus point that is not a number) is kept there too, with ``kind = 'field'``; it does not count as a
  rejected row;
- a file that cannot be read at all raises ``IngestError`` whose ``str`` is one line naming file, line, field
  (control characters quoted from the file are escaped);
- a cluster name that cannot be a partition directory (``store.name_problem``) never reaches the store: the
  parsers reject its rows, ``--cluster`` is refused before anything is read.
``parse_file`` is one file's parse and checks without the write (the fuzz suite runs most inputs through it).
"""
from __future__ import annotations

import datetime as dt
import gzip
import re
import time
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ..store import Store, name_problem, schema
from . import formats
from . import timezone as TZ


class IngestError(Exception):
    """A file that cannot be ingested at all. ``str(err)`` is one line: ``file:line: field: message``."""

    def __init__(self, path: str | Path, message: str, line: int | None = None, field: str | None = None):
        self.path, self.line, self.field, self.message = str(path), line, field, message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(_one_line(f"{where}: {field + ': ' if field else ''}{message}"))


def _one_line(text: str) -> str:
    """A line break becomes a space and any other control character (a NUL, an escape sequence, a lone CR
    from the file's own text) an escape, so the message prints as exactly one line of a terminal."""
    return re.sub(r"[\x00-\x1f\x7f\x85\u2028\u2029]",
                  lambda m: " " if m[0] == "\n" else f"\\x{ord(m[0]):02x}" if ord(m[0]) < 256 else f"\\u{ord(m[0]):04x}",
                  text)


@dataclass
class Parsed:
    """What a parser found in one file. Frames may hold extra columns; they are conformed on write."""

    rows_read: int
    rows_accepted: int
    jobs: pl.DataFrame = field(default_factory=lambda: schema.empty("jobs"))
    samples: pl.DataFrame = field(default_factory=lambda: schema.empty("samples"))
    nodes: pl.DataFrame = field(default_factory=lambda: schema.empty("nodes"))
    # columns: line (Int64), field (String), reason (String), raw (String)
    rejects: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(schema={"line": pl.Int64, "field": pl.String, "reason": pl.String, "raw": pl.String})
    )
    cluster: str | None = None  # a cluster name found in the file itself (sacct-json, SWF header)
    # the zone the file's local wall-clock times were read in (sacct text), or the site zone it names (SWF
    # TimeZoneString); None when its times are absolute or relative and it names no zone
    time_zone: str | None = None
    # fields of accepted rows that were rejected or flagged (same columns as ``rejects``); the rows stay
    field_rejects: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(schema={"line": pl.Int64, "field": pl.String, "reason": pl.String, "raw": pl.String})
    )
    notes: list[str] = field(default_factory=list)  # one-line remarks for the summary (e.g. unmatched series)


@dataclass
class FileSummary:
    source_file: str
    format: str
    cluster: str
    rows_read: int
    rows_accepted: int
    rows_rejected: int
    jobs: int
    samples: int
    nodes: int
    time_zone: str | None = None  # as ``Parsed.time_zone``
    time_note: str = ""  # how the zone was chosen, when not given (``timezone.resolve``)
    fields_rejected: int = 0
    notes: list[str] = field(default_factory=list)
    # the commonest reasons rows were rejected: [count, first line, reason], most frequent first (all of them
    # are in the store's ``rejects`` table): "rejected 846" alone does not tell an operator what to fix
    top_rejects: list[list] = field(default_factory=list)

    def line(self) -> str:
        extra = f"; {self.fields_rejected} fields rejected (rows kept)" if self.fields_rejected else ""
        why = "".join(f"; {n} rejected: {reason} (first at line {first})" if first is not None else
                      f"; {n} rejected: {reason}" for n, first, reason in self.top_rejects)
        return (
            f"{self.source_file}: {self.format}: read {self.rows_read} = accepted {self.rows_accepted}"
            f" + rejected {self.rows_rejected}; {self.jobs} jobs, {self.samples} samples, {self.nodes} nodes"
            + self._zone_text() + extra + why + "".join(f"; {n}" for n in self.notes)
        )

    def _zone_text(self) -> str:
        if self.format == "sacct":
            return f"; local times read in {self.time_zone}" + (f" ({self.time_note})" if self.time_note else "")
        if self.time_zone:
            return f"; site zone {self.time_zone} (times are absolute, stored as UTC)"
        return ""


TOP_REJECTS = 3  # reasons named in an ingest's summary line
_REASON_CHARS = 120


def top_rejects(rejects: pl.DataFrame, n: int = TOP_REJECTS) -> list[list]:
    """``[count, first line, reason]`` of the ``n`` commonest reasons of ``rejects`` (ties: the earliest first),
    each reason one line of at most ``_REASON_CHARS`` characters."""
    if not rejects.height:
        return []
    top = (rejects.group_by("reason").agg(pl.len().alias("n"), pl.col("line").min().alias("first"))
           .sort(["n", "first", "reason"], descending=[True, False, False], nulls_last=True).head(n))
    out = []
    for reason, count, first in top.select("reason", "n", "first").iter_rows():
        text = _one_line(str(reason))
        out.append([count, first, text if len(text) <= _REASON_CHARS else text[:_REASON_CHARS - 3] + "..."])
    return out


def _with_cluster(df: pl.DataFrame, explicit: str | None, fallback: str) -> pl.DataFrame:
    """An explicit ``--cluster`` wins; otherwise a per-row cluster the parser found (a canonical export may hold
    several clusters) is kept and only missing ones get ``fallback``."""
    if explicit is None and "cluster" in df.columns:
        return df.with_columns(pl.col("cluster").cast(pl.String).fill_null(fallback))
    return df.with_columns(pl.lit(explicit or fallback).alias("cluster"))


def last_instants(jobs: pl.DataFrame, samples: pl.DataFrame) -> dict[str, dt.datetime]:
    """Per cluster, the last instant a file's log knows: its latest submit, start, end, start + elapsed (what
    ``sacct`` prints for a job still running is its run time until the export) or sample time."""
    parts = []
    if jobs.height:
        cols = [pl.col(c).cast(schema.UTC_TS) for c in ("submit", "start", "end") if c in jobs.columns]
        if "start" in jobs.columns and "elapsed_s" in jobs.columns:
            cols.append(pl.col("start").cast(schema.UTC_TS)
                        + pl.duration(microseconds=(pl.col("elapsed_s").cast(pl.Float64) * 1e6).round(0).cast(pl.Int64)))
        if cols:
            parts.append(jobs.select("cluster", pl.max_horizontal(cols).alias("t")))
    if samples.height and "ts" in samples.columns:
        parts.append(samples.select("cluster", pl.col("ts").cast(schema.UTC_TS).alias("t")))
    if not parts:
        return {}
    last = pl.concat(parts).drop_nulls().group_by("cluster").agg(pl.col("t").max())
    return {c: t for c, t in last.iter_rows()}


def detect_format(path: str | Path) -> str:
    """Guess a file's format from its name and first bytes (``formats.detection_order``); ``IngestError`` if
    nothing matches."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(65536)
    except OSError as exc:
        raise IngestError(path, f"cannot read file: {exc.strerror or exc}") from exc
    if path.name.endswith(".gz"):

        try:
            with gzip.open(path, "rb") as gz:
                head = gz.read(65536)
        except (OSError, EOFError, zlib.error) as exc:  # zlib.error: a bit flip in the deflate stream
            raise IngestError(path, f"not a readable gzip file: {exc}") from exc
    for fmt in formats.detection_order():
        if fmt.detector()(head, path.name):
            return fmt.name
    raise IngestError(path, "unknown format; pass --format one of " + "|".join(formats.names()), line=1)


def _note_jobs_not_in_store(parsed: list, store: str | Path, cluster: str | None) -> None:
    """Metric samples (Prometheus) name jobs by id only: say how many of those jobs neither the store nor this
    ingest holds (their samples are kept, and count once the job is ingested), so a wrong ``--job-label`` or
    ``--cluster`` shows at once instead of as silently empty results."""
    metric = [(f, cl, res) for _, f, cl, res, _ in parsed if f == "prometheus" and res.samples.height]
    if not metric:
        return
    known = [pl.concat([_with_cluster(res.jobs, cluster, cl).select("cluster", "job_id")
                        for _, _, cl, res, _ in parsed])]
    files = Store(store).files("jobs")
    if files:
        known.append(pl.scan_parquet(files).select("cluster", "job_id").collect())
    known_jobs = pl.concat(known).unique()
    for _, cl, res in metric:
        ids = _with_cluster(res.samples, cluster, cl).select("cluster", "job_id").unique()
        missing = ids.join(known_jobs, on=["cluster", "job_id"], how="anti").height
        if missing:
            res.notes.append(f"{missing} of {ids.height} jobs are not in the store (samples kept: they count once "
                             "the job is ingested; check --job-label and --cluster)")


def parse_file(path: Path, fmt: str = "auto", **options) -> tuple[str, Parsed]:
    """``(format, what the parser found)`` for one file, checked (``read = accepted + rejected``); writes
    nothing. ``IngestError`` (one line) for a file that cannot be read at all."""
    if not path.exists():
        raise IngestError(path, "no such file")
    f = detect_format(path) if fmt == "auto" else fmt
    if f not in formats.REGISTRY:
        raise IngestError(path, f"unknown format {f!r}; use one of auto|{'|'.join(formats.names())}")
    try:
        res = formats.REGISTRY[f].reader()(path, **options)
    except IngestError:
        raise
    except UnicodeDecodeError as exc:
        raise IngestError(path, f"not UTF-8 text at byte {exc.start}") from exc
    except (OSError, EOFError) as exc:
        raise IngestError(path, f"cannot read file: {exc}") from exc
    n_rej = res.rejects.height
    if res.rows_read != res.rows_accepted + n_rej:
        raise AssertionError(
            f"{path}: parser {f} miscounted: read {res.rows_read} != accepted {res.rows_accepted} + rejected {n_rej}"
        )
    return f, res


def ingest(
    paths: list[str | Path],
    store: str | Path,
    fmt: str = "auto",
    cluster: str | None = None,
    timezone: str | None = None,
    **options,
) -> list[FileSummary]:
    """Parse every file, then write all of them in one transaction. Raises ``IngestError`` before writing.

    ``timezone``: the IANA zone of local wall-clock times without a zone (sacct text); default this machine's
    zone (``timezone.resolve``). Formats with absolute (epoch) or relative times ignore it."""
    zone, zone_note = TZ.resolve(timezone if timezone is not None else options.pop("tz", None))
    options["tz"] = zone
    parsed: list[tuple[Path, str, str, Parsed, float]] = []
    if cluster is not None and name_problem(cluster):  # before any file is read or any path is built
        raise IngestError(paths[0] if paths else "-", f"{name_problem(cluster)}: {cluster!r}", field="--cluster")
    for p in paths:
        p = Path(p)
        t0 = time.perf_counter()
        f, res = parse_file(p, fmt, **options)
        # a name found in the file that cannot be a directory (the parsers rejected its rows) does not name
        # the partition of the file's rejects either
        found = res.cluster if res.cluster is not None and not name_problem(res.cluster) else None
        parsed.append((p, f, cluster or found or "default", res, time.perf_counter() - t0))

    _note_jobs_not_in_store(parsed, store, cluster)
    summaries = []
    ingest_id = uuid.uuid4().hex[:12]
    with Store(store).transaction() as tx:
        for p, f, cl, res, took in parsed:
            src = str(p)
            jobs = _with_cluster(res.jobs, cluster, cl).with_columns(
                pl.lit(f).alias("source"), pl.lit(src).alias("source_file"))
            samples = _with_cluster(res.samples, cluster, cl)
            if samples.height:
                have = pl.col("source") if "source" in samples.columns else pl.lit(None, pl.String)
                samples = samples.with_columns(pl.coalesce(have.cast(pl.String), pl.lit(f)).alias("source"))
            tx.upsert("jobs", jobs)
            tx.upsert("samples", samples)
            for snap_cluster, last in last_instants(jobs, samples).items():
                tx.record_snapshot(snap_cluster, last)
            if res.nodes.height:
                nodes = _with_cluster(res.nodes, cluster, cl)
                for (node_cluster,), part in nodes.group_by(["cluster"], maintain_order=True):
                    tx.replace_nodes(node_cluster, part)
            rej = pl.concat([res.rejects.with_columns(pl.lit("row").alias("kind")),
                             res.field_rejects.with_columns(pl.lit("field").alias("kind"))],
                            how="diagonal_relaxed").with_columns(
                pl.lit(ingest_id).alias("ingest_id"), pl.lit(cl).alias("cluster"), pl.lit(src).alias("source_file")
            )
            tx.replace_rejects(cl, src, rej)
            s = FileSummary(src, f, cl, res.rows_read, res.rows_accepted, res.rejects.height,
                            jobs.height, samples.height, res.nodes.height, res.time_zone,
                            zone_note if f == "sacct" else "", res.field_rejects.height, list(res.notes),
                            top_rejects(res.rejects))
            summaries.append(s)
            tx.append("ingest_log", pl.DataFrame([{
                "ingest_id": ingest_id, "ts": dt.datetime.now(dt.timezone.utc), "source_file": src, "format": f,
                "time_zone": s.time_zone, "cluster": cl, "rows_read": s.rows_read, "rows_accepted": s.rows_accepted,
                "rows_rejected": s.rows_rejected, "fields_rejected": s.fields_rejected,
                "jobs": s.jobs, "samples": s.samples, "nodes": s.nodes,
                "duration_s": took,
            }]))
        # the usage rollup of every job these files touched, in the same commit as the rows it derives from
        from ..analytics import rollup  # here: the analytics room loads DuckDB, which parsing alone never needs

        rollup.refresh(tx)
    return summaries
