"""Partitions of the cell tables (``usage_cube``, ``usage_hours``): what ``cube`` and ``usage_hours`` share.

A cell table is partitioned like ``jobs``, by cluster and submit month (``YYYY-MM``, ``unknown`` without a submit
time), except that the cells of RUNNING jobs without an end live apart, in a partition ``month=running`` of their
cluster (column ``running``): every snapshot move lengthens their runs, and re-deriving every month they were
submitted in would cost a rebuild per ingest on a big store.

A refresh (``refresh``, the one path of both tables) re-derives only the cells a transaction can have changed:
those keyed by the (cluster, partition, user, account) of every re-derived job's row before the transaction
(read from the jobs files the transaction started from) and after it, from the jobs of those keys alone (and
their ``job_rollup`` rows or samples), and rewrites each such partition with its other cells as they were. A
cluster's ``running`` partition is re-derived whole when its snapshot moved (every RUNNING job's run grew), a
month whole when the caller says so (the cube's one-time mending). So a day's ingest costs what its jobs'
users and accounts hold in their months, not what the months hold.

Invariants: a cell's jobs all live in one month partition of ``jobs`` and are not RUNNING without an end, or are
all RUNNING without an end and of one cluster; a cell's key (cluster, partition, user, account) is a function of
its jobs' rows alone, so the jobs of a key are all the jobs its cells sum; ``write`` replaces exactly the
partitions it is given and refuses a row outside them.
"""
from __future__ import annotations

from typing import Callable

import polars as pl

from ..store import connect, keyindex, schema
from ..store.store import _partition_dir
from .loader import run

RUNNING = "running"  # the partition (in place of a month) of the cells of RUNNING jobs without an end
KEYS = ["cluster", "job_id"]
NO_PARTS = {"cluster": pl.String, "month": pl.String}
CELL = ["cluster", "month", "user", "account"]  # what a refresh re-derives a cell by: its partition, user, account
NO_CELLS = {**NO_PARTS, "user": pl.String, "account": pl.String}


def dir_of(table: str, cluster: str, month: str) -> str:
    return _partition_dir(table, cluster, month)


def months_of(frame: pl.DataFrame) -> pl.DataFrame:
    """The (cluster, month) partitions of the rows of ``frame`` (columns ``cluster``, ``submit``), named as the
    store names them (``YYYY-MM``, ``unknown`` without a submit time)."""
    if not frame.height:
        return pl.DataFrame(schema=NO_PARTS)
    return frame.select(pl.col("cluster").cast(pl.String).fill_null("default"),
                        pl.col("submit").dt.strftime("%Y-%m").fill_null("unknown").alias("month")).unique()


def _part_expr() -> pl.Expr:
    # a cell written before cells had a ``running`` column (null) is a month's
    return (pl.when(pl.col("running").fill_null(False)).then(pl.lit(RUNNING))
            .otherwise(pl.col("submit").dt.strftime("%Y-%m").fill_null("unknown")))


def parts_of(rows: pl.DataFrame) -> pl.DataFrame:
    """The (cluster, month) partitions of cells ``rows``: the submit month, or ``RUNNING`` for a running cell."""
    if not rows.height:
        return pl.DataFrame(schema=NO_PARTS)
    return rows.select(pl.col("cluster").cast(pl.String).fill_null("default"), _part_expr().alias("month")).unique()


def only(rows: pl.DataFrame, parts: pl.DataFrame) -> pl.DataFrame:
    """The cells of ``rows`` in the partitions ``parts`` (a month's jobs include its RUNNING ones, whose cells
    belong to the RUNNING partition, and the other way round)."""
    return rows.join(parts, left_on=[pl.col("cluster").fill_null("default"), _part_expr()],
                     right_on=["cluster", "month"], how="semi")


def read_keyed(files: list[str], table: str, keys: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``table``'s ``files`` whose (cluster, job_id) is in ``keys``; only the files whose footer may hold
    one of them are read (``keyindex``), the ids first as a filter so that the reader decodes the other columns
    for their rows only."""
    ids = keys["job_id"].unique()
    parts = [schema.conform(pl.scan_parquet(f).filter(pl.col("job_id").cast(pl.String).is_in(ids.implode()))
                            .join(keys.lazy(), on=KEYS, how="semi").collect(), table)
             for f in files if keys.height and keyindex.may_hold(f, ids)]
    return pl.concat(parts) if parts else schema.empty(table)


def running_keys(tx, clusters: list[str]) -> pl.DataFrame:
    """The (cluster, job_id) of the RUNNING jobs without an end of ``clusters`` (a jobs file's footer lists them;
    a file without one is scanned)."""
    parts = []
    for rel in tx.tables.get("jobs", []) if clusters else []:
        f = str(tx.store.root / rel)
        listed = keyindex.running(f)
        if listed is None:
            listed = (pl.scan_parquet(f).filter((pl.col("state") == "RUNNING") & pl.col("end").is_null())
                      .select(pl.col("cluster").cast(pl.String), pl.col("job_id").cast(pl.String)).collect())
        parts.append(listed.filter(pl.col("cluster").is_in(clusters)))
    parts = [p for p in parts if p.height]
    return pl.concat(parts).unique() if parts else pl.DataFrame(schema={k: pl.String for k in KEYS})


def month_rows(tx, table: str, months: pl.DataFrame) -> list[pl.DataFrame]:
    """The rows of ``table`` (partitioned by submit month, as ``jobs``) in the month partitions of ``months``
    (its ``RUNNING`` entries are not months: skipped)."""
    dated = months.filter(pl.col("month") != RUNNING)
    dirs = tuple(dir_of(table, c, m) + "/" for c, m in dated.iter_rows())
    files = [str(tx.store.root / r) for r in tx.tables.get(table, []) if dirs and r.startswith(dirs)]
    return [schema.conform(pl.read_parquet(f), table) for f in files]


def write(tx, table: str, rows: pl.DataFrame, parts: pl.DataFrame, split: str | None = None) -> None:
    """Replace the partitions ``parts`` of the cell table ``table`` by ``rows`` (a partition without rows is left
    empty); ``split``: a column whose values go into files of their own. The store's partition writers sort by
    job id, which a cell has not: the files are staged directly."""
    tx.tables.setdefault(table, [])
    outside = parts_of(rows).join(parts, on=["cluster", "month"], how="anti")
    if outside.height:
        raise AssertionError(f"{table} rows outside the partitions refreshed: {outside.rows()[:3]}")
    for cluster, month in parts.iter_rows():
        rel_dir = dir_of(table, cluster, month)
        tx.tables[table] = [r for r in tx.tables[table] if not r.startswith(rel_dir + "/")]
        part = only(rows, pl.DataFrame({"cluster": [cluster], "month": [month]}, schema=NO_PARTS))
        for piece in (part.partition_by(split, maintain_order=True) if split and part.height else [part]):
            if piece.height:
                tx._write(table, rel_dir, piece)


def _job_cells(jobs: pl.DataFrame) -> pl.DataFrame:
    """The cell keys (``CELL``) of ``jobs`` rows, as ``_jobs`` stages them (no account: '(none)')."""
    if not jobs.height:
        return pl.DataFrame(schema=NO_CELLS)
    running = (pl.col("state") == "RUNNING") & pl.col("end").is_null()
    return jobs.select(pl.col("cluster").cast(pl.String).fill_null("default"),
                       pl.when(running.fill_null(False)).then(pl.lit(RUNNING))
                       .otherwise(pl.col("submit").dt.strftime("%Y-%m").fill_null("unknown")).alias("month"),
                       pl.col("user").cast(pl.String), pl.col("account").cast(pl.String).fill_null("(none)")).unique()


def _row_cells(rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (cells) with their key columns ``CELL`` (``__cluster``, ``__month``: not to clash with theirs)."""
    return rows.with_columns(pl.col("cluster").cast(pl.String).fill_null("default").alias("__cluster"),
                             _part_expr().alias("__month"))


def _in_cells(rows: pl.DataFrame, keys: pl.DataFrame, how: str) -> pl.DataFrame:
    """The cells of ``rows`` whose key is (``how`` = semi) or is not (anti) in ``keys`` (``CELL``)."""
    return _row_cells(rows).join(keys, left_on=["__cluster", "__month", "user", "account"], right_on=CELL,
                                 how=how, nulls_equal=True).drop("__cluster", "__month")


def _running_jobs(tx, clusters: list[str]) -> pl.DataFrame:
    """The ``jobs`` rows of the RUNNING jobs without an end of ``clusters``: read from the files whose footer lists
    one (or lists nothing), filtered on state and end, which the reader decodes more cheaply than it matches
    thousands of job ids."""
    frames = []
    for rel in tx.tables.get("jobs", []):
        f = str(tx.store.root / rel)
        listed = keyindex.running(f)
        if listed is not None and not listed.filter(pl.col("cluster").is_in(clusters)).height:
            continue
        mine = ((pl.col("state") == "RUNNING") & pl.col("end").is_null()
                & pl.col("cluster").cast(pl.String).fill_null("default").is_in(clusters))
        frames.append(schema.conform(pl.scan_parquet(f).filter(mine).collect(), "jobs"))
    return pl.concat(frames) if frames else schema.empty("jobs")


def _with_keys(jobs: pl.DataFrame, keys: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``jobs`` (all of one partition of ``keys``) whose cluster, user and account, as ``_jobs``
    stages them, are a key of ``keys`` (``CELL``)."""
    staged = jobs.with_columns(pl.col("cluster").cast(pl.String).fill_null("default").alias("__cluster"),
                               pl.col("account").cast(pl.String).fill_null("(none)").alias("__account"))
    return staged.join(keys.select("cluster", "user", "account"), left_on=["__cluster", "user", "__account"],
                       right_on=["cluster", "user", "account"], how="semi", nulls_equal=True
                       ).drop("__cluster", "__account")


def _jobs_of(tx, whole: pl.DataFrame, scoped: pl.DataFrame) -> pl.DataFrame:
    """The ``jobs`` rows (as ``tx`` would commit them) the partitions ``whole`` and the cells ``scoped`` are
    derived from: a whole month's rows, a whole ``RUNNING`` partition's cluster's RUNNING jobs, and for a scoped
    cell the rows of its partition with its user and account (the ids first as a filter: the reader decodes the
    other columns for those rows only)."""
    frames = month_rows(tx, "jobs", whole)
    running = pl.concat([whole.filter(pl.col("month") == RUNNING).select("cluster"),
                         scoped.filter(pl.col("month") == RUNNING).select("cluster")])["cluster"].unique().to_list()
    if running:
        mine = _running_jobs(tx, sorted(running))
        frames.append(mine.join(whole.filter(pl.col("month") == RUNNING).select("cluster"), on="cluster", how="semi"))
        frames.append(_with_keys(mine, scoped.filter(pl.col("month") == RUNNING)))
    for (cluster, month), keys in scoped.filter(pl.col("month") != RUNNING).group_by(
            ["cluster", "month"], maintain_order=True):
        prefix = dir_of("jobs", cluster, month) + "/"
        users = keys["user"].drop_nulls().unique().implode()
        pick = pl.col("user").is_in(users) | (pl.col("user").is_null() if keys["user"].null_count() else False)
        for rel in [r for r in tx.tables.get("jobs", []) if r.startswith(prefix)]:
            frames.append(_with_keys(schema.conform(pl.scan_parquet(tx.store.root / rel).filter(pick).collect(),
                                                    "jobs"), keys))
    frames = [f for f in frames if f.height]
    return pl.concat(frames).unique(KEYS) if frames else schema.empty("jobs")


def refresh(tx, table: str, changed: pl.DataFrame, moved: pl.DataFrame,
            derive: Callable[[object, pl.DataFrame], pl.DataFrame], split: str | None = None,
            whole: pl.DataFrame | None = None) -> int:
    """Bring the cells of ``table`` up to date with the jobs in ``changed`` (``cluster``, ``job_id``: the jobs whose
    rollup rows a refresh re-derived) and ``moved`` (the RUNNING jobs whose run end moved with a snapshot); the
    number of cells written. Re-derived: every cell keyed by one of those jobs' rows before the transaction or
    after it, from every job of that key (``derive(tx, jobs)``: the cells of exactly those jobs); the ``RUNNING``
    partition of each of their clusters whose snapshot moved, and the partitions ``whole``, whole. Each such
    partition is rewritten with its other cells as they were."""
    keys = changed.select(pl.col("cluster").cast(pl.String).fill_null("default"),
                          pl.col("job_id").cast(pl.String)).unique()
    clusters = set(keys["cluster"].to_list()) | set(moved["cluster"].cast(pl.String).fill_null("default").to_list())
    snapped = sorted(clusters & set(tx.moved_snapshots))
    whole = pl.concat([whole if whole is not None else pl.DataFrame(schema=NO_PARTS),
                       pl.DataFrame({"cluster": snapped, "month": [RUNNING] * len(snapped)}, schema=NO_PARTS)]
                      ).unique(maintain_order=True)
    # the jobs' rows before the transaction (its base files stay on disk until it commits) and after it
    base = [str(tx.store.root / r) for r in sorted(tx.base_files) if r.startswith("jobs/")]
    live = [str(tx.store.root / r) for r in tx.tables.get("jobs", [])]
    scoped = pl.concat([_job_cells(read_keyed(base, "jobs", keys)), _job_cells(read_keyed(live, "jobs", keys))])
    scoped = scoped.unique().join(whole, on=["cluster", "month"], how="anti")
    parts = pl.concat([whole, scoped.select("cluster", "month").unique(maintain_order=True)])
    if not parts.height:
        return 0
    jobs = _jobs_of(tx, whole, scoped)
    rows = derive(tx, jobs) if jobs.height else schema.empty(table)
    rows = pl.concat([only(rows, whole), _in_cells(rows, scoped, "semi")])
    # the scoped partitions' other cells, as they are
    dirs = tuple(dir_of(table, c, m) + "/" for c, m in scoped.select("cluster", "month").unique().iter_rows())
    files = [r for r in tx.tables.get(table, []) if dirs and r.startswith(dirs)]
    kept = [_in_cells(schema.conform(pl.read_parquet(tx.store.root / r), table), scoped, "anti") for r in files]
    rows = pl.concat([rows, *kept])
    write(tx, table, rows, parts, split=split)
    return rows.height


def derive_cells(tx, table: str, query: str, extra: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The rows of ``table`` the statement ``query`` gives over the store as ``tx`` would commit it, with the
    tables of ``extra`` in place of the store's."""
    con = connect(pending=tx, extra=extra)
    con.execute("set enable_progress_bar = false")
    try:
        return schema.conform(run(query, con=con), table)
    finally:
        con.close()


def all_parts(tx) -> pl.DataFrame:
    """Every partition of a cell table of ``tx``'s store: each (cluster, submit month) of its ``jobs`` and the
    ``RUNNING`` partition of each cluster. A rebuild derives them one at a time (memory holds one month's jobs
    and samples, not the store's)."""
    frames = [pl.read_parquet(tx.store.root / r, columns=["cluster", "submit"]).unique()
              for r in tx.tables.get("jobs", [])]
    months = months_of(pl.concat(frames, how="vertical_relaxed")) if frames else pl.DataFrame(schema=NO_PARTS)
    clusters = sorted(months["cluster"].unique().to_list())
    running = pl.DataFrame({"cluster": clusters, "month": [RUNNING] * len(clusters)}, schema=NO_PARTS)
    return pl.concat([months.sort("cluster", "month"), running])


def rebuild(tx, table: str, derive, write, threads: int | None = None) -> int:
    """Re-derive the whole cell ``table`` of ``tx``'s store, one partition of ``all_parts`` at a time
    (``derive(tx, part, threads=)`` its cells, ``write(tx, rows, part)``), so memory holds one month's jobs and
    samples, not the store's; the cells written."""
    tx.tables[table] = []
    n = 0
    for part in all_parts(tx).iter_slices(1):
        rows = derive(tx, part, threads=threads)
        write(tx, rows, part)
        n += rows.height
    return n
