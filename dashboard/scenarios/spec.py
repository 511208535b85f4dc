"""Named what-if scenarios: which engine configuration each kind changes, and its parameters.

Every scenario replays the same history twice: the *baseline* (the budget file as it is, the baseline policy
and backfill, the log's min runtimes and requests) and the *scenario* (one kind of change below). Both runs use
the same seed, so a result is reproducible from ``ScenarioSpec.to_dict()`` alone (with the same store window).

Kinds and parameters (defaults in ``KINDS``):
- ``shares``: ``shares`` {budget path: share} and ``guaranteed`` {budget path: GPUs} replace the tree's values
  in every effective-dated version (the slider case).
- ``backfill``: ``to`` none | easy | conservative, ``reservation_depth`` (K blocked jobs get reservations;
  None = the mode's own: 1 for EASY, all for conservative) and ``walltime_margin`` (fraction).
- ``min_runtime``: ``min_runtime_s`` {job class: seconds, or None = no contract, never preempted} replaces
  every job of that class's min runtime (log and budget file alike; 0 = always preemptible), passed to the
  engine as ``SimConfig.min_runtime_by_class`` (the override of ``engine.min_runtime``'s precedence),
  ``checkpoint_interval_s`` (None = no checkpoints: a preempted attempt loses all its work).
- ``rightsize``: every job's CPU and memory request replaced by what it used plus ``margin`` (cores rounded
  up, memory to whole GiB, never above the request); with ``gpus`` = "whole" a single-node job whose GPU use
  with the margin is below one GPU (requested GPUs x mean utilisation x (1 + margin) < 1: with margin 0.2 a job
  that used 0.83 GPU or more keeps its count) asks for 1 GPU, "fraction" asks for that fraction (GPU sharing,
  MIG/MPS), "keep" leaves GPU counts. Run times are the logged ones (right-sizing is assumed not to slow a job
  down).

With a warm start, every kind leaves the jobs that started before the window start as logged (requests,
allocation, min runtime: ``transforms.as_logged_before``); only the jobs the window simulates change.
- ``drains``: the baseline plus node drains: ``drains`` a list of ``NODES@TIME[..END]`` (``engine.drains``: a
  node name, a comma list or a hostlist like ``gpu[001-004]``; ISO instants inside the window), ``mode``
  "drain" (DOMAIN.md section 6: no new work, each running job requeued once it has run its min runtime, the
  node down once empty until END or ``repair_time`` later) or "fail" (jobs killed at once), and
  ``node_mtbf_s`` (random drains: mean time between drains per node, seeded; None = none).
- ``quota_loop``: the ``quota_backtest`` coefficients (period ``period_s``, its stabiliser parameters in
  ``backtest``) become multipliers of the leaf shares, each period's applied from the next period on, as
  effective-dated budget versions (``queries.analytics.budgets.quota_loop_multipliers``). The back-test starts
  ``history_periods`` periods before the window, so the loop is already running when the replay starts.

Invariants: ``ScenarioSpec`` is frozen and hashable with a canonical form (dicts become sorted tuples), so equal
settings are equal however they were produced; ``make`` rejects unknown kinds and parameters with one line.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from engine.backfill import BACKFILLS
from engine.budgets import JOB_CLASSES
from engine.policies import POLICIES

CLASSES = JOB_CLASSES
KINDS: dict[str, dict] = {
    "shares": {"shares": {}, "guaranteed": {}},
    "backfill": {"to": "conservative", "reservation_depth": None, "walltime_margin": 0.0},
    "min_runtime": {"min_runtime_s": {"training": 8 * 3600.0, "debug": 0.0}, "checkpoint_interval_s": None},
    "rightsize": {"margin": 0.2, "gpus": "whole"},
    "quota_loop": {"period_s": 7 * 86400.0, "history_periods": 4, "backtest": {}},
    "drains": {"drains": (), "mode": "drain", "node_mtbf_s": None},
}
LABELS = {"shares": "Budget shares changed", "backfill": "Backfill mode and reservation depth",
          "min_runtime": "Min runtime per class and checkpoints", "rightsize": "Right-sized requests",
          "quota_loop": "Quota loop on (back-test coefficients as budget multipliers)",
          "drains": "Node drains (at min runtime) or failures"}
GPU_MODES = ("whole", "fraction", "keep")


class ScenarioError(ValueError):
    """A scenario that cannot be built: one line naming the parameter."""


def _canon(v):
    if isinstance(v, dict):
        return tuple(sorted((str(k), _canon(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_canon(x) for x in v)
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        return float(v)
    raise ScenarioError(f"unsupported parameter value {v!r}")


def _plain(v):
    """Back from the canonical form: tuples of pairs -> dicts."""
    if isinstance(v, tuple) and all(isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) for x in v):
        return {k: _plain(x) for k, x in v}
    return v


@dataclass(frozen=True)
class ScenarioSpec:
    kind: str
    params: tuple = ()
    policy: str = "fairshare"
    backfill: str = "easy"
    seed: int = 0

    @classmethod
    def make(cls, kind: str, *, policy: str = "fairshare", backfill: str = "easy", seed: int = 0,
             **params) -> "ScenarioSpec":
        if kind not in KINDS:
            raise ScenarioError(f"unknown scenario {kind!r}; known: {', '.join(KINDS)}")
        unknown = sorted(set(params) - set(KINDS[kind]))
        if unknown:
            raise ScenarioError(f"scenario {kind}: unknown parameter(s) {', '.join(unknown)}; it takes: "
                                f"{', '.join(KINDS[kind])}")
        if policy not in POLICIES:
            raise ScenarioError(f"policy: {policy!r} is not one of {'|'.join(POLICIES)}")
        if backfill not in BACKFILLS:
            raise ScenarioError(f"backfill: {backfill!r} is not one of {'|'.join(BACKFILLS)}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ScenarioError(f"seed: must be an integer >= 0, got {seed!r}")
        full = {**KINDS[kind], **params}
        _check(kind, full)
        return cls(kind, _canon(full), policy, backfill, seed)

    @property
    def values(self) -> dict:
        return {k: _plain(v) for k, v in self.params}

    def to_dict(self) -> dict:
        """Everything that produced a result (with the window and the budget file it ran on)."""
        return {"kind": self.kind, "policy": self.policy, "backfill": self.backfill, "seed": self.seed,
                "params": self.values}

    def describe(self) -> str:
        v = self.values
        if self.kind == "shares":
            parts = [f"{p.rsplit('/', 1)[-1]}={s:g}" for p, s in v["shares"].items()]
            parts += [f"{p.rsplit('/', 1)[-1]} guaranteed {g:g} GPUs" for p, g in v["guaranteed"].items()]
            what = "shares " + (", ".join(parts) or "unchanged")
        elif self.kind == "backfill":
            depth = v["reservation_depth"]
            what = f"backfill {self.backfill} -> {v['to']}" + (f", reservation depth {depth:g}" if depth else "")
        elif self.kind == "min_runtime":
            what = "min runtime " + (", ".join(f"{c} {'none' if s is None else f'{s / 3600:g} h'}"
                                               for c, s in v["min_runtime_s"].items()) or "unchanged")
            ck = v["checkpoint_interval_s"]
            what += f"; checkpoint every {ck / 60:g} min" if ck else "; no checkpoints"
        elif self.kind == "rightsize":
            what = f"right-sized requests (+{100 * v['margin']:g} % margin, GPUs: {v['gpus']})"
        elif self.kind == "drains":
            what = (f"node {'drains at min runtime' if v['mode'] == 'drain' else 'failures'}: "
                    + (", ".join(v["drains"]) or "none listed"))
            what += f"; random drains every {v['node_mtbf_s'] / 3600:g} h per node" if v["node_mtbf_s"] else ""
        else:
            what = f"quota loop on (period {v['period_s'] / 86400:g} d" + "".join(
                f", {k} {x:g}" for k, x in v["backtest"].items()) + ")"
        return f"{what} · baseline {self.policy}/{self.backfill} · seed {self.seed}"


def _num(name, x, lo=0.0, hi=math.inf, none=False):
    if x is None and none:
        return
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or not lo <= x <= hi:
        raise ScenarioError(f"{name}: must be a number in [{lo:g}, {hi:g}], got {x!r}")


def _check(kind: str, p: dict) -> None:
    if kind == "shares":
        for key in ("shares", "guaranteed"):
            if not isinstance(p[key], dict):
                raise ScenarioError(f"{key}: must map budget path -> number")
            for path, x in p[key].items():
                _num(f"{key}.{path}", x)
    elif kind == "backfill":
        if p["to"] not in BACKFILLS:
            raise ScenarioError(f"to: {p['to']!r} is not one of {'|'.join(BACKFILLS)}")
        d = p["reservation_depth"]
        if d is not None and (isinstance(d, bool) or not float(d).is_integer() or d < 1):
            raise ScenarioError(f"reservation_depth: must be an integer >= 1, got {d!r}")
        if d is not None and p["to"] == "none":
            raise ScenarioError("reservation_depth: needs backfill easy or conservative")
        _num("walltime_margin", p["walltime_margin"], 0.0, 0.99)
    elif kind == "min_runtime":
        if not isinstance(p["min_runtime_s"], dict):
            raise ScenarioError("min_runtime_s: must map job class -> seconds")
        for c, s in p["min_runtime_s"].items():
            if c not in CLASSES and c != "default":  # default: every class not named (engine.min_runtime)
                raise ScenarioError(f"min_runtime_s: unknown job class {c!r}; known: {', '.join(CLASSES)}")
            _num(f"min_runtime_s.{c}", s, none=True)  # None: no contract (never preempted)
        _num("checkpoint_interval_s", p["checkpoint_interval_s"], 1.0, none=True)
    elif kind == "rightsize":
        _num("margin", p["margin"], 0.0, 10.0)
        if p["gpus"] not in GPU_MODES:
            raise ScenarioError(f"gpus: {p['gpus']!r} is not one of {'|'.join(GPU_MODES)}")
    elif kind == "drains":
        from engine import drains
        from engine.config import ConfigError

        if not isinstance(p["drains"], (list, tuple)) or not all(isinstance(d, str) for d in p["drains"]):
            raise ScenarioError("drains: must be a list of NODES@TIME[..END]")
        if p["mode"] not in drains.KINDS:
            raise ScenarioError(f"mode: {p['mode']!r} is not one of {'|'.join(drains.KINDS)}")
        _num("node_mtbf_s", p["node_mtbf_s"], 60.0, none=True)
        for d in p["drains"]:
            try:
                drains.parse_spec(d, p["mode"])
            except ConfigError as exc:
                raise ScenarioError(f"drains: {exc}") from None
    elif kind == "quota_loop":
        _num("period_s", p["period_s"], 3600.0)
        _num("history_periods", p["history_periods"], 0.0, 520.0)
        if not isinstance(p["backtest"], dict):
            raise ScenarioError("backtest: must map quota_backtest parameter -> value")
