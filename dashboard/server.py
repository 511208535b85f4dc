"""The dashboard's server process: Streamlit, plus the cache warm-up in a background thread.

``quotaloop serve`` execs ``python -m dashboard.server run dashboard/app.py [Streamlit options]``; the arguments
are Streamlit's own. Before handing over to Streamlit this starts one daemon thread that waits for Streamlit's
runtime (which owns the process-wide ``st.cache_data`` storage every session reads) and then runs
``dashboard.data.warm()``, so the default view of every page is computed once, before the first visitor asks
for it. It logs one line to stderr when done. ``QUOTALOOP_WARM=0`` (``quotaloop serve --no-warm``) skips it;
the thread then only imports the data layer, so the first visitor does not pay for loading the
code (1.0-1.5 s), only for the queries their page asks.
"""
from __future__ import annotations

import os
import sys
import threading
import time

from streamlit.runtime import Runtime
from streamlit.web import cli


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _when_ready(warm: bool, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not Runtime.exists():  # the runtime creates the cache storage the sessions use: never warm before it
        if time.monotonic() > deadline:
            _log("quotaloop: warm-up skipped: the Streamlit runtime did not start")
            return
        time.sleep(0.2)
    try:
        # imported here, after the runtime started, not at the top: dashboard.data (Polars, DuckDB, queries,
        # engine) takes 1.0-1.5 s to import after Streamlit (measured), which at the top would delay Streamlit
        # opening its port by as much. With the warm-up off it is still imported (no query runs, no cache is
        # filled), so the first visitor of a cold server pays only for the queries their page asks.
        t0 = time.perf_counter()
        from dashboard import data

        if warm:
            data.warm(log=_log)
        else:
            _log(f"quotaloop: data layer loaded in {time.perf_counter() - t0:.1f} s (warm-up off: no query ran)")
    except Exception as exc:  # noqa: BLE001 - a failed warm-up only means the first visitor waits
        _log(f"quotaloop: {'warm-up' if warm else 'preload'} failed: {type(exc).__name__}: {exc}")


def warm_enabled(env=os.environ) -> bool:
    return str(env.get("QUOTALOOP_WARM", "1")).strip().lower() not in ("0", "false", "no", "off")


def main(argv: list[str] | None = None) -> int:
    warm = warm_enabled()
    threading.Thread(target=_when_ready, args=(warm,), name="quotaloop-warm-up" if warm else "quotaloop-preload",
                     daemon=True).start()
    sys.argv = ["streamlit", *(sys.argv[1:] if argv is None else argv)]
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
