"""Turn a jobs frame (canonical ``jobs`` columns) into the engine's per-job arrays, and back.

Accepted input: ``submit`` as UTC datetimes or as numeric seconds; ``elapsed_s`` (else ``end - start``);
``time_limit_s``; requests ``req_gpus``/``req_cpus``/``req_mem_bytes`` (each falls back to its ``alloc_*``);
optional ``job_id`` (else the row number), ``account``, ``user``, ``job_class``, ``qos``, ``priority``,
``min_runtime_s``, ``state``, ``partition``, ``gpu_type``, ``job_name``, ``start``.

Invariants:
- Jobs are ordered by (submit, job id) - numeric ids numerically - then input row; index i in every array
  is the i-th job in that order, and ``frame`` has one row per simulated job in that order.
- Skipped jobs are counted by reason and never simulated: ``no_submit``, ``unfinished`` (state PENDING, and
  RUNNING unless the run has a warm start: a warm-started window simulates a job still running at the log's
  end for its run time so far, a lower bound), ``never_ran`` (no run time and a null ``start``), ``no_runtime`` (elapsed null or <= 0),
  ``no_size`` (nothing of the sizing resource requested), ``too_large`` (fits no set of nodes it may use),
  ``over_cap`` (asks for more GPUs than a ``max_gpus`` borrowing cap on its budget path allows in every budget
  version: it could never start).
- The estimate (``limit``) is the time limit, or the run time when there is none; a job runs
  ``min(elapsed, limit)`` and ends TIMEOUT when its elapsed time exceeds its limit.
- Requests are integers: milli-GPUs, milli-CPUs, MiB (rounded up); in processor-count mode only the
  cluster's sizing resource is non-zero.
- With a warm start T, a job whose logged ``start`` is before T is *pinned* (``pinned[i]``): kept whatever its
  state, run time or size (it runs as logged, ``engine.warm_start``), never skipped for its request; every other job
  goes through the checks above. ``warm_s`` / ``end_s`` are T and the window end on the simulation clock.
"""
from __future__ import annotations

import datetime as dt
from functools import cached_property

import polars as pl

from .config import ConfigError
from .units import EPOCH

SKIP_REASONS = ("no_submit", "unfinished", "never_ran", "no_runtime", "no_size", "too_large", "over_cap")


class Workload:
    def __init__(self, frame, x, datetime_dtype, origin_us, group, gang, skipped, warm_s=None, end_s=None):
        self.frame = frame                  # the kept input rows, sorted
        self._x = x                         # engine columns of the kept rows, same order
        self.datetime_dtype = datetime_dtype  # dtype of submit when it is a datetime, else None (seconds)
        self.origin_us = origin_us          # simulation time 0 in UTC microseconds (datetime input)
        self.group, self.gang = group, gang  # pool group and gang flag per job
        self.skipped = skipped
        self.warm_s, self.end_s = warm_s, end_s  # warm start and window end on the simulation clock (or None)
        get = lambda c: x[c].to_list()  # noqa: E731
        self.submit, self.run, self.limit, self.timeout = get("__sub"), get("__run"), get("__lim"), get("__to")
        self.raw_run = get("__raw")         # the logged run time (not capped at the limit): the as-logged replay
        self.req_g, self.req_c, self.req_m = get("__gm"), get("__cm"), get("__mm")
        self.pinned = get("__pin")          # started before the warm start: runs as logged
        acct = self._str("account").fill_null("(none)")
        self.accounts = sorted(acct.unique().to_list())
        # the index in ``accounts`` is the dense rank (UTF-8 byte order is ``sorted``'s code point order): no
        # Python str per job (0.02 s of 0.04 on HPC2N against a dict lookup of each)
        self.acct = (acct.rank("dense").cast(pl.Int64) - 1).to_list()

    @property
    def n(self) -> int:
        return len(self.submit)

    def array(self, name):
        """numpy view of an engine column: submit, run, limit, req_g, req_c, req_m."""
        col = {"submit": "__sub", "run": "__run", "limit": "__lim", "req_g": "__gm", "req_c": "__cm",
               "req_m": "__mm"}[name]
        return self._x[col].to_numpy()

    def _str(self, name) -> pl.Series:
        f = self.frame
        return f[name].cast(pl.String) if name in f.columns else pl.Series(name, [None] * f.height, pl.String)

    def _floats(self, name) -> list:
        f = self.frame
        return f[name].cast(pl.Float64, strict=False).to_list() if name in f.columns else [None] * f.height

    @cached_property
    def job_class(self) -> list:
        return self._str("job_class").to_list()

    @cached_property
    def qos(self) -> list:
        return self._str("qos").to_list()

    @cached_property
    def state(self) -> list:
        return self._str("state").to_list()

    @cached_property
    def job_id(self) -> pl.Series:
        return self._x["__id"]

    @cached_property
    def job_names(self) -> list:
        return self._str("job_name").to_list()

    @cached_property
    def prio(self) -> list:
        return self._floats("priority")

    @cached_property
    def log_min_rt(self) -> list:
        return self._floats("min_runtime_s")


def _col(df: pl.DataFrame, name: str, dtype):
    if name not in df.columns:
        return pl.lit(None, dtype=dtype)
    return pl.col(name).cast(dtype, strict=False)


def _absolute(value, is_dt: bool, name: str):
    """A config instant on the frame's raw clock: epoch microseconds (datetime submit) or seconds (numeric)."""
    if value is None:
        return None
    if is_dt != isinstance(value, dt.datetime):
        kind = "a datetime" if is_dt else "a number of seconds"
        raise ConfigError(f"{name}: the workload's submit times need {kind}, got {value!r}")
    if is_dt:
        return (value - EPOCH) / dt.timedelta(microseconds=1)
    return float(value)


def prepare(df: pl.DataFrame, pool, gpu_cap=None, keep_all: bool = False, warm_start=None,
            window_end=None) -> Workload:
    """The engine's view of ``df`` on ``pool``; ``gpu_cap(account)`` is the largest GPU request (milli-GPUs)
    any budget version lets the account start, or None for no cap. ``keep_all`` (the as-logged replay) keeps
    every job with a submit time, whatever its state, run time or size. ``warm_start`` / ``window_end``: the
    config's instants (``SimConfig.validated()`` forms)."""
    if not isinstance(df, pl.DataFrame):
        raise ConfigError(f"workload: expected a polars DataFrame, got {type(df).__name__}")
    if "submit" not in df.columns:
        raise ConfigError("workload: no 'submit' column")
    sub_dtype = df.schema["submit"]
    is_dt = isinstance(sub_dtype, pl.Datetime)
    if not is_dt and not sub_dtype.is_numeric():
        raise ConfigError(f"workload: 'submit' must be a datetime or numeric seconds, got {sub_dtype}")
    if "elapsed_s" not in df.columns and not ("start" in df.columns and "end" in df.columns):
        raise ConfigError("workload: needs 'elapsed_s' (or 'start' and 'end') for the actual run times")
    warm_abs = _absolute(warm_start, is_dt, "warm_start")
    end_abs = _absolute(window_end, is_dt, "window_end")
    df = df.with_row_index("__row")
    if "job_id" not in df.columns:
        df = df.with_columns((pl.col("__row") + 1).cast(pl.String).alias("job_id"))
    sub_s = pl.col("submit").dt.epoch("us").cast(pl.Float64) if is_dt else pl.col("submit").cast(pl.Float64)
    span = None
    if "start" in df.columns and "end" in df.columns:
        span = ((pl.col("end") - pl.col("start")).dt.total_microseconds() / 1e6 if is_dt
                else (pl.col("end") - pl.col("start")).cast(pl.Float64))
    run = pl.col("elapsed_s").cast(pl.Float64) if "elapsed_s" in df.columns else span
    if span is not None and "elapsed_s" in df.columns:
        run = pl.coalesce(run, span)

    def req(name):
        return pl.coalesce(_col(df, name, pl.Float64), _col(df, "alloc_" + name[4:], pl.Float64))

    cl = pool.cluster
    milli = lambda e: (e.fill_null(0.0).clip(0.0) * 1000.0).round().cast(pl.Int64)  # noqa: E731
    zero = pl.lit(0, dtype=pl.Int64)
    if cl.procs_mode:
        gm = milli(req("req_gpus")) if cl.resource == "gpus" else zero
        cm = milli(req("req_cpus")) if cl.resource == "cpus" else zero
        mm = zero
    else:
        mem = req("req_mem_bytes")
        gm, cm = milli(req("req_gpus")), milli(req("req_cpus"))
        mm = pl.when(mem > 0).then((mem / float(1 << 20) - 1e-9).ceil()).otherwise(0.0).cast(pl.Int64)
    lim = _col(df, "time_limit_s", pl.Float64)
    if warm_abs is None or "start" not in df.columns:
        pin = pl.lit(False)
    else:
        start_abs = pl.col("start").dt.epoch("us").cast(pl.Float64) if is_dt else pl.col("start").cast(pl.Float64)
        pin = (start_abs < warm_abs).fill_null(False)
    x = df.select(
        pl.col("__row"), pl.col("job_id").cast(pl.String).alias("__id"), sub_s.alias("__sub"), run.alias("__raw"),
        pl.when(lim > 0).then(lim).otherwise(run).alias("__lim"),
        gm.alias("__gm"), cm.alias("__cm"), mm.alias("__mm"),
        _col(df, "state", pl.String).alias("__state"),
        (pl.col("start").is_null() if "start" in df.columns else pl.lit(False)).alias("__nostart"),
        pin.alias("__pin"),
    ).with_columns(
        pl.min_horizontal("__raw", "__lim").alias("__run"), (pl.col("__raw") > pl.col("__lim")).alias("__to"))
    # a warm-started window keeps the jobs still RUNNING at the log's end (their run time so far is a lower
    # bound): they are load inside the window; a cold replay skips them as before
    censored_skip = pl.lit(warm_abs is None)
    reason = (pl.when(pl.col("__sub").is_null()).then(pl.lit("no_submit"))
              .when(pl.col("__pin")).then(pl.lit(None, dtype=pl.String))
              .when((pl.col("__state") == "PENDING") | ((pl.col("__state") == "RUNNING") & censored_skip))
              .then(pl.lit("unfinished"))
              .when((pl.col("__raw").is_null() | ~(pl.col("__raw") > 0)) & pl.col("__nostart")).then(pl.lit("never_ran"))
              .when(pl.col("__raw").is_null() | ~(pl.col("__raw") > 0)).then(pl.lit("no_runtime"))
              .when((pl.col("__gm") <= 0) & (pl.col("__cm") <= 0)).then(pl.lit("no_size")))
    if keep_all:
        reason = pl.when(pl.col("__sub").is_null()).then(pl.lit("no_submit"))
    x = x.with_columns(reason.alias("__skip"))
    skipped = {r: 0 for r in SKIP_REASONS}
    for r, k in x.group_by("__skip").len().iter_rows():
        if r is not None:
            skipped[r] = k
    x = x.filter(pl.col("__skip").is_null())
    num_id = x["__id"].cast(pl.Int64, strict=False)
    idkey = num_id if num_id.null_count() == 0 else x["__id"]
    x = x.with_columns(idkey.alias("__idkey")).sort(["__sub", "__idkey", "__row"])

    # placement groups: one per distinct (partition, gpu type, request) - a handful in practice
    if cl.procs_mode:
        part = gtype = pl.lit(None, dtype=pl.String)
    else:
        part = _col(df, "partition", pl.String)
        gtype = pl.when(gm > 0).then(_col(df, "gpu_type", pl.String))
    x = x.with_columns(df.select("__row", part.alias("__part"), gtype.alias("__gtype"))[x["__row"]]
                       .drop("__row").get_columns())  # by row number: a gather, not a join
    keys = x.select("__part", "__gtype", "__gm", "__cm", "__mm").unique(maintain_order=True)
    verdicts = [_fit(pool, *k) for k in keys.iter_rows()]
    keys = keys.with_columns(pl.Series("__key", range(keys.height), dtype=pl.Int64),
                             pl.Series("__bad", [v if isinstance(v, str) else None for v in verdicts], pl.String))
    x = x.join(keys, on=["__part", "__gtype", "__gm", "__cm", "__mm"], how="left", nulls_equal=True,
               maintain_order="left")
    if keep_all:  # replayed on its logged nodes: the layout need not hold it
        x = x.with_columns(pl.lit(None, dtype=pl.String).alias("__bad"))
    else:  # so are pinned jobs
        x = x.with_columns(pl.when(pl.col("__pin")).then(pl.lit(None, dtype=pl.String)).otherwise(pl.col("__bad"))
                           .alias("__bad"))
    for r, k in x.filter(pl.col("__bad").is_not_null()).group_by("__bad").len().iter_rows():
        skipped[r] += k
    x = x.filter(pl.col("__bad").is_null())
    if gpu_cap is not None and x.height:
        acct = pl.col("account").cast(pl.String) if "account" in df.columns else pl.lit(None, dtype=pl.String)
        accts = df.select("__row", acct.alias("__acct"))
        x = x.join(accts, on="__row", how="left", maintain_order="left")
        names = x["__acct"].unique().to_list()
        caps = pl.DataFrame({"__acct": names, "__cap": [gpu_cap(a) for a in names]},
                            schema={"__acct": pl.String, "__cap": pl.Float64})
        x = x.join(caps, on="__acct", how="left", nulls_equal=True, maintain_order="left")
        over = x["__cap"].is_not_null() & (x["__gm"] > x["__cap"]) & ~x["__pin"]
        skipped["over_cap"] += int(over.sum())
        x = x.filter(~over).drop("__acct", "__cap")
    key_idx = x["__key"].to_list()
    if any(isinstance(verdicts[k], str) for k in set(key_idx)):  # kept misfits (replay, pinned): any node
        verdicts = [v if not isinstance(v, str) else (pool.group(None, None), False) for v in verdicts]
    # per distinct request first, then a gather per job in C (map over __getitem__, not a comprehension)
    group = list(map([v[0] for v in verdicts].__getitem__, key_idx))
    gang = list(map([v[1] for v in verdicts].__getitem__, key_idx))
    origin_us = None
    if is_dt and x.height:  # time 0 is the first simulated submit
        origin_us = int(x["__sub"][0])
        x = x.with_columns(((pl.col("__sub") - float(origin_us)) / 1e6).alias("__sub"))

    def clock(v):
        if v is None:
            return None
        return (v - origin_us) / 1e6 if is_dt and origin_us is not None else v / 1e6 if is_dt else v

    kept = df.drop("__row")[x["__row"]]  # the kept rows in simulation order (a gather: no join needed)
    return Workload(kept, x, sub_dtype if is_dt else None, origin_us, group, gang, skipped, clock(warm_abs),
                    clock(end_abs))


def _fit(pool, part, gtype, g, c, m):
    """(group, gang) for a request, or the skip reason."""
    if g <= 0 and c <= 0:
        return "no_size"
    grp = pool.group(part, gtype)
    if pool.fits_one_node(grp[1], g, c, m):
        return grp, False
    total = grp[3]
    if not pool.cluster.procs_mode and total[0] >= g and total[1] >= c and total[2] >= m:
        return grp, True
    return "too_large"
