"""Tenants (budget buckets) and their usage over a sliding window: the state fair share and DRF order by.

Budgets come as a ``budgets.BudgetTree`` (effective-dated versions), a ``BudgetNode`` root, or a plain
dict ``{"org/team": share | {"share": s, "guaranteed_gpus": g, "max_gpus": x}}``; none = every account is
its own top-level tenant with share 1.

Invariants:
- Every job maps to exactly one bucket per budget version (``budgets.bucket``: a leaf path,
  ``PATH/(direct)`` or ``unbudgeted``); direct and unbudgeted buckets are zero-share leaves, served only
  after their positive-share siblings (never lost).
- ``frac[node]`` = product of share / sum(sibling shares) down the path; siblings' fractions sum to their
  parent's (or 0 when all siblings have share 0).
- ``Ledger.window(a, t)`` = charged usage (resource-seconds) of account ``a`` within ``[t - L, t]``, exact
  for piecewise-constant rates; queries must come at non-decreasing ``t`` (a moving pointer per account).
"""
from __future__ import annotations

import datetime as dt
import math

from . import budgets as bt
from . import fsorder
from .config import ConfigError


def to_tree(budgets):
    """Normalise the accepted budget forms to a ``BudgetTree`` (or ``None``)."""
    if budgets is None or isinstance(budgets, bt.BudgetTree):
        return budgets
    if isinstance(budgets, bt.BudgetNode):
        return bt.BudgetTree((bt.BudgetVersion(None, budgets),))
    if not isinstance(budgets, dict):

        raise ConfigError(f"budgets: expected a BudgetTree or a dict path -> share, got {type(budgets).__name__}")
    return bt.BudgetTree((bt.BudgetVersion(None, _root_from_dict(budgets)),))


def gpu_cap(budgets):
    """``account -> milli-GPUs`` (the largest request any budget version lets the account start under the
    ``max_gpus`` caps on its path; None = uncapped), or None when no node has a cap."""
    tree = to_tree(budgets)
    if tree is None or not any(n.max_gpus is not None for v in tree.versions for n in v.root.walk()):
        return None

    def cap(account):
        best = 0.0
        for v in tree.versions:
            root = v.root
            path = bt.resolve(root, "(none)" if account is None else account)
            if path == bt.UNBUDGETED:
                return None
            parts = path.split("/")
            caps = [root.index["/".join(parts[:i])].max_gpus for i in range(1, len(parts) + 1)]
            caps = [c for c in caps if c is not None]
            if not caps:
                return None
            best = max(best, min(caps) * 1000.0)
        return best

    return cap


def _root_from_dict(spec: dict) -> bt.BudgetNode:

    attrs: dict[str, dict] = {}
    for path, v in spec.items():
        parts = [p for p in str(path).split("/") if p]
        if not parts:
            raise ConfigError(f"budgets: empty account path {path!r}")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            v = {"share": float(v)}
        if not isinstance(v, dict):
            raise ConfigError(f"budgets.{path}: expected a share or a table, got {v!r}")
        unknown = set(v) - {"share", "guaranteed_gpus", "max_gpus"}
        if unknown:
            raise ConfigError(f"budgets.{path}: unknown key(s) {sorted(unknown)}")
        for key, val in v.items():
            if not isinstance(val, (int, float)) or isinstance(val, bool) or val < 0:
                raise ConfigError(f"budgets.{path}.{key}: must be a number >= 0, got {val!r}")
        for i in range(1, len(parts)):
            attrs.setdefault("/".join(parts[:i]), {})
        attrs.setdefault("/".join(parts), {}).update({k: float(x) for k, x in v.items()})

    def build(path: str) -> bt.BudgetNode:
        prefix = path + "/" if path else ""
        kids = sorted(p for p in attrs if p.startswith(prefix) and "/" not in p[len(prefix):])
        a = attrs.get(path, {})
        return bt.BudgetNode(name=path.rsplit("/", 1)[-1], path=path, share=a.get("share", 1.0),
                             guaranteed_gpus=a.get("guaranteed_gpus"), max_gpus=a.get("max_gpus"),
                             children=tuple(build(k) for k in kids))

    return build("")


class Tenants:
    """One budget version as a flat tree of buckets: parent links, fractions, guarantees, caps."""

    def __init__(self, root, accounts):
        self.paths: list[str] = []
        self.parent: list[int] = []
        self.children: list[list[int]] = []
        self.frac: list[float] = []
        self.guarantee: list[float | None] = []   # milli-GPUs
        self.cap: list[float | None] = []
        self.index: dict[str, int] = {}
        if root is None:
            self._add("", -1, 1.0, None, None)
            for a in sorted(set(accounts)):
                self._add(a, 0, 1.0, None, None)
            self.bucket = {a: self.index[a] for a in set(accounts)}
        else:
            self._walk(root, -1, 1.0)
            self.bucket = {}
            for a in set(accounts):
                b = bt.bucket(root, a)
                if b not in self.index:  # direct or unbudgeted bucket: a zero-share leaf
                    parent = "" if b == bt.UNBUDGETED else b.rsplit("/", 1)[0]
                    self._add(b, self.index[parent], 0.0, None, None)
                self.bucket[a] = self.index[b]
        self.depth_chain = [self._chain(i) for i in range(len(self.paths))]
        self.leaves = [i for i in range(len(self.paths)) if not self.children[i]]
        # borrowing caps on each bucket's path, and the milli-GPUs running under every node (kept by the core)
        self.capped_chain = [tuple(i for i in chain if self.cap[i] is not None) for chain in self.depth_chain]
        self.cap_floor = [None if c is None else math.floor(c) for c in self.cap]  # integer milli-GPU caps
        self.held_g = [0] * len(self.paths)

    def _add(self, path, parent, frac, guarantee, cap) -> int:
        i = len(self.paths)
        self.paths.append(path)
        self.parent.append(parent)
        self.children.append([])
        self.frac.append(frac)
        self.guarantee.append(guarantee)
        self.cap.append(cap)
        self.index[path] = i
        if parent >= 0:
            self.children[parent].append(i)
        return i

    def _walk(self, node, parent, frac) -> None:
        def milli_or_none(v):
            return None if v is None else v * 1000.0

        i = self._add(node.path, parent, frac, milli_or_none(node.guaranteed_gpus), milli_or_none(node.max_gpus))
        total = sum(c.share for c in node.children)
        for c in node.children:
            self._walk(c, i, frac * c.share / total if total > 0 else 0.0)

    def _chain(self, i) -> tuple:
        out = []
        while i > 0:
            out.append(i)
            i = self.parent[i]
        return tuple(out)  # bucket first, up to (excluding) the root


class Budgeting:
    """All versions of the budget tree on the simulation clock; ``at(t)`` gives the ``Tenants`` in force."""

    def __init__(self, budgets, accounts, origin_us: int | None):
        self.tree = to_tree(budgets)
        self._k = 0
        accounts = list(accounts)
        if self.tree is None:
            self.starts, self.versions = [float("-inf")], [Tenants(None, accounts)]
            return
        self.starts, self.versions = [], []
        for v in self.tree.versions:
            if v.start is None:
                t = float("-inf")
            else:
                t = (v.start - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)).total_seconds()
                t = t - origin_us / 1e6 if origin_us is not None else t
            self.starts.append(t)
            self.versions.append(Tenants(v.root, accounts))

    def at(self, t: float) -> Tenants:
        if len(self.versions) == 1:
            return self.versions[0]
        starts, k = self.starts, self._k  # the clock mostly moves forward: start from the last answer
        if starts[k] > t:
            k = 0
        while k + 1 < len(starts) and starts[k + 1] <= t:
            k += 1
        self._k = k
        return self.versions[k]


class Ledger:
    """Charged usage per account as a piecewise-linear cumulative function."""

    def __init__(self, n_accounts: int, lookback_s: float):
        self.L = lookback_s
        self.rate = [0.0] * n_accounts
        self.cum = [0.0] * n_accounts
        self.last = [0.0] * n_accounts
        self.hist = [[(float("-inf"), 0.0, 0.0)] for _ in range(n_accounts)]  # (t, cum at t, rate after t)
        self.ptr = [0] * n_accounts
        self._all_t, self._all = None, []
        self._compiled = fsorder.routines()  # ``window_all``'s loop in C (the loop below is its oracle)

    def change(self, a: int, t: float, delta_rate: float) -> None:
        self.cum[a] += self.rate[a] * (t - self.last[a])
        self.last[a] = t
        self.rate[a] += delta_rate
        h = self.hist[a]
        if h[-1][0] == t:
            h[-1] = (t, self.cum[a], self.rate[a])
        else:
            h.append((t, self.cum[a], self.rate[a]))

    def total(self, a: int, t: float) -> float:
        return self.cum[a] + self.rate[a] * (t - self.last[a])

    def window_all(self, t: float) -> list:
        """``window`` of every account at t (cached per instant: starts and stops at t do not change it)."""
        if self._all_t != t and self._compiled is not None:
            self._all = self._compiled.window_all(self.hist, self.cum, self.rate, self.last, self.ptr, t, self.L)
            self._all_t = t
        elif self._all_t != t:
            # ``window`` inlined for every account: this runs at every scheduling instant
            lo = t - self.L
            out = []
            ninf = float("-inf")
            ptr = self.ptr
            for a, (h, c, r, last_t) in enumerate(zip(self.hist, self.cum, self.rate, self.last)):
                k = ptr[a]
                top = len(h) - 1
                while k < top and h[k + 1][0] <= lo:
                    k += 1
                ptr[a] = k
                t0, c0, r0 = h[k]
                out.append(c + r * (t - last_t) - (c0 + r0 * (lo - t0) if t0 > ninf else 0.0))
            self._all = out
            self._all_t = t
        return self._all

    def window(self, a: int, t: float) -> float:
        lo = t - self.L
        h = self.hist[a]
        k = self.ptr[a]
        while k + 1 < len(h) and h[k + 1][0] <= lo:
            k += 1
        self.ptr[a] = k
        t0, c0, r0 = h[k]
        before = c0 + r0 * (lo - t0) if t0 > float("-inf") else 0.0
        return self.total(a, t) - before
