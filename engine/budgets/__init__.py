"""The budget model shared by the engine and the analytics: ``budgets.toml`` parsed into an effective-dated
tree, account -> node mapping, hierarchical water-filling, the window tally and attainment (DOMAIN.md section 6).

Rooms: ``tree`` (the model: nodes, versions, account mapping, water-filling, validation; its docstring is the
file format reference), ``parse`` (TOML text -> ``BudgetTree``, errors naming key and line), ``window``
(entitled / demanded / received hours per tree row over a window, ``attainment``, the one formula, and its
``summary``).

Invariants: a leaf package. It imports only the standard library and itself (no other ``engine`` module, no
DuckDB, Polars or ``queries``), so both ``engine`` and ``queries`` import it without a back-arrow; ``queries``
imports nothing else of ``engine`` (``tests/test_layering.py``). Inside it the arrows run one way:
``parse -> tree``, ``window -> tree``.
"""
from __future__ import annotations

from .parse import load, parse
from .tree import (
    DIRECT, JOB_CLASSES, UNBUDGETED, UNITS, BudgetError, BudgetNode, BudgetTree, BudgetVersion, ancestors, bucket,
    entitlements, frontier, resolve, static_entitlements, static_shares, validate, water_fill,
)
from .window import WindowTally, attainment, summary

__all__ = [
    "DIRECT", "JOB_CLASSES", "UNBUDGETED", "UNITS", "BudgetError", "BudgetNode", "BudgetTree", "BudgetVersion",
    "WindowTally", "ancestors", "attainment", "bucket", "entitlements", "frontier", "load", "parse", "resolve",
    "static_entitlements", "static_shares", "summary", "validate", "water_fill",
]
