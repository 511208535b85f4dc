"""The scenario-kind seam: what a kind is (``Kind``) and what it may change (``Change``).

A what-if scenario replays the same window twice: the *baseline* (the budget file as it is, the baseline
policy and backfill, the log's min runtimes and requests) and the *scenario*, which one kind changes. A kind
is one module under ``dashboard/whatif/kinds/`` holding an object that satisfies ``Kind``, and one line in
``dashboard/whatif/registry.py``; the CLI's ``quotaloop scenario NAME`` choices, the Fair share page's kind
picker and the runner all read that registry, so nothing else changes when a kind is added.

Kind modules import the engine, Polars and the query layer inside ``check`` / ``apply``, not at the top: the
CLI builds ``quotaloop scenario``'s choices from the registry at every start, and importing them there cost
+1.9 s on ``quotaloop --help`` (``python -X importtime``; 0.2 s without).

Invariants:
- ``apply`` starts from the baseline (``Change.jobs is Change.base_jobs`` and ``Change.cfg == Change.base_cfg``)
  and only replaces ``jobs`` / ``cfg`` (never mutates a frame or a tree it got); a kind that changes nothing
  leaves both as they are, and the runner then does not simulate a second time (every delta is 0);
- the runner restores the warm start's pinned jobs to their logged values after ``apply``
  (``transforms.as_logged_before``), so a kind cannot rewrite history before the window.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: the registry (and so every CLI start) imports this module
    import polars as pl

    import engine

    from .runner import Inputs


@dataclass
class Change:
    """What a kind's ``apply`` works on: the window's ``inputs``, the kind's parameter ``values`` (plain dicts),
    the baseline's jobs and configuration, and the scenario's (initially the baseline's), plus the kind's own
    tables (``extra``: name -> frame, written as ``NAME.csv``) and notes shown beside the result."""
    inputs: "Inputs"
    values: dict
    base_jobs: "pl.DataFrame"
    base_cfg: "engine.SimConfig"
    jobs: "pl.DataFrame"
    cfg: "engine.SimConfig"
    extra: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


class Kind(Protocol):
    """A scenario kind. ``name`` is the registry key (and ``ScenarioSpec.kind``), ``cli_name`` the word
    ``quotaloop scenario`` takes, ``label`` the page's and the progress text's title, ``defaults`` every
    parameter with its default (``ScenarioSpec.make`` rejects any other)."""
    name: str
    cli_name: str
    label: str
    defaults: dict

    def check(self, params: dict) -> None:
        """``params.ScenarioError`` naming the first bad parameter (``params`` holds every parameter)."""

    def describe(self, values: dict, spec) -> str:
        """What the scenario ``spec`` changes, in a few words (the spec adds the baseline and the seed)."""

    def apply(self, change: Change) -> None:
        """Set ``change.jobs`` / ``change.cfg`` (and ``extra`` / ``notes``) to the scenario's."""
