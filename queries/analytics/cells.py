"""Partitions of the cell tables (``usage_cube``, ``usage_hours``): what ``cube`` and ``usage_hours`` share.

A cell table is partitioned like ``jobs``, by cluster and submit month (``YYYY-MM``, ``unknown`` without a submit
time), except that the cells of RUNNING jobs without an end live apart, in a partition ``month=running`` of their
cluster (column ``running``): every snapshot move lengthens their runs, and re-deriving every month they were
submitted in would cost a rebuild per ingest on a big store. A refresh re-derives whole partitions, from the
jobs of a month, or from a cluster's RUNNING jobs, which the jobs files' footers list (``keyindex``).

Invariants: a cell's jobs all live in one month partition of ``jobs`` and are not RUNNING without an end, or are
all RUNNING without an end and of one cluster; ``write`` replaces exactly the partitions it is given and refuses
a row outside them.
"""
from __future__ import annotations

import polars as pl

from ..store import keyindex, schema
from ..store.store import _partition_dir

RUNNING = "running"  # the partition (in place of a month) of the cells of RUNNING jobs without an end
KEYS = ["cluster", "job_id"]
NO_PARTS = {"cluster": pl.String, "month": pl.String}


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


def to_refresh(changed: pl.DataFrame, moved: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """The partitions a refresh re-derives, and their clusters: the submit months of the rows in ``changed``
    (``cluster``, ``submit``: the rollup rows re-derived, old and new) and the ``RUNNING`` partition of every
    cluster in ``changed`` or ``moved`` (the RUNNING jobs whose run end moved with a snapshot)."""
    clusters = pl.concat([f.select(pl.col("cluster").cast(pl.String).fill_null("default")) for f in (changed, moved)])
    clusters = sorted(clusters.unique()["cluster"].to_list())
    running = pl.DataFrame({"cluster": clusters, "month": [RUNNING] * len(clusters)}, schema=NO_PARTS)
    return pl.concat([months_of(changed), running]).unique(maintain_order=True), clusters


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
