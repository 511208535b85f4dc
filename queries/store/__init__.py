"""The job-log store: partitioned Parquet tables committed through a manifest (``store``), their columns
(``schema``), the units and time convention every room uses (``units``), and the DuckDB connection over a store
(``connection``), the job summaries in each keyed file's footer (``keyindex``), a table's time extent from its
footers' statistics (``extent``). This room imports no other room of ``queries``.

Re-exported here, the entry points of the room: ``Store``, ``Transaction``, ``StoreError``, ``MANIFEST``,
``name_problem``, ``name_problem_expr`` (``store``), ``connect``, ``DEFAULT_STORE`` (``connection``).
"""
from ..lazy import exports
from .store import MANIFEST, Store, StoreError, Transaction, name_problem, name_problem_expr

__all__ = ["DEFAULT_STORE", "MANIFEST", "Store", "StoreError", "Transaction", "connect", "name_problem",
           "name_problem_expr"]

# the connection imports DuckDB (0.1-0.5 s): only the commands that query load it (``simulate --workload`` does not)
__getattr__ = exports(__name__, {"DEFAULT_STORE": "connection", "connect": "connection"})
