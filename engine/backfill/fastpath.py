"""Fast kernel for the common replay: processor-count mode, FCFS, no backfill or EASY in queue order, and
every other feature idle (no preemption, no node events, no budget caps, no per-user running limit). The rules offer it as their
``whole_run`` (``fast_kernel``) where it applies.

It is the same algorithm as ``core.Simulator.run`` + ``easy.scalar_pass`` with the generic machinery
inlined: submissions come from the sorted job arrays instead of the heap (they are in (time, index) order
already, and at a timestamp ends are applied before submissions exactly as the heap's priorities do), job
ends sit in a heap of (end, seq, job), and a pass after submissions alone examines only the new jobs.

Invariant (tested on random workloads): for every job, start, end, start_seq, reservation and wait reason are
identical to the generic path's.

Two implementations of one kernel, selected per run by ``QUOTALOOP_ENGINE``:

- ``run_python`` (below): the readable reference and the oracle;
- ``_fastpath.run`` (``_fastpath.c``, a CPython extension in plain C built by ``pip install``): the same statements
  on C arrays. It fills exactly the lists ``run_python`` fills (start, end, start_seq, reservation, wait reason
  and since, ``waits.acc`` in the same insertion order) and returns the same tallies, so every output is
  byte-identical (tests/engine/test_compiled_kernel.py: random workloads, every SWF trace in shared data).

``QUOTALOOP_ENGINE`` unset or empty: the compiled kernel when it was built, else the Python one (a package
installed without a C compiler still runs, and says so in one line on stderr, once per process); ``python``: the
reference; ``compiled``: the compiled kernel, or a ``ConfigError`` when it is absent. Any other value is a
``ConfigError``. The variable is read at every run.

Why plain C and not Cython: Cython would be one more build dependency (fetched at install) for a kernel of
~300 lines of arrays, a heap and a sorted array; it was not measured, because the C kernel already costs a fifth
of the textbook C process below, so at best Cython could match it. Measured
on HPC2N (202,871 jobs, FCFS + EASY, CPU seconds on the loaded 2-core machine): the Python kernel 1.4-1.5 s, the C
kernel 0.13-0.15 s of which ~0.05 s is writing the per-job lists back as Python objects, against 0.7 s for the
whole textbook C loop process (tests/benchmarks/easy_baseline.c, reading a text file). The first C version
updated ``waits.acc`` (Python dicts) at every note: 0.20 s; keeping the sums in C arrays and writing the dicts
once took it to 0.13 s. What is left of the gap to the textbook C process is outside the kernel.
"""
from __future__ import annotations

import bisect
import heapq
import os
import sys

from ..units import INF

try:
    from . import _fastpath as compiled
except ImportError:  # built without a C compiler: the Python kernel runs (see ``engine_choice``)
    compiled = None

ENABLED = True  # tests switch it off to compare against the generic path
ENGINE_ENV = "QUOTALOOP_ENGINE"
_noted = False  # the missing compiled kernel is said once per process


def applies(sim) -> bool:
    cfg = sim.cfg
    return (ENABLED and sim.pool.cluster.procs_mode and sim.policy.supports_fastpath and sim.depth <= 1
            and cfg.backfill_order == "queue" and cfg.backfill_max_job_test is None and not sim.preempting.on
            and not sim.health.events and not sim.caps.on and not sim.users.on and sim.wl.warm_s is None
            and not cfg.sched_interval_s)


def fast_kernel(sim):
    """``run`` when it applies to ``sim``, else None (the generic event loop runs)."""
    return run if applies(sim) else None


def engine_choice() -> str:
    """"compiled" or "python": the kernel ``run`` uses, from ``QUOTALOOP_ENGINE`` (read at every run)."""
    global _noted
    want = os.environ.get(ENGINE_ENV, "").strip().lower()
    if want == "" and compiled is None and not _noted:
        _noted = True
        sys.stderr.write(f"quotaloop: note: the compiled engine kernel is not built (no C compiler at install?); "
                         f"running the Python kernel (set {ENGINE_ENV}=python to choose it and silence this)\n")
    if want == "python" or (want == "" and compiled is None):
        return "python"
    if want in ("", "compiled") and compiled is not None:
        return "compiled"
    # imported here: engine.config imports the backfill registry, which imports this module
    from ..config import ConfigError

    if want == "compiled":
        raise ConfigError(f"{ENGINE_ENV}=compiled: the compiled kernel was not built (reinstall with a C compiler: "
                          "pip install -e .)")
    raise ConfigError(f"{ENGINE_ENV}={want!r}: expected 'python' or 'compiled' (or unset)")


def run(sim) -> None:
    """The whole run, on the kernel ``engine_choice`` names."""
    if engine_choice() == "compiled":
        run_compiled(sim)
    else:
        run_python(sim)


def run_compiled(sim) -> None:
    """``run_python`` in C (``_fastpath.c``): same inputs, same lists written, same tallies."""
    waits = sim.waits
    pool = sim.pool
    use_c = pool.cluster.resource == "cpus"
    size = sim.req_c if use_c else sim.req_g
    names = ["resources", "reservation", "priority"]
    dflt = names.index(waits.default)
    names[dflt] = waits.default
    t, seq, passes, full_passes = compiled.run(
        sim.submit, sim.limit_left, sim.rem, size, (pool.cap_c if use_c else pool.cap_g)[0], sim.depth,
        1.0 / (1.0 - sim.cfg.walltime_margin), sim.now, dflt, tuple(names),
        sim.first_start, sim.end_time, sim.start_seq, waits.reason, sim.reserved, waits.since, waits.acc)
    start_s, end_s = sim.intervals.set_single_attempts(sim.first_start, sim.end_time, sim.start_seq, size, use_c)
    sim.adopt_whole_run(t, seq, passes, full_passes, start_s, end_s)


def run_python(sim) -> None:
    """The reference kernel (and the oracle of the compiled one)."""
    n = sim.n
    waits = sim.waits
    pool = sim.pool
    use_c = pool.cluster.resource == "cpus"
    size = sim.req_c if use_c else sim.req_g
    free = (pool.cap_c if use_c else pool.cap_g)[0]
    submit, est, rem = sim.submit, sim.limit_left, sim.rem
    start, end, seq_of, reason, reserved = sim.first_start, sim.end_time, sim.start_seq, waits.reason, sim.reserved
    depth = sim.depth
    default_reason = waits.default
    since, note, close = waits.since, waits.note, waits.close
    inv = 1.0 / (1.0 - sim.cfg.walltime_margin)
    heappush, heappop = heapq.heappush, heapq.heappop
    insort, bisect_left = bisect.insort, bisect.bisect_left
    ends: list = []       # (actual end, seq, job)
    running: list = []    # (estimated end, seq, job), sorted
    queue: dict = {}
    seq = n
    i = 0
    # pass state (see state.PassState): blocked head, its reservation time T and extra processors
    blocked = False
    stopped = False
    T = INF
    extra = 0
    passes = full_passes = 0
    t = sim.now  # the clock the run ends at (no event: where it began)
    while i < n or ends:
        t = submit[i] if i < n else INF
        full = False
        if ends and ends[0][0] <= t:
            t = ends[0][0]
            while ends and ends[0][0] == t:
                _, s, j = heappop(ends)
                free += size[j]
                end[j] = t
                k = bisect_left(running, (start[j] + est[j], s, j))
                del running[k]
                full = True
        first_new = i
        while i < n and submit[i] == t:
            queue[i] = None
            reason[i] = default_reason
            since[i] = t
            i += 1
        if not queue:
            continue
        passes += 1
        if full:
            full_passes += 1
            blocked = stopped = False
            it = iter(queue)
        else:
            it = iter(range(first_new, i))
        if stopped:
            continue
        started = []
        if not blocked:
            for j in it:
                s = size[j]
                if s <= free:
                    free -= s
                    seq += 1
                    start[j] = t
                    seq_of[j] = seq
                    if t != submit[j]:
                        close(j, t)
                    heappush(ends, (t + (rem[j] if rem[j] < est[j] else est[j]), seq, j))
                    insort(running, (t + est[j], seq, j))
                    started.append(j)
                    continue
                if reason[j] != "resources":
                    note(j, "resources", t)
                if depth == 0:
                    stopped = True
                    break
                blocked = True
                avail = free
                T = INF
                k, nr = 0, len(running)
                while k < nr:
                    e = running[k][0]
                    while k < nr and running[k][0] == e:
                        avail += size[running[k][2]]
                        k += 1
                    if avail >= s:
                        T = e
                        break
                extra = avail - s
                if T < INF and reserved[j] is None:
                    reserved[j] = T
                break
        if blocked and not stopped:
            for j in it:
                if free <= 0:
                    break
                s = size[j]
                if s > free:
                    if reason[j] != "resources":
                        note(j, "resources", t)
                    continue
                if t + est[j] * inv <= T:
                    pass
                elif s <= extra:
                    extra -= s
                else:
                    if reason[j] != "reservation":
                        note(j, "reservation", t)
                    continue
                free -= s
                seq += 1
                start[j] = t
                seq_of[j] = seq
                if t != submit[j]:
                    close(j, t)
                heappush(ends, (t + (rem[j] if rem[j] < est[j] else est[j]), seq, j))
                insort(running, (t + est[j], seq, j))
                started.append(j)
        for j in started:
            del queue[j]
    # the intervals, in the order the generic path records them (by end, then start sequence), as arrays
    start_s, end_s = sim.intervals.set_single_attempts(start, end, seq_of, size, use_c)
    sim.adopt_whole_run(t, seq, passes, full_passes, start_s, end_s)
