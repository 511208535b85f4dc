"""GPU-time budget trees (DOMAIN.md section 6): parse ``budgets.toml``, validate, map accounts, water-fill.

File format (TOML; every key optional unless marked)::

    cluster = "h100"               # the cluster the budget funds (informational)
    cluster_gpus = 1024            # capacity used to check guarantees (``validate`` may be given it instead)
    unit = "gpu"                   # "gpu" (GPU-hours) or "cpu" (core-hours, a cluster without GPUs); omitted =
                                   # inferred (queries.analytics.budgets.budget_unit): a node list with cores and no
                                   # GPUs -> "cpu". Guarantees and max_gpus stay GPUs (the simulator's quota)

    [min_runtime]                  # per job class default min runtime: seconds or "8h", "30m", "1h30m", "2d"
    training = "8h"
    debug = 0
    default = "1h"                 # classes not listed (optional)

    [qos]                          # Slurm's PreemptType=preempt/qos: a job of QoS `high` may preempt running
    high = { preempts = ["low", "normal"] }   # jobs of these QoS once they have run their min runtime
    #                                (requeued; a victim without a min runtime contract is never preempted)

    [tree.research]                # an org; tables nest org -> group -> team/project (any depth)
    share = 3                      # relative weight among its siblings (default 1; 0 = unfunded, leftovers only)
    guaranteed_gpus = 400          # guarantee (Kubernetes-style min; Hadoop fair-scheduler min share)
    max_gpus = 800                 # borrowing cap
    description = "..."
    [tree.research.vision]         # a group; its teams are [tree.research.vision.TEAM]
    share = 2
    [tree.research.vision.min_runtime]   # per-node override of [min_runtime], inherited by its subtree
    training = "4h"

    [[node]]                       # flat alternative, may be mixed with [tree.*]; names are then global
    name = "ops"                   # a path "org/group" is also accepted via  path = "research/vision"
    parent = "research"            # a [[node]] name or a [tree.*] path; omitted = top level
    share = 1

    [[period]]                     # from `start` on (UTC), these overrides apply; cumulative, strictly sorted
    start = 2026-11-15             # TOML date or datetime (naive = UTC) or an ISO string
    [period.tree.research.vision]  # same shapes as above: override attributes, or add new nodes
    share = 1
    [[period.node]]
    path = "ops"
    share = 2

Invariants:
- Node names are non-empty, contain no ``/``, whitespace or parentheses, are not ``unbudgeted``; sibling names
  are unique case-insensitively (matching is case-insensitive). A node's path is ``org/group/team``.
- ``BudgetTree.versions`` is sorted by start; the first starts at ``None`` (the beginning of history).
- ``resolve(account)`` never loses an account: the deepest node whose path is a ``/``-prefix of it (or whose
  globally unique name is its first component), else ``UNBUDGETED``. Demand resolving to an internal node is
  that node's *direct* bucket ``PATH/(direct)``: a zero-share child that receives only what the named children
  cannot absorb. ``unbudgeted`` is such a bucket at the root.
- Water-filling (``entitlements``) gives every child ``clamp(lam * share, floor, cap)`` with one ``lam`` per
  parent, ``cap`` = the subtree's demand (and ``max_gpus`` x hours), ``floor`` = ``guaranteed_gpus`` x hours
  (the Hadoop Fair Scheduler rule). Subtree caps are computed bottom-up, so what a child cannot use goes to its
  siblings first and only what the whole subtree cannot use goes up. The sum is min(capacity, total demand).
Pure Python + tomllib: no DuckDB, Polars or queries here (the engine imports this).
"""
from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from functools import cached_property

UNBUDGETED = "unbudgeted"
DIRECT = "(direct)"
# Mirrors queries.schema.JOB_CLASSES (the engine may not import queries); tests/queries/analytics/test_budgets.py checks they match.
JOB_CLASSES = ("debug", "interactive", "training", "eval", "dataprep", "batch")
NODE_KEYS = {"share", "guaranteed_gpus", "max_gpus", "min_runtime", "description"}
FLAT_KEYS = NODE_KEYS | {"name", "parent", "path"}
TOP_KEYS = {"cluster", "cluster_gpus", "description", "min_runtime", "qos", "tree", "node", "period", "unit"}
UNITS = ("gpu", "cpu")  # the resource a budget counts: GPU-hours, or core-hours on a cluster without GPUs
PERIOD_KEYS = {"start", "description", "tree", "node"}
_NAME = re.compile(r"[^\s/()]+")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


class BudgetError(ValueError):
    """A bad budget file: ``str`` is ``FILE:LINE: key.path: message`` (line when it can be located)."""

    def __init__(self, message: str, key: str | None = None, line: int | None = None, source: str | None = None):
        self.key, self.line, self.source, self.reason = key, line, source, message
        where = ":".join(str(x) for x in (source, line) if x)
        super().__init__("".join((f"{where}: " if where else "", f"{key}: " if key else "", message)))


@dataclass(frozen=True)
class BudgetNode:
    name: str
    path: str
    share: float = 1.0
    guaranteed_gpus: float | None = None
    max_gpus: float | None = None
    min_runtime_s: tuple[tuple[str, float], ...] = ()
    description: str = ""
    children: tuple["BudgetNode", ...] = ()

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def depth(self) -> int:
        return self.path.count("/") + 1 if self.path else 0

    def walk(self):
        """This node and its subtree, pre-order (parents before children, file order)."""
        yield self
        for child in self.children:
            yield from child.walk()

    @cached_property
    def index(self) -> dict[str, "BudgetNode"]:
        return {n.path: n for n in self.walk()}

    @cached_property
    def _by_key(self) -> tuple[dict, dict]:
        kids = {(n.path, c.name.casefold()): c for n in self.walk() for c in n.children}
        names: dict[str, list[BudgetNode]] = {}
        for n in self.walk():
            if n.path:
                names.setdefault(n.name.casefold(), []).append(n)
        return kids, names


@dataclass(frozen=True)
class BudgetVersion:
    start: dt.datetime | None
    root: BudgetNode


@dataclass(frozen=True)
class BudgetTree:
    versions: tuple[BudgetVersion, ...]
    min_runtime_s: tuple[tuple[str, float], ...] = ()
    cluster_gpus: float | None = None
    cluster: str | None = None
    source: str = ""
    qos_preempts: tuple[tuple[str, tuple[str, ...]], ...] = ()   # [qos]: (QoS, QoS it may preempt), sorted
    unit: str | None = None  # "gpu" | "cpu"; None = inferred from the cluster (queries.analytics.budgets.budget_unit)

    def at(self, when: dt.datetime | None = None) -> BudgetNode:
        """The root in force at ``when`` (UTC); ``None`` = the latest version."""
        if when is None:
            return self.versions[-1].root
        when = _utc(when)
        return [v for v in self.versions if v.start is None or v.start <= when][-1].root

    def segments(self, start: dt.datetime, end: dt.datetime) -> list[tuple[dt.datetime, dt.datetime, BudgetNode]]:
        """[start, end) cut at effective dates: (seg_start, seg_end, root in force)."""
        start, end = _utc(start), _utc(end)
        cuts = [start] + [v.start for v in self.versions if v.start and start < v.start < end] + [end]
        return [(a, b, self.at(a)) for a, b in zip(cuts, cuts[1:]) if b > a]

    def resolve(self, account: str | None, when: dt.datetime | None = None) -> str:
        return resolve(self.at(when), account)

    def bucket(self, account: str | None, when: dt.datetime | None = None) -> str:
        return bucket(self.at(when), account)

    def min_runtime(self, job_class: str | None, account: str | None = None,
                    when: dt.datetime | None = None) -> float | None:
        """Seconds: the deepest ``min_runtime`` table on the account's path naming the class (or ``default``),
        then the top-level ``[min_runtime]``; None when no table names it (no contract: never preempted, the
        meaning ``engine.min_runtime`` gives it; 0 is a contract, preemptible at once)."""
        root = self.at(when)
        path = resolve(root, account)
        chain = [] if path == UNBUDGETED else [root.index["/".join(path.split("/")[:i])] for i in
                                                range(path.count("/") + 1, 0, -1)]
        for table in [dict(n.min_runtime_s) for n in chain] + [dict(self.min_runtime_s)]:
            for key in (job_class, "default"):
                if key in table:
                    return table[key]
        return None


# ------------------------------------------------------------------------------------------ account mapping
def resolve(root: BudgetNode, account: str | None) -> str:
    """Deepest node path matching ``account`` (``/``-prefix, case-insensitive), else ``UNBUDGETED``."""
    parts = [p for p in (account or "").strip().split("/") if p]
    kids, names = root._by_key
    node = root
    for i, part in enumerate(parts):
        child = kids.get((node.path, part.casefold()))
        if child is None and i == 0 and len(names.get(part.casefold(), ())) == 1:
            child = names[part.casefold()][0]  # a bare Slurm account name, unique in the tree
        if child is None:
            break
        node = child
    return node.path or UNBUDGETED


def bucket(root: BudgetNode, account: str | None) -> str:
    """The demand bucket of ``account``: a leaf path, ``PATH/(direct)`` for an internal node, or ``UNBUDGETED``."""
    path = resolve(root, account)
    return path if path == UNBUDGETED or root.index[path].is_leaf else f"{path}/{DIRECT}"


def frontier(root: BudgetNode, level="leaf") -> list[tuple[str, str, int]]:
    """(key, kind, depth) rows that partition demand at ``level``: "leaf" or a depth (1 = top of the tree).

    A node at that depth stands for its subtree; shallower leaves stand for themselves; shallower internal
    nodes add a "direct" row for demand naming them but none of their children; ``UNBUDGETED`` comes last.
    """
    if level != "leaf" and (not isinstance(level, int) or level < 1):
        raise ValueError(f"level must be 'leaf' or a depth >= 1, got {level!r}")
    rows: list[tuple[str, str, int]] = []

    def walk(node):
        for child in node.children:
            if child.is_leaf or (level != "leaf" and child.depth >= level):
                rows.append((child.path, "node", child.depth))
            else:
                walk(child)
                rows.append((f"{child.path}/{DIRECT}", "direct", child.depth + 1))

    walk(root)
    return rows + [(UNBUDGETED, "unbudgeted", 0)]


def ancestors(key: str) -> list[str]:
    """``key`` and every node path above it (``a/b/(direct)`` -> itself, ``a/b``, ``a``)."""
    if key == UNBUDGETED:
        return [key]
    parts = key.split("/")
    return [key] + ["/".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


# ------------------------------------------------------------------------------------------ entitlements
def water_fill(amount: float, weights, floors, caps) -> list[float]:
    """Split ``amount``: x_i = clamp(lam * w_i, min(floor_i, cap_i), cap_i), sum x = min(amount, sum cap).

    Floors above ``amount`` are scaled down proportionally (oversold guarantees). Zero-weight items keep their
    floor while the weighted ones fill, then share what is left max-min fairly (equal weights).
    """
    n = len(weights)
    lo = [min(f, c) for f, c in zip(floors, caps)]
    total_lo = sum(lo)
    if total_lo >= amount:
        return [amount * v / total_lo if total_lo > 0 else 0.0 for v in lo]
    pos = [i for i in range(n) if weights[i] > 0 and caps[i] > lo[i]]
    rest = [i for i in range(n) if weights[i] <= 0 and caps[i] > lo[i]]
    x = list(lo)

    def f(lam: float) -> float:
        return total_lo + sum(min(max(lam * weights[i], lo[i]), caps[i]) - lo[i] for i in pos)

    full = total_lo + sum(caps[i] - lo[i] for i in pos)
    if amount >= full:
        for i in pos:
            x[i] = caps[i]
        if rest and amount > full:
            extra = water_fill(amount - full, [1.0] * len(rest), [0.0] * len(rest), [caps[i] - lo[i] for i in rest])
            for i, e in zip(rest, extra):
                x[i] += e
        return x
    points = sorted({lo[i] / weights[i] for i in pos} | {caps[i] / weights[i] for i in pos if math.isfinite(caps[i])})
    lam_lo, f_lo = 0.0, total_lo
    for p in points:
        fp = f(p)
        if fp >= amount:
            lam = lam_lo + (amount - f_lo) * (p - lam_lo) / (fp - f_lo)
            break
        lam_lo, f_lo = p, fp
    else:  # past the last finite breakpoint only uncapped items still grow
        lam = lam_lo + (amount - f_lo) / sum(weights[i] for i in pos if not math.isfinite(caps[i]))
    for i in pos:
        x[i] = min(max(lam * weights[i], lo[i]), caps[i])
    return x


def _root(tree, when) -> BudgetNode:
    return tree.at(when) if isinstance(tree, BudgetTree) else tree


def entitlements(tree: BudgetTree | BudgetNode, capacity_gpu_hours: float, demand: dict[str, float], *,
                 when: dt.datetime | None = None, window_hours: float | None = None) -> dict[str, float]:
    """Entitled GPU-hours per node path (internal nodes = their subtree), direct bucket with demand, and unbudgeted.

    ``demand`` maps accounts or node paths to GPU-hours (keys are bucketed with ``bucket``). With
    ``window_hours`` the guarantees (floors) and ``max_gpus`` (caps) apply as GPUs x hours.
    """
    root = _root(tree, when)
    need: dict[str, float] = {}
    for key, value in demand.items():
        owner = root.index.get(key[: -len(DIRECT) - 1]) if key.endswith("/" + DIRECT) else None
        b = key if owner is not None and not owner.is_leaf else bucket(root, key)
        need[b] = need.get(b, 0.0) + max(float(value), 0.0)
    cap: dict[str, float] = {}

    def direct_key(node):
        return (node.path + "/" + DIRECT) if node.path else UNBUDGETED

    def fill_caps(node) -> float:
        own = need.get(node.path, 0.0) if node.is_leaf and node.path else need.get(direct_key(node), 0.0)
        total = own + sum(fill_caps(c) for c in node.children)
        if window_hours is not None and node.max_gpus is not None:
            total = min(total, node.max_gpus * window_hours)
        cap[node.path] = total
        return total

    out: dict[str, float] = {UNBUDGETED: 0.0}

    def split(node, amount):
        if node.path:
            out[node.path] = amount
        if node.is_leaf:
            return
        kids = list(node.children)
        floors = [(c.guaranteed_gpus or 0.0) * window_hours if window_hours is not None else 0.0 for c in kids]
        weights, caps = [c.share for c in kids], [cap[c.path] for c in kids]
        own = need.get(direct_key(node), 0.0)
        xs = water_fill(amount, weights + [0.0], floors + [0.0], caps + [own])
        for child, x in zip(kids, xs):
            split(child, x)
        if own > 0 or not node.path:
            out[direct_key(node)] = xs[-1]

    fill_caps(root)
    split(root, float(capacity_gpu_hours))
    return out


def static_shares(tree: BudgetTree | BudgetNode, when: dt.datetime | None = None) -> dict[str, float]:
    """Each node's fraction of the cluster: the product of share / sum(sibling shares) down its path."""
    out: dict[str, float] = {}

    def down(node, frac):
        total = sum(c.share for c in node.children)
        for c in node.children:
            out[c.path] = frac * c.share / total if total > 0 else 0.0
            down(c, out[c.path])

    down(_root(tree, when), 1.0)
    return out


def static_entitlements(tree, capacity_gpu_hours: float, when: dt.datetime | None = None) -> dict[str, float]:
    """share x capacity with no redistribution (a manager's "my 35 %"); unbudgeted gets 0."""
    return {p: f * capacity_gpu_hours for p, f in static_shares(tree, when).items()} | {UNBUDGETED: 0.0}


# ------------------------------------------------------------------------------------------ validation
def _committed(node: BudgetNode) -> dict[str, float]:
    """The outermost guarantees under ``node``: a node's own, else its children's (a guarantee set deep in
    the tree under unguaranteed parents still claims cluster capacity)."""
    out: dict[str, float] = {}
    for child in node.children:
        if child.guaranteed_gpus is not None:
            out[child.path] = child.guaranteed_gpus
        else:
            out.update(_committed(child))
    return {p: g for p, g in out.items() if g > 0}


def validate(tree: BudgetTree, cluster_gpus: float | None = None, accounts=None) -> list[str]:
    """Raise ``BudgetError`` for guarantees above capacity; return warnings (nodes without log accounts, ...)."""
    capacity = cluster_gpus if cluster_gpus is not None else tree.cluster_gpus
    warnings: list[str] = []
    for i, version in enumerate(tree.versions):
        key = "tree" if i == 0 else f"period[{i - 1}].tree"
        committed = _committed(version.root)
        total = sum(committed.values())
        if capacity is not None and total > capacity:
            names = ", ".join(f"{p}={g:g}" for p, g in committed.items())
            raise BudgetError(f"guaranteed_gpus sum to {total:g} GPUs, above the cluster's {capacity:g} GPUs "
                              f"(oversold quota): {names}", key=key, source=tree.source)
        if capacity is not None:
            warnings += [f"{key}: {n.path}: max_gpus {n.max_gpus:g} is above the cluster's {capacity:g} GPUs"
                         for n in version.root.walk() if n.max_gpus is not None and n.max_gpus > capacity]
    if capacity is None and any(_committed(v.root) for v in tree.versions):  # nothing to check without guarantees
        warnings.append("cluster capacity unknown (cluster_gpus): guarantees were not checked against it")
    if accounts is not None:
        accounts = sorted({a or "" for a in accounts})
        seen: set[str] = set()
        for version in tree.versions:
            used = {resolve(version.root, a) for a in accounts}
            used |= {"/".join(p.split("/")[:k]) for p in used for k in range(1, p.count("/") + 1)}
            stack = list(version.root.children)
            while stack:
                n = stack.pop(0)
                if n.path not in used and n.path not in seen:
                    seen.add(n.path)
                    warnings.append(f"tree node {n.path} has no account in the logs")
                elif n.path in used:
                    stack.extend(n.children)
        lost = [a for a in accounts if tree.resolve(a) == UNBUDGETED]
        if lost:
            more = f" (+{len(lost) - 10} more)" if len(lost) > 10 else ""
            warnings.append(f"{len(lost)} account(s) not in the tree count as '{UNBUDGETED}': "
                            + ", ".join(repr(a) if a else "(jobs without an account)" for a in lost[:10]) + more)
    return warnings


def _utc(when) -> dt.datetime:
    if isinstance(when, str):
        when = dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
    if not isinstance(when, dt.datetime) and isinstance(when, dt.date):
        when = dt.datetime(when.year, when.month, when.day)
    if not isinstance(when, dt.datetime):
        raise TypeError(f"not a date/datetime: {when!r}")
    return when.replace(tzinfo=dt.timezone.utc) if when.tzinfo is None else when.astimezone(dt.timezone.utc)
