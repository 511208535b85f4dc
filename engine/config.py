"""Simulation configuration: one dataclass, validated once, plus duration parsing.

Invariants:
- ``SimConfig.validated()`` either returns a config whose every field has a legal value or raises
  ``ConfigError`` with a one-line message naming the field; the engine never sees an invalid config.
- Times in the config are seconds on the simulation clock: 0 is the workload's origin (the earliest submit
  of a datetime workload; 0 itself for a numeric-seconds workload).
- ``warm_start`` and ``window_end`` are instants of the workload's own clock (a UTC datetime when its ``submit``
  column holds datetimes, else a number of the same seconds as ``submit``); ``validated()`` normalises a
  datetime (naive = UTC) or an ISO string to an aware UTC datetime and requires ``window_end > warm_start``.
- ``sched_interval_s`` 0 (the default) leaves every output byte-identical to a build without the knob (it is
  left out of ``params()``, as is ``sched_cycle`` "all"); N > 0 runs scheduling passes only at multiples of N
  seconds (``engine.core``), or with ``sched_cycle="backfill"`` only the backfilling ones.
- The ``priority_*`` fields matter only to the ``multifactor`` policy: under any other they must keep their
  defaults (a weight that would be silently ignored is a one-line error) and are left out of ``params()`` (older
  runs' metrics.json stay byte-identical); the default weights (age only) give FCFS order.
- ``max_running_jobs_per_user`` 0 (the default) is no limit and is left out of ``params()``: every output stays
  byte-identical to a build without the knob.
- Nothing here reads the wall clock; ``seed`` feeds the single random generator (``rng()``), used only for
  the optional random node drains (``node_mtbf_s``).
"""
from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass, field, fields, replace

import numpy as np

from .backfill import BACKFILLS
from .policies import POLICIES
from .units import UTC

BACKFILL_ORDERS = ("queue", "area", "smallest")
QUOTA_MODES = ("none", "guarantee")
REPLAYS = ("none", "logged")
SCHED_CYCLES = ("all", "backfill")
NODE_EVENT_KINDS = ("fail", "drain")
DEFAULT_QOS_PRIORITY = {"urgent": 4.0, "high": 3.0, "normal": 2.0, "standard": 2.0, "low": 1.0,
                        "preemptible": 0.0, "scavenger": 0.0}
WEEK_S = 7 * 86400.0

_DUR = re.compile(r"(\d+(?:\.\d+)?)\s*([dhms])")
_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


class ConfigError(ValueError):
    """A configuration the engine cannot run: ``str`` is one line naming the field."""


def parse_duration(value, field_name: str = "duration") -> float:
    """Seconds from ``3600``, ``"3600"``, ``"8h"``, ``"30m"``, ``"1h30m"``, ``"2d"``, ``"1.5h"``; >= 0."""
    if isinstance(value, bool):
        raise ConfigError(f"{field_name}: not a duration: {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        try:
            seconds = float(text)
        except ValueError:
            parts = _DUR.findall(text)
            if not parts or _DUR.sub("", text).strip():
                raise ConfigError(f"{field_name}: not a duration: {value!r} (use e.g. 3600, 90s, 30m, 8h, 1h30m, 2d)") from None
            seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    else:
        raise ConfigError(f"{field_name}: not a duration: {value!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigError(f"{field_name}: must be a finite duration >= 0, got {value!r}")
    return seconds


def _plain(t):
    """An instant for metrics.json: seconds as they are, a datetime as ISO text."""
    return t.isoformat() if isinstance(t, dt.datetime) else t


def _capacity_events(items, bad) -> tuple:
    """``SimConfig.capacity_events`` checked: a positive whole number of processors, two instants of one kind."""
    out = []
    for i, e in enumerate(items or ()):
        if not isinstance(e, CapacityEvent):
            try:
                e = CapacityEvent(*e)
            except TypeError:
                bad(f"capacity_events[{i}]", f"expected (time_s, procs, until), got {e!r}")
        k = e.procs
        if isinstance(k, float) and k.is_integer():
            k = int(k)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            bad(f"capacity_events[{i}].procs", f"must be a whole number of processors >= 1, got {e.procs!r}")
        t = instant(e.time_s, f"capacity_events[{i}].time_s")
        until = instant(e.until, f"capacity_events[{i}].until")
        if t is None or until is None or isinstance(until, dt.datetime) != isinstance(t, dt.datetime) or until < t:
            bad(f"capacity_events[{i}].until", f"must be an instant of the same kind at or after time_s, got {e.until!r}")
        out.append(CapacityEvent(t, k, until))
    return tuple(out)


def instant(value, field_name: str):
    """None, an aware UTC datetime (from a datetime, naive = UTC, or an ISO string), or finite seconds."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError(f"{field_name}: not an ISO time: {value!r}") from None
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{field_name}: expected a datetime, an ISO time or seconds, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class NodeEvent:
    """A node failure (``fail``: running jobs are killed and requeued now) or drain (``drain``: running
    jobs are requeued as each reaches its min runtime; the node takes no new work). Either way the node is
    down for ``repair_time_s`` once empty, or until ``until`` when given (a drain file's end; never before it
    is empty). ``time_s`` and ``until``: seconds on the simulation clock, or instants (datetime / ISO) of a
    datetime workload."""

    time_s: object
    node: str
    kind: str = "fail"
    until: object = None


@dataclass(frozen=True)
class CapacityEvent:
    """A drain of ``procs`` processors of a processor-count pool (``--procs``) over [``time_s``, ``until``): from
    ``time_s`` no new work may use them (running jobs keep running, so free capacity may go negative until they
    end, as a Slurm drain), at ``until`` they return (``engine.capacity``). Instants as ``NodeEvent``'s."""

    time_s: object
    procs: int
    until: object


@dataclass(frozen=True)
class SimConfig:
    policy: str = "fcfs"
    backfill: str = "easy"
    reservation_depth: int | None = None      # None: 1 for easy, every queued job for conservative
    backfill_order: str = "queue"
    backfill_max_job_test: int | None = None  # Slurm's bf_max_job_test: jobs tested per pass after the first
    #                                           blocked one (None = all: exact EASY / conservative)
    walltime_margin: float = 0.0              # a backfilled job must fit time_limit / (1 - margin) in its hole
    budgets: object = None                    # BudgetTree | BudgetNode | {path: share | {share, guaranteed_gpus, max_gpus}}
    min_runtime_s: float | None = None        # default contract; None = not preemptible (no contract)
    min_runtime_by_class: dict = field(default_factory=dict)   # scenario override: job_class | "default" ->
    #                                           seconds or None (no contract); beats the log and the budget file
    #                                           (precedence: engine.min_runtime)
    checkpoint_interval_s: float | None = None  # None/0: no checkpoints, a requeue loses the whole attempt
    preemption: bool = True                   # jobs past their min runtime may be requeued (see engine.preempt)
    preemption_threshold: float = 0.1         # fair-share preemption: preemptor served < 1 - t, victim > 1 + t
    preemption_cost_factor: float = 1.0       # preempt only if waiting saved >= factor x funded work lost (0: always)
    quota: str = "none"                       # "guarantee": guaranteed_gpus protected, beyond = burst (reclaimable)
    lookback_s: float = WEEK_S                # fair-share usage window
    attainment_history: bool = False          # also attainment per lookback-long window ending every day
    node_events: tuple = ()                   # NodeEvent items (or (time_s, node[, kind]) tuples)
    repair_time_s: float = 4 * 3600.0
    node_mtbf_s: float | None = None          # random drains: mean time between drains per node (seeded)
    capacity_events: tuple = ()               # CapacityEvent items (or (time_s, procs, until)): --procs drains
    qos_priority: dict = field(default_factory=lambda: dict(DEFAULT_QOS_PRIORITY))
    qos_preempts: dict = field(default_factory=dict)  # QoS -> QoS its jobs may preempt (Slurm preempt/qos);
    #                                                    empty = the budget file's [qos] table, if any
    replay: str = "none"                      # "logged": the log's own schedule (engine.replay), no policy
    warm_start: object = None                 # instant T: jobs that started before T run as logged (engine.warm_start),
    #                                           the rest are simulated from T; metrics cover [T, window_end)
    window_end: object = None                 # end of the measured window (default: the last job end)
    seed: int = 0
    sched_interval_s: float = 0.0             # scheduler cycle: passes only at multiples of this on the sim clock
    #                                           (Slurm's sched_interval / bf_interval, Maui's poll interval);
    #                                           0 = a pass at every event instant
    sched_cycle: str = "all"                  # with sched_interval_s > 0: "all" passes wait for the cycle, or only
    #                                           "backfill" (a main pass in queue order runs at every event, as Slurm's)
    # the multifactor policy (Slurm's priority/multifactor; engine.policies.multifactor): priority = the weighted
    # sum of age (min(age, max age) / max age), size (request / capacity; a negative weight favours small jobs)
    # and fair share (2 ** (-usage share x accounts), equal shares, usage over lookback_s)
    priority_weight_age: float = 1.0
    priority_weight_size: float = 0.0
    priority_weight_fairshare: float = 0.0
    priority_max_age_s: float = WEEK_S        # Slurm's PriorityMaxAge (default 7 days)
    priority_calc_period_s: float = 300.0     # Slurm's PriorityCalcPeriod: fair-share factors refreshed this often
    max_running_jobs_per_user: int = 0        # Maui's MAXJOB, Slurm's MaxJobsPerUser: a user's jobs running at
    #                                           once (engine.user_limits); 0 = no limit

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)

    @property
    def depth(self) -> int:
        """Reservations per pass: 0 = no backfill, 1 = EASY, a large number = conservative."""
        return BACKFILLS[self.backfill].depth(self.reservation_depth)

    def params(self) -> dict:
        """The parameters that produced a run (for metrics.json); budgets are summarised, not dumped."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if (f.name in ("qos_preempts", "sched_interval_s", "capacity_events", "max_running_jobs_per_user")
                    and not v) or (f.name == "sched_cycle" and v == "all") \
                    or (f.name.startswith("priority_") and self.policy != "multifactor"):
                continue  # absent unless used: older runs' metrics.json stay byte-identical
            if f.name == "budgets":
                v = None if v is None else type(v).__name__
            elif f.name == "node_events":
                v = [[_plain(e.time_s), e.node, e.kind] + ([] if e.until is None else [_plain(e.until)]) for e in v]
            elif f.name == "capacity_events":
                v = [[_plain(e.time_s), e.procs, _plain(e.until)] for e in v]
            elif isinstance(v, dt.datetime):
                v = v.isoformat()
            elif isinstance(v, dict):
                v = {str(k): v[k] for k in sorted(v)}
            out[f.name] = v
        return out

    def validated(self) -> "SimConfig":
        def bad(name, msg):
            raise ConfigError(f"{name}: {msg}")

        for name, allowed in (("policy", POLICIES), ("backfill", BACKFILLS),
                              ("backfill_order", BACKFILL_ORDERS), ("quota", QUOTA_MODES),
                              ("replay", REPLAYS), ("sched_cycle", SCHED_CYCLES)):
            if getattr(self, name) not in allowed:
                bad(name, f"{getattr(self, name)!r} is not one of {'|'.join(allowed)}")
        if self.reservation_depth is not None:
            if isinstance(self.reservation_depth, bool) or not isinstance(self.reservation_depth, int) \
                    or self.reservation_depth < 1:
                bad("reservation_depth", f"must be an integer >= 1, got {self.reservation_depth!r}")
            if not BACKFILLS[self.backfill].takes_depth:
                bad("reservation_depth", "needs backfill " + " or ".join(n for n, r in BACKFILLS.items() if r.takes_depth))
        k = self.backfill_max_job_test
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
            bad("backfill_max_job_test", f"must be an integer >= 0, got {k!r}")
        u = self.max_running_jobs_per_user
        if isinstance(u, bool) or not isinstance(u, int) or u < 0:
            bad("max_running_jobs_per_user", f"must be an integer >= 0 (0: no limit), got {u!r}")
        t = self.preemption_threshold
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not (0.0 <= t < 1.0):
            bad("preemption_threshold", f"must be a fraction in [0, 1), got {t!r}")
        f = self.preemption_cost_factor
        if not isinstance(f, (int, float)) or isinstance(f, bool) or not (0.0 <= f < math.inf):
            bad("preemption_cost_factor", f"must be a number >= 0, got {f!r}")
        m = self.walltime_margin
        if not isinstance(m, (int, float)) or not (0.0 <= m < 1.0):
            bad("walltime_margin", f"must be a fraction in [0, 1), got {m!r}")
        for name in ("priority_weight_age", "priority_weight_size", "priority_weight_fairshare"):
            w = getattr(self, name)
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
                bad(name, f"must be a finite number, got {w!r}")
        changes: dict = {}
        for name in ("priority_weight_age", "priority_weight_size", "priority_weight_fairshare"):
            changes[name] = float(getattr(self, name))
        changes["priority_max_age_s"] = parse_duration(self.priority_max_age_s, "priority_max_age_s")
        if changes["priority_max_age_s"] <= 0:
            bad("priority_max_age_s", "must be > 0")
        changes["priority_calc_period_s"] = parse_duration(self.priority_calc_period_s, "priority_calc_period_s")
        if self.policy != "multifactor":
            for f in fields(self):
                if f.name.startswith("priority_") and changes[f.name] != f.default:
                    bad(f.name, f"only the multifactor policy reads it (policy is {self.policy!r})")
        for name in ("min_runtime_s", "checkpoint_interval_s", "node_mtbf_s"):
            v = getattr(self, name)
            if v is not None:
                changes[name] = parse_duration(v, name)
        changes["lookback_s"] = parse_duration(self.lookback_s, "lookback_s")
        if changes["lookback_s"] <= 0:
            bad("lookback_s", "must be > 0")
        changes["repair_time_s"] = parse_duration(self.repair_time_s, "repair_time_s")
        changes["sched_interval_s"] = parse_duration(self.sched_interval_s, "sched_interval_s")
        if not isinstance(self.min_runtime_by_class, dict):
            bad("min_runtime_by_class", "must map job class -> duration")
        changes["min_runtime_by_class"] = {  # None: the override is "no contract" (never preempted)
            str(k): None if v is None else parse_duration(v, f"min_runtime_by_class.{k}")
            for k, v in self.min_runtime_by_class.items()}
        if not isinstance(self.qos_priority, dict):
            bad("qos_priority", "must map QoS name -> number")
        if not isinstance(self.qos_preempts, dict):
            bad("qos_preempts", "must map QoS name -> QoS names it may preempt")
        pre = {}
        for q, victims in self.qos_preempts.items():
            victims = (victims,) if isinstance(victims, str) else victims
            if not isinstance(victims, (list, tuple, set, frozenset)) or not all(isinstance(v, str) for v in victims):
                bad(f"qos_preempts.{q}", f"must be a list of QoS names, got {victims!r}")
            if q in victims:
                bad(f"qos_preempts.{q}", "a QoS cannot preempt itself")
            pre[str(q)] = tuple(sorted(set(victims)))
        changes["qos_preempts"] = pre
        events = []
        for i, e in enumerate(self.node_events or ()):
            if not isinstance(e, NodeEvent):
                try:
                    e = NodeEvent(*e)
                except TypeError:
                    bad(f"node_events[{i}]", f"expected (time_s, node[, kind]), got {e!r}")
            if e.kind not in NODE_EVENT_KINDS:
                bad(f"node_events[{i}].kind", f"{e.kind!r} is not one of fail|drain")
            if isinstance(e.time_s, (int, float)) and not isinstance(e.time_s, bool):
                if not math.isfinite(e.time_s):
                    bad(f"node_events[{i}].time_s", f"not a number of seconds: {e.time_s!r}")
                t = float(e.time_s)
            else:
                t = instant(e.time_s, f"node_events[{i}].time_s")
            until = instant(e.until, f"node_events[{i}].until")
            if until is not None and (isinstance(until, dt.datetime) != isinstance(t, dt.datetime) or until < t):
                bad(f"node_events[{i}].until", f"must be an instant of the same kind at or after time_s, got {e.until!r}")
            events.append(NodeEvent(t, str(e.node), e.kind, until))
        changes["node_events"] = tuple(events)
        changes["capacity_events"] = _capacity_events(self.capacity_events, bad)
        for name in ("warm_start", "window_end"):
            changes[name] = instant(getattr(self, name), name)
        w0, w1 = changes["warm_start"], changes["window_end"]
        if w0 is not None and w1 is not None:
            if isinstance(w0, dt.datetime) != isinstance(w1, dt.datetime):
                bad("window_end", "must be of the same kind as warm_start (both datetimes or both seconds)")
            if w1 <= w0:
                bad("window_end", f"must be after warm_start ({w1} <= {w0})")
        if not isinstance(self.attainment_history, bool):
            bad("attainment_history", f"must be true or false, got {self.attainment_history!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            bad("seed", f"must be an integer >= 0, got {self.seed!r}")
        return replace(self, **changes)
