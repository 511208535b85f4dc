"""``shares``: budget shares and guaranteed GPUs replaced (the slider case).

Parameters: ``shares`` {budget path: share} and ``guaranteed`` {budget path: GPUs} replace the tree's values in
every effective-dated version. Invariants: paths the tree does not know are ignored and listed in a note; new
guarantees that oversell the cluster raise ``BudgetError``, as they do for the budget file.
"""
from __future__ import annotations

import dataclasses

from ..kind import Change
from ..params import ScenarioError, number

# the engine, Polars and queries are imported on use (see ``dashboard.whatif.kind``: CLI start-up)


class Shares:
    name, cli_name, label = "shares", "shares", "Budget shares changed"
    defaults = {"shares": {}, "guaranteed": {}}

    def check(self, p: dict) -> None:
        for key in ("shares", "guaranteed"):
            if not isinstance(p[key], dict):
                raise ScenarioError(f"{key}: must map budget path -> number")
            for path, x in p[key].items():
                number(f"{key}.{path}", x)

    def describe(self, v: dict, spec) -> str:
        return "shares " + (", ".join(self.parts(v)) or "unchanged")

    @staticmethod
    def parts(v: dict) -> list[str]:
        return ([f"{p.rsplit('/', 1)[-1]}={s:g}" for p, s in v["shares"].items()]
                + [f"{p.rsplit('/', 1)[-1]} guaranteed {g:g} GPUs" for p, g in v["guaranteed"].items()])

    def apply(self, change: Change) -> None:
        from engine import budgets as bt

        from .. import transforms
        from ..budgets import apply_budget_overrides, has_guarantees

        v, inputs = change.values, change.inputs
        missing = transforms.unknown_paths(inputs.tree, list(v["shares"]) + list(v["guaranteed"]))
        if missing:
            change.notes.append("not in the budget tree, ignored: " + ", ".join(missing))
        tree = apply_budget_overrides(inputs.tree, v["shares"], v["guaranteed"])
        bt.validate(tree, inputs.capacity_gpus or None)  # new guarantees may oversell: BudgetError, as for the file
        change.cfg = dataclasses.replace(change.cfg, budgets=tree, quota="guarantee" if has_guarantees(tree) else "none")


KIND = Shares()
