"""Partitions of the cell tables (``usage_cube``, ``usage_hours``): what ``cube`` and ``usage_hours`` share.

A cell table is partitioned like ``jobs``, by cluster and submit month (``YYYY-MM``, ``unknown`` without a submit
time). A RUNNING job without an end is in no ``usage_cube`` cell, and its ``usage_hours`` cells hold only its
sampled usage: what depends on its run end (the store's snapshot, which every ingest moves) is derived per job
by the queries. So a snapshot move changes no cell, and an ingest's cost does not grow with the RUNNING jobs of
the store. (Tables written before kept those jobs' whole cells in a partition ``month=running`` of their
cluster, column ``running`` true, re-derived whole at every snapshot move: ``legacy`` finds them, and the next
refresh rebuilds such a table once.)

A refresh (``refresh``, the one path of both tables) re-derives only the cells a transaction can have changed:
those keyed by the (cluster, month, user, account) of every re-derived job's row before the transaction (read
from the jobs files the transaction started from) and after it (``Scope``; in ``usage_hours``, whose open runs'
sampled usage has cells of its own, also by whether the job is an open run), from the jobs of those keys alone
(and their ``job_rollup`` rows or samples). A partition's cells are in files sorted by user, each about an
eighth of it (``write``); the refresh rewrites the files holding a cell of those keys' users, with their other
cells as they were, and keeps the partition's other files. So a day's ingest costs what its jobs' users hold
in their months, not what the months hold.

Invariants: a cell's jobs all live in one month partition of ``jobs``; a cell's key (cluster, month, user,
account) is a function of its jobs' rows alone, so the jobs of a key are all the jobs its cells sum; ``write``
replaces exactly the partitions (or the files of them) it is given and refuses a row outside them; the files
holding a user's cells are exactly those whose ``user`` column holds it, which is how a refresh finds them
(their order and size only make them few: a store written with one file per partition is refreshed exactly,
its touched partitions taking the new layout as they go).
"""
from __future__ import annotations

import functools
from typing import Callable

import polars as pl
import pyarrow.parquet as pq

from ..store import connect, keyindex, schema
from ..store.store import _partition_dir
from .loader import run, tables

# a partition's cells are in about this many files (per ``split`` value) of at least MIN_FILE_ROWS cells, sorted by
# user: a refresh rewrites the files of its users, not the partition (the day's ingest that touches a user in
# each of ten old months rewrote 1.7M of the 1M-job store's 2.6M hour cells when a partition was one file)
FILES_PER_PART = 8
MIN_FILE_ROWS = 16384
RUNNING = "running"  # the partition (in place of a month) of the cells of RUNNING jobs in a legacy table
KEYS = ["cluster", "job_id"]
NO_PARTS = {"cluster": pl.String, "month": pl.String}
CELL = ["cluster", "month", "user", "account"]  # what a refresh re-derives a cell by: its partition, user, account
OPEN = "open_run"  # and, in a table with that column (usage_hours), whether it sums open runs (their own cells)
NO_CELLS = {**NO_PARTS, "user": pl.String, "account": pl.String, OPEN: pl.Boolean}
# the manifest's mark (``Transaction.layouts``) of a cell table every file of which this code wrote: no RUNNING
# cells, ``running`` false, open runs' cells apart (``legacy`` is then False without opening a file). A change
# of what a cell holds gets a new mark, so that older tables are looked at again
LAYOUT = "cells-2026-12-06"


def _open_run() -> pl.Expr:
    """``_jobs``' ``open_run`` on ``jobs`` rows: RUNNING without an end."""
    return ((pl.col("state") == "RUNNING") & pl.col("end").is_null()).fill_null(False)


def _cell_key(table: str) -> list[str]:
    """The columns of a cell of ``table`` a refresh re-derives it by: ``CELL``, and ``OPEN`` where it has one."""
    return [*CELL, OPEN] if OPEN in schema.TABLES[table] else CELL


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
    # a legacy cell of a RUNNING job is in the RUNNING partition; one written before cells had a ``running``
    # column (null) is a month's
    return (pl.when(pl.col("running").fill_null(False)).then(pl.lit(RUNNING))
            .otherwise(pl.col("submit").dt.strftime("%Y-%m").fill_null("unknown")))


def parts_of(rows: pl.DataFrame) -> pl.DataFrame:
    """The (cluster, month) partitions of cells ``rows``: the submit month, or ``RUNNING`` for a legacy running
    cell."""
    if not rows.height:
        return pl.DataFrame(schema=NO_PARTS)
    return rows.select(pl.col("cluster").cast(pl.String).fill_null("default"), _part_expr().alias("month")).unique()


def only(rows: pl.DataFrame, parts: pl.DataFrame) -> pl.DataFrame:
    """The cells of ``rows`` in the partitions ``parts``."""
    return rows.join(parts, left_on=[pl.col("cluster").fill_null("default"), _part_expr()],
                     right_on=["cluster", "month"], how="semi")


def month_rows(tx, table: str, months: pl.DataFrame) -> list[pl.DataFrame]:
    """The rows of ``table`` (partitioned by submit month, as ``jobs``) in the month partitions of ``months``
    (a legacy ``RUNNING`` entry is not a month: skipped)."""
    dated = months.filter(pl.col("month") != RUNNING)
    dirs = tuple(dir_of(table, c, m) + "/" for c, m in dated.iter_rows())
    files = [str(tx.store.root / r) for r in tx.tables.get(table, []) if dirs and r.startswith(dirs)]
    return [schema.conform(pl.read_parquet(f), table) for f in files]


def target_rows(total: int) -> int:
    """The rows of a full cell file in a partition of ``total`` cells: about ``1 / FILES_PER_PART`` of it, never
    fewer than ``MIN_FILE_ROWS``."""
    return max(MIN_FILE_ROWS, -(-total // FILES_PER_PART))


def _rows_of(tx, rels: list[str]) -> int:
    return sum(pq.ParquetFile(tx.store.root / r).metadata.num_rows for r in rels)


def _pieces(part: pl.DataFrame, split: tuple[str, ...], size: int) -> list[pl.DataFrame]:
    """A partition's cells ``part`` as the files a write gives them: per value of the ``split`` columns, sorted by
    user and account (then every other column, so that the same cells give the same files), in slices of
    ``size`` rows.
    A user's cells are thus in few files, which is what a refresh rewrites of the partition."""
    part = part.sort(["user", "account", *[c for c in part.columns if c not in ("user", "account")]],
                     nulls_last=True)
    groups = part.partition_by(*split, maintain_order=True) if split and part.height else [part]
    return [g.slice(k, size) for g in groups for k in range(0, g.height, size)]


def write(tx, table: str, rows: pl.DataFrame, parts: pl.DataFrame, split: tuple[str, ...] = (),
          replace: set[str] | None = None) -> None:
    """Replace the partitions ``parts`` of the cell table ``table`` by ``rows`` (a partition without rows is left
    empty); with ``replace`` (files of those partitions), only those files: ``rows`` are then their cells, and
    the partitions' other files stay. ``split``: columns whose values go into files of their own. A partition's
    cells are written in files of ``target_rows`` (``_pieces``). The store's partition writers sort by job id,
    which a cell has not: the files are staged directly."""
    tx.tables.setdefault(table, [])
    keyed = rows.with_columns(pl.col("cluster").cast(pl.String).fill_null("default").alias("__cluster"),
                              _part_expr().alias("__month"))
    outside = (keyed.select(pl.col("__cluster").alias("cluster"), pl.col("__month").alias("month")).unique()
               .join(parts, on=["cluster", "month"], how="anti"))
    if outside.height:
        raise AssertionError(f"{table} rows outside the partitions refreshed: {outside.rows()[:3]}")
    by_part = keyed.partition_by("__cluster", "__month", as_dict=True, include_key=False) if keyed.height else {}
    for cluster, month in parts.iter_rows():
        rel_dir = dir_of(table, cluster, month)
        live = [r for r in tx.tables[table] if r.startswith(rel_dir + "/")]
        drop = set(live) if replace is None else set(live) & replace
        tx.tables[table] = [r for r in tx.tables[table] if r not in drop]
        part = by_part.get((cluster, month), rows.clear())
        size = target_rows(part.height + _rows_of(tx, [r for r in live if r not in drop]))
        for piece in _pieces(part, split, size):
            tx._write(table, rel_dir, piece)


def _cell_of() -> list[pl.Expr]:
    """A ``jobs`` row's cell key (``CELL`` and ``OPEN``), as ``_jobs`` stages it (no account: '(none)')."""
    return [pl.col("cluster").cast(pl.String).fill_null("default"),
            pl.col("submit").dt.strftime("%Y-%m").fill_null("unknown").alias("month"),
            pl.col("user").cast(pl.String), pl.col("account").cast(pl.String).fill_null("(none)"),
            _open_run().alias(OPEN)]


def _job_cells(jobs: pl.DataFrame) -> pl.DataFrame:
    """The cell keys (``CELL`` and ``OPEN``) of ``jobs`` rows."""
    if not jobs.height:
        return pl.DataFrame(schema=NO_CELLS)
    return jobs.select(_cell_of()).unique()


def _in_keys(jobs: pl.DataFrame, keys: pl.DataFrame) -> pl.DataFrame:
    """The ``jobs`` rows whose cell key (``_cell_of``) is one of ``keys``."""
    if not jobs.height:
        return jobs
    staged = jobs.with_columns(pl.struct(_cell_of()).alias("__cell"))
    return (staged.filter(pl.col("__cell").is_in(keys.select(pl.struct(pl.all())).to_series().implode()))
            .drop("__cell"))


def _row_cells(rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (cells) with their key columns ``CELL`` (``__cluster``, ``__month``: not to clash with theirs)."""
    return rows.with_columns(pl.col("cluster").cast(pl.String).fill_null("default").alias("__cluster"),
                             _part_expr().alias("__month"))


def _in_cells(rows: pl.DataFrame, keys: pl.DataFrame, how: str, table: str) -> pl.DataFrame:
    """The cells of ``rows`` (of ``table``) whose key is (``how`` = semi) or is not (anti) in ``keys``
    (``_cell_key``)."""
    on = _cell_key(table)  # cluster and month as _row_cells stages them, then the cell's own columns
    return _row_cells(rows).join(keys.select(on).unique(), left_on=["__cluster", "__month", *on[len(NO_PARTS):]],
                                 right_on=on, how=how, nulls_equal=True).drop("__cluster", "__month")


def _with_keys(jobs: pl.DataFrame, keys: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``jobs`` (all of one partition of ``keys``) whose cluster, user, account and open run, as
    ``_jobs`` stages them, are a key of ``keys`` (``_job_cells``)."""
    staged = jobs.with_columns(pl.col("cluster").cast(pl.String).fill_null("default").alias("__cluster"),
                               pl.col("account").cast(pl.String).fill_null("(none)").alias("__account"),
                               _open_run().alias("__open"))
    on = ["cluster", "user", "account", OPEN]
    return staged.join(keys.select(on), left_on=["__cluster", "user", "__account", "__open"], right_on=on,
                       how="semi", nulls_equal=True).drop("__cluster", "__account", "__open")


def _jobs_of(tx, scoped: pl.DataFrame) -> pl.DataFrame:
    """The ``jobs`` rows (as ``tx`` would commit them) the cells ``scoped`` are derived from: for each, the rows of
    its month with its user and account (the users first as a filter: the reader decodes the other columns for
    those rows only)."""
    frames = []
    for (cluster, month), keys in scoped.group_by(["cluster", "month"], maintain_order=True):
        prefix = dir_of("jobs", cluster, month) + "/"
        users = keys["user"].drop_nulls().unique().implode()
        pick = pl.col("user").is_in(users) | (pl.col("user").is_null() if keys["user"].null_count() else False)
        for rel in [r for r in tx.tables.get("jobs", []) if r.startswith(prefix)]:
            frames.append(_with_keys(schema.conform(pl.scan_parquet(tx.store.root / rel).filter(pick).collect(),
                                                    "jobs"), keys))
    frames = [f for f in frames if f.height]
    return pl.concat(frames).unique(KEYS) if frames else schema.empty("jobs")


def _holding(tx, table: str, scoped: pl.DataFrame) -> set[str]:
    """The files a refresh of the cells ``scoped`` rewrites: in their partitions, each file holding a cell of
    one of their users (its ``user`` column alone is read; with ``OPEN``, of their users' open or closed cells as
    the key says), and each small file (under a quarter of ``target_rows``), merged on the way so that a
    partition keeps few files."""
    out = set()
    cols = ["user", *_cell_key(table)[len(CELL):]]
    for (cluster, month), keys in scoped.group_by(["cluster", "month"], maintain_order=True):
        prefix = dir_of(table, cluster, month) + "/"
        rels = [r for r in tx.tables.get(table, []) if r.startswith(prefix)]
        held = [pl.read_parquet(tx.store.root / r, columns=cols) for r in rels]
        small = target_rows(sum(h.height for h in held)) // 4
        wanted = keys.select(cols).unique()
        out.update(r for r, h in zip(rels, held)
                   if h.height < small or h.join(wanted, on=cols, how="semi", nulls_equal=True).height)
    return out


class Scope:
    """What a refresh re-derives, the same for both cell tables, found on first use (a store keeping neither
    table, or rebuilding a legacy one, reads nothing): ``rows``, the ``jobs`` rows of the jobs ``changed``
    (``cluster``, ``job_id``: the jobs whose rollup rows a refresh re-derived) before the transaction and after
    it (the files it started from stay on disk until it commits; a file in both is read once); ``keys``, the
    cells (``CELL`` and ``OPEN``: ``_job_cells``) those rows key; ``jobs``, every job of those cells as the
    transaction would commit it.
    ``closed`` is the same over the rows that are not an open run (a RUNNING job without an end, which is in no
    ``usage_cube`` cell)."""

    def __init__(self, tx, changed: pl.DataFrame, rows: pl.DataFrame | None = None, within: "Scope | None" = None):
        self.tx, self.changed, self.within = tx, changed, within
        if rows is not None:
            self.rows = rows

    @functools.cached_property
    def rows(self) -> pl.DataFrame:
        tx = self.tx
        jobs = self.changed.select(pl.col("cluster").cast(pl.String).fill_null("default"),
                                   pl.col("job_id").cast(pl.String)).unique()
        files = sorted({r for r in tx.base_files if r.startswith("jobs/")} | set(tx.tables.get("jobs", [])))
        return keyindex.read_keyed([str(tx.store.root / r) for r in files], "jobs", jobs)

    @functools.cached_property
    def keys(self) -> pl.DataFrame:
        return _job_cells(self.rows)

    @functools.cached_property
    def jobs(self) -> pl.DataFrame:
        if not self.keys.height:
            return schema.empty("jobs")
        # a scope within another (``closed``) has a subset of its keys: their jobs are among its jobs
        return _in_keys(self.within.jobs, self.keys) if self.within is not None else _jobs_of(self.tx, self.keys)

    @functools.cached_property
    def closed(self) -> "Scope":
        """The scope of the rows that are not an open run (``_jobs``' ``open_run``: RUNNING, no end). A job open
        before and after the transaction is in no ``usage_cube`` cell either way: the cube's cells of its key do
        not change (its re-derivation at a snapshot move, or for new samples, is the hour cells' business)."""
        return Scope(self.tx, self.changed, rows=self.rows.filter(~_open_run()), within=self)


def maintained(tx, table: str) -> bool:
    """Whether ``tx``'s store keeps the cell table ``table``: its manifest lists it (even empty), or it held no
    jobs before. An older store with jobs but no such table gets none (the queries derive without it)."""
    return table in tx.tables or not any(r.startswith("jobs/") for r in tx.base_files)


def refresh(tx, table: str, scoped: Scope, derive: Callable[[object, pl.DataFrame], pl.DataFrame],
            rebuild: Callable[[object], int], split: tuple[str, ...] = ()) -> int:
    """Bring the cells ``scoped`` (``Scope``) of ``table`` up to date; the number of cells written. Nothing when
    the store does not keep the table (``maintained``); the whole table (``rebuild(tx)``) when it was written
    with cells of RUNNING jobs (``legacy``). Else they are re-derived from their jobs (``derive(tx, jobs)``: the
    cells of exactly those jobs). The files holding a cell of their users (``_holding``) are rewritten with their
    other cells as they were; the partition's other files stay. A snapshot move alone changes no cell (module
    docstring)."""
    if not maintained(tx, table):
        return 0
    if legacy(tx, table):
        return rebuild(tx)
    if not scoped.keys.height:
        return 0
    jobs = scoped.jobs
    rows = _in_cells(derive(tx, jobs), scoped.keys, "semi", table) if jobs.height else schema.empty(table)
    picked = _holding(tx, table, scoped.keys)
    kept = [_in_cells(schema.conform(pl.read_parquet(tx.store.root / r), table), scoped.keys, "anti", table)
            for r in sorted(picked)]
    rows = pl.concat([rows, *kept])
    write(tx, table, rows, scoped.keys.select("cluster", "month").unique(maintain_order=True), split=split,
          replace=picked)
    return rows.height


def writer_connection(tx, extra: dict[str, pl.DataFrame], *queries: str, threads: int | None = None):
    """A connection to the store as ``tx`` would commit it, with the tables of ``extra`` in place of the store's,
    binding only the tables the statements ``queries`` read. ``usage_cube`` stands in empty unless ``extra``
    gives it: the writers' statements read it only for its column types (``_usage_all``'s ``where false``), and
    binding it reads the footer of every cube file."""
    con = connect(pending=tx, extra={"usage_cube": schema.empty("usage_cube"), **extra}, threads=threads,
                  tables=tables(*queries))
    con.execute("set enable_progress_bar = false")  # an ingest prints its own summary, not DuckDB's bar
    return con


def derive_cells(tx, table: str, query: str, extra: dict[str, pl.DataFrame],
                 threads: int | None = None) -> pl.DataFrame:
    """The rows of ``table`` the statement ``query`` gives over the store as ``tx`` would commit it, with the
    tables of ``extra`` in place of the store's."""
    con = writer_connection(tx, extra, query, threads=threads)
    try:
        return schema.conform(run(query, con=con), table)
    finally:
        con.close()


def all_parts(tx) -> pl.DataFrame:
    """Every partition of a cell table of ``tx``'s store: each (cluster, submit month) of its ``jobs``. A rebuild
    derives them one at a time (memory holds one month's jobs and samples, not the store's)."""
    frames = [pl.read_parquet(tx.store.root / r, columns=["cluster", "submit"]).unique()
              for r in tx.tables.get("jobs", [])]
    months = months_of(pl.concat(frames, how="vertical_relaxed")) if frames else pl.DataFrame(schema=NO_PARTS)
    return months.sort("cluster", "month")


def _marks_running(path, table: str) -> bool:
    """Whether the cell file at ``path`` may hold a cell of RUNNING jobs as legacy tables wrote them: its
    ``running`` column is missing, or its statistics show a true or a null (the footer is read, not the rows); or
    it lacks ``table``'s ``OPEN`` column."""
    meta = pq.ParquetFile(path).metadata
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    if "running" not in names or (OPEN in schema.TABLES[table] and OPEN not in names):
        return True
    k = names.index("running")
    for g in range(meta.num_row_groups):
        if not meta.row_group(g).num_rows:
            continue
        stats = meta.row_group(g).column(k).statistics
        if stats is None or stats.null_count or not stats.has_min_max or stats.max:
            return True  # no statistics: it may
    return False


def legacy(tx, table: str) -> bool:
    """Whether ``tx``'s ``table`` was written when RUNNING jobs without an end had cells of their own: it has a
    ``RUNNING`` partition, or a file whose ``running`` column is missing or not all false (a cube older still,
    whose months hold them); or, for a table with an ``OPEN`` column (``usage_hours``), a file without it (written
    before 2026-12-06, when an open run's sampled usage shared its user's cells: right sums, which the queries
    read, but a refresh could not re-derive the open runs' alone). Such a table is rebuilt by its next refresh
    (``cube.refresh``, ``usage_hours.refresh``), once; the queries do not read one with RUNNING cells until then.
    """
    if tx.layouts.get(table) == LAYOUT:
        return False
    rels = tx.tables.get(table, [])
    found = any(f"/month={RUNNING}/" in r for r in rels) or any(_marks_running(tx.store.root / r, table)
                                                                for r in rels)
    if not found:
        tx.layouts[table] = LAYOUT  # what this transaction writes into it keeps the layout
    return found


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
    tx.layouts[table] = LAYOUT
    return n
