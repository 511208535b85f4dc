"""``min_runtime``: per-class min runtimes and checkpoints.

Parameters: ``min_runtime_s`` {job class, or ``default`` for every class not named: seconds, or None = no
contract, never preempted} replaces every job of that class's min runtime (log and budget file alike; 0 = always
preemptible). It travels as configuration, ``SimConfig.min_runtime_by_class`` (the override at the top of
``engine.min_runtime``'s precedence), never as a rewrite of the jobs' ``min_runtime_s`` column, so a warm start's
pinned jobs keep their logged contract. ``checkpoint_interval_s`` (None = no checkpoints: a preempted attempt
loses all its work). Seconds inside; the page's sliders hold seconds too and show hours only in their labels.
"""
from __future__ import annotations

import dataclasses

from ..kind import Change
from ..params import ScenarioError, number

# the engine, Polars and queries are imported on use (see ``dashboard.whatif.kind``: CLI start-up)


class MinRuntime:
    name, cli_name, label = "min_runtime", "min-runtime", "Min runtime per class and checkpoints"
    defaults = {"min_runtime_s": {"training": 8 * 3600.0, "debug": 0.0}, "checkpoint_interval_s": None}

    def check(self, p: dict) -> None:
        from engine.budgets import JOB_CLASSES
        from engine.min_runtime import DEFAULT

        if not isinstance(p["min_runtime_s"], dict):
            raise ScenarioError("min_runtime_s: must map job class -> seconds")
        for c, s in p["min_runtime_s"].items():
            if c not in JOB_CLASSES and c != DEFAULT:  # default: every class not named (engine.min_runtime)
                raise ScenarioError(f"min_runtime_s: unknown job class {c!r}; known: {', '.join(JOB_CLASSES)}")
            number(f"min_runtime_s.{c}", s, none=True)  # None: no contract (never preempted)
        number("checkpoint_interval_s", p["checkpoint_interval_s"], 1.0, none=True)

    @staticmethod
    def parts(by_class: dict) -> str:
        """``training 8 h, debug none``: each override, None = no contract."""
        return ", ".join(f"{c} {'none' if s is None else f'{s / 3600:g} h'}" for c, s in by_class.items())

    def describe(self, v: dict, spec) -> str:
        what = "min runtime " + (self.parts(v["min_runtime_s"]) or "unchanged")
        ck = v["checkpoint_interval_s"]
        return what + (f"; checkpoint every {ck / 60:g} min" if ck else "; no checkpoints")

    def apply(self, change: Change) -> None:
        v = change.values
        change.cfg = dataclasses.replace(change.cfg, min_runtime_by_class=dict(v["min_runtime_s"]),
                                         checkpoint_interval_s=v["checkpoint_interval_s"])


KIND = MinRuntime()
