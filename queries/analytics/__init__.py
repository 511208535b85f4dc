"""Analytics over a store: the named SQL queries in ``sql/`` run through the loader (``loader``: ``run``,
``names``, ``load``, ``bind``, ``QueryError``, re-exported here), and the Python analytics over them
(``budgets``: water-filled attainment against a budget tree). Reads the store through ``queries.store``; never
imports ``queries.ingest`` or ``queries.samplegen``.
"""
from .loader import Param, Query, QueryError, bind, load, names, run

__all__ = ["Param", "Query", "QueryError", "bind", "load", "names", "run"]
