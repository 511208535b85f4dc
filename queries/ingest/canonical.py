"""Files already in the store's own schema (``queries/store/schema.py``): CSV or Parquet exports of jobs, samples,
nodes.

Which table a file holds is decided by its header: ``job_id`` + ``submit`` -> jobs, ``job_id`` + ``ts`` -> samples,
``node`` -> nodes; otherwise the table sharing most column names, whose missing required column then raises
``IngestError`` naming that column and line 1. Column names are matched case-insensitively after trimming;
columns the schema does not know are ignored (so a file may carry extra columns of another tool).

Invariants:
- every data row is either accepted (cast to the schema dtype, all checks passed) or rejected with the
  first failing field, a reason and the raw input text (CSV: the physical lines of the record; Parquet: the
  row as JSON, ``line`` = 1-based row index);
- a value that does not cast (``abc`` in ``req_cpus``, a bad timestamp, NaN/inf) rejects its row, never the file;
- impossible values reject the row: end before start, negative counts/durations/bytes, more than 1e6 CPUs or
  GPUs, more than 1 PB of memory, a duration over 100 years, a utilisation outside 0..1, a state or job class the schema does not know;
- timestamps: ISO 8601 (a naive value is UTC, an offset is converted to UTC) or a number = Unix seconds;
- an empty ``cluster`` stays null here; ``ingest`` fills it from ``--cluster`` (else ``default``).

The module also holds the helpers the other non-Slurm parsers share (``read_text``, ``first_failure``).
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import polars as pl

from ..store import name_problem_expr, schema
from .pipeline import IngestError, Parsed
from .limits import MAX_COUNT, MAX_SECONDS
from .textio import gunzip

REQUIRED = {"jobs": ("job_id", "submit"), "samples": ("job_id", "ts"), "nodes": ("node",)}
MAX_BYTES = 1e15         # 1 PB of memory (this format's documented limit, stricter than ``limits.MAX_BYTES``)
BAD_UTF8 = "\ufffd"
REJECT_SCHEMA = {"line": pl.Int64, "field": pl.String, "reason": pl.String, "raw": pl.String}

# Columns per impossible-value check; checks run in this order and the first failing one names the row's field.
_COUNTS = ("nodes", "req_cpus", "req_gpus", "alloc_cpus", "alloc_gpus", "cpus", "gpus", "cpu_used")
_BYTES = ("req_mem_bytes", "alloc_mem_bytes", "max_rss_bytes", "gpu_mem_used_bytes", "mem_bytes", "gpu_mem_bytes")
_DURATIONS = ("elapsed_s", "time_limit_s", "cpu_seconds_used", "min_runtime_s", "interval_s")
_FRACTIONS = ("mean_gpu_util", "max_gpu_util", "max_cpu_util", "gpu_util")


# ------------------------------------------------------------------ shared text helpers
def read_text(path: str | Path) -> tuple[str, bool]:
    """The whole file as text, gunzipped when it starts with the gzip magic.

    Returns ``(text, had_invalid_utf8)``; invalid bytes become U+FFFD so the caller can reject just those lines.
    A truncated or corrupt gzip stream raises ``IngestError`` naming the first line that could not be read.
    """
    path = Path(path)
    with open(path, "rb") as fh:
        magic = fh.read(2)
        fh.seek(0)
        if magic == b"\x1f\x8b":
            data = gunzip(path, fh)
        else:
            data = fh.read()
    try:
        text, bad = data.decode("utf-8"), False
    except UnicodeDecodeError:
        text, bad = data.decode("utf-8", errors="replace"), True
    return text.removeprefix("\ufeff"), bad


def first_failure(checks: list[tuple[pl.Expr, str, pl.Expr | str]]) -> tuple[pl.Expr, pl.Expr]:
    """(field, reason) expressions naming the first check whose condition is true, null when all pass."""
    field = pl.coalesce([pl.when(c).then(pl.lit(f)) for c, f, _ in checks] or [pl.lit(None, pl.String)])
    reason = pl.coalesce([pl.when(c).then(r if isinstance(r, pl.Expr) else pl.lit(r)) for c, _, r in checks]
                         or [pl.lit(None, pl.String)])
    return field.cast(pl.String), reason.cast(pl.String)


# ------------------------------------------------------------------ sniffing
def _header_names(head: bytes) -> list[str]:
    first = head.split(b"\n", 1)[0].decode("utf-8", errors="replace").removeprefix("\ufeff")
    try:
        return [c.strip().lower() for c in next(csv.reader([first]))]
    except (StopIteration, csv.Error):
        return []


def sniff_parquet(head: bytes, name: str) -> bool:
    return head[:4] == b"PAR1"


def sniff_samples(head: bytes, name: str) -> bool:
    cols = _header_names(head)
    return "job_id" in cols and "ts" in cols and "submit" not in cols


def sniff_csv(head: bytes, name: str) -> bool:
    cols = _header_names(head)
    return ("job_id" in cols and ("submit" in cols or "ts" in cols)) or ("node" in cols and ("cpus" in cols or
                                                                                            "gpus" in cols))


# ------------------------------------------------------------------ table choice
def _choose_table(path: Path, columns: list[str], only: str | None = None) -> str:
    cols = set(columns)
    if only is None:
        if {"job_id", "submit"} <= cols:
            return "jobs"
        if {"job_id", "ts"} <= cols:
            return "samples"
        if "node" in cols:
            return "nodes"
    candidates = [only] if only else ["jobs", "samples", "nodes"]
    overlap = {t: len(cols & (set(schema.TABLES[t]) - {"cluster"})) for t in candidates}
    table = max(candidates, key=lambda t: overlap[t])
    if overlap[table] == 0 and only is None:
        raise IngestError(path, "header names no column of the jobs, samples or nodes schema", line=1)
    for req in REQUIRED[table]:
        if req not in cols:
            raise IngestError(path, f"missing required column for a {table} table", line=1, field=req)
    return table


# ------------------------------------------------------------------ casting and checks
def _to_timestamp(s: pl.Series) -> pl.Series:
    """Strings -> UTC microseconds: a number is Unix seconds, anything else goes through DuckDB's TIMESTAMPTZ
    cast (ISO 8601 with or without offset; naive means UTC). Unparseable -> null."""
    s = s.str.strip_chars()
    num = s.cast(pl.Float64, strict=False)
    import duckdb  # here, not at the top: reading SWF (which borrows read_text) must not load DuckDB

    con = duckdb.connect()
    try:
        con.sql("set timezone = 'UTC'")
        con.register("frame", pl.DataFrame({"s": s}).to_arrow())
        parsed = con.sql("select try_cast(s as timestamptz) as t from frame").pl()["t"].cast(schema.UTC_TS)
    finally:
        con.close()
    return pl.select(pl.when(num.is_not_null()).then(_epoch_seconds(num)).otherwise(parsed)).to_series()


def _epoch_seconds(num: pl.Series | pl.Expr):
    ok = num.is_finite() & (num.abs() < 1e11)  # beyond year 5138: not seconds, a unit error
    us = pl.when(ok).then((num * 1e6).round()).cast(pl.Int64, strict=False)
    return us.cast(schema.UTC_TS) if isinstance(num, pl.Expr) else pl.select(us.cast(schema.UTC_TS)).to_series()


def _cast_column(s: pl.Series, dtype: pl.DataType) -> tuple[pl.Series, str]:
    """``(typed, what)``: ``typed`` is null exactly where ``s`` is null or holds a value that does not cast to
    ``dtype``. Typed Parquet columns cast directly; text goes through the same parsing as CSV."""
    src = s.dtype
    if dtype == pl.String:
        return s.cast(pl.String), "text"
    if dtype == schema.UTC_TS:
        if isinstance(src, pl.Datetime):
            s = s.dt.replace_time_zone("UTC") if src.time_zone is None else s.dt.convert_time_zone("UTC")
            return s.cast(schema.UTC_TS), "a timestamp"
        if src == pl.Date:
            return s.cast(pl.Datetime("us")).dt.replace_time_zone("UTC"), "a timestamp"
        if src.is_numeric():
            return _epoch_seconds(s.cast(pl.Float64)), "a timestamp"
        return _to_timestamp(s.cast(pl.String)), "a timestamp"
    if src.is_numeric() or src == pl.Boolean:
        f = s.cast(pl.Float64)
    else:
        f = s.cast(pl.String).str.strip_chars().cast(pl.Float64, strict=False)
    keep = f.is_finite()
    what = "a number"
    if dtype.is_integer():
        keep, what = keep & (f == f.round()), "an integer"
    return pl.select(pl.when(keep).then(f)).to_series().cast(dtype, strict=False), what


def _value_checks(cols: set[str], table: str) -> list[tuple[pl.Expr, str, pl.Expr | str]]:
    checks: list[tuple[pl.Expr, str, pl.Expr | str]] = []
    for req in REQUIRED[table]:
        checks.append((pl.col(req).is_null(), req, "required value missing"))
    if "cluster" in cols:  # the name becomes a directory of the store
        problem = name_problem_expr(pl.col("cluster"))
        checks.append((problem.is_not_null(), "cluster", problem))
    if {"start", "end"} <= cols:
        checks.append((pl.col("end") < pl.col("start"), "end", "end before start"))
    for c in _COUNTS + _BYTES + _DURATIONS:
        if c in cols:
            checks.append((pl.col(c) < 0, c, pl.format("negative value: {}", pl.col(c))))
    for c in _COUNTS:
        if c in cols:
            checks.append((pl.col(c) > MAX_COUNT, c, pl.format("impossible count (> 1e6): {}", pl.col(c))))
    for c in _BYTES:
        if c in cols:
            checks.append((pl.col(c) > MAX_BYTES, c, pl.format("impossible memory (> 1 PB): {}", pl.col(c))))
    for c in _DURATIONS:
        if c in cols:
            checks.append((pl.col(c) > MAX_SECONDS, c, pl.format("impossible duration (> 100 years): {}", pl.col(c))))
    for c in _FRACTIONS:
        if c in cols:
            checks.append(((pl.col(c) < 0) | (pl.col(c) > 1), c, pl.format("utilisation outside 0..1: {}", pl.col(c))))
    if table == "jobs" and "state" in cols:
        checks.append((pl.col("state").is_not_null() & ~pl.col("state").is_in(schema.STATES), "state",
                       pl.format("unknown state: {}", pl.col("state"))))
    if "job_class" in cols:
        checks.append((pl.col("job_class").is_not_null() & ~pl.col("job_class").is_in(schema.JOB_CLASSES),
                       "job_class", pl.format("unknown job class: {}", pl.col("job_class"))))
    return checks


def _validate(raw: pl.DataFrame, table: str, bad_utf8: bool) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Cast + check the schema columns of ``raw``. Returns (accepted rows conformed to the table,
    rejects with ``__row`` = index into ``raw``, ``field``, ``reason``)."""
    known = [c for c in raw.columns if c in schema.TABLES[table]]
    raw = raw.select(known).with_columns(
        pl.when(pl.col(c).str.strip_chars() != "").then(pl.col(c)).alias(c)
        for c in known if raw.schema[c] == pl.String)
    if table == "jobs" and "state" in known:  # job states are upper case; node states (idle, ...) are not
        raw = raw.with_columns(pl.col("state").cast(pl.String).str.strip_chars().str.to_uppercase())
    dtypes = schema.polars_schema(table)
    typed, checks = {}, []
    if bad_utf8:
        utf8 = pl.any_horizontal([pl.col(f"__raw_{c}").cast(pl.String).str.contains(BAD_UTF8, literal=True)
                                  for c in known]) if known else pl.lit(False)
        checks.append((utf8, "record", "invalid UTF-8 bytes"))
    for c in known:
        typed[c], what = _cast_column(raw[c], dtypes[c])
        checks.append((pl.col(f"__raw_{c}").is_not_null() & pl.col(c).is_null(), c,
                       pl.format(f"not {what}: {{}}", pl.col(f"__raw_{c}"))))
    df = pl.DataFrame(typed, schema={c: dtypes[c] for c in known}) if known else pl.DataFrame()
    df = pl.concat([df, raw.select(pl.all().name.prefix("__raw_"))], how="horizontal")
    df = df.with_row_index("__row")
    field, reason = first_failure(checks + _value_checks(set(known), table))
    df = df.with_columns(field.alias("field"), reason.alias("reason"))
    rej = df.filter(pl.col("field").is_not_null()).select("__row", "field", "reason")
    good = df.filter(pl.col("field").is_null()).select(known)
    if table == "jobs" and {"start", "end"} <= set(known):
        elapsed = (pl.col("end") - pl.col("start")).dt.total_microseconds() / 1e6
        good = good.with_columns(
            (pl.col("elapsed_s") if "elapsed_s" in known else pl.lit(None, pl.Float64))
            .fill_null(elapsed).fill_null(pl.when(pl.col("start").is_null()).then(0.0)).alias("elapsed_s"))
    return schema.conform(good, table), rej


def _parsed(table: str, n_read: int, good: pl.DataFrame, rej: pl.DataFrame) -> Parsed:
    res = Parsed(rows_read=n_read, rows_accepted=good.height, rejects=rej.select(list(REJECT_SCHEMA)).sort("line"))
    setattr(res, table, good)
    return res


# ------------------------------------------------------------------ CSV
_FIELD = r'(?:[^",]*|"(?:[^"]|"")*")'  # RFC 4180: a bare field, or a quoted one ("" escapes a quote)
_RECORD = rf"^{_FIELD}(?:,{_FIELD})*$"


def _csv_records(path: Path, text: str) -> tuple[list[str], int, pl.DataFrame, pl.DataFrame]:
    """``(header, header_line, records, bad)``: ``records`` holds the string columns plus the ``__first``/``__last``
    physical lines of each record; ``bad`` holds rejects for malformed quoting or a wrong number of fields.

    Vectorised: a physical line starts a new record when the quotes before it are balanced (RFC 4180 quotes
    may hold commas and newlines); records are validated by a regex, then split by Polars' CSV reader."""
    lines = pl.DataFrame({"raw": text.split("\n")}).with_row_index("__first", offset=1)
    lines = lines.with_columns(pl.col("__first").cast(pl.Int64), pl.col("raw").str.strip_chars_end("\r"))
    quoted = '"' in text
    if quoted:
        quotes = pl.col("raw").str.count_matches('"', literal=True)
        lines = (lines.with_columns((((quotes.cum_sum() - quotes) % 2) == 0).cum_sum().alias("__rec"))
                 .group_by("__rec", maintain_order=True)
                 .agg(pl.col("__first").first(), pl.col("__first").last().alias("__last"),
                      pl.col("raw").str.join("\n")))
    else:
        lines = lines.with_columns(pl.col("__first").alias("__last"))
    recs = lines.filter(pl.col("raw").str.strip_chars() != "")
    if recs.height == 0:
        raise IngestError(path, "empty file: no header line", line=1)
    try:
        header = [h.strip().lower() for h in next(csv.reader([recs["raw"][0]]))]
    except csv.Error as exc:  # a lone CR or a NUL inside the header line
        raise IngestError(path, f"malformed header line: {exc}", line=int(recs["__first"][0])) from exc
    body = recs.slice(1)
    well_formed = pl.col("raw").str.contains(_RECORD) if quoted else pl.lit(True)
    unquoted = pl.col("raw").str.replace_all(r'"(?:[^"]|"")*"', "") if quoted else pl.col("raw")
    n_fields = unquoted.str.count_matches(",", literal=True) + 1
    body = body.with_columns(well_formed.alias("__ok"), n_fields.alias("__n"))
    problem = (pl.when(~pl.col("__ok")).then(pl.lit("malformed quoting"))
               .when(pl.col("__n") != len(header))
               .then(pl.format(f"expected {len(header)} fields, found {{}}", pl.col("__n"))))
    body = body.with_columns(problem.alias("reason"))
    bad = body.filter(pl.col("reason").is_not_null()).select(
        pl.col("__first").alias("line"), pl.lit("record").alias("field"), "reason", "raw")
    body = body.filter(pl.col("reason").is_null())
    schema_str = {h: pl.String for h in header}
    fields = pl.read_csv(io.StringIO("\n".join(body["raw"].to_list()) + "\n"), has_header=False, schema=schema_str,
                         quote_char='"' if quoted else None) if body.height else pl.DataFrame(schema=schema_str)
    if fields.height != body.height:  # the regex admitted something the reader splits differently
        raise IngestError(path, f"CSV reader found {fields.height} records where {body.height} were expected",
                          line=int(recs["__first"][0]))
    frame = fields.with_columns(body["__first"], body["__last"])
    return header, recs["__first"][0], frame, bad


def _parse_csv_file(path: str | Path, only: str | None = None) -> Parsed:
    path = Path(path)
    text, bad_utf8 = read_text(path)
    header, header_line, records, ragged = _csv_records(path, text)
    if len(set(header)) != len(header):
        dup = next(h for h in header if header.count(h) > 1)
        raise IngestError(path, "duplicate column in header", line=header_line, field=dup)
    table = _choose_table(path, header, only)
    good, rej = _validate(records.drop("__first", "__last"), table, bad_utf8)
    # raw text only for the rejected records: the physical lines they span
    where = records.select("__first", "__last").with_row_index("__row").join(rej, on="__row")
    lines = text.split("\n")
    raw = ["\n".join(lines[a - 1:b]).rstrip("\r") for a, b in where.select("__first", "__last").iter_rows()]
    rej = where.select(pl.col("__first").alias("line"), "field", "reason", pl.Series("raw", raw, pl.String))
    return _parsed(table, records.height + ragged.height, good, pl.concat([ragged, rej]))


def parse_csv(path: str | Path, **_options) -> Parsed:
    """A jobs, samples or nodes CSV (plain or gzip) in the canonical schema; see the module docstring."""
    return _parse_csv_file(path)


# ------------------------------------------------------------------ Parquet
def _parse_parquet_file(path: str | Path, only: str | None = None) -> Parsed:
    path = Path(path)
    try:
        df = pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise IngestError(path, f"not a readable Parquet file: {str(exc).splitlines()[0]}", line=1) from exc
    df = df.rename({c: c.strip().lower() for c in df.columns})
    table = _choose_table(path, df.columns, only)
    good, rej = _validate(df, table, bad_utf8=False)
    known = [c for c in df.columns if c in schema.TABLES[table]]
    bad_rows = df.select(known)[rej["__row"].to_list()] if rej.height else df.select(known).clear()
    raw = [json.dumps(r, default=str) for r in bad_rows.iter_rows(named=True)]
    rej = rej.select((pl.col("__row").cast(pl.Int64) + 1).alias("line"), "field", "reason",
                     pl.Series("raw", raw, pl.String))
    return _parsed(table, df.height, good, rej)


def parse_parquet(path: str | Path, **_options) -> Parsed:
    """A jobs, samples or nodes Parquet file in the canonical schema; ``line`` in rejects is the row index."""
    return _parse_parquet_file(path)


def parse_samples(path: str | Path, **_options) -> Parsed:
    """A samples file, CSV or Parquet (by its magic bytes); anything else in it is an error, not a guess."""
    path = Path(path)
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic == b"PAR1":
        return _parse_parquet_file(path, only="samples")
    return _parse_csv_file(path, only="samples")
