"""``quotaloop query NAME --store DIR [--param k=v ...] [--format table|csv|json]``; ``quotaloop query --list``.

Runs one named query (``queries/analytics/sql/NAME.sql``) and prints its result. Parameter values are strings on the
command line; the query's declared types convert them (``null`` = unset). csv and json print every row
and column; table prints at most ``--limit`` rows (default 50) and as many columns as fit the terminal (or
``--columns a,b,...``), and says what it left out.
"""
from __future__ import annotations

import json
import shutil
import sys

# Polars, DuckDB and queries are imported inside the functions: see the start-up note in dashboard.cli.


def register(sub):
    p = sub.add_parser("query", help="run a named query over a store",
                       description="Run a named query (queries/analytics/sql/NAME.sql) over a store.")
    p.add_argument("name", nargs="?", metavar="NAME", help="query name (see --list)")
    p.add_argument("--store", help="store directory (default: $QUOTALOOP_STORE or sample_data/store)")
    p.add_argument("--param", "-p", action="append", default=[], metavar="K=V",
                   help="query parameter, repeatable (e.g. --param start=2026-11-01 --param user=alice)")
    p.add_argument("--format", "-f", choices=["table", "csv", "json"], default="table")
    p.add_argument("--limit", type=int, default=50, help="rows shown by --format table (default 50)")
    p.add_argument("--columns", "-c", metavar="A,B,...",
                   help="only these columns, in this order (every format); default: all (table: those that fit)")
    p.add_argument("--list", action="store_true", help="list the queries with their parameters and exit")
    return p


def _parse_params(pairs: list[str]) -> dict:
    from queries import QueryError

    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise QueryError(f"--param needs KEY=VALUE, got {pair!r}")
        params[key.strip()] = None if value.strip().lower() == "null" else value
    return params


def _list(out) -> None:
    import queries

    for name in queries.names():
        q = queries.load(name)
        out.write(f"{name}\n    {q.description}\n")
        for p in q.params:
            default = "null" if p.default is None else p.default
            bounds = "".join(f", {op}{b:g}" for op, b in p.bounds)
            out.write(f"    --param {p.name}=<{p.type}> (default {default}{bounds})  {p.description}\n")
        out.write("\n")


STR_CHARS = 60  # longest string cell a table shows before cutting it


def _select(df, columns: str | None):
    """``df`` with only the comma-listed ``columns`` (in that order); an unknown name is a ``QueryError``."""
    from queries import QueryError

    if not columns:
        return df
    wanted = [c.strip() for c in columns.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in df.columns]
    if unknown:
        raise QueryError(f"unknown column(s) {', '.join(unknown)}; the query returns: {', '.join(df.columns)}")
    return df.select(wanted)


def _fitting_columns(df, width: int) -> int:
    """How many leading columns of ``df`` fit ``width`` characters (at least one), as Polars draws them."""
    used = 1
    for k, name in enumerate(df.columns):
        cells = df[name].head(200).cast(str, strict=False).str.len_chars().max() or 0
        used += max(len(name), min(int(cells), STR_CHARS), 4) + 3
        if used > width:
            return max(k, 1)
    return df.width


def _jsonable(value):
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    return value


def run(args) -> int:
    import duckdb
    import polars as pl

    import queries

    if args.list:
        _list(sys.stdout)
        return 0
    if not args.name:
        raise queries.QueryError("give a query NAME (see `quotaloop query --list`)")
    params = _parse_params(args.param)
    queries.bind(queries.load(args.name), params)  # a bad name or value first, before the store is opened
    from queries.store import Store

    # a typo in --store (or $QUOTALOOP_STORE) must not print an empty table that looks like "nothing wasted"
    Store(args.store or queries.DEFAULT_STORE).check()
    try:
        df = queries.run(args.name, store=args.store, **params)
    except duckdb.Error as exc:  # e.g. a parameter value the query rejects with error(...)
        raise queries.QueryError(str(exc).splitlines()[0]) from exc
    df = _select(df, args.columns)
    if args.format == "csv":
        sys.stdout.write(df.write_csv())
    elif args.format == "json":
        rows = [{k: _jsonable(v) for k, v in row.items()} for row in df.iter_rows(named=True)]
        json.dump(rows, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        width = shutil.get_terminal_size((160, 40)).columns
        shown = df.head(max(args.limit, 0))
        shown = shown.select(shown.columns[:_fitting_columns(shown, width)])
        with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=width, fmt_str_lengths=STR_CHARS,
                       tbl_hide_dataframe_shape=True):
            print(shown)
        if df.height > shown.height:
            print(f"({df.height - shown.height} more rows; use --limit or --format csv)")
        if df.width > shown.width:
            print(f"({df.width - shown.width} more columns: {', '.join(df.columns[shown.width:])}; "
                  "pick with --columns or use --format csv)")
    return 0
