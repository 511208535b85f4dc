"""Node health: failures, drains and repairs (DOMAIN.md section 6's automatic draining).

- ``fail``: the node goes down at once; its running jobs are requeued (counted as failures, work since the
  last checkpoint lost); it returns ``repair_time_s`` later.
- ``drain``: the node takes no new work; each running job leaves (requeued, counted as a preemption) when it
  reaches its min runtime - at once if already past it; jobs without a contract run to their end. When the
  node is empty it goes down and returns ``repair_time_s`` later.
- Random drains: with ``node_mtbf_s``, each node draws exponential inter-drain gaps from the config's seeded
  generator (nodes in index order) up to the last submit time.
- Processor drains (``capacity_events``, ``engine.capacity``): in processor-count mode k processors out of service
  for new work over [t0, t1), running jobs untouched; on named nodes, drains of the last nodes holding at most k.

Invariants: a node is ``up``, ``draining`` or ``down``; only ``up`` nodes are available for placement; a
failure or drain of a node that is not up is ignored; every down node gets exactly one repair event.
"""
from __future__ import annotations

import datetime as dt

from . import capacity
from .config import ConfigError
from .events import P_MINRT, P_NODE, P_REPAIR
from .preempt import on_minrt
from .units import EPOCH, INF

UP, DRAINING, DOWN = "up", "draining", "down"


def _clock(sim, t, i: int) -> float:
    """An event instant on the simulation clock: seconds as given, a datetime against the workload's origin."""
    if not isinstance(t, dt.datetime):
        return float(t)
    if sim.wl.datetime_dtype is None:
        raise ConfigError(f"node_events[{i}]: a datetime instant needs a workload with datetime submit times")
    return ((t - EPOCH) // dt.timedelta(microseconds=1) - sim.wl.origin_us) / 1e6


class Health:
    def __init__(self, sim):
        self.sim = sim
        self.state = [UP] * sim.pool.n
        self.down_intervals: list[tuple] = []  # (node, down_at, up_at)
        self._down_at = {}
        self.counts = {"fail": 0, "drain": 0, "ignored": 0}
        cfg = sim.cfg
        self.events = []
        index = {name: k for k, name in enumerate(sim.pool.names)}
        if (cfg.node_events or cfg.node_mtbf_s) and sim.pool.cluster.procs_mode:
            raise ConfigError("node_events: processor-count mode has no nodes to fail; use a node layout")
        self.capacity = None  # processor drains over time (``engine.capacity``): the schedule's steps
        if cfg.capacity_events and not sim.pool.cluster.procs_mode:  # whole nodes, as node drains
            self.events += capacity.node_drains(sim, _clock)
        elif cfg.capacity_events:
            spans = capacity.outages(sim, _clock)
            self.capacity = capacity.steps(spans) if spans else None
            self.events += [(t0, units, capacity.PROCS, t1) for t0, t1, units in spans]
        self.until: dict[int, float] = {}   # node -> when an explicit drain window ends (drain files)
        for i, e in enumerate(cfg.node_events):
            if e.node not in index:
                raise ConfigError(f"node_events[{i}].node: unknown node {e.node!r}")
            t, until = _clock(sim, e.time_s, i), None if e.until is None else _clock(sim, e.until, i)
            self.events.append((t, index[e.node], e.kind) if until is None else (t, index[e.node], e.kind, until))
        if cfg.node_mtbf_s:
            rng = cfg.rng()
            horizon = max(sim.submit) if sim.n else 0.0
            for n in range(sim.pool.n):
                t = 0.0
                while True:
                    t += float(rng.exponential(cfg.node_mtbf_s))
                    if t > horizon:
                        break
                    self.events.append((t, n, "drain"))

    def schedule_events(self) -> None:
        for t, n, kind, *until in sorted(self.events):
            if kind == capacity.PROCS:  # n processors (in pool units) out for [t, until)
                self.sim.push(t, P_NODE, (kind, n))
                self.sim.push(until[0], P_REPAIR, (kind, n))
                continue
            self.sim.push(t, P_NODE, (kind, n, *until))

    def on_event(self, prio, payload, t) -> bool:
        """Apply one health or min-runtime event; True when the next pass must be a full one."""
        sim = self.sim
        if prio == P_MINRT:
            j, att = payload
            return on_minrt(sim, j, att, t)
        if prio == P_REPAIR:
            if type(payload) is tuple:  # drained processors return
                sim.change_capacity(payload[1])
                return True
            n = payload
            self.state[n] = UP
            sim.set_node_available(n, True)
            self.down_intervals.append((n, self._down_at.pop(n), t))
            return True
        kind, n, *until = payload
        if kind == capacity.PROCS:
            self.counts["drain"] += 1
            sim.change_capacity(-n)
            return True
        if self.state[n] != UP:
            self.counts["ignored"] += 1
            return False
        if until:
            self.until[n] = until[0]
        self.counts[kind] += 1
        sim.set_node_available(n, False)
        on_node = [j for _, _, j in list(sim.running_by_end) if any(x[0] == n for x in sim.alloc[j])]
        if kind == "fail":
            self._go_down(n, t)
            for j in on_node:
                sim.requeue(j, t, "fail")
            return True
        self.state[n] = DRAINING
        for j in on_node:
            mrt = sim.min_rt[j]
            if mrt < INF and t - sim.att_start[j] >= mrt:
                sim.requeue(j, t, "drain")
            elif mrt < INF and not sim.preempting.on:
                sim.push(sim.att_start[j] + mrt, P_MINRT, (j, sim.attempt[j]))
        if sim.pool.idle(n) and self.state[n] == DRAINING:
            self._go_down(n, t)
        return True

    def _go_down(self, n, t) -> None:
        self.state[n] = DOWN
        self._down_at[n] = t
        until = self.until.pop(n, None)
        self.sim.push(t + self.sim.cfg.repair_time_s if until is None else max(t, until), P_REPAIR, n)

    def on_draining_node(self, j) -> bool:
        return any(self.state[x[0]] == DRAINING for x in self.sim.alloc[j])

    def after_release(self, alloc, now) -> None:
        for n, *_ in alloc:
            if self.state[n] == DRAINING and self.sim.pool.idle(n):
                self._go_down(n, now)

    def finish(self, end_time) -> None:
        """Close the down intervals still open at the end of the simulation."""
        for n, t in sorted(self._down_at.items()):
            self.down_intervals.append((n, t, max(t, end_time)))
        self._down_at.clear()
