"""The Fair share page's "custom mix" scenario: the parameters, their engine config, and comparison frames.

The named scenario kinds (shares, min runtime, right-size, quota loop, backfill) and the "why does my team get
less?" explanation live in ``dashboard.scenarios``.

Pure (no Streamlit, no queries): ``dashboard.data`` caches the runs; tests call these directly.

Invariants:
- ``Scenario`` is frozen and hashable with a canonical form (sorted tuples), so equal settings hit the same cached
  run however the UI produced them; ``Scenario()`` with no overrides *is* the baseline.
- ``apply_budget_overrides`` never mutates the tree it gets; overrides apply to every effective-dated version
  (a manager's change is replayed over the whole history), paths the tree does not know are ignored and listed.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import polars as pl

import engine
from engine import budgets as bt
from engine import min_runtime

CLASSES = bt.JOB_CLASSES
CHECKPOINTS = {0: "none", 900: "15 min", 1800: "30 min", 3600: "1 hour", 7200: "2 hours", 14400: "4 hours"}


@dataclass(frozen=True)
class Scenario:
    policy: str = "fairshare"
    backfill: str = "easy"
    shares: tuple = ()            # ((budget path, share), ...) overrides
    guaranteed: tuple = ()        # ((budget path, GPUs), ...) overrides
    min_runtime_s: tuple = ()     # ((job class, seconds | None = no contract), ...) overrides (engine.min_runtime)
    checkpoint_interval_s: float = 0.0
    seed: int = 0

    @classmethod
    def make(cls, *, shares: dict | None = None, guaranteed: dict | None = None, min_runtime_s: dict | None = None,
             **kw) -> "Scenario":
        canon = lambda d: tuple(sorted((str(k), None if v is None else float(v))  # noqa: E731
                                       for k, v in (d or {}).items()))
        return cls(shares=canon(shares), guaranteed=canon(guaranteed), min_runtime_s=canon(min_runtime_s), **kw)

    def describe(self) -> str:
        parts = [f"policy {self.policy}", f"backfill {self.backfill}"]
        if self.shares:
            parts.append("shares " + ", ".join(f"{p.rsplit('/', 1)[-1]}={s:g}" for p, s in self.shares))
        if self.guaranteed:
            parts.append("guaranteed " + ", ".join(f"{p.rsplit('/', 1)[-1]}={g:g} GPUs" for p, g in self.guaranteed))
        if self.min_runtime_s:
            parts.append("min runtime " + ", ".join(f"{c} {'none' if s is None else f'{s / 3600:g} h'}"
                                                    for c, s in self.min_runtime_s))
        if self.checkpoint_interval_s:
            parts.append(f"checkpoint every {CHECKPOINTS.get(int(self.checkpoint_interval_s), self.checkpoint_interval_s)}")
        return "; ".join(parts)


def budget_nodes(budgets) -> list[dict]:
    """Rows (path, name, depth, share, guaranteed_gpus, is_leaf) of the latest version, pre-order."""
    root = _root(budgets)
    if root is None:
        return []
    return [dict(path=n.path, name=n.name, depth=n.depth, share=n.share, guaranteed_gpus=n.guaranteed_gpus,
                 is_leaf=n.is_leaf) for n in root.walk() if n.path]


def slider_groups(nodes: list[dict]) -> list[tuple[str, list[dict]]]:
    """(parent path, children) for every budget node with two or more children, pre-order.

    A lone child's share means nothing (it gets all of its parent), so such levels get no sliders; for
    ``acme -> {research, product, platform} -> teams`` this gives the groups first, then each group's teams."""
    kids: dict[str, list[dict]] = {}
    for n in nodes:
        parent = n["path"].rsplit("/", 1)[0] if "/" in n["path"] else ""
        kids.setdefault(parent, []).append(n)
    order = [""] + [n["path"] for n in nodes]
    return [(p, kids[p]) for p in order if len(kids.get(p, [])) >= 2]


def _root(budgets):
    if budgets is None:
        return None
    if isinstance(budgets, bt.BudgetTree):
        return budgets.at(None)
    if isinstance(budgets, bt.BudgetNode):
        return budgets
    from engine.tenants import to_tree

    return to_tree(budgets).at(None)


def baseline_min_runtime_s(budgets, job_class: str) -> float | None:
    """The min runtime (seconds) the budget file gives a class at the top of the tree, by the engine's resolver
    (``engine.min_runtime``): None when no table names it (no contract: the baseline never preempts it)."""
    return min_runtime.resolve(job_class, None, tree=budgets if isinstance(budgets, bt.BudgetTree) else None)


def overrides(baseline: dict, chosen: dict, tol: float = 1e-9) -> dict:
    """Only the entries of ``chosen`` that differ from ``baseline`` (keeps equal scenarios equal); a key the
    baseline lacks counts as 0. None (a min runtime's "no contract") equals only None: it is not 0."""
    def differs(v, b) -> bool:
        if v is None or b is None:
            return (v is None) != (b is None)
        return abs(float(v) - float(b)) > tol

    return {k: v for k, v in chosen.items() if differs(v, baseline.get(k, 0.0))}


def occupancy_series(result, bucket_s: float = 3600.0, start=None, end=None, resource: str = "gpus") -> pl.DataFrame:
    """GPUs (``resource="cpus"``: CPU cores) allocated per bucket from a run's node x time timeline: t and the
    resource's column (mean over the bucket).

    Buckets tile [start, end) (default: the timeline's first start to its last end) and none begins at ``end``:
    a bucket starting at the window's end would hold nothing and draw a drop to 0 that reads as "the cluster
    emptied". A last bucket cut short by ``end`` is the mean over its own length, so sum(gpus x bucket length)
    is the allocated GPU-hours."""
    tl = result.timeline.filter(pl.col("end") > pl.col("start")).select("start", "end", pl.col(resource).alias("gpus"))
    if tl.is_empty():
        return pl.DataFrame(schema={"t": pl.Datetime("us", "UTC"), resource: pl.Float64})
    us = int(bucket_s * 1e6)
    t0 = start if start is not None else tl["start"].min()
    t1 = end if end is not None else tl["end"].max()
    edges = pl.datetime_range(t0, t1, interval=f"{us}us", eager=True, time_zone="UTC", closed="left")
    grid = pl.DataFrame({"t": edges}).with_columns(
        pl.min_horizontal(pl.col("t") + pl.duration(microseconds=us), pl.lit(t1, dtype=pl.Datetime("us", "UTC")))
        .alias("t_end"))
    # exact overlap of every allocation interval with every bucket it touches (piecewise-constant sum)
    joined = grid.join_where(tl.select("start", "end", "gpus"), pl.col("start") < pl.col("t_end"),
                             pl.col("end") > pl.col("t"))
    over = joined.with_columns(
        ((pl.min_horizontal("end", "t_end") - pl.max_horizontal("start", "t")).dt.total_microseconds()
         / (pl.col("t_end") - pl.col("t")).dt.total_microseconds() * pl.col("gpus")).alias("g"))
    return grid.join(over.group_by("t").agg(pl.col("g").sum().alias(resource)), on="t", how="left") \
        .select("t", pl.col(resource).fill_null(0.0)).sort("t")


def default_budgets(accounts: list[str]) -> dict:
    """Without a budget file: every leaf account gets share 1 (intermediate nodes share 1 too)."""
    leaves = [a for a in accounts if a and not any(b.startswith(a + "/") for b in accounts)]
    return {a: 1.0 for a in sorted(leaves)}


def apply_budget_overrides(budgets, shares: dict, guaranteed: dict):
    """A copy of ``budgets`` (BudgetTree, BudgetNode or dict) with the given shares / guarantees replaced."""
    if not shares and not guaranteed:
        return budgets
    if isinstance(budgets, dict):
        out = {k: (dict(v) if isinstance(v, dict) else {"share": float(v)}) for k, v in budgets.items()}
        for path, s in shares.items():
            out.setdefault(path, {})["share"] = float(s)
        for path, g in guaranteed.items():
            out.setdefault(path, {})["guaranteed_gpus"] = float(g)
        return out

    def patch(node: bt.BudgetNode) -> bt.BudgetNode:
        kids = tuple(patch(c) for c in node.children)
        changes: dict = {"children": kids}
        if node.path in shares:
            changes["share"] = float(shares[node.path])
        if node.path in guaranteed:
            changes["guaranteed_gpus"] = float(guaranteed[node.path]) or None
        return dataclasses.replace(node, **changes)

    if isinstance(budgets, bt.BudgetNode):
        return patch(budgets)
    versions = tuple(dataclasses.replace(v, root=patch(v.root)) for v in budgets.versions)
    return dataclasses.replace(budgets, versions=versions)


def sim_config(scn: Scenario, budgets) -> "engine.SimConfig":
    """The engine configuration of a scenario on top of the baseline budgets."""
    tree = apply_budget_overrides(budgets, dict(scn.shares), dict(scn.guaranteed))
    quota = "guarantee" if any(g > 0 for _, g in scn.guaranteed) or _has_guarantees(tree) else "none"
    return engine.SimConfig(
        policy=scn.policy, backfill=scn.backfill, budgets=tree,
        min_runtime_by_class=dict(scn.min_runtime_s),
        checkpoint_interval_s=scn.checkpoint_interval_s or None, quota=quota, seed=scn.seed,
    )


def _has_guarantees(budgets) -> bool:
    root = _root(budgets)
    return root is not None and any((n.guaranteed_gpus or 0) > 0 for n in root.walk())


# ------------------------------------------------------------------ comparison frames
def attainment_frame(base_metrics: dict, scen_metrics: dict) -> pl.DataFrame:
    """Per budget bucket: entitled / demanded / received GPU-hours and attainment, baseline vs scenario."""
    a = (base_metrics.get("attainment") or {}).get("teams") or {}
    b = (scen_metrics.get("attainment") or {}).get("teams") or {}
    rows = []
    for team in sorted(set(a) | set(b)):
        x, y = a.get(team, {}), b.get(team, {})
        rows.append(dict(team=team, baseline=x.get("attainment"), scenario=y.get("attainment"),
                         entitled_baseline_h=x.get("entitled_hours"), entitled_scenario_h=y.get("entitled_hours"),
                         demanded_h=y.get("demanded_hours", x.get("demanded_hours")),
                         received_baseline_h=x.get("received_hours"), received_scenario_h=y.get("received_hours")))
    schema = {"team": pl.String, "baseline": pl.Float64, "scenario": pl.Float64, "entitled_baseline_h": pl.Float64,
              "entitled_scenario_h": pl.Float64, "demanded_h": pl.Float64, "received_baseline_h": pl.Float64,
              "received_scenario_h": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def waits_frame(base_metrics: dict, scen_metrics: dict, quantile: str = "p90") -> pl.DataFrame:
    """Per job class: the wait quantile in hours, baseline vs scenario."""
    a = base_metrics.get("wait_s_by_class") or {}
    b = scen_metrics.get("wait_s_by_class") or {}
    rows = [dict(job_class=c, baseline=_h((a.get(c) or {}).get(quantile)), scenario=_h((b.get(c) or {}).get(quantile)))
            for c in sorted(set(a) | set(b))]
    return pl.DataFrame(rows, schema={"job_class": pl.String, "baseline": pl.Float64, "scenario": pl.Float64})


def _h(seconds):
    return None if seconds is None else seconds / 3600.0


# (metric key in engine.compare, label, kind, +1 when higher is better / -1 when lower is / 0 neutral)
HEADLINE = [
    ("occupancy", "Occupancy", "pct", 1), ("utilisation", "Useful utilisation", "pct", 1),
    ("attainment.mean", "Mean attainment", "pct", 1), ("attainment.worst", "Worst team's attainment", "pct", 1),
    ("attainment.teams_at_95pct", "Teams at ≥ 95 %", "int", 1), ("wait_s.p50", "Median wait", "dur", -1),
    ("wait_s.p90", "p90 wait", "dur", -1), ("preemptions", "Preemptions", "int", -1),
    ("lost_gpu_hours", "Lost GPU-hours", "num", -1), ("fragmentation_gpu_hours", "Stranded GPU-hours", "num", -1),
    ("unallocated_occupancy_share", "Unallocated occupancy", "pct", 0),
    ("bounded_slowdown_mean", "Mean bounded slowdown", "num", -1),
]


def headline(compare: pl.DataFrame) -> list[dict]:
    """Headline rows of ``engine.compare`` in display order: key, label, kind, better, baseline, scenario, delta."""
    by = {r["metric"]: r for r in compare.iter_rows(named=True)}
    return [dict(key=k, label=label, kind=kind, better=better,
                 **{c: by.get(k, {}).get(c) for c in ("baseline", "scenario", "delta")})
            for k, label, kind, better in HEADLINE if k in by]


def _fmt_dur(seconds) -> str:
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "–"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


fmt_duration = _fmt_dur
