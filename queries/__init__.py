"""quotaloop's data layer, in four rooms (sub-packages):

- ``queries.store``: the job-log store (Parquet tables committed through a manifest, its schema and units, the
  DuckDB connection over it);
- ``queries.ingest``: scheduler exports into a store, one module per format, named in ``ingest.formats``;
- ``queries.analytics``: the named SQL queries (``analytics/sql/*.sql``) and their loader, and the Python
  analytics over them (``budgets``);
- ``queries.samplegen``: the synthetic sample store's generator.

Public API re-exported here: the named-query interface, ``run``, ``names``, ``load``, ``bind``,
``QueryError`` (from ``queries.analytics``) and ``connect``, ``DEFAULT_STORE`` (from ``queries.store``), so
``queries.run("job_waste", store=...)`` is how the dashboard, the CLI and the reports read analytics.
"""
from .analytics.loader import QueryError, bind, load, names, run
from .store.connection import DEFAULT_STORE, connect

__all__ = ["DEFAULT_STORE", "QueryError", "bind", "connect", "load", "names", "run"]
