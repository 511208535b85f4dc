"""The compiled fair-share arithmetic (issue 16): ``engine/_fsorder.c``'s routines, chosen per run.

Four routines over the engine's own objects: every account's usage window (``tenants.Ledger.window_all``), and in
``policies.fairshare.FairShareQueue.funded_order`` those windows summed up each account's chain of tree nodes, the
tree descent to the under-served bucket and the bucket walk up to the next job to hand over (skipping, and noting,
the jobs a borrowing cap holds back and those the pass's hint already answers). For an order without the class
index the whole loop of ``funded_order`` runs in a cursor, ``Funded`` (its set-up - the pending counts' copy, the
usage sums, the total - from the budget version's arguments kept on the order's ``_Plan``, ``plan.cursor``; then the
descents, room, the buckets' iterators, the walk, the counts and projected usage after a start: one C call per job
handed over, the cursor iterated by the order's ``yield from``), and during EASY's backfill
(``easy.node_pass`` publishes ``hint.examine``) the cursor also examines each candidate as ``easy._backfill``
would (the reservation when first needed, the placement on the pool, ``sim.start``, the shape's failure and the
job's reason) instead of handing it over: a backfill pass runs no Python per candidate, only per start
(``Simulator.start``, ``qstats.nothing_fits``) and per pass. The Python code beside each call
stays the readable reference and the oracle (``tests/engine/test_compiled_fairshare.py``: the routines against the
Python loops on random inputs and by hand, whole simulations byte-identical across fair share and DRF with and
without caps, capped backlogs with the class index on / flapping / off, warm starts, contracts and every backfill
mode, and the sample store; the cursor also against the per-bucket Python loop, ``fairshare.CURSOR`` off, with the
same held-back counts at every order). Measured on the sample (issue 16's 30-day fair share + EASY + 8 h run): README,
"Speed of the simulator".

Selected like the compiled node pool, with ``QUOTALOOP_ENGINE`` read when a ledger or a fair-share queue is built:
unset or ``compiled`` uses the routines when they were built, ``python`` keeps the reference; ``compiled`` without
the module is a ``ConfigError``. Without a C compiler the install goes on (setup.py) and the Python code runs.
"""
from __future__ import annotations

import os

try:
    from . import _fsorder as compiled
except ImportError:  # built without a C compiler: the Python code runs
    compiled = None

ENABLED = True  # tests switch it off to compare against the reference


def routines():
    """The compiled module when this run uses it (``QUOTALOOP_ENGINE``, read at every call), else None."""
    from .backfill.fastpath import ENGINE_ENV  # not at import: the backfill registry imports the queues' users

    want = os.environ.get(ENGINE_ENV, "").strip().lower()
    if want == "compiled" and compiled is None:
        from .config import ConfigError

        raise ConfigError(f"{ENGINE_ENV}=compiled: the compiled fair-share order was not built (reinstall with a "
                          "C compiler: pip install -e .)")
    return compiled if ENABLED and compiled is not None and want in ("", "compiled") else None
