"""The values of sacct's fields: which fields the parser reads, how each is parsed (per distinct value where
few are distinct, by fixed-position fast paths with the general parser as fallback elsewhere) and the checks
that reject a row, in order of precedence.

Invariants: every parsed column is ``_<field>`` (plus ``_<field>_bad`` where a raw value did not parse); a
field the file lacks parses as if every value were null; a step row is checked only on the fields it
contributes (``shared``), so a bad request field never rejects a step.
"""
from __future__ import annotations

import numpy as np
import polars as pl

from ..store import name_problem_expr
from . import common as c
from . import timezone as TZ
from .limits import MAX_BYTES, MAX_COUNT, MAX_SECONDS

CANON = ("JobID JobName User Account Partition QOS State ExitCode Submit Start End Elapsed "
         "ElapsedRaw Timelimit TimelimitRaw NNodes AllocNodes ReqNodes NodeList ReqCPUS AllocCPUS NCPUS ReqMem "
         "ReqTRES AllocTRES ReqGRES AllocGRES TotalCPU UserCPU SystemCPU MaxRSS TRESUsageInAve TRESUsageInMax "
         "Priority Comment Cluster AdminComment").split()
USED = [n.lower() for n in CANON]  # the columns this parser reads; others are ignored
CODED = ["state", "elapsed", "timelimit", "reqmem", "reqtres", "alloctres", "reqgres", "allocgres"]
SHOWN = {n.lower(): n for n in CANON}
JOBID_RE = r"^\d+(?:_(?:\d+|\[[^\]]*\]))?(?:\+\d+)?(?:\.[A-Za-z0-9_+\-]+)?$"


ALLOC_NUMBERS = ["alloccpus", "ncpus", "allocnodes", "nnodes", "elapsedraw", "reqcpus", "reqnodes", "priority",
                 "timelimitraw"]
STEP_NUMBERS = ["alloccpus", "ncpus"]  # a step contributes only its CPU count
SHARED_RAW = ["jobid", "cluster", "state", "elapsed", "totalcpu", "usercpu", "systemcpu", "maxrss", "tresusageinave",
              "tresusageinmax", "alloccpus", "ncpus"]


def shared_fields(has: set[str]) -> list[str]:
    """The raw fields step rows contribute: ``SHARED_RAW``, and AllocTRES too when the file has no CPU-count
    column of its own (the step's CPUs then come from its TRES)."""
    return SHARED_RAW + (["alloctres"] if not set(STEP_NUMBERS) & has else [])


def parse_values(df: pl.DataFrame, part: str, tz, has: set[str]) -> pl.DataFrame:
    """Add the parsed ``_<name>`` columns of ``part``: "shared" (what every row, step or allocation,
    contributes: state, Elapsed, CPU times, MaxRSS, TRESUsageIn*, CPU counts), "alloc-only" (what only
    allocation rows do: requests, limits, times, ...) or "alloc" (both). Low-cardinality fields (state, TRES,
    limits, requests, comments, Elapsed) are parsed once per distinct value; the rest by fixed-position fast
    paths, with the general parser only on the rows those do not take, in one lazy pass."""
    col = pl.col
    shared, alloc = part in ("shared", "alloc"), part in ("alloc-only", "alloc")
    found: dict[str, pl.Series] = {}
    like = df.get_column("_line")

    def const(value, dtype) -> pl.Series:  # a full column cut like the frame's others
        return c.align_chunks(pl.repeat(value, df.height, dtype=dtype, eager=True), like)

    def distinct(key: str, exprs: dict[str, pl.Expr]) -> None:
        if key in has:
            found.update(c.on_distinct_values(df, key, exprs))
        else:  # a column the file does not have: what the parsers give for null
            none = pl.select(pl.lit(None, pl.String).alias(key)).select(**exprs)
            found.update({k: const(v[0], v.dtype) for k, v in none.to_dict().items()})

    def with_bad(key: str, value: pl.Expr, tokens=()) -> dict[str, pl.Expr]:
        return {f"_{key}": value, f"_{key}_bad": c.unparsed(col(key), value, tokens)}

    plain, specs = {}, []
    if shared:
        distinct("state", {"_state": c.state_expr(col("state"))})
        distinct("elapsed", with_bad("elapsed", c.duration_expr(col("elapsed")), c.DURATION_NULL))
    # a step's AllocTRES only matters when the CPU count has no column of its own
    for key in ("alloctres", "reqtres"):
        if (shared if key in shared_fields(has) else alloc):
            distinct(key, {f"_{key}_{k}": e for k, e in c.tres_expr(col(key)).items()})
    if alloc:
        for key in ("allocgres", "reqgres"):
            distinct(key, {f"_{key}_{k}": e for k, e in c.gres_expr(col(key)).items()})
        distinct("timelimit", with_bad("timelimit", c.duration_expr(col("timelimit").str.strip_chars()),
                                       c.DURATION_NULL))
        mem, per = c.memory_expr(col("reqmem").str.strip_chars(), "M")
        distinct("reqmem", with_bad("reqmem", mem) | {"_reqmem_per": per})
        # a user's own claim in free text: one that is no duration (inf, NaN, negative, > 100 years) claims nothing
        mrt = c.number_expr(c.comment_value_expr(col("comment"), "min_runtime_s"))
        distinct("comment", {"_min_runtime_s": pl.when(mrt.is_finite() & mrt.is_between(0, MAX_SECONDS)).then(mrt)})
        plain |= {f"_{k}": c.number_expr(col(k)) for k in ALLOC_NUMBERS if k not in STEP_NUMBERS}
        specs += [(f"_{k}", k, c.timestamp_fast_expr(col(k), tz), c.timestamp_expr(col(k), tz))
                  for k in ("submit", "start", "end")]
    if shared:
        found.update(usage_values(df, has, const))
        plain |= {f"_{k}": c.number_expr(col(k)) for k in STEP_NUMBERS}
        durations = ["totalcpu"] if "totalcpu" in has else ["usercpu", "systemcpu"]
        specs += [("_maxrss", "maxrss", c.memory_fast_expr(col("maxrss")), c.memory_expr(col("maxrss"), "")[0])]
        specs += [(f"_{k}", k, c.duration_fast_expr(col(k)), c.duration_expr(col(k))) for k in durations]
    df = df.with_columns(v.alias(k) for k, v in found.items())
    return c.with_fallbacks(df, specs, plain)


def _years(df: pl.DataFrame, cols: tuple[str, ...]) -> list[int]:
    """The UTC years of the instants in ``cols``: every year from the first to the last when they span up to 60,
    else only the years that occur (a stray far-future date must not make the caller scan centuries)."""
    ends = [v for k in cols for v in (df[k].min(), df[k].max()) if v is not None]
    if not ends:
        return []
    first, last = min(ends).year, max(ends).year
    if last - first <= 60:
        return list(range(first, last + 1))
    return sorted(pl.concat([df[k] for k in cols]).dt.year().unique().drop_nulls().to_list())


def settle_folds(df: pl.DataFrame, tz: str | None) -> pl.DataFrame:
    """Start and End printed in the hour the clocks go back have two readings, and parsing took the earlier
    (``fold=0``). Where either has a later one, keep the pair whose ``End - Start`` is closest to the row's
    Elapsed (else ElapsedRaw), which Slurm computes from the instants; without either, the earliest pair with
    End >= Start. Ties go to the earlier readings, End's first. Submit keeps its earlier reading.

    Only rows whose instants fall in a fall-back window of ``tz`` are looked at (one binary search per column
    over the few windows of the data's years); the rest of the frame is not copied."""
    if not tz or df.height == 0:
        return df
    windows = TZ.fall_back_windows(tz, _years(df, ("_start", "_end")))
    if not windows:
        return df
    # windows are disjoint and sorted: an instant lies inside one when it sorts after an odd number of bounds
    bounds = np.array([b for w in windows for b in w[:2]], dtype=np.int64) * 1_000_000
    shift = np.array([w[2] for w in windows], dtype=np.int64) * 1_000_000
    none = np.iinfo(np.int64).min  # sorts before every bound: never inside
    us = {k: df[k].to_physical().fill_null(none).to_numpy() for k in ("_start", "_end")}

    def later(x: np.ndarray) -> dict[int, int]:  # row -> microseconds to add for its later reading
        idx = np.searchsorted(bounds, x, side="right")
        rows = np.flatnonzero(idx & 1)
        return dict(zip(rows.tolist(), shift[idx[rows] // 2].tolist()))

    d_start, d_end = later(us["_start"]), later(us["_end"])
    if not d_start and not d_end:
        return df
    elapsed = df.select(pl.coalesce(pl.col("_elapsed"), pl.col("_elapsedraw"))).to_series()
    moved: dict[str, dict[int, int]] = {"_start": {}, "_end": {}}
    for r in sorted(d_start.keys() | d_end.keys()):
        s0, e0 = int(us["_start"][r]), int(us["_end"][r])
        if s0 == none or e0 == none:
            continue  # one instant alone: nothing to compare it with
        el, ds, de = elapsed[r], d_start.get(r, 0), d_end.get(r, 0)
        pairs = [(s0, e0), (s0, e0 + de), (s0 + ds, e0), (s0 + ds, e0 + de)]

        def score(pair: tuple[int, int], el=el) -> float:  # bound now: ruff B023, though used at once
            run_s = (pair[1] - pair[0]) / 1e6
            return abs(run_s - el) if el is not None and el == el else float(run_s < 0)

        s1, e1 = min(pairs, key=score)  # min keeps the first of equal scores
        if s1 != s0:
            moved["_start"][r] = s1
        if e1 != e0:
            moved["_end"][r] = e1
    fixed = []
    for k, rows in moved.items():
        if rows:
            col = df.get_column(k)
            values = pl.Series(list(rows.values()), dtype=pl.Int64).cast(pl.Datetime("us")).dt.replace_time_zone(
                "UTC").cast(col.dtype)
            fixed.append(c.align_chunks(col.clone().scatter(list(rows), values), col))
    return df.with_columns(fixed) if fixed else df


def usage_values(df: pl.DataFrame, has: set[str], const) -> dict[str, pl.Series]:
    """The TRESUsageIn* entries we use, extracted and parsed on the rows that have them only (a minority: GPU
    steps), with a ``_<source>_bad`` flag for an entry that does not parse."""
    col, found = pl.col, {}
    usage = {"_util_ave": ("tresusageinave", "gres/gpuutil", 100), "_util_max": ("tresusageinmax", "gres/gpuutil", 100),
             "_gmem": ("tresusageinmax", "gres/gpumem", None)}  # name: (source, key, percent divisor)
    if "maxrss" not in has:
        usage["_umem"] = ("tresusageinmax", "mem", None)
    for src in ("tresusageinave", "tresusageinmax"):
        mine = {k: (key, scale) for k, (s, key, scale) in usage.items() if s == src}
        needle = "mem=" if "_umem" in mine else "gres/gpu"
        mask = df.select(col(src).str.contains(needle, literal=True).fill_null(False)).to_series() if (
            src in has) else None
        if mask is None or not mask.any():
            found.update({k: const(None, pl.Float64) for k in mine} | {f"_{src}_bad": const(False, pl.Boolean)})
            continue
        raw = {f"{k}_raw": c.tres_value_expr(col(src), key) for k, (key, _) in mine.items()}
        value = {k: (c.number_expr(col(f"{k}_raw")) / scale if scale else c.memory_expr(col(f"{k}_raw"), "")[0])
                 for k, (_, scale) in mine.items()}
        bad = pl.any_horizontal([c.unparsed(col(f"{k}_raw"), col(k)) for k in mine]).alias(f"_{src}_bad")
        sub = df.select(src).filter(mask).lazy().with_columns(**raw).with_columns(**value).select(
            *mine, bad).collect()
        like, idx = df.get_column(src), mask.arg_true()
        found.update({k: c.align_chunks(pl.repeat(None if k in mine else False, df.height, dtype=sub[k].dtype,
                                                  eager=True).scatter(idx, sub[k]), like) for k in sub.columns})
    return found


def checks(rows: str, has: set[str]) -> list[tuple[str | None, pl.Expr, pl.Expr, str, str | None, bool]]:
    """``(shown field, bad, may be bad, reason, raw column, shared)`` in order of precedence, over the parsed
    columns of ``rows`` ("alloc" or "step"); ``shared`` marks a check of a field step rows contribute too
    (a step row is checked on those only).

    ``may be bad`` is a cheaper superset of ``bad`` (it skips the "no value" token lists) for the pass over all
    rows; ``bad`` decides on the rows it flags."""
    col = pl.col
    step_fields = shared_fields(has)

    def unparsed(k: str, tokens=()) -> tuple[pl.Expr, pl.Expr]:
        raw, val = col(k), col(f"_{k}")
        return c.unparsed(raw, val, tokens), c.unparsed(raw, val)

    def exact(bad: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
        return bad, bad

    chk = [(None, *exact(~col("_fields_ok")), "wrong number of fields", None, True),
           ("JobID", *exact(~col("jobid").fill_null("").str.contains(JOBID_RE)), "malformed job id", "jobid", True),
           ("State", *exact(col("_state").is_null()), "unknown state", "state", True)]
    if "cluster" in has:  # the name becomes a directory of the store
        chk.append(("Cluster", *exact(name_problem_expr(col("cluster")).is_not_null()),
                    "invalid cluster name (empty, a control character or too long)", "cluster", True))
    for k in ("submit", "start", "end"):
        chk.append((SHOWN[k], *unparsed(k, c.TIME_NULL), "unparseable timestamp", k, False))
    chk.append(("Elapsed", *exact(col("_elapsed_bad")), "unparseable duration", "elapsed", True))
    chk.append(("Timelimit", *exact(col("_timelimit_bad")), "unparseable duration", "timelimit", False))
    for k in ["totalcpu"] if "totalcpu" in has else ["usercpu", "systemcpu"]:
        chk.append((SHOWN[k], *unparsed(k, c.DURATION_NULL), "unparseable duration", k, True))
    for k in ALLOC_NUMBERS:
        bad, maybe = unparsed(k)
        neg = col(f"_{k}") < 0
        chk.append((SHOWN[k], bad | neg, maybe | neg, "not a non-negative number", k, k in STEP_NUMBERS))
    chk.append(("MaxRSS", *unparsed("maxrss"), "unparseable memory size", "maxrss", True))
    chk.append(("ReqMem", *exact(col("_reqmem_bad")), "unparseable memory size", "reqmem", False))
    for k in ("alloctres", "reqtres"):
        chk.append((SHOWN[k], *exact(col(f"_{k}_bad")), "unparseable TRES string", k, k in step_fields))
    for k in ("tresusageinave", "tresusageinmax"):
        chk.append((SHOWN[k], *exact(col(f"_{k}_bad")), "unparseable TRES usage value", k, True))
    big = lambda keys, limit: [col(k).fill_null(0) > limit for k in keys]  # noqa: E731
    absurd = "absurd size (> 1e6 CPUs/GPUs/nodes, > 1 EiB or > 100 years)"
    # two checks with one message, adjacent: the sizes a step contributes, then those only an allocation has
    chk.append((None, *exact(pl.any_horizontal(
        big(["_alloccpus", "_ncpus"], MAX_COUNT) + big(["_maxrss"], MAX_BYTES)
        + big(["_elapsed"] + (["_totalcpu"] if "totalcpu" in has else []), MAX_SECONDS))), absurd, None, True))
    chk.append((None, *exact(pl.any_horizontal(
        big(["_allocnodes", "_nnodes", "_reqcpus", "_reqnodes", "_reqtres_cpu", "_reqtres_gpus", "_alloctres_cpu",
             "_alloctres_gpus"], MAX_COUNT)
        + big(["_alloctres_mem_bytes", "_reqtres_mem_bytes", "_reqmem"], MAX_BYTES)
        + big(["_timelimit", "_elapsedraw"], MAX_SECONDS) + big(["_timelimitraw"], MAX_SECONDS / 60))),  # minutes
        absurd, None, False))
    chk.append(("End", *exact(col("_end") < col("_start")), "end before start", "end", False))
    return [x for x in chk if x[5]] if rows == "step" else chk
