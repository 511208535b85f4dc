"""Lazy re-exports for a package ``__init__`` (PEP 562): a name is imported from its module on first use.

Why: ``quotaloop --help`` builds its parser from the registries (``queries.ingest.formats``) and must not load
Polars or DuckDB, which importing the rooms' modules eagerly would do.
"""
from __future__ import annotations

from importlib import import_module


def exports(package: str, names: dict[str, str]):
    """A module ``__getattr__`` for ``package`` that resolves each name of ``names`` (name -> submodule,
    relative to ``package``) on first use and caches it in the package's namespace."""
    def __getattr__(name: str):
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{names[name]}"), name)
        setattr(import_module(package), name, value)
        return value
    return __getattr__
