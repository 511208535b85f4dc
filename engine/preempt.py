"""Min-runtime contracts, preemption and guaranteed quota with a reclaimable burst pool.

Who may be preempted (a *victim*), always only once it has run its min runtime in the current attempt:
- a job with min runtime 0 (unallocated occupancy), by any waiting funded job;
- under ``fairshare``/``drf``: a job of an over-served bucket (served > 1 + threshold) to start a job of an
  under-served bucket (served < 1 - threshold; the threshold, default 0.1, keeps two teams hovering around
  their shares from preempting each other back and forth); served = (window usage share / fraction) for
  fair share, weighted dominant share for DRF. DRF's served is what is held now, so DRF also needs the
  preemptor's bucket, with it started, served no more than each victim's bucket with its victims stopped
  (``_final_share_ok``): one large job must not flip two buckets across their shares and start a ping-pong;
- with QoS pairs (``SimConfig.qos_preempts`` or the budget file's ``[qos]`` table, Slurm's
  ``PreemptType=preempt/qos``): a job whose QoS the preemptor's QoS lists, by any funded job of that QoS,
  whatever the policy;
- with ``quota="guarantee"``: a *burst* job (running beyond its tenant's guarantee) to start a job that fits
  within its own tenant's guarantee (reclaim). When guaranteed capacity frees up, the tenant's running burst
  jobs move into it (oldest first) and stop being reclaimable.

Invariants:
- No job is preempted before ``att_start + min_runtime``; jobs without a contract (min runtime infinite)
  are never preempted (``preemptible`` only ever holds jobs past their min runtime).
- Only the first blocked job of the last pass preempts (the reserved / most under-served one), taking the
  fewest victims, in preference order: unfunded, burst, most over-served bucket, least work lost, latest
  start; only jobs holding resources on nodes the preemptor may use are considered (``preemptible_in``: per
  placement group). A search first checks that the preemptor would fit with every candidate released (fitting
  is monotone in freed resources), so hopeless searches cost one placement.
  Victims are requeued (work since the last checkpoint lost) and the preemptor starts at once.
- Preemption pays (DOMAIN.md section 5): the funded work the victims lose (resource-seconds since their last
  checkpoint) times ``preemption_cost_factor`` may not exceed the waiting it saves the preemptor (its
  resources x the time to its reservation; unbounded when it has none). Unfunded work counts as free.
- With the compiled node pool the search (candidates, the all-released test, the release-until-placed walk and
  the victims needed) runs in ``engine/_nodecore.c`` (``NodeOps.release_fits``, ``NodeOps.victims``), except
  with QoS pairs or guarantee reclaim; the Python lines of ``_victims`` are its reference and oracle
  (``tests/engine/test_compiled_preempt.py``), and the DRF and cost checks (``_pays``) are shared.
- A job preempted more than ``MAX_PREEMPTIONS_PER_JOB`` times stops the run with a ``ConfigError`` naming it (a
  livelock: a lookback no longer than the min runtime lets two buckets trade places for ever), instead of
  simulating without end.
- Rounds run after every pass; a search that found nothing is not repeated until the running set, the head
  or the set of preemptible jobs changes (so a team drifting under its share over quiet time is noticed at
  the next event that changes one of those).
"""
from __future__ import annotations

import math

from .backfill.easy import reservation_time
from .config import ConfigError
from .events import P_MINRT
from .jobstate import QUEUED, RUNNING
from .units import INF

# A job preempted this often is in a livelock, not a schedule: with a lookback no longer than the min runtime and
# no checkpoints, two buckets can trade places every min runtime for ever (each run loses its work, simulated
# time grows without end). A real contract (hours) cannot come near it in any horizon a log spans.
MAX_PREEMPTIONS_PER_JOB = 1000


class PreemptState:
    """What preemption keeps across rounds; this module is its only writer (through ``sim.preempting``).

    - ``on``: some job has a contract and ``SimConfig.preemption`` allows preempting (else no round runs);
    - ``victims``: running jobs past their min runtime (the candidates), ``victims_in``: the same per placement
      group of the nodes they hold, ``added``: additions so far (a memo key of fruitless searches);
    - ``burst`` per job (running beyond its tenant's guarantee, with ``quota="guarantee"``), ``burst_att``:
      (job, attempt) of requeued attempts that ran as burst (an output), ``gheld`` per account: guaranteed
      milli-GPUs running;
    - ``qos``/``qos_victims``: per job its QoS and the QoS names it may preempt (None when no pair is set);
    - the memos ``failed_key`` (the last fruitless search) and ``served`` (the served ratios at an instant).
    """

    def __init__(self, sim):
        cfg, n = sim.cfg, sim.n
        self.on = cfg.preemption and any(m < INF for m in sim.min_rt)
        self.victims: set[int] = set()
        self.victims_in: dict = {}
        self.added = 0
        self.burst = [False] * n
        self.burst_att: set = set()
        self.gheld = [0] * len(sim.accounts)
        # QoS preemption (Slurm preempt/qos)
        pairs = cfg.qos_preempts or dict(getattr(sim.budgeting.tree, "qos_preempts", ()) or ())
        self.qos = sim.wl.qos if pairs else None
        self.qos_victims = [pairs.get(q) or None for q in self.qos] if pairs else None
        self.failed_key = None
        self.served = (None, None)
        self.preempted = [0] * n  # times each job was preempted (the livelock bound)


def on_start(sim, j, now, dur) -> None:
    pre = sim.preempting
    if sim.cfg.quota == "guarantee":
        _classify(sim, pre, j, now)
    mrt = sim.min_rt[j]
    if mrt == 0:
        add_victim(sim, j)
    elif mrt < dur:
        sim.push(now + mrt, P_MINRT, (j, sim.attempt[j]))


def on_pin(sim, j, now) -> None:
    """A warm start pinned j running at ``now``: it holds guaranteed capacity or runs as burst, as if started."""
    if sim.cfg.quota == "guarantee":
        _classify(sim, sim.preempting, j, now)


def _classify(sim, pre, j, now) -> None:
    pre.burst[j] = burst = not _within_guarantee(sim, j, now)
    if not burst:
        pre.gheld[sim.acct[j]] += sim.req_g[j]


def add_victim(sim, j) -> None:
    pre = sim.preempting
    pre.victims.add(j)
    pre.added += 1
    groups = sim.pool._node_groups
    for n, *_ in sim.alloc[j]:
        for k in groups[n]:
            pre.victims_in.setdefault(k, set()).add(j)


def on_stop(sim, j) -> None:
    pre = sim.preempting
    if j in pre.victims:
        pre.victims.discard(j)
        groups = sim.pool._node_groups
        for n, *_ in sim.alloc[j]:
            for k in groups[n]:
                pre.victims_in[k].discard(j)
    if sim.cfg.quota == "guarantee" and not pre.burst[j]:
        pre.gheld[sim.acct[j]] -= sim.req_g[j]
        _promote(sim, j)


def on_requeue(sim, j) -> None:
    """j's attempt ends by a requeue: an attempt that ran as burst is remembered as such (an output)."""
    pre = sim.preempting
    if pre.burst[j]:
        pre.burst_att.add((j, sim.attempt[j]))


def _promote(sim, j) -> None:
    """Guaranteed capacity was released: the tenant's running burst jobs move into it, oldest first."""
    ten = sim.budgeting.at(sim.now)
    g_node = _guarantee_node(ten, ten.bucket[sim.accounts[sim.acct[j]]])
    if g_node is None:
        return
    pre = sim.preempting
    burst = sorted((sim.start_seq[v], v) for _, _, v in sim.running_by_end
                   if pre.burst[v] and v != j and _guarantee_node(ten, ten.bucket[sim.accounts[sim.acct[v]]]) == g_node)
    for _, v in burst:
        if _within_guarantee(sim, v, sim.now):
            pre.burst[v] = False
            pre.gheld[sim.acct[v]] += sim.req_g[v]


def on_minrt(sim, j, att, now) -> bool:
    """A running job reached its min runtime: it becomes preemptible (and leaves a draining node)."""
    if sim.status[j] != RUNNING or sim.attempt[j] != att:
        return False
    if sim.health.on_draining_node(j):
        sim.requeue(j, now, "drain")
        return True
    add_victim(sim, j)
    return False  # nothing to re-plan: the preemption round after the (incremental) pass sees the new victim


def _guarantee_node(ten, bucket):
    for i in ten.depth_chain[bucket]:
        if ten.guarantee[i] is not None:
            return i
    return None


def _within_guarantee(sim, j, now) -> bool:
    ten = sim.budgeting.at(now)
    g_node = _guarantee_node(ten, ten.bucket[sim.accounts[sim.acct[j]]])
    if g_node is None:
        return False
    gheld = sim.preempting.gheld
    used = sum(gheld[a] for a in range(len(sim.accounts))
               if g_node in ten.depth_chain[ten.bucket[sim.accounts[a]]])
    return used + sim.req_g[j] <= ten.guarantee[g_node]


def _served(sim, ten, now) -> dict:
    """bucket -> served ratio (1 = exactly its entitled fraction); cached per instant and running set."""
    pre = sim.preempting
    key = (now, sim.version, id(ten))
    if pre.served[0] == key:
        return pre.served[1]
    out = _served_now(sim, ten, now)
    pre.served = (key, out)
    return out


def _served_now(sim, ten, now) -> dict:
    out: dict[int, float] = {}
    if sim.policy.dominant_share:
        held = sim.held_by_bucket(ten)
        tot = sim.capacity
        for b in set(ten.bucket.values()):
            out[b] = _drf_served(held.get(b, (0, 0, 0)), tot, ten.frac[b])
        return out
    usage: dict[int, float] = {}
    for name, u in zip(sim.accounts, sim.ledger.window_all(now)):
        b = ten.bucket[name]
        usage[b] = usage.get(b, 0.0) + u
    total = sum(usage.values())
    for b, u in usage.items():
        share = u / total if total > 0 else 0.0
        out[b] = share / ten.frac[b] if ten.frac[b] > 0 else (INF if share > 0 else 0.0)
    return out


def _drf_served(h, tot, frac: float) -> float:
    """Weighted dominant share of held resources ``h`` (g, c, m) against capacity ``tot``: 1 = its fraction."""
    s = max(h[i] / tot[i] if tot[i] else 0.0 for i in range(3))
    return s / frac if frac > 0 else (INF if s > 0 else 0.0)


def _victims(sim, J, now):
    ten = sim.budgeting.at(now)
    fair = sim.policy.uses_buckets
    served = _served(sim, ten, now) if fair else {}
    th = sim.cfg.preemption_threshold
    bJ = ten.bucket[sim.accounts[sim.acct[J]]]
    sJ = served.get(bJ, 0.0)
    reclaim = sim.cfg.quota == "guarantee" and _within_guarantee(sim, J, now)
    gJ = _guarantee_node(ten, bJ) if reclaim else None
    fair_ok = fair and sJ < 1.0 - th
    elig = sim.eligible(J)
    min_rt, alloc, bucket, accounts, acct = sim.min_rt, sim.alloc, ten.bucket, sim.accounts, sim.acct
    vs, svs, by_share = [], {}, set()
    pre = sim.preempting
    near = pre.victims_in.get(sim.group[J][0], ())  # preemptible jobs holding something on J's nodes
    by_qos = pre.qos_victims[J] if pre.qos_victims is not None else None
    ops = sim.pool.ops
    if ops is not None and not by_qos and not reclaim:
        # the compiled pool's twin of the search below (engine/_nodecore.c): the all-released test, then the
        # candidates in preference order released until J fits, and the victims it needs; the code below stays
        # the reference (QUOTALOOP_ENGINE=python, and QoS pairs or guarantee reclaim)
        sv = [served.get(bucket[name], 0.0) for name in accounts] if fair_ok else None
        ok = [x > 1.0 + th for x in sv] if fair_ok else None
        grp, gang = sim.group[J], sim.gang[J]
        g, c, m = sim.req_g[J], sim.req_c[J], sim.req_m[J]
        if not ops.release_fits(near, min_rt, acct, ok, alloc, elig, grp[2], gang, g, c, m):
            return None
        found = ops.victims(near, min_rt, acct, ok, sv, pre.burst, sim.att_start, alloc, elig, grp[2], gang, g, c, m,
                            float(now), float(sim.cfg.checkpoint_interval_s or 0.0))
        if found is None:
            return None
        need, placement = found
        return _pays(sim, ten, J, now, need, placement, {v for v in need if min_rt[v] != 0})
    for v in near:
        if min_rt[v] == 0:
            vs.append(v)
        elif by_qos and pre.qos[v] in by_qos:
            vs.append(v)
        elif fair_ok or reclaim:
            bv = bucket[accounts[acct[v]]]
            sv = served.get(bv, 0.0)
            burst = reclaim and pre.burst[v] and _guarantee_node(ten, bv) != gJ
            if (fair_ok and sv > 1.0 + th) or burst:
                vs.append(v)
                svs[v] = sv
                if not burst:
                    by_share.add(v)
    if not vs:
        return None
    pool = sim.pool
    grp = sim.group[J]
    gang = sim.gang[J]
    nodes = grp[2] if gang else grp[1]
    g, c, m = sim.req_g[J], sim.req_c[J], sim.req_m[J]
    # releasing more jobs never makes a fit impossible: if J does not fit with every candidate gone, no search
    # through them can succeed (the common case on a busy cluster), so test that once first (in any order)
    fg, fc, fm = list(pool.free_g), list(pool.free_c), list(pool.free_m)
    touched_all = set()
    avail = pool.avail
    for v in vs:
        for n, a, b, d in alloc[v]:
            fg[n] += a
            fc[n] += b
            fm[n] += d
            if n in elig and avail[n]:
                touched_all.add(n)
    if not touched_all or pool.place(nodes if gang else sorted(touched_all), gang, g, c, m,
                                     free=(fg, fc, fm)) is None:
        return None
    ci = sim.cfg.checkpoint_interval_s
    cands = []
    for v in vs:
        unfunded = min_rt[v] == 0
        elapsed = now - sim.att_start[v]
        lost = elapsed - (math.floor(elapsed / ci) * ci if ci else 0.0)
        cands.append((not unfunded, not pre.burst[v], -svs.get(v, 0.0), lost, -sim.att_start[v], v))
    cands.sort()
    fg, fc, fm = list(pool.free_g), list(pool.free_c), list(pool.free_m)
    chosen = []
    placement = None
    for *_, v in cands:
        touched = []
        for n, a, b, d in sim.alloc[v]:
            fg[n] += a
            fc[n] += b
            fm[n] += d
            if n in elig and pool.avail[n]:
                touched.append(n)
        chosen.append(v)
        if not touched:
            continue
        placement = pool.place(nodes if gang else sorted(touched), gang, g, c, m, free=(fg, fc, fm))
        if placement is not None:
            break
    if placement is None:
        return None
    used = {n for n, *_ in placement}
    need = [v for v in chosen if any(n in used for n, *_ in sim.alloc[v])]
    # the preemptor would otherwise start at its reservation: preempt only when the waiting saved pays for the
    # funded work thrown away (``preemption_cost_factor`` x lost resource-seconds; unfunded work is free)
    if not gang:  # drop victims (least preferred first) whose release the placement does not need
        (n0, *_), = placement
        for v in reversed(list(need)):
            rest = [u for u in need if u != v]
            a = pool.free_g[n0] + sum(x[1] for u in rest for x in sim.alloc[u] if x[0] == n0)
            b = pool.free_c[n0] + sum(x[2] for u in rest for x in sim.alloc[u] if x[0] == n0)
            d = pool.free_m[n0] + sum(x[3] for u in rest for x in sim.alloc[u] if x[0] == n0)
            if a >= g and b >= c and d >= m:
                need = rest
    return _pays(sim, ten, J, now, need, placement, by_share)


def _pays(sim, ten, J, now, need, placement, by_share):
    """``(need, placement)`` when preempting ``need`` for J passes DRF's final-share check and pays for itself
    (module docstring), else None."""
    if sim.policy.dominant_share and by_share.intersection(need) and not _final_share_ok(sim, ten, J, need, by_share):
        return None
    factor = sim.cfg.preemption_cost_factor
    if factor > 0:
        k = 1 if sim.capacity[0] > 0 else 2
        ci = sim.cfg.checkpoint_interval_s
        sunk = 0.0
        for v in need:
            if sim.min_rt[v] != 0:
                el = now - sim.att_start[v]
                sunk += (el - (math.floor(el / ci) * ci if ci else 0.0)) * sum(x[k] for x in sim.alloc[v])
        pass_state = sim.pstate
        T = reservation_time(sim, pass_state) if pass_state is not None and pass_state.blocked == J else INF
        gain = (T - now) * (sim.req_g[J] if k == 1 else sim.req_c[J])
        if factor * sunk > gain:
            return None
    return need, placement

def _final_share_ok(sim, ten, J, need, by_share) -> bool:
    """DRF: J's bucket, with J started, is served no more than each bucket losing a job for its share, with
    those jobs stopped (Kueue's "LessThanOrEqualToFinalShare"). DRF's served is the dominant share held now,
    so without it one large job can flip two buckets across their shares, and the victim's bucket preempts back
    once the preemptor has run its min runtime: a ping-pong in which neither job ever finishes. With it every
    such preemption lowers the larger of the two buckets' served, so the sorted served values fall
    lexicographically and preemptions between two events are finitely many."""
    held = {b: list(h) for b, h in sim.held_by_bucket(ten).items()}
    bucket, accounts, acct = ten.bucket, sim.accounts, sim.acct

    def add(j, sign) -> int:
        b = bucket[accounts[acct[j]]]
        h = held.setdefault(b, [0, 0, 0])
        h[0] += sign * sim.req_g[j]
        h[1] += sign * sim.req_c[j]
        h[2] += sign * sim.req_m[j]
        return b

    bJ = add(J, 1)
    losers = {add(v, -1) for v in need if v in by_share}
    for v in need:
        if v not in by_share:
            add(v, -1)
    tot, frac = sim.capacity, ten.frac
    mine = _drf_served(held[bJ], tot, frac[bJ])
    return all(mine <= _drf_served(held[b], tot, frac[b]) + 1e-12 for b in losers)


def rounds(sim, now) -> None:
    """Preempt for the first blocked job while that works, re-running a full pass after each success."""
    pre = sim.preempting
    for _ in range(len(sim.queue) + 1):
        pass_state = sim.pstate
        J = pass_state.blocked if pass_state is not None else None
        if J is None or sim.status[J] != QUEUED or sim.min_rt[J] == 0 or not pre.victims:
            return
        if sim.caps.on and sim.caps.over(J, now):
            return
        if sim.users.on and sim.users.over(J):  # the preemptor obeys its user's limit (a backfilled job of its
            return                              # user may have taken the last slot since J blocked)
        # a search fails again until J's nodes change or a job becomes preemptible (guarantees: any change)
        key = (J, sim.pool.gepoch[sim.group[J][0]], pre.added,
               sim.version if sim.cfg.quota == "guarantee" else 0)
        if pre.failed_key == key:  # nothing changed since the last fruitless search
            return
        found = _victims(sim, J, now)
        if found is None:
            pre.failed_key = key
            return
        victims, placement = found
        sim.counters["preemption_rounds"] += 1
        for v in victims:
            pre.preempted[v] += 1
            if pre.preempted[v] > MAX_PREEMPTIONS_PER_JOB:
                raise ConfigError(
                    f"preemption livelock: job {sim.wl.job_id[v]} was preempted {pre.preempted[v] - 1} times (now by "
                    f"job {sim.wl.job_id[J]}, at t={now:g} s): its run never outlasts its min runtime before another "
                    "bucket takes its place; use a longer lookback than the min runtime, a longer min runtime or a "
                    "checkpoint interval")
            sim.requeue(v, now, "preempt")
        sim.start(J, now, placement)
        sim.dequeue(J)
        sim.replan(now)
