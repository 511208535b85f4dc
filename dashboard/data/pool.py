"""A small pool of DuckDB connections to one version of a store, reused across the dashboard's queries.

Opening a connection binds a view per store table (reading each file's schema) and closing it drops DuckDB's
cache of the files' parsed footers: at 10M jobs that was about 0.1 s to open and 0.05 s to close per query,
Python work that holds the GIL while the other view's query waits (measured with py-spy on the Overview's cold
render). The pool keeps the connections open instead.

Invariants:
- a connection is used by one thread at a time (DuckDB connections are not shared between concurrent queries),
  so each query keeps its own ``memory_limit``, as with a connection per query;
- a connection whose query raised is closed, never reused (its state after an interrupt or an error is not
  worth trusting);
- the pool belongs to one store version (the caller keys it by the store token): a new ingest gets a new pool,
  and ``close()`` closes the idle connections and any connection handed back afterwards;
- at most ``max_idle`` idle connections are kept (the dashboard runs two views at a time plus the page's own).
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator


class ConnectionPool:
    def __init__(self, open_connection: Callable[[], object], max_idle: int = 4):
        self._open = open_connection
        self._max_idle = max_idle
        self._idle: list = []
        self._lock = threading.Lock()
        self._closed = False
        self.opened = 0  # connections opened so far (tests and diagnostics)

    @contextlib.contextmanager
    def connection(self) -> Iterator[object]:
        """An idle connection, or a new one when none is idle; handed back (or closed) when the block ends."""
        with self._lock:
            con = self._idle.pop() if self._idle else None
        if con is None:
            con = self._open()
            with self._lock:
                self.opened += 1
        try:
            yield con
        except BaseException:
            con.close()
            raise
        with self._lock:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(con)
                return
        con.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for con in idle:
            con.close()
