"""The one registry of scenario kinds: name -> ``Kind`` (``dashboard.whatif.kind``).

``quotaloop scenario``'s ``NAME`` choices (``cli_names``), the Fair share page's kind picker (``KINDS`` in
order, ``label``) and ``ScenarioSpec.make`` / the runner read it. Adding a kind: one module under ``kinds/``
exporting ``KIND``, and one line below (or ``register`` at run time, as tests/whatif's toy kind does).

Invariants: names and CLI names are unique; the order is the page's and the CLI help's order.
"""
from __future__ import annotations

from .kind import Kind
from .kinds import backfill, custom, drains, min_runtime, quota_loop, rightsize, shares

KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    """Add ``kind`` (``ValueError`` when its name or CLI name is taken)."""
    if kind.name in KINDS or kind.cli_name in cli_names():
        raise ValueError(f"scenario kind {kind.name!r} ({kind.cli_name}) is already registered")
    KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    KINDS.pop(name, None)


def cli_names() -> dict[str, str]:
    """CLI word -> kind name (``min-runtime`` -> ``min_runtime``)."""
    return {k.cli_name: k.name for k in KINDS.values()}


def labels() -> dict[str, str]:
    return {name: k.label for name, k in KINDS.items()}


for _kind in (shares.KIND, backfill.KIND, min_runtime.KIND, rightsize.KIND, quota_loop.KIND, drains.KIND,
              custom.KIND):
    register(_kind)
