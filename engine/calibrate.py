"""Calibration of what a log does not state, against the log itself, with a held-back part (DOMAIN.md section 10).

Knobs so far: the scheduler's cycle (``SimConfig.sched_interval_s``, with ``sched_cycle``: whether every pass or
only backfilling waits for it) and, when asked for, the reservation depth (``reservation_depth``: 1 = EASY, K =
the first K blocked jobs reserve) and the estimate handling (``walltime_margin``: a backfilled job must fit its
time limit / (1 - margin) in the hole, bounded to [0, ``MAX_MARGIN``]; ``estimate_evidence`` says from the log
how far users' limits were from their run times) and, with the ``multifactor`` policy, its priority weights
(``priority_weight_age|size|fairshare``, each bounded by ``WEIGHT_BOUNDS``; ``priority_evidence`` gives the log's
own rank correlation of wait with size and its share of jobs overtaken by a later submission) and the capacity
over time (``DRAIN``: the fraction, in [0, 1], of the capacity the log left idle for an hour or more while its
oldest waiting job fit it, ``idle_capacity.suspect_outages``, that the replay drains - whole nodes on a cluster
of named nodes, a processor count under ``--procs`` (``engine.capacity``); each
replay drains only what the log of its own window shows: the training replays the training part's, the held-back
ones the held-back part's, so nothing after the split informs the choice - but a held-back replay does read its
own window's log for these facts of the machine, as a what-if on that past would) and the per-user running limit
(``max_running_jobs_per_user``, ``USER_LIMIT``: 0 = none, else 1..``MAX_USER_LIMIT``; its evidence,
``user_limit_evidence``, is each user's largest number of jobs running at once in the training part and the wait
spent by users sitting at it beside idle capacity that fit their waiting job). ``run`` replays the *training* window [t0, split) once per candidate setting, each warm-started from the logged state at t0, scores each with
``fidelity.loss`` and keeps the lowest (ties: the earlier candidate in the grid, so the result does not depend on
which worker finished first). The held-back window [split, t1) never informs the choice: it is replayed
warm-started at ``split`` (the log's state then) under each candidate and the base value, and reported.

Invariants: the training replays are given only jobs submitted before ``split`` (``window_end=split`` and the
warm start's job filter), so nothing after the split can influence the choice, and the held-back reports compare
only jobs submitted at or after ``split``; results come back in grid order
whatever the worker count; the same inputs give the same choice. Replays run in a local process pool of
``workers`` processes (1: in this process), or, given ``ray_address``, as Ray tasks (``ray`` is an optional
extra, imported only then): the jobs frame and cluster are put in Ray's object store once and every task
replays one candidate; ``ray.get`` returns the results in submission order, so the choice is the pool's.
No wall clock here: the caller times the search.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import polars as pl

from . import fidelity
from .run import simulate
from .warm_start import window_filter

DEFAULT_GRID_S = (0.0, 30.0, 60.0, 120.0, 300.0, 600.0)
TRAIN_FRACTION = 0.7
KNOB = "sched_interval_s"
KNOBS = (KNOB, "sched_cycle", "reservation_depth", "walltime_margin")
MAX_MARGIN = 0.9   # a margin m inflates every estimate by 1 / (1 - m): 0.9 = 10x, far past any log's own slack
WEIGHTS = ("priority_weight_age", "priority_weight_size", "priority_weight_fairshare")
# every factor is in [0, 1], so only the ratios of the weights matter: 10 is "dominates" for any of them; size may
# be negative (favour small jobs), age and fair share may not (an older or less-served job never loses by it)
WEIGHT_BOUNDS = {"priority_weight_age": (0.0, 10.0), "priority_weight_size": (-10.0, 10.0),
                 "priority_weight_fairshare": (0.0, 10.0)}
KNOBS = KNOBS + WEIGHTS
DRAIN = "capacity_drain_fraction"   # a calibration setting, saved as the node / processor drains it stands for
USER_LIMIT = "max_running_jobs_per_user"  # Maui's MAXJOB / Slurm's MaxJobsPerUser; 0 = no limit
MAX_USER_LIMIT = 1000  # a limit above any log's per-user ceiling binds nobody: the bound keeps the grid sane
KNOBS = KNOBS + (USER_LIMIT,)
DEFAULT_CYCLES = ("all", "backfill")
FILE_FORMAT = "quotaloop-simconfig/1"

_STATE: dict = {}  # per worker process: the jobs frame and cluster, sent once by the pool's initializer


def split_time(submits, fraction: float = TRAIN_FRACTION):
    """The submit instant of the job at position floor(fraction x n) in submit order: the training window holds
    the jobs submitted strictly before it (about ``fraction`` of them, fewer when submits tie at the split)."""
    s = sorted(submits)
    if len(s) < 2:
        raise ValueError("calibration needs at least two jobs in the window")
    k = min(max(int(fraction * len(s)), 1), len(s) - 1)
    return s[k]


def window_jobs(jobs: pl.DataFrame, start, end, lookback_s: float) -> pl.DataFrame:
    """The jobs a replay of [start, end) warm-started at ``start`` needs (``warm_start.window_filter``)."""
    if isinstance(start, dt.datetime):
        return jobs.filter(window_filter(start, end, lookback_s))
    return jobs


def _init(jobs, cluster):
    _STATE["jobs"], _STATE["cluster"] = jobs, cluster


def replay_and_compare(cfg, t0_s, t1_s):
    """One replay: ``_STATE``'s jobs of [cfg.warm_start, cfg.window_end) simulated under ``cfg``, compared with
    the log over [t0_s, t1_s)."""
    jobs = window_jobs(_STATE["jobs"], cfg.warm_start, cfg.window_end, cfg.lookback_s)
    return fidelity.compare_run(jobs, simulate(jobs, _STATE["cluster"], cfg), window_start=t0_s, window_end=t1_s)


def _map(fn, items, jobs, cluster, workers: int):
    if workers <= 1 or len(items) <= 1:
        _init(jobs, cluster)
        try:
            return [fn(*it) for it in items]
        finally:
            _STATE.clear()
    # spawn, not fork: a forked child of a process whose polars thread pool is running can deadlock
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(items)), mp_context=ctx, initializer=_init,
                             initargs=(jobs, cluster)) as pool:
        return list(pool.map(fn, *zip(*items)))  # map keeps the input order


def _ray_replay(jobs, cluster, cfg, t0_s, t1_s):
    """One Ray task: ``replay_and_compare`` with this task's jobs and cluster (Ray passes them from its object
    store; a worker may run several tasks, so the state is set per task and cleared after)."""
    _init(jobs, cluster)
    try:
        return replay_and_compare(cfg, t0_s, t1_s)
    finally:
        _STATE.clear()


def _map_ray(items, jobs, cluster, address: str):
    try:
        import ray
    except ImportError:
        raise RuntimeError("Ray is not installed: pip install 'quotaloop[ray]'") from None
    started = not ray.is_initialized()
    if started:  # a caller (or a test in local mode) that already connected keeps its session
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        task = ray.remote(_ray_replay)
        jobs_ref, cluster_ref = ray.put(jobs), ray.put(cluster)
        return ray.get([task.remote(jobs_ref, cluster_ref, *it) for it in items])  # in submission order
    finally:
        if started:
            ray.shutdown()


def _seconds(t) -> float | None:
    if t is None:
        return None
    return t.timestamp() if isinstance(t, dt.datetime) else float(t)


def candidates(grid=DEFAULT_GRID_S, cycles=DEFAULT_CYCLES, depths=(None,), margins=(None,),
               weights=(None,), drains=(None,), user_limits=(None,)) -> list[dict]:
    """The knob settings to try: every cycle length of ``grid`` with every ``sched_cycle`` of ``cycles``, every
    reservation depth of ``depths``, every walltime margin of ``margins`` and every (age, size, fair share)
    triple of ``weights`` and every drain fraction of ``drains`` (None: the modeled value, left out of the
    setting), in that order, each with every per-user running limit of ``user_limits`` (0: none), without the
    duplicates (a 0 s cycle is the every-event loop whatever the scope)."""
    out = []
    for v in grid:
        for c in cycles:
            for d in depths:
                for m in margins:
                    for w in weights:
                        for f in drains:
                            cand = {KNOB: float(v), "sched_cycle": c if v else "all"}
                            if d is not None:
                                cand["reservation_depth"] = int(d)
                            if m is not None:
                                cand["walltime_margin"] = float(m)
                            if w is not None:
                                cand.update(zip(WEIGHTS, (float(x) for x in w)))
                            if f is not None:
                                cand[DRAIN] = float(f)
                            if cand not in out:
                                out.append(cand)
    if any(u is not None for u in user_limits):
        out = [c if u is None else {**c, USER_LIMIT: int(u)} for c in out for u in user_limits]
    return out


def drain_events(outages, cluster, fraction: float) -> tuple:
    """Node drains standing for ``fraction`` of each suspect outage's idle capacity: for an outage (start, end,
    idle k), the last floor(fraction x k / capacity per node) nodes of the cluster (placement fills the first
    ones first) drain at start and return at end. Instants as UTC datetimes (the store's clock)."""
    from .config import NodeEvent

    if cluster.procs_mode:
        return _procs_drains(outages, cluster, fraction)
    per_node = max((g if cluster.charge_resource == "gpus" else c) for g, c in zip(cluster.gpus, cluster.cpus))
    names = cluster.names
    out = []
    for a, b, idle in outages:
        k = min(int(fraction * idle / per_node + 1e-9), len(names))
        ta, tb = (dt.datetime.fromtimestamp(x, dt.timezone.utc) for x in (a, b))
        out += [NodeEvent(ta, n, "drain", tb) for n in names[len(names) - k:]] if k else []
    return tuple(out)


def _procs_drains(outages, cluster, fraction: float) -> tuple:
    """``drain_events`` on a processor-count pool: floor(fraction x k) of an outage's k idle processors are
    drained (``config.CapacityEvent``) for its span."""
    from .config import CapacityEvent

    total = int(sum(cluster.gpus if cluster.charge_resource == "gpus" else cluster.cpus))
    out = []
    for a, b, idle in outages:
        k = min(int(fraction * idle + 1e-9), total)
        if k:
            ta, tb = (dt.datetime.fromtimestamp(x, dt.timezone.utc) for x in (a, b))
            out.append(CapacityEvent(ta, k, tb))
    return tuple(out)


def _outages(jobs, cluster, start, end):
    """The suspect outages the log of [start, end) shows (jobs submitted before ``end`` hold the capacity)."""
    from .idle_capacity import suspect_outages

    res = cluster.charge_resource
    cap = sum(cluster.gpus if res == "gpus" else cluster.cpus)
    before = jobs if end is None else jobs.filter(pl.col("submit") < end)
    return suspect_outages(before, f"req_{res}", cap, _seconds(start), _seconds(end))


def check_weights(w) -> tuple:
    """An (age, size, fair share) triple inside ``WEIGHT_BOUNDS``, as floats; ValueError naming the bound."""
    if len(w) != 3:
        raise ValueError(f"expected age:size:fairshare, got {len(w)} value(s)")
    out = []
    for name, x in zip(WEIGHTS, w):
        lo, hi = WEIGHT_BOUNDS[name]
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not lo <= x <= hi:
            raise ValueError(f"{name} must be a number in [{lo:g}, {hi:g}], got {x!r}")
        out.append(float(x))
    return tuple(out)


def priority_evidence(jobs: pl.DataFrame, size_col: str) -> dict:
    """What the log says about its queue order, beside the weight knobs: over the started jobs, the Spearman
    correlation of wait with size (clearly negative: small jobs waited less, a size weight < 0 or backfilling;
    positive: large jobs were favoured) and the share of jobs that some later-submitted job overtook (started
    before them). Neither is a fit: the search decides; they say which weights are plausible."""
    if size_col not in jobs.columns or "start" not in jobs.columns:
        return {"jobs": 0, "spearman_wait_size": None, "share_overtaken": None}
    f = jobs.filter(pl.col("start").is_not_null() & pl.col(size_col).is_not_null()).sort("submit")
    if f.height < 2:
        return {"jobs": f.height, "spearman_wait_size": None, "share_overtaken": None}
    sub, st = fidelity.seconds(f["submit"]), fidelity.seconds(f["start"])
    later_min = np.minimum.accumulate(st[::-1])[::-1]  # earliest start among each job and the ones after it
    overtaken = np.append(st[:-1] > later_min[1:], False)  # the last job has no later one
    return {"jobs": f.height, "spearman_wait_size": fidelity.spearman(st - sub, f[size_col].to_numpy()),
            "share_overtaken": float(np.mean(overtaken))}


def estimate_evidence(jobs: pl.DataFrame) -> dict:
    """How the log's users estimated, the evidence beside the ``walltime_margin`` knob: over the jobs with a
    time limit > 0 and a run time > 0, their number, the median and mean of run time / limit, and the share that
    ran to within 1 % of their limit (killed there, or exact). A median far below 1 says limits were generous:
    a scheduler that trusted them backfilled less than one that knew run times; a margin makes the replay's
    scheduler more cautious still (it is not a fit of the ratio: the search decides)."""
    if "time_limit_s" not in jobs.columns or "elapsed_s" not in jobs.columns:
        return {"jobs_with_limit": 0, "median_run_over_limit": None, "mean_run_over_limit": None,
                "share_at_limit": None}
    r = (jobs.filter((pl.col("time_limit_s") > 0) & (pl.col("elapsed_s") > 0))
         .select((pl.col("elapsed_s") / pl.col("time_limit_s")).alias("r"))["r"].to_numpy())
    if not len(r):
        return {"jobs_with_limit": 0, "median_run_over_limit": None, "mean_run_over_limit": None,
                "share_at_limit": None}
    return {"jobs_with_limit": int(len(r)), "median_run_over_limit": float(np.median(r)),
            "mean_run_over_limit": float(np.mean(r)), "share_at_limit": float(np.mean(r >= 0.99))}


def run(jobs: pl.DataFrame, cluster, base, t0, split, t1, grid=DEFAULT_GRID_S, workers: int = 1,
        cycles=("all",), depths=(None,), margins=(None,), weights=(None,), ray_address: str | None = None,
        drains=(None,), user_limits=(None,)) -> dict:
    """Calibrate the knobs over ``candidates(grid, cycles, depths, margins, weights, drains)`` on [t0, split) and
    replay the held-back [split, t1) (``t1`` None: to the end of the log) under every candidate and the base
    setting, all in one pool.

    The choice reads only the training reports (the held-back losses are reported beside it, to show whether the
    choice carries over). Returns the candidates in order with both losses, the chosen knobs, the held-back
    reports under the base configuration and the chosen one, and the number of replays. ``ray_address``: run the
    replays as Ray tasks there ("local": a local Ray, "auto": the running cluster, "ray://host:port") instead of
    the local pool (``workers`` is then unused); RuntimeError when Ray is not installed."""
    cands = candidates(grid, cycles, depths, margins, weights, drains, user_limits)
    base_k = {KNOB: float(base.sched_interval_s), "sched_cycle": base.sched_cycle if base.sched_interval_s else "all"}
    if any(d is not None for d in depths):
        base_k["reservation_depth"] = base.depth
    if any(m is not None for m in margins):
        base_k["walltime_margin"] = float(base.walltime_margin)
    if any(w is not None for w in weights):
        base_k.update((k, float(getattr(base, k))) for k in WEIGHTS)
    if any(u is not None for u in user_limits):
        base_k[USER_LIMIT] = int(base.max_running_jobs_per_user)
    if any(f is not None for f in drains):
        base_k[DRAIN] = 0.0
        outages = {"train": _outages(jobs, cluster, t0, split), "held": _outages(jobs, cluster, split, t1)}
    held_k = cands + ([base_k] if base_k not in cands else [])

    def cfg(c, start, end, part):
        knobs = {k: v for k, v in c.items() if k != DRAIN}
        out = dataclasses.replace(base, warm_start=start, window_end=end, **knobs)
        if c.get(DRAIN) and cluster.procs_mode:
            out = dataclasses.replace(out, capacity_events=tuple(base.capacity_events)
                                      + drain_events(outages[part], cluster, c[DRAIN]))
        elif c.get(DRAIN):
            out = dataclasses.replace(out, node_events=tuple(base.node_events)
                                      + drain_events(outages[part], cluster, c[DRAIN]))
        return out

    items = [(cfg(c, t0, split, "train"), _seconds(t0), _seconds(split)) for c in cands]
    items += [(cfg(c, split, t1, "held"), _seconds(split), _seconds(t1)) for c in held_k]
    reports = (_map_ray(items, jobs, cluster, ray_address) if ray_address
               else _map(replay_and_compare, items, jobs, cluster, workers))
    train, held = reports[:len(cands)], reports[len(cands):]
    rows = [{**c, "loss": fidelity.loss(r), "held_back_loss": fidelity.loss(h), **_brief(r)}
            for c, r, h in zip(cands, train, held)]
    best = min(range(len(rows)), key=lambda i: (rows[i]["loss"], i))
    return {"candidates": rows, "chosen": dict(cands[best]), "train_jobs": train[best]["jobs_compared"],
            "held_back": {"baseline": held[held_k.index(base_k)], "calibrated": held[best]},
            "replays": len(items)}


def _brief(report: dict) -> dict:
    o = report["overall"]
    keys = ("n", "mean_rel_err", "p90_rel_err", "spearman", "zero_wait_share_sim", "zero_wait_share_log")
    return {k: o[k] for k in keys}


def config_file(base, chosen: dict, extra: dict, jobs: pl.DataFrame | None = None, cluster=None, t0=None,
                t1=None) -> dict:
    """The saved configuration: the knob values ``simulate --config-file`` applies, plus the evidence. A chosen
    drain fraction > 0 is saved as the node drains (``capacity_events`` under ``--procs``: [start, processors,
    end]) it stands for over the whole window [t0, t1) (``jobs`` and
    ``cluster`` needed then), beside the fraction itself (``capacity_drain_fraction``, top level)."""
    params = {k: v for k, v in base.params().items() if k in ("policy", "backfill", "reservation_depth",
                                                                "backfill_order", "backfill_max_job_test")}
    config = {k: v for k, v in chosen.items() if k != DRAIN}
    out = {"format": FILE_FORMAT, "config": config, "modeled": params, **extra}
    if DRAIN in chosen:
        out[DRAIN] = chosen[DRAIN]
        if chosen[DRAIN]:
            events = drain_events(_outages(jobs, cluster, t0, t1), cluster, chosen[DRAIN])
            if cluster.procs_mode:
                config["capacity_events"] = [[e.time_s.isoformat(), e.procs, e.until.isoformat()] for e in events]
            else:
                config["node_events"] = [[e.time_s.isoformat(), e.node, e.kind, e.until.isoformat()] for e in events]
    return out


def read_config_file(path) -> dict:
    """The ``config`` table of a saved calibration (``config_file``): SimConfig field -> value (priority weights
    apply only under ``--policy multifactor``: ``SimConfig.validated`` refuses them under another). Raises
    ValueError with a one-line reason when the file is not one."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON (line {exc.lineno}): {exc.msg}") from None
    if not isinstance(doc, dict) or doc.get("format") != FILE_FORMAT or not isinstance(doc.get("config"), dict):
        raise ValueError(f"{path}: not a quotaloop calibration file (expected \"format\": \"{FILE_FORMAT}\")")
    allowed = set(KNOBS) | {"node_events", "capacity_events"}
    unknown = sorted(set(doc["config"]) - allowed)
    if unknown:
        raise ValueError(f"{path}: config.{unknown[0]}: not a calibrated knob (known: {', '.join(sorted(allowed))})")
    out = {}
    for k, v in doc["config"].items():
        if k == "node_events":  # SimConfig.validated checks each (instants, kind, order)
            if not isinstance(v, list) or not all(isinstance(e, list) and len(e) == 4 for e in v):
                raise ValueError(f"{path}: config.{k}: must be a list of [start, node, kind, until]")
            out[k] = tuple(tuple(e) for e in v)
            continue
        if k == "capacity_events":  # SimConfig.validated checks each (instants, processor count, order)
            if not isinstance(v, list) or not all(isinstance(e, list) and len(e) == 3 for e in v):
                raise ValueError(f"{path}: config.{k}: must be a list of [start, processors, until]")
            out[k] = tuple(tuple(e) for e in v)
            continue
        if k == "reservation_depth":
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{path}: config.{k}: must be an integer >= 1, got {v!r}")
            out[k] = v
            continue
        if k == "walltime_margin":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= MAX_MARGIN:
                raise ValueError(f"{path}: config.{k}: must be a fraction in [0, {MAX_MARGIN}], got {v!r}")
            out[k] = float(v)
            continue
        if k in WEIGHTS:
            lo, hi = WEIGHT_BOUNDS[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
                raise ValueError(f"{path}: config.{k}: must be a number in [{lo:g}, {hi:g}], got {v!r}")
            out[k] = float(v)
            continue
        if k == USER_LIMIT:
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_USER_LIMIT:
                raise ValueError(f"{path}: config.{k}: must be an integer in [0, {MAX_USER_LIMIT}] (0: no limit), "
                                 f"got {v!r}")
            out[k] = v
            continue
        if k == "sched_cycle":
            if v not in DEFAULT_CYCLES:
                raise ValueError(f"{path}: config.{k}: must be one of {'|'.join(DEFAULT_CYCLES)}, got {v!r}")
            out[k] = v
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
            raise ValueError(f"{path}: config.{k}: must be a number >= 0, got {v!r}")
        out[k] = float(v)
    return out
