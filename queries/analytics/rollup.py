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
- Incremental = rebuild: ``refresh`` re-derives only the jobs a transaction touched (every job or sample row it
  upserted, whatever the file; the RUNNING jobs of a cluster whose snapshot moved, since they run until it),
  from the store as the transaction will commit it, and gives the rows ``rebuild`` gives (up to the last bits
  of a floating-point sum, whose order DuckDB does not fix).
- A query uses a row only when it was derived for the job's run interval and levels as that query stages them
  (a RUNNING job without a snapshot runs until the window's end: such a row is ignored and the samples
  answer); a store without a rollup (older than it, or a simulation's output) is answered from the samples.

Cost of an incremental refresh: the touched jobs' rows are derived from their samples only (the jobs and
samples of the pending store are narrowed to them before DuckDB sees them: one pass over the key columns of
the sample files, then the touched jobs' samples), and the upsert rewrites the month partitions of
``job_rollup`` those jobs are in, as the jobs upsert does for ``jobs``.
"""
from __future__ import annotations

import os

import polars as pl

from ..store import Store, connect
from ..store import schema
from .loader import run

TABLE = "job_rollup"
QUERY = "_job_rollup"
DAY_TABLE = "job_day_rollup"  # the same integrals per job and UTC day (several rows per job)
DAY_QUERY = "_job_day_rollup"
KEYS = ["cluster", "job_id"]


def _scope(tx) -> pl.DataFrame:
    """The (cluster, job_id) whose rows ``tx`` makes stale: touched jobs and samples, and the RUNNING jobs of
    clusters whose snapshot moved."""
    parts = [t.select(KEYS) for t in tx.touched]
    if tx.moved_snapshots:
        files = [str(tx.store.root / r) for r in tx.tables.get("jobs", [])]
        for f in files:
            part = (pl.scan_parquet(f).filter(pl.col("cluster").is_in(sorted(tx.moved_snapshots))
                                               & (pl.col("state") == "RUNNING") & pl.col("end").is_null())
                    .select(KEYS).collect())
            if part.height:
                parts.append(part)
    if not parts:
        return pl.DataFrame(schema={"cluster": pl.String, "job_id": pl.String})
    return pl.concat([p.cast(pl.String) for p in parts]).unique()


def _narrowed(files: list[str], table: str, scope: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``table``'s ``files`` whose job is in ``scope``, conformed to the table's schema."""
    out = [schema.conform(pl.scan_parquet(f).join(scope.lazy(), on=KEYS, how="semi").collect(), table)
           for f in files]
    return pl.concat(out) if out else schema.empty(table)


def derive(tx, scope: pl.DataFrame | None = None, threads: int | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(job_rollup rows, job_day_rollup rows)`` for the jobs in ``scope`` (None: every job) of the store as
    ``tx`` would commit it."""
    extra = {TABLE: schema.empty(TABLE), DAY_TABLE: schema.empty(DAY_TABLE)}
    if scope is not None:
        for table in ("jobs", "samples"):
            extra[table] = _narrowed([str(tx.store.root / r) for r in tx.tables.get(table, [])], table, scope)
    con = connect(pending=tx, extra=extra, threads=threads)
    con.execute("set enable_progress_bar = false")  # an ingest prints its own summary, not DuckDB's bar
    try:
        return schema.conform(run(QUERY, con=con), TABLE), schema.conform(run(DAY_QUERY, con=con), DAY_TABLE)
    finally:
        con.close()


def refresh(tx) -> int:
    """Bring ``tx``'s rollup up to date with the jobs and samples it upserted; the number of rows written."""
    scope = _scope(tx)
    if not scope.height:
        tx.derived_fresh = True
        return 0
    rows, days = derive(tx, scope)
    n = tx.upsert(TABLE, rows)
    tx.delete_keys(DAY_TABLE, scope)  # a job may now reach fewer days (or none): drop all, write what it has
    tx.upsert(DAY_TABLE, days)
    tx.derived_fresh = True
    return n


def rebuild(store: str | os.PathLike, threads: int | None = None) -> int:
    """Re-derive the whole rollup of ``store`` from its jobs and samples, in one transaction; the rows written."""
    with Store(store).transaction() as tx:
        rows, days = derive(tx, None, threads=threads)
        n = tx.replace_table(TABLE, rows)
        tx.replace_table(DAY_TABLE, days)
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
