"""The compiled node-mode pool (issue 16): ``engine/_nodecore.c``'s routines bound on a node-mode ``pool.Pool``.

``bind(pool)`` replaces, on that one instance, ``bounds``, ``place``, ``place_in``, ``allocate``, ``release`` and
``_move`` by the compiled routines of a ``_nodecore.NodeOps`` holding the pool's own lists and dicts: the same
answers and the same state left behind (free resources, epochs, running bounds, the free-GPU index, stranded
GPUs), so every kernel above the pool's interface runs unchanged. EASY's reservation search
(``easy._reservation``) asks ``pool.ops.reservation`` when it is bound: the same release-and-place walk on C
copies of the free lists; the preemption search (``preempt._victims``) asks ``pool.ops.release_fits`` (would the
job fit with every preemptible job near it released?) and ``pool.ops.victims`` (the candidates released in
preference order until it fits, then those its placement needs), read only, on C copies too. The Python methods
(and functions) stay the readable reference and the oracle (``tests/engine/test_compiled_pool.py``: random pools,
every operation, both sides; whole simulations byte-identical across policies x backfill x contracts; a
hand-computed reservation; ``tests/engine/test_compiled_preempt.py`` for the search).

Where it applies: node mode only (a ``--procs`` pool keeps its Python methods: one node, nothing to win, and
its own path). Selected per pool with the engine kernel's ``QUOTALOOP_ENGINE`` (``backfill.fastpath``): unset or
``compiled`` binds the compiled routines when they were built, ``python`` keeps the reference; ``compiled`` without
the module is a ``ConfigError``. Without a C compiler the install goes on (setup.py) and the Python methods run.
"""
from __future__ import annotations

import os

try:
    from . import _nodecore as compiled
except ImportError:  # built without a C compiler: the Python methods run
    compiled = None

ENABLED = True  # tests switch it off to compare against the reference


def wanted() -> bool:
    """Whether this run binds the compiled routines (``QUOTALOOP_ENGINE``, read at every pool built)."""
    from .backfill.fastpath import ENGINE_ENV  # not at import: the backfill registry imports the pool's users

    want = os.environ.get(ENGINE_ENV, "").strip().lower()
    if want == "compiled" and compiled is None:
        from .config import ConfigError

        raise ConfigError(f"{ENGINE_ENV}=compiled: the compiled node pool was not built (reinstall with a C "
                          "compiler: pip install -e .)")
    return ENABLED and compiled is not None and want in ("", "compiled")


def bind(pool) -> bool:
    """Bind the compiled routines on ``pool`` (node mode) when this run wants them; True if bound."""
    if pool.cluster.procs_mode or not wanted():
        return False
    ops = compiled.NodeOps(pool)
    pool.ops = ops
    pool.bounds, pool.place, pool.place_in = ops.bounds, ops.place, ops.place_in
    pool.allocate, pool.release, pool._move = ops.allocate, ops.release, ops.move
    return True
