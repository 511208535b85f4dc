"""The hour cells (store table ``usage_hours``): gap_area's per-bucket sums per hour and per UTC day, kept by every ingest.

A cell is the jobs of one cluster, submit month, user and account, and one UTC hour (``grain_s`` 3600) or day
(86400): the requested, used and unknown-usage CPU, GPU and memory resource-seconds its jobs put into it,
counted exactly as ``gap_area`` counts them per bucket (each sample's interval clipped to the job's run and to
the cell, capped at the allocation, GPU utilisation at 1; job totals spread evenly where a job has no samples
of the resource; a job of unknown usage in requested and unknown). The SQL is ``sql/_usage_hours.sql``. A
``gap_area`` whose buckets, origin and window are whole hours (or days) sums the cells instead of clipping every
sample (``sql/_hour_cells.sql``); the team comes from the account at query time, as with ``usage_cube``.

Invariants (as ``cube``'s):
- Complete or absent. ``rebuild`` writes the table whole (``quotaloop rollup --rebuild``); an ingest into a store
  holding it (its manifest lists the table, even empty) or into an empty store keeps it; an ingest into an
  older store with jobs but no table writes none (``gap_area`` then reads the samples, as before).
- Same commit, incremental = rebuild: ``refresh`` re-derives every cell of each (cluster, submit month)
  partition the rollup refresh touched (the same months as ``cube.refresh``: the jobs it re-derived or whose run
  end moved with a snapshot, before and after), from the store as the transaction will commit it (that month's
  jobs and the samples of those jobs: the sample files whose footer may hold one of them), and replaces those
  partitions. A cell's jobs all live in one month partition of ``jobs``.
- Compaction's rollup refresh re-derives the months whose samples it coarsened, as an ingest's does.
"""
from __future__ import annotations

import polars as pl

from ..store import connect, keyindex, schema
from .cube import _dir, _months
from .loader import run

TABLE = "usage_hours"
QUERY = "_usage_hours"


def maintained(tx) -> bool:
    """Whether ``tx``'s store keeps the table: its manifest lists it, or it held no jobs before."""
    return TABLE in tx.tables or not any(r.startswith("jobs/") for r in tx.base_files)


def _month_sources(tx, months: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The ``jobs`` of the partitions ``months`` and the ``samples`` of those jobs, as ``tx`` would commit them."""
    dirs = tuple(_dir("jobs", c, m) + "/" for c, m in months.iter_rows())
    files = [str(tx.store.root / r) for r in tx.tables.get("jobs", []) if r.startswith(dirs)]
    jobs = (pl.concat([schema.conform(pl.read_parquet(f), "jobs") for f in files]) if files
            else schema.empty("jobs"))
    keys = jobs.select(pl.col("cluster").cast(pl.String), pl.col("job_id").cast(pl.String))
    ids = keys["job_id"].unique()
    parts = []
    for rel in tx.tables.get("samples", []):
        path = str(tx.store.root / rel)
        if keys.height and keyindex.may_hold(path, ids):
            # the ids first as a filter (the reader decodes other columns only for their rows), then exact
            parts.append(schema.conform(
                pl.scan_parquet(path).filter(pl.col("job_id").cast(pl.String).is_in(ids.implode()))
                .join(keys.lazy(), on=["cluster", "job_id"], how="semi").collect(), "samples"))
    samples = pl.concat(parts) if parts else schema.empty("samples")
    return {"jobs": jobs, "samples": samples}


def derive(tx, months: pl.DataFrame | None = None, threads: int | None = None) -> pl.DataFrame:
    """The ``usage_hours`` rows of the (cluster, month) partitions ``months`` (None: every job) of the store as
    ``tx`` would commit it."""
    # every job's clipped samples come from ``samples``: no rollup row answers for it
    extra = {"job_rollup": schema.empty("job_rollup"), "job_day_rollup": schema.empty("job_day_rollup")}
    if months is not None:
        extra.update(_month_sources(tx, months))
    con = connect(pending=tx, extra=extra, threads=threads)
    con.execute("set enable_progress_bar = false")
    try:
        rows = run(QUERY, con=con)
    finally:
        con.close()
    return schema.conform(rows, TABLE)


def _write(tx, rows: pl.DataFrame, months: pl.DataFrame) -> None:
    """Replace the partitions ``months`` of the table by ``rows`` (a partition without rows is left empty)."""
    tx.tables.setdefault(TABLE, [])
    keyed = _months(rows).join(months, on=["cluster", "month"], how="anti")
    if keyed.height:
        raise AssertionError(f"usage_hours rows outside the partitions refreshed: {keyed.rows()[:3]}")
    for cluster, month in months.iter_rows():
        rel_dir = _dir(TABLE, cluster, month)
        tx.tables[TABLE] = [r for r in tx.tables[TABLE] if not r.startswith(rel_dir + "/")]
        part = rows.filter((pl.col("cluster").fill_null("default") == cluster)
                           & (pl.col("submit").dt.strftime("%Y-%m").fill_null("unknown") == month))
        if part.height:
            tx._write(TABLE, rel_dir, part)


def refresh(tx, changed: pl.DataFrame) -> int:
    """Re-derive the partitions of the jobs in ``changed`` (rows with ``cluster`` and ``submit``: the rollup rows a
    refresh wrote or replaced, old and new); the number of cells written."""
    if not maintained(tx):
        return 0
    months = _months(changed)
    if not months.height:
        return 0
    rows = derive(tx, months)
    _write(tx, rows, months)
    return rows.height


def rebuild(tx, threads: int | None = None) -> int:
    """Re-derive the whole table of ``tx``'s store (inside ``rollup.rebuild``'s transaction); the cells written."""
    rows = derive(tx, None, threads=threads)
    tx.tables[TABLE] = []
    _write(tx, rows, _months(rows))
    return rows.height
