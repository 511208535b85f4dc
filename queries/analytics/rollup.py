"""The per-job usage rollup (store table ``job_rollup``): each job's sample figures, kept by every ingest.

What a ``job_rollup`` row holds: the figures ``_job_usage`` derives from a job's samples when the window holds the job's whole
run (sample counts, the integrals of the sampled CPU / GPU / memory curves capped at the job's levels and
clipped to its run interval, the covered seconds, the sampled peaks), plus the run interval and the levels they
were derived for. The SQL is ``sql/_job_rollup.sql`` (``_job_usage`` itself, with no window and no rollup).
``job_day_rollup`` holds the same integrals per job and UTC day its run's samples reach (``sql/_job_day_rollup.sql``),
so that a window of whole days is answered by summing them.

Invariants:
- One row per job of ``jobs`` (never-started jobs too, with no run interval), and its day rows, written in the same store
  transaction as the jobs and samples it derives from: a failed ingest leaves the old rows, a committed one
  the new ones (``Transaction.commit`` refuses to commit changed jobs or samples with a stale rollup).
- An open run (RUNNING, no end) whose samples all end by its run end (``samples_end_s``, or it has none) has a
  row without ``t_end``: clipping its samples to any longer run changes no integral, count, peak or day row, so
  the row holds while its run reaches its samples' end, whatever the snapshot. An open run with a sample
  reaching past its run end has that run end (the snapshot) as ``t_end``, as a finished job has its end.
- Incremental = rebuild: ``refresh`` re-derives only the jobs a transaction touched (every job or sample row it
  upserted, whatever the file; the RUNNING jobs of a cluster whose snapshot moved whose row no longer holds:
  one with a ``t_end``, or none at all), from the store as the transaction will commit it, and gives the rows
  ``rebuild`` gives (up to the last bits of a floating-point sum, whose order DuckDB does not fix). A snapshot
  move writes nothing for the open runs whose rows hold.
- A query uses a row only when it was derived for the job's run interval and levels as that query stages them,
  or is an open run's row without ``t_end`` and the job's run end is at or after its samples' end
  (``_job_usage``'s ``rollup_answers``); a store without a rollup (older than it, or a simulation's output) is
  answered from the samples.

Cost of an incremental refresh: what the refresh touches, not the store. Every store file keyed by job carries
the hashes of its job ids in its footer (``queries.store.keyindex``; a ``jobs`` file also lists its RUNNING
jobs), so the touched jobs' rows and samples are read from the files that hold them only (a new job's samples
may sit in any older file: the footers say which), the RUNNING jobs are found without scanning the jobs, and
the upserts rewrite only the files holding a touched job (new jobs go to a new file). ``rebuild`` writes the
RUNNING jobs' ``job_rollup`` and day rows into files of their own, so re-deriving them rewrites those small
files, not every month. What remains per file of the store is reading its footer (queries/README.md,
"Rollups").
"""
from __future__ import annotations

import datetime as dt
import os

import polars as pl

from ..store import Store
from ..store import keyindex, schema
from . import cells, cube, usage_hours
from .loader import run

TABLE = "job_rollup"
QUERY = "_job_rollup"
DAY_TABLE = "job_day_rollup"  # the same integrals per job and UTC day (several rows per job)
DAY_QUERY = "_job_day_rollup"
KEYS = ["cluster", "job_id"]
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
CHUNK_JOBS = 200_000  # jobs a compaction's refresh re-derives at a time (``refresh(chunk_jobs=...)``)


def _running(tx) -> pl.DataFrame:
    """The (cluster, job_id) of the RUNNING jobs without an end of the clusters whose snapshot moved: they run
    until it, so their rows' run interval moved with it."""
    if not tx.moved_snapshots:
        return pl.DataFrame(schema={"cluster": pl.String, "job_id": pl.String})
    files = [str(tx.store.root / r) for r in tx.tables.get("jobs", [])]
    moved = sorted(tx.moved_snapshots)
    # a file's footer lists its RUNNING jobs (``keyindex``); only a file without one is scanned
    parts = [listed.filter(pl.col("cluster").is_in(moved)) if (listed := keyindex.running(f)) is not None else
             pl.scan_parquet(f).filter(pl.col("cluster").is_in(moved)
                                       & (pl.col("state") == "RUNNING") & pl.col("end").is_null())
             .select(pl.col(k).cast(pl.String) for k in KEYS).collect() for f in files]
    parts = [p for p in parts if p.height]
    return pl.concat(parts).unique() if parts else pl.DataFrame(schema={"cluster": pl.String, "job_id": pl.String})


def _running_all(tx) -> pl.DataFrame:
    """The (cluster, job_id) of every RUNNING job without an end, whatever its cluster's snapshot did."""
    files = [str(tx.store.root / r) for r in tx.tables.get("jobs", [])]
    parts = [listed if (listed := keyindex.running(f)) is not None else
             pl.scan_parquet(f).filter((pl.col("state") == "RUNNING") & pl.col("end").is_null())
             .select(pl.col(k).cast(pl.String) for k in KEYS).collect() for f in files]
    parts = [p for p in parts if p.height]
    return pl.concat(parts).unique() if parts else pl.DataFrame(schema={"cluster": pl.String, "job_id": pl.String})


def _touched(tx) -> pl.DataFrame:
    """The (cluster, job_id) of every job or sample row ``tx`` upserted."""
    parts = [t.select(pl.col(k).cast(pl.String) for k in KEYS) for t in tx.touched]
    return pl.concat(parts).unique() if parts else pl.DataFrame(schema={"cluster": pl.String, "job_id": pl.String})


def _epoch_s(text: str) -> float:
    """An ISO instant -> epoch seconds as DuckDB's ``epoch_us(t) / 1e6`` gives it (whole microseconds first)."""
    t = dt.datetime.fromisoformat(text)
    return ((t - _EPOCH) // dt.timedelta(microseconds=1)) / 1e6


def _old_rows(tx, keys: pl.DataFrame, columns: list[str], files: list[str] | None = None) -> pl.DataFrame:
    """``columns`` of the ``job_rollup`` rows the store holds for ``keys``, read (those columns only) from the files
    (``files``: default all the table's) whose footer says they may hold one of them (``keyindex``)."""
    if files is None:
        files = [str(tx.store.root / r) for r in tx.tables.get(TABLE, [])]
    probe = keyindex.Probe(keys["job_id"])
    files = [f for f in files if keyindex.may_hold(f, probe)] if keys.height else []
    if not files:
        return schema.empty(TABLE).select(columns)
    return pl.concat([scan_columns(keyindex.scan_keyed(f, keys), f, columns).collect() for f in files])


def _stale(tx, running: pl.DataFrame) -> pl.DataFrame:
    """The untouched RUNNING jobs of moved snapshots (``running``) whose rows no longer hold. A row without a
    run end (an open run whose samples all end by its run end: ``derive``) holds while the run reaches its
    samples' end; a snapshot only moves forward (``Transaction.record_snapshot``), so it always does: no
    write. Re-derived: a job without a row, and a row with a run end (samples reaching past the snapshot it
    was derived for, or a row written before rows could go without one).
    A file's footer lists its rows without a run end (``keyindex.open_rows``): no row is read but from a file
    written before footers did."""
    if not running.height:
        return running
    columns = [*KEYS, "t_start", "samples_end_s"]
    listed, unlisted = [schema.empty(TABLE).select(columns)], []  # a store without rollup files: none holds
    for f in (str(tx.store.root / r) for r in tx.tables.get(TABLE, [])):
        rows = keyindex.open_rows(f)
        (unlisted.append(f) if rows is None else listed.append(rows.join(running, on=KEYS, how="semi")))
    if unlisted:
        old = _old_rows(tx, running, columns=[*columns, "t_end"], files=unlisted)
        listed.append(old.filter(pl.col("t_start").is_not_null() & pl.col("t_end").is_null()).select(columns))
    snap = pl.DataFrame({"cluster": list(tx.snapshots), "__snap": [_epoch_s(t) for t in tx.snapshots.values()]},
                        schema={"cluster": pl.String, "__snap": pl.Float64})
    holds = (pl.concat(listed).join(snap, on="cluster", how="left")
             .filter(pl.col("__snap").is_not_null()
                     & (pl.col("samples_end_s").is_null()
                        | (pl.col("samples_end_s") <= pl.max_horizontal("__snap", "t_start")))))
    return running.join(holds.select(KEYS), on=KEYS, how="anti")


def scan_columns(frame: pl.LazyFrame, path: str | os.PathLike, columns: list[str]) -> pl.LazyFrame:
    """``columns`` of ``frame`` (a scan of the ``job_rollup`` file at ``path``) typed as the table's schema: a
    column the file lacks (written before the column existed) is null."""
    have = pl.read_parquet_schema(path)
    types = schema.polars_schema(TABLE)
    return frame.select(pl.col(c).cast(types[c]) if c in have else pl.lit(None, dtype=types[c]).alias(c)
                        for c in columns)


def derive(tx, scope: pl.DataFrame | None = None, threads: int | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(job_rollup rows, job_day_rollup rows)`` for the jobs in ``scope`` (None: every job) of the store as
    ``tx`` would commit it."""
    extra = {TABLE: schema.empty(TABLE), DAY_TABLE: schema.empty(DAY_TABLE)}
    if scope is not None:
        for table in ("jobs", "samples"):
            extra[table] = keyindex.read_keyed([str(tx.store.root / r) for r in tx.tables.get(table, [])], table, scope)
    con = cells.writer_connection(tx, extra, QUERY, DAY_QUERY, threads=threads)
    try:
        rows, days = run(QUERY, con=con), run(DAY_QUERY, con=con)
    finally:
        con.close()
    if scope is not None:
        samples = extra["samples"].lazy()
    else:
        files = [str(tx.store.root / r) for r in tx.tables.get("samples", [])]
        samples = pl.scan_parquet(files) if files else schema.empty("samples").lazy()
    ends = (samples.filter(pl.col("ts").is_not_null() & pl.col("interval_s").is_not_null())
            .group_by(pl.col("cluster").cast(pl.String), pl.col("job_id").cast(pl.String))
            .agg((pl.col("ts").dt.epoch("us").cast(pl.Float64) / 1e6 + pl.col("interval_s")).max()
                 .alias("samples_end_s")).collect(engine="streaming"))  # a rebuild scans every sample: in batches
    open_runs = rows.filter(pl.col("open_run")).select(pl.col(k).cast(pl.String) for k in KEYS)
    rows = (schema.conform(rows, TABLE).drop("samples_end_s").join(ends, on=KEYS, how="left")
            .join(open_runs.with_columns(pl.lit(True).alias("__open")), on=KEYS, how="left"))
    # an open run's figures hold for any run end at or after its samples' end: its row then records none, so
    # that a snapshot move leaves it as it is (the queries' `rollup_answers` says when such a row answers)
    unbound = (pl.col("__open").fill_null(False) & pl.col("t_start").is_not_null() & pl.col("t_end").is_not_null()
               & (pl.col("samples_end_s").is_null() | (pl.col("samples_end_s") <= pl.col("t_end"))))
    rows = rows.with_columns(pl.when(unbound).then(None).otherwise(pl.col("t_end")).alias("t_end"))
    return schema.conform(rows, TABLE), schema.conform(days, DAY_TABLE)


def refresh(tx, chunk_jobs: int | None = None) -> int:
    """Bring ``tx``'s rollup up to date with the jobs and samples it upserted; the number of rows written.
    ``chunk_jobs``: re-derive at most that many jobs at a time (a compaction touches most jobs of the store;
    memory then holds one chunk's jobs and samples), in the order of their rows' submit months."""
    touched = _touched(tx)
    again = _stale(tx, _running(tx).join(touched, on=KEYS, how="anti"))
    scope = pl.concat([touched, again]).unique()
    if not scope.height:
        tx.derived_fresh = True
        return 0
    # where the re-derived jobs' day rows are: the partition of their old row's submit month
    had = _old_rows(tx, scope, columns=[*KEYS, "submit"])
    if chunk_jobs is None or scope.height <= chunk_jobs:
        slices = [scope]
    else:
        ordered = scope.join(had, on=KEYS, how="left").sort("submit", *KEYS, nulls_last=True).select(KEYS)
        slices = [ordered.slice(k, chunk_jobs) for k in range(0, ordered.height, chunk_jobs)]
    n = 0
    for part in slices:
        n += _rederive(tx, part, had.join(part, on=KEYS, how="semi"))
    tx.derived_fresh = True
    return n


def _rederive(tx, scope: pl.DataFrame, had: pl.DataFrame) -> int:
    """Derive the rows of the jobs in ``scope`` and upsert them; ``had``: the scope's jobs that had a row, with
    its submit. The rows written."""
    rows, days = derive(tx, scope)
    n = tx.upsert(TABLE, rows)
    # a re-derived job may now reach fewer days (or none): drop all its day rows, write what it has. They exist
    # only for a job that had a row, in the partition of that row's submit month
    if had.height:
        tx.delete_keys(DAY_TABLE, had, where=True)
    tx.upsert(DAY_TABLE, days)
    changed = pl.concat([f.select("cluster", "job_id") for f in (rows, had)])
    scoped = cells.Scope(tx, changed)  # the same cells of both tables
    cube.refresh(tx, scoped, fresh=rows)
    usage_hours.refresh(tx, scoped)
    return n


def rebuild(store: str | os.PathLike, threads: int | None = None) -> int:
    """Re-derive the whole rollup of ``store`` from its jobs and samples, in one transaction; the rows written.
    One ``jobs`` file at a time (its jobs, and their samples from the files whose footer may hold them), as a
    refresh derives the jobs it touched: memory holds a month's jobs and samples, not the store's (at 10 M jobs
    / 99 M samples the whole-store derivation spilled 5.5 GB past its 4 GB and ran for over 40 minutes)."""
    with Store(store).transaction() as tx:
        for table in ("jobs", "samples"):  # files written before the job summaries get them (same rows)
            tx.reindex(table)
        # the RUNNING jobs' rows in files of their own: a snapshot move rewrites those, not every month
        running = _running_all(tx)
        written: dict[str, list[str]] = {TABLE: [], DAY_TABLE: []}
        n = 0
        for rel in list(tx.tables.get("jobs", [])):
            scope = (pl.read_parquet(tx.store.root / rel, columns=KEYS)
                     .select(pl.col(k).cast(pl.String) for k in KEYS).unique())
            if not scope.height:
                continue
            rows, days = derive(tx, scope, threads=threads)
            # replace_table starts the table afresh: each chunk's files are collected and listed at the end
            n += tx.replace_table(TABLE, rows, apart=running)
            tx.replace_table(DAY_TABLE, days, apart=running)
            for table in written:
                written[table] += tx.tables[table]
        tx.tables.update(written)
        cube.rebuild(tx, threads=threads)
        usage_hours.rebuild(tx, threads=threads)
        tx.derived_fresh = True
    return n


def status(store: str | os.PathLike) -> dict[str, int]:
    """How much of ``store``'s jobs the rollup covers: ``jobs``, ``rows`` (rollup rows of existing jobs) and
    ``missing`` (jobs without a row: a store ingested before the rollup existed; ``rebuild`` fills them in)."""
    st = Store(store).check()
    jobs = [pl.scan_parquet(f).select(KEYS) for f in st.files("jobs")]
    rows = [pl.scan_parquet(f).select(KEYS) for f in st.files(TABLE)]
    job_keys = pl.concat(jobs).collect() if jobs else pl.DataFrame(schema={k: pl.String for k in KEYS})
    row_keys = pl.concat(rows).collect() if rows else pl.DataFrame(schema={k: pl.String for k in KEYS})
    covered = job_keys.join(row_keys, on=KEYS, how="semi").height
    return {"jobs": job_keys.height, "rows": covered, "missing": job_keys.height - covered}
