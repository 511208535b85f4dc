"""Shared parsing helpers for scheduler exports: vectorised Polars expression builders and their scalar twins.
Reading text (heads, whole files, delimited lines with their numbers) is ``textio``'s.

Unit conventions (every format module relies on them; see ``queries/store/schema.py``):

- durations -> float seconds. Accepted: ``[D-]HH:MM:SS``, ``HH:MM:SS.fff``, ``MM:SS``, ``MM:SS.fff`` (sacct's
  TotalCPU style). ``UNLIMITED``, ``Partition_Limit``, ``INVALID``, ``NONE``, ``Unknown`` and empty -> null.
- memory -> float bytes with *binary* units: ``K`` = 1024, ``M`` = 1024**2, ... ``P``, ``E``. A bare number
  takes the caller's default unit, because sacct prints each field from a different base unit (verified in
  Slurm's ``sacct/print.c``): ``ReqMem`` and the ``mem=`` of ReqTRES/AllocTRES are megabytes, while MaxRSS and
  the ``mem=``/``gres/gpumem=`` of TRESUsageIn* are bytes. An ``n``/``c`` suffix (Slurm < 21.08 ReqMem) means
  per node / per CPU; the caller multiplies.
- utilisation -> 0..1 (``gres/gpuutil`` is printed in percent).
- timestamps -> UTC. ``YYYY-MM-DDTHH:MM:SS`` (or with a space) is local time of ``tz`` when given, else UTC
  (a time the clocks skip or repeat is read as ``zoneinfo`` reads it with ``fold=0``: see ``timestamp_expr``);
  a bare integer is epoch seconds (``SLURM_TIME_FORMAT=%s``). ``Unknown``, ``None``, ``N/A`` and empty -> null.

Invariants: every ``*_expr`` parser yields null for empty input, for a "no value" token and for anything it
cannot parse - it never guesses. ``unparsed(raw, value, tokens)`` then tells the last case from the first two;
callers turn it into a reject, so a value is never silently dropped. Each expression has a scalar twin
(``parse_*``, ``normalise_state``, ``job_class``) written independently with ``re``, which the tests compare.

Speed notes (a 1M-line dump must ingest within a few times DuckDB's bare CSV read): regexes with capture groups
are slow per row, so low-cardinality fields are parsed once per distinct value (``on_distinct``); sacct's usual
duration and MaxRSS shapes are cut at fixed positions (``duration_fast_expr``, ``memory_fast_expr``) and only
the rows they do not take go to the general parser (``with_fallbacks``), which computes everything in one lazy
pass: the eager API neither shares a subexpression between expressions nor runs them in parallel, and that
alone tripled the cost of a composite expression. Rare work runs on the rows that need it (``subset_values``),
and every added column keeps the frame's chunk boundaries (``align_chunks``): Polars rechunks a whole frame
whose columns disagree, in every later operation, which costs more than the parsing.
"""
from __future__ import annotations

import re

import numpy as np
import polars as pl

from ..store import schema
from .timezone import UTC_NAMES

# ---------------------------------------------------------------------------------------------- generic
def unparsed(raw: pl.Expr, value: pl.Expr, tokens: tuple[str, ...] = ()) -> pl.Expr:
    """True where ``raw`` holds something (not null - empty fields are read as null - and not a "no value"
    token) but ``value`` is null."""
    bad = raw.is_not_null() & value.is_null()
    return bad & ~raw.is_in(tokens) if tokens else bad


def number_expr(e: pl.Expr) -> pl.Expr:
    """Plain number -> Float64 (null when not a number)."""
    return e.cast(pl.Float64, strict=False)


def on_distinct(df: pl.DataFrame, column: str, exprs: dict[str, pl.Expr]) -> pl.DataFrame:
    """Add ``exprs`` (written against ``pl.col(column)``) to ``df``, evaluated once per distinct value.

    States, TRES strings, limits and memory requests repeat across millions of rows; parsing their few
    distinct values and gathering the results by the value's position (an Enum cast gives it) is much cheaper
    than regex work per row. A null key gets what the expressions give for null. Not worth it for columns
    whose values are mostly distinct (CPU times): the Enum over them costs more than the parse.
    """
    return df.with_columns(v.alias(k) for k, v in on_distinct_values(df, column, exprs).items())


def on_distinct_values(df: pl.DataFrame, column: str, exprs: dict[str, pl.Expr]) -> dict[str, pl.Series]:
    """What ``on_distinct`` adds, as Series whose chunks line up with ``df``'s (to add several at once).

    A Categorical column (the CSV reader can build one as it splits) already holds each row's value as a code:
    its distinct values are the distinct codes, and no string is hashed again."""
    s = df.get_column(column)
    if s.dtype == pl.Categorical:
        distinct = s.unique().drop_nulls()
        dcodes = distinct.to_physical().cast(pl.Int64).to_numpy()
        lut = np.full(int(dcodes.max(initial=-1)) + 2, len(dcodes), dtype=np.int64)  # last slot: null rows
        lut[dcodes] = np.arange(len(dcodes))
        codes = lut[s.to_physical().cast(pl.Int64).fill_null(len(lut) - 1).to_numpy()]
        distinct = distinct.cast(pl.String)
    else:
        distinct = df.select(pl.col(column).unique().drop_nulls())[column]
        codes = df.select(pl.col(column).cast(pl.Enum(distinct)).to_physical().cast(pl.Int64)
                          .fill_null(distinct.len())).to_series()
    table = pl.concat([distinct, pl.Series(column, [None], dtype=pl.String)]).to_frame().with_columns(**exprs)
    like = df.get_column(column)
    return {k: align_chunks(table[k].gather(codes), like) for k in exprs}


def subset_values(df: pl.DataFrame, mask: pl.Series, exprs: dict[str, pl.Expr],
                  inputs: list[str]) -> dict[str, pl.Series]:
    """``exprs`` (reading only the ``inputs`` columns) evaluated on the rows of ``mask`` alone, as full-length
    Series (null elsewhere) whose chunks line up with ``df``'s. For work that only a minority of rows needs."""
    like = df.get_column(df.columns[0])
    sub = df.select(inputs).filter(mask).select(**exprs)
    idx = mask.arg_true()
    return {k: align_chunks(pl.repeat(None, df.height, dtype=sub[k].dtype, eager=True).scatter(idx, sub[k]), like)
            for k in exprs}


def with_fallbacks(df: pl.DataFrame, specs: list[tuple[str, str, pl.Expr, pl.Expr]],
                   plain: dict[str, pl.Expr] | None = None) -> pl.DataFrame:
    """Add columns from ``(name, raw column, fast expr, full expr)``: the fast parser runs on every row; the
    general one only on the rows where the fast one gave null for a non-null raw value (a "no value" token, or
    a shape the fast one does not know, like a duration with a day prefix), so the common case costs one cheap
    pass. ``plain`` expressions (no fallback) are computed in the same pass.

    The pass is one lazy ``with_columns``: Polars then evaluates a subexpression that several expressions share
    (a slice, a length) once, and the independent expressions in parallel; the eager API does neither.
    """
    exprs = {name: fast for name, _, fast, _ in specs} | (plain or {})
    if not exprs:
        return df
    # only the new columns leave the lazy query, and are made one chunk each: the query cuts its outputs into
    # chunks of its own, and a frame whose columns disagree on chunk boundaries is rechunked whole (all the raw
    # text too) by every later operation
    out = df.lazy().select(**exprs).collect().rechunk()
    for name, raw, _, full in specs:
        miss = df.get_column(raw).is_not_null() & out.get_column(name).is_null()
        if miss.any():
            fixed = subset_values(df, miss, {name: full}, [raw])[name].rechunk()
            out = out.with_columns(pl.coalesce(pl.col(name), fixed))
    like = df.get_column(df.columns[0])
    return df.with_columns(align_chunks(s, like) for s in out.get_columns())


# ---------------------------------------------------------------------------------------------- durations
DURATION_NULL = ("", "UNLIMITED", "Partition_Limit", "INVALID", "NONE", "None", "Unknown", "N/A")
_DURATION_RE = r"^(?:(?P<d>\d+)-)?(?:(?P<h>\d+):)?(?P<m>\d\d):(?P<s>\d\d(?:\.\d+)?)$"
_DURATION_OK = r"^(?:(?:\d+-)?\d+:)?\d\d:\d\d(?:\.\d+)?$"


def duration_expr(e: pl.Expr) -> pl.Expr:
    """Slurm duration -> seconds; null for "no value" tokens and for anything else that is not a duration.

    Validated by one regex without captures (a fast DFA), then cut by position from the end, which sacct's
    fixed ``MM:SS`` tail allows: ``SS[.fff]`` ends the string, ``MM`` precedes it, hours and days lead.
    """
    n = e.str.len_bytes().cast(pl.Int64)
    base = pl.coalesce(e.str.find(".", literal=True).cast(pl.Int64), n)  # end of the whole seconds
    dash = e.str.find("-", literal=True).cast(pl.Int64)
    h0 = pl.coalesce(dash + 1, pl.lit(0, pl.Int64))
    num = lambda off, length=None: e.str.slice(off, length).cast(pl.Float64, strict=False)  # noqa: E731
    sec, minute = num(base - 2), num(base - 5, 2)
    # the hours' length is clamped at 0: Polars evaluates a `then` on every row, and since 2.2 a negative
    # length (text that is no duration, e.g. `01:00:-1`) raises instead of giving an empty string
    hours = num(h0, pl.max_horizontal(base - 6 - h0, pl.lit(0, pl.Int64)))
    val = (sec + minute * 60 + pl.when(base >= 7).then(hours).otherwise(0.0) * 3600
           + pl.when(dash.is_not_null()).then(num(0, dash)).otherwise(0.0) * 86400)
    return pl.when(e.str.contains(_DURATION_OK) & (sec < 60) & (minute < 60)).then(val)


def duration_fast_expr(e: pl.Expr) -> pl.Expr:
    """sacct's two usual duration shapes, ``MM:SS.mmm`` (TotalCPU under an hour) and ``HH:MM:SS``, cut at fixed
    positions; null for any other text (``with_fallbacks`` hands it to ``duration_expr``). Where it is not null
    it equals ``duration_expr`` bit for bit: the same field values added in the same order."""
    head = e.str.slice(0, 2).cast(pl.Float64, strict=False)
    hms = e.str.slice(6).cast(pl.Float64, strict=False) + e.str.slice(3, 2).cast(pl.Float64, strict=False) * 60
    ms = e.str.slice(3).cast(pl.Float64, strict=False) + head * 60
    shape = e.str.contains(r"^(?:[0-5]\d:[0-5]\d\.\d\d\d|\d\d:[0-5]\d:[0-5]\d)$")
    return pl.when(shape).then(pl.when(e.str.len_bytes() == 9).then(ms).otherwise(hms + head * 3600))


def parse_duration(text: str | None) -> float | None:
    """Scalar twin of ``duration_expr`` (independent regex). Raises ``ValueError`` when unparseable."""
    s = (text or "").strip()
    if s in DURATION_NULL:
        return None
    m = re.match(_DURATION_RE, s)
    if not m or int(m["m"]) >= 60 or float(m["s"]) >= 60:
        raise ValueError(f"unparseable duration {text!r}")
    return int(m["d"] or 0) * 86400 + int(m["h"] or 0) * 3600 + int(m["m"]) * 60 + float(m["s"])


# ---------------------------------------------------------------------------------------------- memory
UNIT_BYTES = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50, "E": 2**60}
_MEMORY_RE = r"^(?P<num>\d+(?:\.\d+)?)(?P<unit>[KMGTPEkmgtpe]?)(?P<per>[nc]?)$"
_SUFFIXES = [u + p for u0 in UNIT_BYTES for u in {u0, u0.lower()} for p in ("", "n", "c")]


def memory_expr(e: pl.Expr, default_unit: str = "") -> tuple[pl.Expr, pl.Expr]:
    """Memory string -> ``(bytes, per)``; ``per`` is ``"n"`` (per node), ``"c"`` (per CPU) or null.

    ``bytes`` is null unless the text is ``NUMBER[UNIT][n|c]`` with a non-negative number; a bare number has
    ``default_unit``. The suffix is split off with a character strip and looked up in a small table.
    """
    num = e.str.strip_chars_end("KMGTPEkmgtpnc")
    suffix = e.str.slice(num.str.len_chars())
    mult = suffix.replace_strict(
        {x: float(UNIT_BYTES[(x.rstrip("nc") or default_unit).upper()]) for x in _SUFFIXES},
        default=None, return_dtype=pl.Float64)
    per = suffix.replace_strict({x: x[-1] for x in _SUFFIXES if x.endswith(("n", "c"))}, default=None,
                                return_dtype=pl.String)
    val = num.cast(pl.Float64, strict=False) * mult
    return pl.when(num.str.contains(r"^\d+(?:\.\d+)?$")).then(val), per


def memory_fast_expr(e: pl.Expr) -> pl.Expr:
    """``NUMBERK`` with an integer number (how sacct prints MaxRSS) -> bytes; null for any other text
    (``with_fallbacks`` hands it to ``memory_expr``). Equal to ``memory_expr`` where not null: an integer cast
    to float is the same double as the decimal text parsed as float."""
    digits = e.str.head(-1)
    return pl.when(e.str.ends_with("K") & ~e.str.starts_with("+")).then(
        digits.cast(pl.UInt64, strict=False).cast(pl.Float64) * float(UNIT_BYTES["K"]))


def parse_memory(text: str | None, default_unit: str = "") -> tuple[float | None, str | None]:
    """Scalar twin of ``memory_expr``: ``(bytes, per)``. Raises ``ValueError`` when unparseable."""
    s = (text or "").strip()
    if not s:
        return None, None
    m = re.match(_MEMORY_RE, s)
    if not m:
        raise ValueError(f"unparseable memory {text!r}")
    return float(m["num"]) * UNIT_BYTES[(m["unit"] or default_unit).upper()], (m["per"] or None)


# ---------------------------------------------------------------------------------------------- TRES strings
def tres_value_expr(e: pl.Expr, key: str) -> pl.Expr:
    """Raw value of ``key`` in a ``k=v,k=v`` TRES string (exact key: ``mem`` does not match ``gres/gpumem``)."""
    return e.str.extract(r"(?:^|,)" + re.escape(key) + r"=([^,]*)")


def tres_expr(e: pl.Expr) -> dict[str, pl.Expr]:
    """ReqTRES/AllocTRES (``billing=24,cpu=8,gres/gpu:a100=4,gres/gpu=4,mem=199G,node=1``) -> expressions.

    Meant for ``on_distinct`` (regex work). Keys: ``cpu``, ``gpus`` (0 when the string is non-empty but has no
    GPU entry, null when empty), ``gpu_type``, ``mem_bytes`` (bare number = MB), ``nodes``, ``bad``. GPUs are
    counted once: ``gres/gpu=N`` when present, else the sum of the typed ``gres/gpu:TYPE=N`` entries;
    ``gpu_type`` is the first typed entry.
    """
    s = e.str.strip_chars()
    raw = {k: tres_value_expr(s, k) for k in ("cpu", "node", "gres/gpu", "mem")}
    num = {k: number_expr(v) for k, v in raw.items() if k != "mem"}
    mem, _ = memory_expr(raw["mem"], "M")
    typed = s.str.extract_all(r"(?:^|,)gres/gpu:[^=,]+=\d+(?:\.\d+)?")
    typed_sum = typed.list.eval(pl.element().str.extract(r"=(\d+(?:\.\d+)?)$").cast(pl.Float64)).list.sum()
    present = s.fill_null("") != ""
    gpus = (pl.when(num["gres/gpu"].is_not_null()).then(num["gres/gpu"])
            .when(typed.list.len() > 0).then(typed_sum).when(present).then(0.0))
    bad = pl.any_horizontal([unparsed(raw[k], num[k]) for k in num] + [unparsed(raw["mem"], mem)])
    bad = bad | (present & ~s.str.contains(r"^[^=,]+=[^,]*(?:,[^=,]+=[^,]*)*$"))
    return {"cpu": num["cpu"], "gpus": gpus, "gpu_type": s.str.extract(r"(?:^|,)gres/gpu:([^=,]+)="),
            "mem_bytes": mem, "nodes": num["node"], "bad": bad}


def parse_tres(text: str | None) -> dict[str, float | str | None]:
    """Scalar twin of ``tres_expr``: ``{"cpu", "gpus", "gpu_type", "mem_bytes", "nodes"}``."""
    items = dict(kv.split("=", 1) for kv in (text or "").strip().split(",") if "=" in kv)
    typed = {k.split(":", 1)[1]: float(v) for k, v in items.items() if k.startswith("gres/gpu:")}
    gpus = float(items["gres/gpu"]) if "gres/gpu" in items else (sum(typed.values()) if typed else 0.0)
    return {"cpu": float(items["cpu"]) if "cpu" in items else None, "gpus": gpus if items else None,
            "gpu_type": next(iter(typed), None), "mem_bytes": parse_memory(items.get("mem"), "M")[0],
            "nodes": float(items["node"]) if "node" in items else None}


def gres_expr(e: pl.Expr) -> dict[str, pl.Expr]:
    """Old ReqGRES/AllocGRES (``gpu:2``, ``gpu:tesla:2``, ``gpu:a100:4(IDX:0-3)``) -> ``gpus``, ``gpu_type``.

    Meant for ``on_distinct``. ``gpus`` is 0 for a non-empty string without a GPU entry, null when empty.
    """
    g = e.str.extract_groups(r"(?:^|,)(?:gres/)?gpu(?::(?P<type>[A-Za-z][^:,(=]*))?[:=](?P<n>\d+)")
    n = g.struct.field("n").cast(pl.Float64)
    present = e.str.strip_chars().fill_null("") != ""
    return {"gpus": pl.when(n.is_not_null()).then(n).when(present).then(0.0), "gpu_type": g.struct.field("type")}


# ---------------------------------------------------------------------------------------------- states
# Slurm job state (long name or short code) -> schema.STATES. Why the non-obvious ones:
# COMPLETING/SUSPENDED/STOPPED/RESIZING/SIGNALING/STAGE_OUT still hold their allocation -> RUNNING;
# REQUEUED (a run that was stopped and put back in the queue, by preemption or a failure) -> PREEMPTED, the run's
# work is lost either way; BOOT_FAIL -> NODE_FAIL (infrastructure); DEADLINE -> TIMEOUT (killed by a time bound);
# SPECIAL_EXIT -> FAILED; REVOKED (federation sibling revoked) -> CANCELLED; REQUEUE_HOLD/REQUEUE_FED -> PENDING.
STATE_MAP: dict[str, str] = {s: s for s in schema.STATES} | {
    "COMPLETING": "RUNNING", "SUSPENDED": "RUNNING", "STOPPED": "RUNNING", "RESIZING": "RUNNING",
    "SIGNALING": "RUNNING", "STAGE_OUT": "RUNNING", "REQUEUED": "PREEMPTED", "REQUEUE_HOLD": "PENDING",
    "REQUEUE_FED": "PENDING", "BOOT_FAIL": "NODE_FAIL", "DEADLINE": "TIMEOUT", "SPECIAL_EXIT": "FAILED",
    "REVOKED": "CANCELLED", "OOM": "OUT_OF_MEMORY",
    "CD": "COMPLETED", "F": "FAILED", "CA": "CANCELLED", "TO": "TIMEOUT", "PR": "PREEMPTED",
    "NF": "NODE_FAIL", "R": "RUNNING", "PD": "PENDING", "CG": "RUNNING", "S": "RUNNING", "ST": "RUNNING",
    "RS": "RUNNING", "SI": "RUNNING", "SO": "RUNNING", "RQ": "PREEMPTED", "RH": "PENDING", "RF": "PENDING",
    "BF": "NODE_FAIL", "DL": "TIMEOUT", "SE": "FAILED", "RV": "CANCELLED",
}
# sacct without --parsable truncates to the column width with a trailing '+' (``OUT_OF_ME+``): a prefix of
# 3+ characters that completes to exactly one long state name is accepted.
_LONG = [k for k in STATE_MAP if len(k) > 3]
_PREFIX_MAP: dict[str, str] = {}
for _name in _LONG:
    for _i in range(3, len(_name) + 1):
        _hits = {STATE_MAP[n] for n in _LONG if n.startswith(_name[:_i])}
        if len(_hits) == 1:
            _PREFIX_MAP[_name[:_i]] = _hits.pop()


def state_expr(e: pl.Expr) -> pl.Expr:
    """Raw state (``CANCELLED by 1234``, ``OUT_OF_ME+``, ``CD``) -> schema state; null when unknown or empty.

    Meant for ``on_distinct``.
    """
    g = e.str.strip_chars().str.to_uppercase().str.extract_groups(r"^(?P<name>[A-Z_]+)(?P<cut>\+?)")
    name, cut = g.struct.field("name"), g.struct.field("cut") == "+"
    full = name.replace_strict(STATE_MAP, default=None, return_dtype=pl.String)
    return pl.when(cut).then(name.replace_strict(_PREFIX_MAP, default=None, return_dtype=pl.String)).otherwise(full)


def normalise_state(text: str | None) -> str | None:
    """Scalar twin of ``state_expr``: schema state, or None when unknown."""
    m = re.match(r"^([A-Z_]+)(\+?)", (text or "").strip().upper())
    if not m:
        return None
    return _PREFIX_MAP.get(m[1]) if m[2] else STATE_MAP.get(m[1])


# ---------------------------------------------------------------------------------------------- timestamps
TIME_NULL = ("", "Unknown", "None", "N/A", "NONE", "UNKNOWN", "(null)")


def _local_to_utc(naive: pl.Expr, tz: str) -> pl.Expr:
    """Naive wall-clock times of ``tz`` -> UTC, ``fold=0`` (see ``timestamp_expr``)."""
    def to_utc(t: pl.Expr) -> pl.Expr:
        return t.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null").dt.convert_time_zone("UTC")

    def with_offset_before(hours: int) -> pl.Expr:
        # the UTC offset a few hours earlier is the one in force before a gap (3 h covers every DST gap, 25 h
        # a skipped day such as Samoa's 2011-12-30); the time minus that offset is the shifted instant
        probe = naive - pl.duration(hours=hours)
        offset = probe - to_utc(probe).dt.replace_time_zone(None)
        return naive - offset

    shifted = pl.coalesce(with_offset_before(3), with_offset_before(25)).dt.replace_time_zone("UTC")
    return pl.coalesce(to_utc(naive), shifted)


def timestamp_fast_expr(e: pl.Expr, tz: str | None = None) -> pl.Expr:
    """Only sacct's default ``YYYY-MM-DDTHH:MM:SS``; for ``with_fallbacks`` in front of ``timestamp_expr``."""
    tz = None if tz in UTC_NAMES else tz  # the plain UTC path is several times cheaper
    naive = e.str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S", strict=False)
    # a time in a spring-forward gap is null here and left to ``timestamp_expr``
    local = (naive.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null").dt.convert_time_zone("UTC")
             if tz else naive.dt.replace_time_zone("UTC"))
    return local.cast(schema.UTC_TS)


def timestamp_expr(e: pl.Expr, tz: str | None = None) -> pl.Expr:
    """``2026-11-01T10:00:00`` (local time of ``tz``, else UTC) or epoch seconds -> UTC datetime; null for
    "no value" tokens and for unparseable text.

    Local times the clocks skip or repeat are read as Python's ``zoneinfo`` reads them with ``fold=0``: an
    ambiguous one (the hour the clocks go back) takes the earlier instant (``sacct_values.settle_folds`` may
    pick the later one by the job's Elapsed); one that does not exist (the hour the clocks skip) is read with
    the UTC offset in force before the gap, i.e. shifted forward by the gap: ``2024-03-31T02:30:00`` in
    Europe/Amsterdam -> 01:30 UTC (= 03:30 CEST). sacct never prints such a time (it formats instants with
    ``localtime``); a file that holds one was written in another zone or edited."""
    tz = None if tz in UTC_NAMES else tz
    naive = pl.coalesce(e.str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S", strict=False),
                        e.str.strptime(pl.Datetime("us"), "%Y-%m-%d %H:%M:%S", strict=False))
    local = _local_to_utc(naive, tz) if tz else naive.dt.replace_time_zone("UTC")
    epoch = pl.when(e.str.contains(r"^\d{9,11}$")).then(
        pl.from_epoch(e.cast(pl.Int64, strict=False), time_unit="s").dt.replace_time_zone("UTC"))
    return pl.coalesce(epoch, local).cast(schema.UTC_TS)


# ---------------------------------------------------------------------------------------------- job class
_CLASS_RULES = (  # first match wins; applied to the lower-cased job name
    ("interactive", r"^(?:bash|sh|zsh|tcsh|fish|salloc|tmux|screen)$|interactive|jupyter|notebook|vscode|"
                    r"code-server|rstudio|sys/dashboard"),
    ("debug", r"debug"),
    ("eval", r"eval|bench|infer|predict|valid"),
    ("dataprep", r"prep|tokeni[sz]|etl|download|convert|shard|dedup|data[-_]?proc"),
    ("training", r"train|finetun|fine[-_]tun|(?:^|[^a-z])(?:sft|rlhf|dpo)(?:[^a-z]|$)"),
)
TRAINING_MIN_GPUS = 8  # an unnamed job asking for a whole 8-GPU node is almost always training


def name_class_expr(job_name: pl.Expr) -> pl.Expr:
    """The class the job-name rules give, or null (meant for ``on_distinct``: names repeat)."""
    n = job_name.str.to_lowercase().fill_null("")
    out = pl.when(pl.lit(False)).then(pl.lit(None, pl.String))
    for cls, rx in _CLASS_RULES:
        out = out.when(n.str.contains(rx)).then(pl.lit(cls))
    return out


def job_class_expr(qos: pl.Expr, job_name: pl.Expr, req_gpus: pl.Expr, name_class: pl.Expr | None = None) -> pl.Expr:
    """schema.JOB_CLASSES: the QoS when it is a class name, else job-name rules, else size, else ``batch``.

    ``name_class``: precomputed ``name_class_expr(job_name)`` (for example per distinct name)."""
    q = qos.str.strip_chars().str.to_lowercase()
    by_name = name_class_expr(job_name) if name_class is None else name_class
    return (pl.when(q.is_in(schema.JOB_CLASSES)).then(q).when(by_name.is_not_null()).then(by_name)
            .when(req_gpus.fill_null(0) >= TRAINING_MIN_GPUS).then(pl.lit("training")).otherwise(pl.lit("batch")))


def job_class(qos: str | None, job_name: str | None, req_gpus: float | None) -> str:
    """Scalar twin of ``job_class_expr``."""
    q = (qos or "").strip().lower()
    if q in schema.JOB_CLASSES:
        return q
    n = (job_name or "").lower()
    for cls, rx in _CLASS_RULES:
        if re.search(rx, n):
            return cls
    return "training" if (req_gpus or 0) >= TRAINING_MIN_GPUS else "batch"


# ---------------------------------------------------------------------------------------------- comments
def comment_value_expr(e: pl.Expr, key: str) -> pl.Expr:
    """Value of ``key=value`` among whitespace/comma/semicolon separated tokens of a Comment, as a string."""
    return e.str.extract(r"(?:^|[\s,;])" + re.escape(key) + r"=([^\s,;]+)")


def parse_comment(text: str | None) -> dict[str, str]:
    """Scalar twin: all ``key=value`` tokens of a comment."""
    return dict(t.split("=", 1) for t in re.split(r"[\s,;]+", text or "") if "=" in t and not t.startswith("="))


# ---------------------------------------------------------------------------------------------- chunks
def align_chunks(s: pl.Series, like: pl.Series) -> pl.Series:
    """``s`` cut into the same chunk lengths as ``like`` (zero-copy slices). Polars rechunks a whole frame
    whose columns disagree on chunk boundaries, which costs more than parsing it."""
    s, out, off = s.rechunk(), None, 0
    for chunk in like.get_chunks():
        piece = s.slice(off, len(chunk))
        off += len(chunk)
        out = piece if out is None else out.append(piece)
    return s if out is None else out
