"""``quota_loop``: the quota loop on, its back-test coefficients as budget multipliers.

The ``quota_backtest`` coefficients (period ``period_s``, its stabiliser parameters in ``backtest``) become
multipliers of the leaf shares, each period's applied from the next period on, as effective-dated budget
versions (``queries.analytics.budgets.quota_loop_multipliers``). The back-test starts ``history_periods``
periods before the window, so the loop is already running when the replay starts. Extra tables:
``multipliers`` and ``stability`` (``transforms.stability``).
"""
from __future__ import annotations

import dataclasses
import datetime as dt

from ..kind import Change
from ..params import ScenarioError, number

# the engine, Polars and queries are imported on use (see ``dashboard.whatif.kind``: CLI start-up)


class QuotaLoop:
    name, cli_name, label = "quota_loop", "quota-loop", "Quota loop on (back-test coefficients as budget multipliers)"
    defaults = {"period_s": 7 * 86400.0, "history_periods": 4, "backtest": {}}

    def check(self, p: dict) -> None:
        number("period_s", p["period_s"], 3600.0)
        number("history_periods", p["history_periods"], 0.0, 520.0)
        if not isinstance(p["backtest"], dict):
            raise ScenarioError("backtest: must map quota_backtest parameter -> value")

    def describe(self, v: dict, spec) -> str:
        return f"quota loop on (period {v['period_s'] / 86400:g} d" + "".join(
            f", {k} {x:g}" for k, x in v["backtest"].items()) + ")"

    def apply(self, change: Change) -> None:
        from queries.analytics import budgets

        from .. import transforms

        v, inputs = change.values, change.inputs
        if not inputs.store:
            raise ValueError("the quota loop scenario needs the store (its back-test reads the usage samples)")
        since = inputs.start - dt.timedelta(seconds=v["period_s"] * int(v["history_periods"]))
        mult = budgets.quota_loop_multipliers(inputs.store, inputs.tree, since, inputs.end,
                                              period_s=v["period_s"], cluster=inputs.cluster, **v["backtest"])
        change.extra["multipliers"] = mult
        change.extra["stability"] = transforms.stability(mult)
        if mult.is_empty():
            change.notes.append("the back-test produced no coefficients in this window: the loop changes nothing")
        change.cfg = dataclasses.replace(change.cfg, budgets=transforms.with_multipliers(inputs.tree, mult))


KIND = QuotaLoop()
