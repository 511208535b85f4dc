"""``quotaloop query NAME --store DIR [--param k=v ...] [--format table|csv|json]``; ``quotaloop query --list``.

Runs one named query (``queries/sql/NAME.sql``) and prints its result. Parameter values are strings on the
command line; the query's declared types convert them (``null`` = unset). csv and json print every row;
table prints at most ``--limit`` rows (default 50) and says how many it left out.
"""
from __future__ import annotations

import json
import sys


def register(sub):
    p = sub.add_parser("query", help="run a named query over a store",
                       description="Run a named query (queries/sql/NAME.sql) over a store.")
    p.add_argument("name", nargs="?", metavar="NAME", help="query name (see --list)")
    p.add_argument("--store", help="store directory (default: $QUOTALOOP_STORE or sample_data/store)")
    p.add_argument("--param", "-p", action="append", default=[], metavar="K=V",
                   help="query parameter, repeatable (e.g. --param start=2026-11-01 --param user=alice)")
    p.add_argument("--format", "-f", choices=["table", "csv", "json"], default="table")
    p.add_argument("--limit", type=int, default=50, help="rows shown by --format table (default 50)")
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
            out.write(f"    --param {p.name}=<{p.type}> (default {default})  {p.description}\n")
        out.write("\n")


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

    # QueryError, not cli.UserError: under `python -m dashboard.cli` the router's UserError is __main__'s
    if args.list:
        _list(sys.stdout)
        return 0
    if not args.name:
        raise queries.QueryError("give a query NAME (see `quotaloop query --list`)")
    params = _parse_params(args.param)
    try:
        df = queries.run(args.name, store=args.store, **params)
    except duckdb.Error as exc:  # e.g. a parameter value the query rejects with error(...)
        raise queries.QueryError(str(exc).splitlines()[0]) from exc
    if args.format == "csv":
        sys.stdout.write(df.write_csv())
    elif args.format == "json":
        rows = [{k: _jsonable(v) for k, v in row.items()} for row in df.iter_rows(named=True)]
        json.dump(rows, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        shown = df.head(max(args.limit, 0))
        with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=200, fmt_str_lengths=60,
                       tbl_hide_dataframe_shape=True):
            print(shown)
        if df.height > shown.height:
            print(f"({df.height - shown.height} more rows; use --limit or --format csv)")
    return 0
