"""``custom``: the Fair share page's custom mix, shares, guarantees, min runtimes, checkpoints, queue policy and
backfill changed together.

Parameters: ``shares`` and ``guaranteed`` as the ``shares`` kind, ``min_runtime_s`` and
``checkpoint_interval_s`` as the ``min_runtime`` kind (seconds, None = no contract; but ``min_runtime_s`` empty
by default: only the classes the manager moved), ``scenario_policy`` and ``scenario_backfill`` (None = the
baseline's). Each part is applied by the kind that owns it, so the custom mix of one part equals that kind
(tests/whatif).
"""
from __future__ import annotations

import dataclasses

from ..kind import Change
from ..params import one_of
from . import min_runtime, shares

# the engine, Polars and queries are imported on use (see ``dashboard.whatif.kind``: CLI start-up)


class Custom:
    name, cli_name, label = "custom", "custom", "Custom mix (shares, min runtime, policy, backfill)"
    defaults = {"shares": {}, "guaranteed": {}, "min_runtime_s": {}, "checkpoint_interval_s": None,
                "scenario_policy": None, "scenario_backfill": None}

    def check(self, p: dict) -> None:
        from engine.backfill import BACKFILLS
        from engine.policies import POLICIES

        shares.KIND.check(p)
        min_runtime.KIND.check(p)
        if p["scenario_policy"] is not None:
            one_of("scenario_policy", p["scenario_policy"], POLICIES)
        if p["scenario_backfill"] is not None:
            one_of("scenario_backfill", p["scenario_backfill"], BACKFILLS)

    def describe(self, v: dict, spec) -> str:
        from ..budgets import CHECKPOINTS

        parts = [f"policy {v['scenario_policy']}"] if v["scenario_policy"] else []
        parts += [f"backfill {v['scenario_backfill']}"] if v["scenario_backfill"] else []
        parts += ["shares " + ", ".join(shares.Shares.parts(v))] if v["shares"] or v["guaranteed"] else []
        if v["min_runtime_s"]:
            parts.append("min runtime " + min_runtime.MinRuntime.parts(v["min_runtime_s"]))
        ck = v["checkpoint_interval_s"]
        if ck:
            parts.append(f"checkpoint every {CHECKPOINTS.get(int(ck), f'{ck / 60:g} min')}")
        return "; ".join(parts) or "custom mix unchanged"

    def apply(self, change: Change) -> None:
        v = change.values
        shares.KIND.apply(change)
        if v["min_runtime_s"] or v["checkpoint_interval_s"]:
            min_runtime.KIND.apply(change)
        fields = {"policy": v["scenario_policy"], "backfill": v["scenario_backfill"]}
        fields = {k: x for k, x in fields.items() if x is not None}
        if fields:
            change.cfg = dataclasses.replace(change.cfg, **fields)


KIND = Custom()
