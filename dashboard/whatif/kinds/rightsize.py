"""``rightsize``: every job's CPU and memory request replaced by what it used plus ``margin``.

Cores are rounded up, memory to whole GiB, never above the request; with ``gpus`` = "whole" a single-node job
whose GPU use with the margin is below one GPU (requested GPUs x mean utilisation x (1 + margin) < 1: with
margin 0.2 a job that used 0.83 GPU or more keeps its count) asks for 1 GPU, "fraction" asks for that fraction
(GPU sharing, MIG/MPS), "keep" leaves GPU counts. Run times are the logged ones (right-sizing is assumed not to
slow a job down). Its verdict is by attainment (``runner.verdict_basis``).
"""
from __future__ import annotations

from ..kind import Change
from ..params import number, one_of

# the engine, Polars and queries are imported on use (see ``dashboard.whatif.kind``: CLI start-up)

GPU_MODES = ("whole", "fraction", "keep")


class Rightsize:
    name, cli_name, label = "rightsize", "right-size", "Right-sized requests"
    defaults = {"margin": 0.2, "gpus": "whole"}

    def check(self, p: dict) -> None:
        number("margin", p["margin"], 0.0, 10.0)
        one_of("gpus", p["gpus"], GPU_MODES)

    def describe(self, v: dict, spec) -> str:
        return f"right-sized requests (+{100 * v['margin']:g} % margin, GPUs: {v['gpus']})"

    def apply(self, change: Change) -> None:
        from .. import transforms

        change.jobs = transforms.rightsize(change.jobs, change.values["margin"], change.values["gpus"])


KIND = Rightsize()
