"""The budget tree as the what-if forms see it: slider rows, overrides, default shares.

Pure (no Streamlit, no queries): the Fair share page builds its forms from these, and the ``shares`` and
``custom`` scenario kinds (``dashboard.whatif.kinds``) apply a form's overrides with ``apply_budget_overrides``.

Invariants:
- ``apply_budget_overrides`` never mutates the tree it gets; overrides apply to every effective-dated version
  (a manager's change is replayed over the whole history); paths the tree does not know are ignored (the
  ``shares`` kind lists them as a note).
- ``overrides`` keeps only what differs from the baseline, so equal settings make equal scenarios however the
  UI produced them; a min runtime's None (no contract, never preempted) differs from 0 (preemptible at once).
- Min runtimes are seconds here (None = no contract, as ``engine.min_runtime``); hours appear only in labels.
"""
from __future__ import annotations

import dataclasses

import polars as pl

from engine import budgets as bt
from engine import min_runtime
from engine.tenants import to_tree

CHECKPOINTS = {0: "none", 900: "15 min", 1800: "30 min", 3600: "1 hour", 7200: "2 hours", 14400: "4 hours"}


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
    return to_tree(budgets).at(None)


def baseline_min_runtime_s(budgets, job_class: str) -> float | None:
    """The min runtime (seconds) the budget file gives a class at the top of the tree, by the engine's resolver
    (``engine.min_runtime``): None when no table names it (no contract: the baseline never preempts it)."""
    return min_runtime.resolve(job_class, None, tree=budgets if isinstance(budgets, bt.BudgetTree) else None)


def logged_contracts(jobs: pl.DataFrame) -> dict[str, tuple[int, int, float | None]]:
    """Per job class: (jobs with a logged min runtime, jobs, their median min runtime in seconds). A logged
    contract beats the budget file (``engine.min_runtime``), so the page must not call a class "never
    preempted" because the budget file names no contract for it. A null class counts under ``""``."""
    if jobs.is_empty() or "min_runtime_s" not in jobs.columns:
        return {}
    cls = pl.col("job_class").fill_null("") if "job_class" in jobs.columns else pl.lit("")
    rows = (jobs.group_by(cls.alias("cls"))
            .agg(pl.col("min_runtime_s").is_not_null().sum().alias("n_with"), pl.len().alias("n"),
                 pl.col("min_runtime_s").median().alias("median_s"))
            .sort("cls"))
    return {r["cls"]: (int(r["n_with"]), int(r["n"]), r["median_s"]) for r in rows.iter_rows(named=True)}


def overrides(baseline: dict, chosen: dict, tol: float = 1e-9) -> dict:
    """Only the entries of ``chosen`` that differ from ``baseline`` (keeps equal scenarios equal); a key the
    baseline lacks counts as 0. None (a min runtime's "no contract") equals only None: it is not 0."""
    def differs(v, b) -> bool:
        if v is None or b is None:
            return (v is None) != (b is None)
        return abs(float(v) - float(b)) > tol

    return {k: v for k, v in chosen.items() if differs(v, baseline.get(k, 0.0))}


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


def has_guarantees(tree: bt.BudgetTree) -> bool:
    """Whether any version of the tree guarantees GPUs to a node (the replay then runs with quota "guarantee")."""
    return any((n.guaranteed_gpus or 0) > 0 for v in tree.versions for n in v.root.walk())
