"""A DuckDB connection over a store: one view per store table, the optional relations and ``store_snapshot``.

Invariants: every table of ``schema.TABLES`` is a relation of the connection, whatever the store holds (typed
empty views for absent tables, typed null columns for columns older files lack); ``store_snapshot`` (cluster,
snapshot: the last instant each cluster's log knows) always exists, from the store's manifest (empty for a flat
store); each relation of ``OPTIONAL_RELATIONS`` exists, empty unless ``connect(extra=...)`` provides it. The
session's time zone is UTC.
"""
from __future__ import annotations

import datetime as dt
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import duckdb
import polars as pl

from . import schema
from .store import Store
from .units import UTC_TS

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_STORE = Path(os.environ.get("QUOTALOOP_STORE", REPO_ROOT / "sample_data" / "store"))

# Relations a query may reference that only some callers provide: name -> schema of the empty stand-in.
OPTIONAL_RELATIONS = {"budget_shares": {"account": pl.String, "share": pl.Float64}}
# DuckDB keeps each file's parsed Parquet footer for the connection's life instead of parsing it again for every
# scan. Footers written before 2026-12-07 carry their jobs' hashes (``keyindex``: 8 bytes a job, about 9 MB for a
# month of the 10M-job benchmark store); uncached, the views' schema read and every query's scan re-parsed them,
# which cost more than some queries themselves at 10M jobs (queries/README.md, "Speed"). The hashes are beside
# the files now, and a footer of hundreds of row groups is still worth parsing once. Safe: a store file is never
# rewritten in place (new files get new names), and DuckDB checks the file's modification time anyway.
PARQUET_METADATA_CACHE = True
# A writer's connection (``connect(pending=tx)``: the rollup, cube and hour cells an ingest, ``rollup --rebuild`` or
# ``compact`` derives) is bounded like the dashboard's queries, so an ingest or a rebuild of a 10M-job store
# spills to disk instead of taking 80 % of the machine (uncapped, a 10M-job rebuild reached 21 GB and was
# killed). ``QUOTALOOP_WRITE_MEMORY`` overrides it; spills go under the system's temporary directory.
WRITE_MEMORY_LIMIT = os.environ.get("QUOTALOOP_WRITE_MEMORY", "4GB")
# The last instant each cluster's log knows (``Store.snapshots``): registered from the store's manifest, empty
# for a flat store (a simulation's output) or a store ingested before it was recorded.
SNAPSHOT_SCHEMA = {"cluster": pl.String, "snapshot": UTC_TS}


def connect(store: str | os.PathLike | None = None, *, threads: int | None = None, extra: dict | None = None,
            memory_limit: str | None = None, pending=None, tables: Iterable[str] | None = None):
    """A DuckDB connection with one view per store table (empty, typed views for absent tables).

    ``extra`` maps names to Polars/Arrow frames registered beside the tables (e.g. a budget table).
    ``memory_limit`` (``"8GB"``) bounds DuckDB's memory; its default is 80 % of the machine's RAM.
    ``pending`` (a ``Transaction`` of this store) shows the store as that transaction would commit it: its staged
    files and snapshots (the rollup reads what an ingest is about to commit, before it commits); such a writer's
    connection is bounded by ``WRITE_MEMORY_LIMIT`` unless ``memory_limit`` says otherwise.
    ``tables``: bind only these store tables (``queries.analytics.loader.tables`` names those a query reads); the
    others are not defined, so a query that reads one fails instead of seeing it empty. Binding a table reads the
    footer of each of its files (hundreds in a big store's cell tables), so a writer's short query names them.
    """
    st = Store(store or DEFAULT_STORE) if pending is None else pending.store
    config = {k: v for k, v in (("threads", threads), ("memory_limit", memory_limit)) if v}
    if pending is not None:
        config.setdefault("memory_limit", WRITE_MEMORY_LIMIT)
        config["temp_directory"] = str(Path(tempfile.gettempdir()) / f"quotaloop-duckdb-{os.getpid()}")
    con = duckdb.connect(config=config)
    con.execute("set timezone = 'UTC'")
    if PARQUET_METADATA_CACHE:
        con.execute("set parquet_metadata_cache = true")
    for table in schema.TABLES:
        if table in (extra or {}) or (tables is not None and table not in tables):  # a frame stands in, or unread
            continue
        files = st.files(table) if pending is None else [str(st.root / r) for r in pending.tables.get(table, [])]
        if files:
            _with_all_columns(con.read_parquet(files, union_by_name=True), table).create_view(table, replace=True)
        else:
            con.register(table, schema.empty(table).to_arrow())
    if "store_snapshot" not in (extra or {}):
        snaps = st.snapshots() if pending is None else {
            c: dt.datetime.fromisoformat(t) for c, t in sorted(pending.snapshots.items())}
        con.register("store_snapshot", pl.DataFrame({"cluster": list(snaps), "snapshot": list(snaps.values())},
                                                    schema=SNAPSHOT_SCHEMA).to_arrow())
    for name, frame in (extra or {}).items():
        con.register(name, frame.to_arrow() if isinstance(frame, pl.DataFrame) else frame)
    for name, rel_schema in OPTIONAL_RELATIONS.items():
        if name not in (extra or {}):
            con.register(name, pl.DataFrame(schema=rel_schema).to_arrow())
    return con


def _with_all_columns(rel, table: str):
    """``rel`` with the schema's columns its files lack added as typed nulls: a store written before a column
    was added (jobstats' ``gpus_idle``, a sample's ``source``) still answers every query."""
    have = {c.lower() for c in rel.columns}
    missing = [(k, v[0]) for k, v in schema.TABLES[table].items() if k.lower() not in have]
    if not missing:
        return rel
    empty = pl.DataFrame(schema=dict(missing)).to_arrow()
    types = dict(zip(empty.column_names, duckdb.from_arrow(empty).types))
    return rel.project(*[duckdb.ColumnExpression(c) for c in rel.columns],
                       *[duckdb.ConstantExpression(None).cast(types[k]).alias(k) for k, _ in missing])
