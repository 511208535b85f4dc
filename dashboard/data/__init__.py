"""The one place that owns the dashboard's caches and talks to ``queries`` and ``engine`` (a package only so
that no file grows past a screenful; pages import ``dashboard.data`` and see one namespace).

- Queries are called by name (``queries.run``); a query or engine feature that does not exist yet raises
  ``NotAvailable`` so the page can say so instead of failing.
- ``st.cache_data`` holds result frames, keyed by the store's manifest token (a new ingest invalidates them)
  and the bound parameters; ``st.cache_resource`` holds engine inputs and simulation results (large, read-only,
  shared by every session), keyed the same way. Aggregates are cached as aggregates, so a rerun never reloads a
  per-job frame just to sum it again.
- Only the parameters a query declares are passed; a global filter a query does not take is reported by
  ``ignored_filters`` so the page can say "this view ignores ...", never silently.
- Pure shaping of the results lives in ``dashboard.shaping`` and the what-if service ``dashboard.whatif``.
"""
from .analytics import *  # noqa: F401,F403
from .core import *  # noqa: F401,F403
from .reports import *  # noqa: F401,F403
from .sim import *  # noqa: F401,F403
from .warm import *  # noqa: F401,F403
