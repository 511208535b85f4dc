"""``drains``: the baseline plus node drains or failures.

Parameters: ``drains`` a list of ``NODES@TIME[..END]`` (``engine.drains``: a node name, a comma list or a
hostlist like ``gpu[001-004]``; ISO instants inside the window), ``mode`` "drain" (DOMAIN.md section 6: no new
work, each running job requeued once it has run its min runtime, the node down once empty until END or
``repair_time`` later) or "fail" (jobs killed at once), and ``node_mtbf_s`` (random drains: mean time between
drains per node, seeded; None = none).
"""
from __future__ import annotations

import dataclasses
import datetime as dt

from ..kind import Change
from ..params import ScenarioError, number, one_of

# the engine, Polars and queries are imported on use (see ``dashboard.whatif.kind``: CLI start-up)


class Drains:
    name, cli_name, label = "drains", "drains", "Node drains (at min runtime) or failures"
    defaults = {"drains": (), "mode": "drain", "node_mtbf_s": None}

    def check(self, p: dict) -> None:
        from engine import drains
        from engine.config import ConfigError

        if not isinstance(p["drains"], (list, tuple)) or not all(isinstance(d, str) for d in p["drains"]):
            raise ScenarioError("drains: must be a list of NODES@TIME[..END]")
        one_of("mode", p["mode"], drains.KINDS)
        number("node_mtbf_s", p["node_mtbf_s"], 60.0, none=True)
        for d in p["drains"]:
            try:
                drains.parse_spec(d, p["mode"])
            except ConfigError as exc:
                raise ScenarioError(f"drains: {exc}") from None

    def describe(self, v: dict, spec) -> str:
        what = (f"node {'drains at min runtime' if v['mode'] == 'drain' else 'failures'}: "
                + (", ".join(v["drains"]) or "none listed"))
        return what + (f"; random drains every {v['node_mtbf_s'] / 3600:g} h per node" if v["node_mtbf_s"] else "")

    def apply(self, change: Change) -> None:
        from engine import drains

        v, inputs = change.values, change.inputs
        events = tuple(e for d in v["drains"] for e in drains.parse_spec(d, v["mode"]))
        for e in events:
            t = e.time_s
            if not isinstance(t, dt.datetime) or not inputs.start <= t < inputs.end:
                raise ValueError(f"drain of {e.node} at {t}: not an instant inside the window "
                                 f"[{inputs.start:%Y-%m-%d %H:%M}, {inputs.end:%Y-%m-%d %H:%M}) UTC")
        change.cfg = dataclasses.replace(change.cfg, node_events=events, node_mtbf_s=v["node_mtbf_s"])


KIND = Drains()
