"""Core of ``dashboard.data``: configuration, the store token, filters, cached query runs, filter options."""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import polars as pl
import streamlit as st

import queries
from queries.store import schema
from queries.store import Store
from queries.store.extent import extent

from .. import config as config_mod
from .. import shaping
from .pool import ConnectionPool


class NotAvailable(Exception):
    """A query, engine function or report hook this page needs is not there (yet)."""


class SimulationError(Exception):
    """The engine failed on a scenario; ``str`` is one line for the page."""


# ------------------------------------------------------------------ filters
@dataclass(frozen=True)
class Filters:
    """The sidebar's global filters. ``end`` is exclusive; ``account`` selects a subtree (prefix)."""
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    cluster: str | None = None
    partition: str | None = None
    account: str | None = None
    state: str | None = None
    job_class: str | None = None

    def params(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def describe(self) -> str:
        parts = []
        if self.start and self.end:
            parts.append(f"{self.start:%Y-%m-%d} – {(self.end - dt.timedelta(seconds=1)):%Y-%m-%d}")
        parts += [f"{k.replace('_', ' ')} {v}" for k, v in asdict(self).items()
                  if v is not None and k not in ("start", "end")]
        return ", ".join(parts) or "everything"


# Names a query may use for a global filter (first match wins).
FILTER_ALIASES = {
    "start": ("start",), "end": ("end",), "cluster": ("cluster",), "partition": ("partition",),
    "account": ("account", "account_prefix", "team"), "state": ("state",), "job_class": ("job_class", "class"),
}


def config() -> config_mod.Config:
    return config_mod.load()


def store_dir() -> Path:
    return config().store


def store_token(store: Path | str | None = None) -> str:
    """Changes whenever the store's content changes (manifest version, or the files' mtimes for a flat store)."""
    s = Store(store or store_dir())
    if s.manifest_path.exists():
        st_ = s.manifest_path.stat()
        return f"m{s.manifest().get('version', 0)}:{st_.st_mtime_ns}"
    files = [s.files(t) for t in ("jobs", "nodes", "samples")]
    return "f" + ":".join(str(Path(f).stat().st_mtime_ns) for fs in files for f in fs)


def available(name: str) -> bool:
    return name in queries.names()


def declared(name: str) -> set[str]:
    return {p.name for p in queries.load(name).params}


def param_default(name: str, param: str):
    """A query parameter's declared default (so a page's explanation quotes the query, not a copy of it)."""
    return next(p.default for p in queries.load(name).params if p.name == param)


def _bind_filters(name: str, filters: Filters | None) -> tuple[dict, list[str]]:
    if filters is None:
        return {}, []
    names = declared(name)
    bound, ignored = {}, []
    for key, value in filters.params().items():
        target = next((a for a in FILTER_ALIASES[key] if a in names), None)
        if target is None:
            ignored.append(key.replace("_", " "))
        else:
            bound[target] = value
    return bound, ignored


def ignored_filters(name: str, filters: Filters | None) -> list[str]:
    """Global filters that are set but that query ``name`` does not take."""
    if not available(name):
        return []
    return _bind_filters(name, filters)[1]


@st.cache_data(show_spinner=False, max_entries=512, ttl=6 * 3600)
def _run(store: str, token: str, name: str, params_json: str, memory_limit: str | None = None) -> pl.DataFrame:
    params = json.loads(params_json)
    for key in list(params):
        if isinstance(params[key], dict) and "__dt" in params[key]:
            params[key] = dt.datetime.fromisoformat(params[key]["__dt"])
    with connections(store, token, memory_limit).connection() as con:
        return queries.run(name, con=con, **params)


@st.cache_resource(show_spinner=False, max_entries=4, on_release=ConnectionPool.close)
def connections(store: str, token: str, memory_limit: str | None = None) -> ConnectionPool:
    """The open connections to this version of the store (``token``): a new ingest gets new ones, and the old
    pool is closed when Streamlit drops it."""
    return ConnectionPool(lambda: queries.connect(store, memory_limit=memory_limit))


def _jsonable(params: dict) -> str:
    return json.dumps({k: ({"__dt": v.isoformat()} if isinstance(v, dt.datetime) else v)
                       for k, v in sorted(params.items())}, sort_keys=True)


def query(name: str, filters: Filters | None = None, store: Path | str | None = None, **params) -> pl.DataFrame:
    """Run query ``name`` with the global filters it declares plus ``params`` (cached)."""
    if not available(name):
        raise NotAvailable(f"the `{name}` query is not available yet")
    bound, _ = _bind_filters(name, filters)
    defaults = {p.name: p.default for p in queries.load(name).params}
    # a value equal to the query's default is left unbound, so spelling it out or not shares one cache entry
    bound.update({k: v for k, v in params.items() if k in defaults and v is not None and v != defaults[k]})
    store = str(store or store_dir())
    return _run(store, store_token(store), name, _jsonable(bound), config().memory_limit)


def scan(table: str, store: Path | str | None = None) -> pl.LazyFrame:
    """A lazy scan of a store table (filters push down to Parquet; never loads a 10M-row table to drop most)."""
    files = Store(store or store_dir()).files(table)
    if not files:
        return schema.empty(table).lazy()
    return pl.scan_parquet(files, hive_partitioning=False, missing_columns="insert", extra_columns="ignore")


# ------------------------------------------------------------------ filter options
@dataclass(frozen=True)
class Options:
    clusters: list[str] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)
    accounts: list[str] = field(default_factory=list)   # every subtree prefix: org, org/group, org/group/team
    states: list[str] = field(default_factory=list)
    job_classes: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    first: dt.datetime | None = None
    last: dt.datetime | None = None
    jobs: int = 0


@st.cache_data(show_spinner=False, max_entries=16)
def _options(store: str, token: str) -> Options:
    s = Store(store)
    files = s.files("jobs")
    if not files:
        return Options()
    # DuckDB's distinct per column: a third of the CPU of a Polars scan of the same columns (measured at 10M jobs)
    values = query("store_values", store=store)
    uniq = {c: sorted(values.filter(pl.col("field") == c)["value"].to_list())
            for c in ("cluster", "partition", "account", "state", "job_class", "user")}
    # the span from the files' footers (exact, milliseconds); a scan of the three columns only when they cannot say
    ext = extent(files, "submit", ("submit", "start", "end"))
    span = ext and {"first": ext.first, "last": ext.last, "jobs": ext.rows}
    if span is None:
        last = pl.max_horizontal(pl.col("submit").max(), pl.col("start").max(), pl.col("end").max())
        span = scan("jobs", store).select(pl.col("submit").min().alias("first"), last.alias("last"),
                                          pl.len().alias("jobs")).collect().row(0, named=True)
    return Options(uniq["cluster"], uniq["partition"], shaping.prefixes(uniq["account"]), uniq["state"],
                   uniq["job_class"], uniq["user"], span["first"], span["last"], int(span["jobs"]))


def options(store: Path | str | None = None) -> Options:
    """Values the sidebar offers (clusters, partitions, account subtrees, ...) and the store's time span."""
    store = str(store or store_dir())
    return _options(store, store_token(store))
