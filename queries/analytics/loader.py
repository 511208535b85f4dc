"""The named-query loader: the only way the UI, CLI and reports read analytics.

``run("job_waste", store="DIR", start="2026-11-01")`` loads ``queries/analytics/sql/job_waste.sql``, binds the
parameters it declares and returns a Polars frame. Each SQL file declares its parameters in header lines::

    -- param: start timestamp null  window start (UTC, inclusive)

(name, type, default, description). Bounds may follow the default (``-- param: team_level integer 1 >=1  ...``:
``>=X``, ``>X``, ``<=X``, ``<X``). Values are always bound with DuckDB's ``$name`` placeholders, never
formatted into SQL. An unknown query or parameter, a value of the wrong type, a number that is not finite or
outside its bounds, and an ``end`` not after ``start`` are each a one-line ``QueryError`` naming it.

A line ``-- include: _NAME`` is replaced by the text of ``sql/_NAME.sql`` (a fragment of named CTEs, dbt's
"ephemeral model"); its ``-- param:`` lines join the query's, a query's own declaration winning. Files
starting with ``_`` are fragments, not queries. The relations a query may reference are those of
``queries.store.connect``: the store's tables, ``store_snapshot`` and the optional relations (``budget_shares``).
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import polars as pl

from ..store import schema
from ..store.connection import connect
from ..store.units import parse_ts

SQL_DIR = Path(__file__).parent / "sql"

_PARAM_RE = re.compile(r"^--\s*param:\s*(\w+)\s+(\w+)\s+(\S+)\s*(.*)$")
_BOUND_RE = re.compile(r"^(>=|>|<=|<)(-?\d+(?:\.\d+)?)$")
_BOUND_OK = {">=": lambda v, b: v >= b, ">": lambda v, b: v > b, "<=": lambda v, b: v <= b, "<": lambda v, b: v < b}
_INCLUDE_RE = re.compile(r"^--\s*include:\s*(_[a-z0-9_]+)\s*$")
_TYPES = {
    "timestamp": parse_ts,
    "double": float,
    "integer": int,
    "varchar": str,
    "boolean": lambda v: v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes", "on"),
}


class QueryError(ValueError):
    """A query name or parameter that does not exist, or a value of the wrong type."""


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    default: object
    description: str
    bounds: tuple[tuple[str, float], ...] = ()  # (operator, bound): (">=", 1.0)

    def check(self, value, query: str) -> None:
        """``QueryError`` unless a numeric ``value`` is finite and within the declared bounds."""
        if isinstance(value, float) and not math.isfinite(value):
            raise QueryError(f"query {query!r}: parameter {self.name}={value!r} is not a finite number")
        for op, bound in self.bounds:
            if not _BOUND_OK[op](value, bound):
                raise QueryError(f"query {query!r}: parameter {self.name}={value!r} must be {op} {bound:g}")


@dataclass(frozen=True)
class Query:
    name: str
    sql: str
    description: str
    params: tuple[Param, ...]


@lru_cache(maxsize=None)
def load(name: str) -> Query:
    if not re.fullmatch(r"[a-z0-9_]+", name or ""):
        raise QueryError(f"unknown query {name!r}; known: {', '.join(names())}")
    path = SQL_DIR / f"{name}.sql"
    if not path.exists():
        raise QueryError(f"unknown query {name!r}; known: {', '.join(names())}")
    text = path.read_text()
    params, desc = [], []
    for line in text.splitlines():
        if line.startswith("-- ") and not line.startswith(("-- param", "-- include")) and not params:
            desc.append(line[3:].strip())
        elif _PARAM_RE.match(line):
            params.append(line)
    text = _expand(text, (name,))
    declared: dict[str, Param] = {}
    for line in text.splitlines():
        m = _PARAM_RE.match(line)
        if m:
            pname, ptype, default, pdesc = m.groups()
            if ptype not in _TYPES:
                raise QueryError(f"{path}: parameter {pname} has unknown type {ptype}")
            if pname in declared:  # the query's own header comes first and wins over an include's default
                if declared[pname].type != ptype:
                    raise QueryError(f"{path}: parameter {pname} declared as {declared[pname].type} and {ptype}")
                continue
            value = None if default == "null" else _TYPES[ptype](default)
            bounds = []
            words = pdesc.split()
            while words and _BOUND_RE.match(words[0]):
                op, bound = _BOUND_RE.match(words.pop(0)).groups()
                bounds.append((op, float(bound)))
            if bounds and ptype not in ("integer", "double"):
                raise QueryError(f"{path}: parameter {pname}: bounds on a {ptype}")
            declared[pname] = Param(pname, ptype, value, " ".join(words), tuple(bounds))
    return Query(name, text, " ".join(desc), tuple(declared.values()))


def _expand(text: str, stack: tuple[str, ...]) -> str:
    """Replace ``-- include: _NAME`` lines by the fragment's text (recursively; a cycle is an error)."""
    out = []
    for line in text.splitlines():
        m = _INCLUDE_RE.match(line.strip())
        if not m:
            out.append(line)
            continue
        inc = m.group(1)
        path = SQL_DIR / f"{inc}.sql"
        if inc in stack or not path.exists():
            raise QueryError(f"query {stack[0]!r}: include {inc!r} " + ("is cyclic" if inc in stack else "not found"))
        out.append(_expand(path.read_text().rstrip(), stack + (inc,)))
    return "\n".join(out)


@lru_cache(maxsize=None)
def tables(*queries: str) -> frozenset[str]:
    """The store tables the named ``queries`` (statements or fragments) may read: every table whose name appears
    as a word in their SQL outside comments (a string literal or alias of that name only binds one table more).
    For ``connect(tables=...)``."""
    text = "\n".join(re.sub(r"--[^\n]*", "", load(q).sql) for q in queries)
    words = set(re.findall(r"[a-z_][a-z0-9_]*", text))
    return frozenset(t for t in schema.TABLES if t in words)


def names() -> list[str]:
    return sorted(p.stem for p in SQL_DIR.glob("*.sql") if not p.stem.startswith("_"))


def bind(query: Query, params: dict) -> dict:
    known = {p.name: p for p in query.params}
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise QueryError(
            f"query {query.name!r} has no parameter {', '.join(unknown)}; it takes: {', '.join(known) or 'none'}"
        )
    bound = {}
    for p in query.params:
        value = params.get(p.name, p.default)
        if value is not None:
            try:
                value = _TYPES[p.type](value)
            except (TypeError, ValueError) as exc:
                raise QueryError(f"query {query.name!r}: parameter {p.name}={value!r} is not a {p.type}") from exc
            p.check(value, query.name)
        bound[p.name] = value
    if bound.get("start") is not None and bound.get("end") is not None and bound["end"] <= bound["start"]:
        raise QueryError(f"query {query.name!r}: end {bound['end']:%Y-%m-%d %H:%M:%S} is not after start "
                         f"{bound['start']:%Y-%m-%d %H:%M:%S} (the window is [start, end))")
    return bound


def run(name: str, store: str | os.PathLike | None = None, *, con=None, **params) -> pl.DataFrame:
    """Run the named query against ``store`` (or an open connection ``con``) and return a Polars frame."""
    query = load(name)
    bound = bind(query, params)
    own = con is None
    con = con or connect(store)
    try:
        used = {k: v for k, v in bound.items() if re.search(rf"\${k}\b", query.sql)}
        return con.sql(query.sql, params=used).pl()
    finally:
        if own:
            con.close()
