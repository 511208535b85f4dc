"""``min_runtime``: per-class min runtimes and checkpoints.

Parameters: ``min_runtime_s`` {job class: seconds} replaces every job of that class's min runtime (log and
budget file alike; 0 = always preemptible), ``checkpoint_interval_s`` (None = no checkpoints: a preempted
attempt loses all its work). Seconds inside; the page converts its hour sliders at its edge.
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
        from engine.budget_tree import JOB_CLASSES

        if not isinstance(p["min_runtime_s"], dict):
            raise ScenarioError("min_runtime_s: must map job class -> seconds")
        for c, s in p["min_runtime_s"].items():
            if c not in JOB_CLASSES:
                raise ScenarioError(f"min_runtime_s: unknown job class {c!r}; known: {', '.join(JOB_CLASSES)}")
            number(f"min_runtime_s.{c}", s)
        number("checkpoint_interval_s", p["checkpoint_interval_s"], 1.0, none=True)

    def describe(self, v: dict, spec) -> str:
        what = "min runtime " + ", ".join(f"{c} {s / 3600:g} h" for c, s in v["min_runtime_s"].items())
        ck = v["checkpoint_interval_s"]
        return what + (f"; checkpoint every {ck / 60:g} min" if ck else "; no checkpoints")

    def apply(self, change: Change) -> None:
        from .. import transforms

        v = change.values
        change.jobs = transforms.set_min_runtimes(change.jobs, v["min_runtime_s"])
        change.cfg = dataclasses.replace(change.cfg, checkpoint_interval_s=v["checkpoint_interval_s"])


KIND = MinRuntime()
