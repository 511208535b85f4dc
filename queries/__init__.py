"""quotaloop's data layer, in four rooms (sub-packages):

- ``queries.store``: the job-log store (Parquet tables committed through a manifest, its schema and units, the
  DuckDB connection over it);
- ``queries.ingest``: scheduler exports into a store, one module per format, named in ``ingest.formats``;
- ``queries.analytics``: the named SQL queries (``analytics/sql/*.sql``) and their loader, and the Python
  analytics over them (``budgets``);
- ``queries.samplegen``: the synthetic sample store's generator.

Public API re-exported here: the named-query interface, ``run``, ``names``, ``load``, ``bind``,
``QueryError`` (from ``queries.analytics.loader``) and ``connect``, ``DEFAULT_STORE`` (from
``queries.store.connection``), so ``queries.run("job_waste", store=...)`` is how the dashboard, the CLI and the
reports read analytics. They resolve on first use (PEP 562) rather than at import: importing any room (the CLI
reads ``queries.ingest.formats`` when it builds its parser) must not load Polars (see ``queries.ingest``).
"""
from .lazy import exports

_EXPORTS = {
    "QueryError": "analytics.loader", "bind": "analytics.loader", "load": "analytics.loader",
    "names": "analytics.loader", "run": "analytics.loader",
    "DEFAULT_STORE": "store.connection", "connect": "store.connection",
}
__all__ = sorted(_EXPORTS)

__getattr__ = exports(__name__, _EXPORTS)
