"""``backfill``: another backfill mode, reservation depth and walltime margin than the baseline's.

Parameters: ``to`` none | easy | conservative, ``reservation_depth`` (K blocked jobs get reservations; None =
the mode's own: 1 for EASY, all for conservative) and ``walltime_margin`` (fraction).
"""
from __future__ import annotations

import dataclasses

from ..kind import Change
from ..params import ScenarioError, number, one_of

# the engine, Polars and queries are imported on use (see ``dashboard.whatif.kind``: CLI start-up)


class Backfill:
    name, cli_name, label = "backfill", "backfill", "Backfill mode and reservation depth"
    defaults = {"to": "conservative", "reservation_depth": None, "walltime_margin": 0.0}

    def check(self, p: dict) -> None:
        from engine.backfill import BACKFILLS

        one_of("to", p["to"], BACKFILLS)
        d = p["reservation_depth"]
        if d is not None and (isinstance(d, bool) or not float(d).is_integer() or d < 1):
            raise ScenarioError(f"reservation_depth: must be an integer >= 1, got {d!r}")
        if d is not None and p["to"] == "none":
            raise ScenarioError("reservation_depth: needs backfill easy or conservative")
        number("walltime_margin", p["walltime_margin"], 0.0, 0.99)

    def describe(self, v: dict, spec) -> str:
        depth = v["reservation_depth"]
        return f"backfill {spec.backfill} -> {v['to']}" + (f", reservation depth {depth:g}" if depth else "")

    def apply(self, change: Change) -> None:
        v, depth = change.values, change.values["reservation_depth"]
        change.cfg = dataclasses.replace(change.cfg, backfill=v["to"],
                                         reservation_depth=None if depth is None else int(depth),
                                         walltime_margin=float(v["walltime_margin"]))


KIND = Backfill()
