"""The job-log store: partitioned Parquet tables committed through a manifest (``store``), their columns
(``schema``), the units and time convention every room uses (``units``), and the DuckDB connection over a store
(``connection``). This room imports no other room of ``queries``.

Re-exported here, the entry points of the room: ``Store``, ``Transaction``, ``StoreError``, ``MANIFEST``,
``name_problem``, ``name_problem_expr`` (``store``), ``connect``, ``DEFAULT_STORE`` (``connection``).
"""
from .connection import DEFAULT_STORE, connect
from .store import MANIFEST, Store, StoreError, Transaction, name_problem, name_problem_expr

__all__ = ["DEFAULT_STORE", "MANIFEST", "Store", "StoreError", "Transaction", "connect", "name_problem",
           "name_problem_expr"]
