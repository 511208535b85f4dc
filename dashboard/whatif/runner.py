"""Run a scenario (``spec.ScenarioSpec``) against its baseline replay of the same history, and compare them.

``load_inputs`` cuts the window [start, end) of one cluster (its node layout, the budget tree) and, by default,
*warm-starts* it (``engine.warm_start``): both runs start from the logged state at ``start`` - jobs running then hold
their logged nodes until their logged end, jobs pending then keep their real submit times, jobs that ran in the
fair-share lookback before ``start`` feed the usage ledger - and every metric covers [start, end). A cold start
(``warm_start=False``, ``--cold-start``) replays only the jobs submitted in [start, end) on an empty cluster,
which is barely contended (on the sample's last week: 54.5 % occupancy against 91.4 % logged). ``run`` builds
both engine configurations (the spec's kind changes the baseline's: ``kind``, ``registry``), simulates both and
measures them the same way:

- ``comparison``: one row per metric (engine metrics, ``queries.analytics.budgets`` attainment of both runs' jobs over
  the window, idle reservation and queueing of ``usage_metrics``), baseline, scenario, delta.
  Queueing and idle reservation count only inside the window and only simulated (not pinned) waits.
- Unit: GPU-hours, or core-hours on a cluster without GPUs (``Inputs.unit``: the budget tree's ``unit``, else
  inferred from the node list): attainment, received hours and the queueing / lost-work rows are then counted
  in cores, and the GPU-only rows (fragmentation, idle GPUs) are left out (``metrics_for``).
- ``teams``: per budget bucket, attainment, received GPU-hours, share of the cluster's GPU-hours, p50/p90 wait
  (of the simulated jobs until their first start, as the engine's ``wait_s``),
  and ``verdict`` gains / loses / same: received GPU-hours moved by more than 0.5 % of the baseline's and
  1 GPU-hour; for ``rightsize``, whose jobs ask (and so receive) fewer GPU-hours for the same work, attainment
  moved by more than 0.5 percentage points.
- ``extra``: kind-specific tables (the quota loop's multipliers and their stability).
- ``fidelity``: the baseline replay against the log of its window (``dashboard.whatif.fidelity``: no extra replay,
  the baseline *is* the modeled replay); ``judged()`` marks each comparison row inside / beyond that error.

Invariants: the engine is a black box (``engine.simulate``); the same spec and inputs give byte-identical
files from ``ScenarioResult.write``; the baseline of every kind is the unchanged replay (same policy, backfill,
budgets, seed: ``baseline``, which a caller may keep and pass back to ``run``), so a scenario equal to its
baseline compares equal everywhere (and is not simulated a second time); a caller keeping the baseline may keep
its measures too (``measure_baseline``: attainment, queueing, waits per bucket) and pass them back, so a slider
measures only the scenario - the result is the same as measuring both.
"""
from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

import engine
from engine import budgets as bt
from engine.metrics import clean
from queries.analytics.budgets import Attainment, attainment_of, budget_unit
from queries.store import Store

from . import fidelity as baseline_fidelity
from . import loader, registry, transforms
from .budgets import has_guarantees
from .frames import fmt_duration
from .kind import Change
from .spec import ScenarioSpec

# (metric key, label, +1 higher is better / -1 lower is better / 0 neutral)
METRICS = [
    ("occupancy", "Occupancy", 1), ("utilisation", "Useful utilisation", 1),
    ("attainment.mean", "Mean attainment", 1), ("attainment.worst", "Worst team's attainment", 1),
    ("attainment.at_least_95", "Teams at >= 95 %", 1),
    ("wait_s.p50", "Median wait", -1), ("wait_s.p90", "p90 wait", -1),
    ("wait_s_by_class.debug.p90", "Debug p90 wait", -1), ("wait_s_by_class.training.p90", "Training p90 wait", -1),
    ("preemptions", "Preemptions", -1), ("lost_gpu_hours", "Lost GPU-hours", -1),
    ("fragmentation_gpu_hours", "Stranded GPU-hours (fragmentation)", -1),
    ("unallocated_occupancy_share", "Unallocated occupancy", 0), ("bounded_slowdown_mean", "Mean bounded slowdown", -1),
    ("usage.waiting_gpu_hours", "Queued GPU-hours", -1), ("usage.wait_job_hours", "Queued job-hours", -1),
    ("usage.allocated_cpu_hours", "Allocated CPU-hours", 0), ("usage.idle_cpu_hours", "Idle reserved CPU-hours", -1),
    ("usage.idle_mem_tb_hours", "Idle reserved memory TB-hours", -1),
    ("usage.idle_gpu_hours", "Idle reserved GPU-hours", -1),
]
# on a cluster without GPUs: the same rows in core-hours, GPU-only rows dropped (they would all read 0)
_CPU_METRICS = {"lost_gpu_hours": ("lost_cpu_hours", "Lost core-hours"),
                "usage.waiting_gpu_hours": ("usage.waiting_cpu_hours", "Queued core-hours"),
                "fragmentation_gpu_hours": None, "usage.idle_gpu_hours": None}


def metrics_for(unit: str) -> list[tuple[str, str, int]]:
    """The comparison rows for a budget ``unit``: ``METRICS`` for "gpu", the core-hour rows for "cpu"."""
    if unit != "cpu":
        return METRICS
    out = []
    for key, label, better in METRICS:
        if key in _CPU_METRICS:
            if _CPU_METRICS[key] is None:
                continue
            key, label = _CPU_METRICS[key]
        out.append((key, label, better))
    return out


COMPARISON_SCHEMA = {"metric": pl.String, "label": pl.String, "better": pl.Int8, "baseline": pl.Float64,
                     "scenario": pl.Float64, "delta": pl.Float64}


@dataclass(frozen=True)
class Inputs:
    jobs: pl.DataFrame
    nodes: pl.DataFrame
    tree: bt.BudgetTree
    start: dt.datetime
    end: dt.datetime
    store: str | None = None
    cluster: str | None = None
    budgets_source: str = ""
    warm_start: bool = True   # both runs start from the logged state at ``start`` (``engine.warm_start``)
    layout_inferred: bool = False  # ``nodes`` read from the jobs' node lists (``loader.infer_nodes``): say so

    @property
    def capacity_gpus(self) -> float:
        return float(self.nodes["gpus"].fill_null(0).sum()) if self.nodes.height else float(self.tree.cluster_gpus or 0)

    @property
    def capacity_cpus(self) -> float:
        return float(self.nodes["cpus"].fill_null(0).sum()) if self.nodes.height else 0.0

    @property
    def unit(self) -> str:
        """"gpu" or "cpu": what attainment and the comparison count (``queries.analytics.budgets.budget_unit``)."""
        return budget_unit(self.tree, capacity_gpus=self.capacity_gpus, capacity_cpus=self.capacity_cpus)

    @property
    def capacity(self) -> float:
        """Capacity in the unit's resource: GPUs, or CPU cores on a cluster without GPUs."""
        return self.capacity_cpus if self.unit == "cpu" else self.capacity_gpus

    def counts(self) -> dict:
        """Jobs submitted in the window, and (warm start) pending at its start and started before it."""
        j = self.jobs
        out = {"jobs": int(j.filter((pl.col("submit") >= self.start) & (pl.col("submit") < self.end)).height)}
        if self.warm_start:
            before = pl.col("start").is_not_null() & (pl.col("start") < self.start)
            out["jobs_started_before"] = int(j.filter(before).height)
            out["jobs_pending_at_start"] = int(j.filter(~before & (pl.col("submit") < self.start)).height)
        return out

    def describe(self) -> dict:
        out = {"cluster": self.cluster, "start": self.start.isoformat(), "end": self.end.isoformat(),
               **self.counts(), "capacity_gpus": self.capacity_gpus, "budgets": self.budgets_source,
               "warm_start": self.warm_start}
        if self.unit == "cpu":  # GPU clusters keep their parameters byte-identical
            out.update(unit="cpu", capacity_cpus=self.capacity_cpus)
        return out

    def sim_window(self) -> dict:
        """The engine's warm start and window end (none for a cold start)."""
        return {"warm_start": self.start, "window_end": self.end} if self.warm_start else {}


def load_inputs(store, tree: bt.BudgetTree, *, window_s: float, end=None, cluster: str | None = None,
                budgets_source: str = "", warm_start: bool = True, lookback_s: float = engine.config.WEEK_S) -> Inputs:
    """The window [end - window, end) of ``cluster`` (the only one when None); ``end`` None = the latest submit
    in the store (exclusive bound one microsecond later). Warm start (default): the jobs of
    ``engine.warm_start.window_filter`` (running or pending at the start, submitted in the window, and those that
    ran in the ``lookback_s`` before it); cold start: the jobs submitted in the window. Rows through
    ``loader`` (the ``replay_jobs`` query)."""
    if not Store(store).exists():
        raise ValueError(f"{store}: not a store (no manifest, no jobs.parquet)")
    per_cluster = loader.clusters(store)
    known = sorted(c for c in per_cluster["cluster"].to_list() if c is not None)
    if cluster is None:
        if len(known) > 1:
            raise ValueError(f"the store holds clusters {', '.join(known)}: choose one with --cluster")
        cluster = known[0] if known else None
    elif cluster not in known:
        raise ValueError(f"cluster {cluster!r} has no jobs; clusters: {', '.join(known)}")
    if end is None:
        end = loader.last_submit_end(per_cluster, cluster)
    start = end - dt.timedelta(seconds=window_s)
    jobs, nodes = loader.load(store, cluster=cluster, start=start, end=end, warm_start=warm_start,
                              lookback_s=lookback_s)
    return Inputs(jobs, nodes, tree, start, end, str(store), cluster, budgets_source, warm_start,
                  layout_inferred=nodes.height > 0 and loader.layout_inferred(store, cluster))


@dataclass
class ScenarioResult:
    spec: ScenarioSpec
    inputs: dict
    baseline: engine.SimResult
    scenario: engine.SimResult
    comparison: pl.DataFrame
    teams: pl.DataFrame
    extra: dict = field(default_factory=dict)
    notes: tuple = ()
    trees: tuple = ()          # (baseline budget tree, scenario budget tree): what each run's attainment uses
    fidelity: dict | None = None  # the baseline's fidelity against the log (``fidelity.of_baseline``)

    def judged(self) -> pl.DataFrame:
        """The comparison rows marked inside / beyond the baseline's error (``fidelity.judge``)."""
        return baseline_fidelity.judge(self.comparison, self.fidelity)

    def fidelity_words(self) -> list[str]:
        """The headline and the conclusions inside / beyond the error, as the CLI and the page print them."""
        if self.fidelity is None:
            return []
        out = [baseline_fidelity.headline(self.fidelity)]
        if self.fidelity.get("available"):
            out.append(baseline_fidelity.conclusion_words(self.judged(), fmt_change))
        return out

    def params(self) -> dict:
        return {"scenario": self.spec.to_dict(), "inputs": self.inputs, "notes": list(self.notes)}

    def summary(self) -> dict:
        rows = {r["metric"]: r for r in self.comparison.iter_rows(named=True)}
        out = self.params() | {"metrics": {k: {c: r[c] for c in ("baseline", "scenario", "delta")}
                                           for k, r in rows.items()}}
        out["teams"] = {"gains": self.teams.filter(pl.col("verdict") == "gains")["node"].to_list(),
                        "loses": self.teams.filter(pl.col("verdict") == "loses")["node"].to_list()}
        if "stability" in self.extra:
            out["loop_stable"] = not bool(self.extra["stability"]["oscillating"].any())
        if self.fidelity is not None:
            out["fidelity"] = baseline_fidelity.summary(self.fidelity)
            judged = self.judged()
            out["fidelity"]["conclusions"] = {r["metric"]: r["status"] for r in judged.iter_rows(named=True)}
        return out

    def write(self, out_dir) -> Path:
        """out/baseline/ and out/scenario/ (jobs.parquet, timeline.parquet, metrics.json: flat stores every
        query runs on), comparison.csv, teams.csv, one CSV per extra table, fidelity.csv (each comparison row's delta against the
        baseline's error), scenario.json (parameters + summary, with the fidelity)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.baseline.write(out / "baseline")
        self.scenario.write(out / "scenario")
        tables = {"comparison": self.comparison, "teams": self.teams, **self.extra}
        if self.fidelity is not None:
            tables["fidelity"] = self.judged()
        for name, df in tables.items():
            _atomic(out / f"{name}.csv", df.write_csv(float_precision=9, datetime_format="%Y-%m-%dT%H:%M:%S%.fZ"))
        _atomic(out / "scenario.json", json_text(self.summary()))
        return out


def json_text(obj) -> str:
    return json.dumps(clean(obj), sort_keys=True, indent=1, allow_nan=False) + "\n"


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def baseline_config(spec: ScenarioSpec, inputs: Inputs):
    """(jobs, config) of the baseline replay: the same for every kind with the same policy, backfill and seed."""
    jobs = transforms.with_usage(inputs.jobs)
    quota = "guarantee" if has_guarantees(inputs.tree) else "none"
    return jobs, engine.SimConfig(policy=spec.policy, backfill=spec.backfill, budgets=inputs.tree, quota=quota,
                                  seed=spec.seed, **inputs.sim_window(), **dict(spec.sim_knobs))


def baseline(spec: ScenarioSpec, inputs: Inputs) -> engine.SimResult:
    """The baseline replay alone (a caller may keep it for every scenario of the same window: ``run``)."""
    jobs, cfg = baseline_config(spec, inputs)
    return engine.simulate(jobs, inputs.nodes, cfg)


def configs(spec: ScenarioSpec, inputs: Inputs):
    """(baseline jobs, baseline config, scenario jobs, scenario config, extra tables, notes) of a scenario: the
    baseline's, changed by the spec's kind (``registry.KINDS[spec.kind].apply``)."""
    jobs, base = baseline_config(spec, inputs)
    change = Change(inputs, spec.values, jobs, base, jobs, base)
    registry.KINDS[spec.kind].apply(change)
    # the jobs that started before a warm start run exactly as logged, in the scenario too
    scen_jobs = transforms.as_logged_before(jobs, change.jobs, inputs.start if inputs.warm_start else None)
    return jobs, base, scen_jobs, change.cfg, change.extra, change.notes


@dataclass(frozen=True)
class Measured:
    """What ``run`` measures of one replay over its window: attainment (``attainment_of``), queueing and idle
    reservation (``usage_metrics``) and p50 / p90 waits per budget bucket (``_waits_by_bucket``)."""
    attainment: Attainment
    usage: dict
    waits: pl.DataFrame


def measure(res: engine.SimResult, cfg, inputs: Inputs) -> Measured:
    """The measures of ``res``, a replay of ``inputs``' window under ``cfg`` (its budgets are what attainment is
    measured against)."""
    return Measured(_attainment(res, cfg, inputs), usage_metrics(res, inputs.start, inputs.end),
                    _waits_by_bucket(res))


def measure_baseline(spec: ScenarioSpec, inputs: Inputs, base: engine.SimResult) -> Measured:
    """The measures of ``baseline(spec, inputs)`` (a caller caching the baseline caches these beside it and
    passes them to ``run``: the same for every scenario of the window, as the baseline is)."""
    return measure(base, baseline_config(spec, inputs)[1], inputs)


def run(spec: ScenarioSpec, inputs: Inputs, progress=None, baseline: engine.SimResult | None = None,
        fidelity: dict | None = None, measured: Measured | None = None) -> ScenarioResult:
    """Simulate baseline and scenario; ``progress(fraction, text)`` is called between the steps. ``baseline``:
    the result of ``baseline(spec, inputs)`` when the caller kept it (a slider re-runs only the scenario), and
    ``fidelity`` its ``fidelity_of(spec, inputs, baseline)``, ``measured`` its ``measure_baseline(spec, inputs,
    baseline)`` likewise (only with ``baseline``); a scenario whose jobs and configuration equal the baseline's
    is neither simulated nor measured twice."""
    say = progress or (lambda f, t: None)
    if not inputs.counts()["jobs"] and not inputs.counts().get("jobs_pending_at_start"):
        raise ValueError("no jobs were submitted in this window on this cluster: nothing to replay")
    if inputs.nodes.is_empty():
        raise ValueError(loader.NO_LAYOUT)
    say(0.05, f"Preparing {spec.label.lower()} ...")
    base_jobs, base_cfg, scen_jobs, scen_cfg, extra, notes = configs(spec, inputs)
    if inputs.layout_inferred:
        notes = [*notes, loader.INFERRED_NOTE]
    if baseline is None:
        say(0.15, "Replaying the baseline ...")
        baseline = engine.simulate(base_jobs, inputs.nodes, base_cfg)
        measured = None  # measures of a baseline the caller did not keep describe another run
    base = baseline
    say(0.5, "Replaying the scenario ...")
    same = scen_jobs is base_jobs and scen_cfg == base_cfg
    scen = base if same else engine.simulate(scen_jobs, inputs.nodes, scen_cfg)
    say(0.85, "Comparing ...")
    if measured is None:
        measured = measure(base, base_cfg, inputs)
    scen_measured = measured if scen is base else measure(scen, scen_cfg, inputs)
    ba, sa = measured.attainment, scen_measured.attainment
    comparison = compare(base, scen, ba.summary, sa.summary, inputs.start, inputs.end, unit=ba.unit,
                         usage=(measured.usage, scen_measured.usage))
    teams = team_table(base, scen, ba.table, sa.table, inputs, by=verdict_basis(spec.kind),
                       waits=(measured.waits, scen_measured.waits))
    if fidelity is None:
        fidelity = baseline_fidelity.of_baseline(inputs, base, base_cfg)
    say(1.0, "Done")
    return ScenarioResult(spec, inputs.describe(), base, scen, comparison, teams, extra, tuple(notes),
                          (base_cfg.budgets, scen_cfg.budgets), fidelity)


def window_fidelity(store, tree: bt.BudgetTree | None, start: dt.datetime, end: dt.datetime, *,
                    cluster: str | None = None, spec: ScenarioSpec | None = None) -> dict:
    """The fidelity of the what-if baseline (``spec``'s, default the Fair share page's: fairshare / easy) over
    [start, end) of ``cluster``, warm-started: one replay. ``tree`` None: share 1 per account of the window, as
    ``quotaloop scenario`` without ``--budgets``. A store that cannot be replayed (several clusters and none
    chosen, no node list, no job in the window) gives ``available: False`` with the reason, as a log without
    start times does."""
    from engine.tenants import to_tree

    from .budgets import default_budgets

    spec = spec or ScenarioSpec.make("shares")
    window = {"start": start.isoformat(), "end": end.isoformat()}
    unavailable = {"available": False, "window": window, "days": (end - start).total_seconds() / 86400.0,
                   "warm_start": True}
    try:
        if tree is None:
            accounts = loader.replay_jobs(store, cluster=cluster, start=start, end=end)["account"]
            tree = to_tree(default_budgets(sorted(accounts.drop_nulls().unique().to_list())))
        inputs = load_inputs(store, tree, window_s=(end - start).total_seconds(), end=end, cluster=cluster)
    except ValueError as exc:
        return {**unavailable, "reason": str(exc)}
    if inputs.nodes.is_empty():
        return {**unavailable, "reason": loader.NO_LAYOUT}
    if not inputs.counts()["jobs"]:
        return {**unavailable, "reason": "no job was submitted in this window: nothing to check the baseline against"}
    return fidelity_of(spec, inputs, baseline(spec, inputs)) | {
        "cluster": inputs.cluster, "baseline": f"{spec.policy}/{spec.backfill}",
        "layout_note": loader.INFERRED_NOTE if inputs.layout_inferred else None}


def fidelity_of(spec: ScenarioSpec, inputs: Inputs, base: engine.SimResult) -> dict:
    """The fidelity of ``baseline(spec, inputs)`` (a caller caching the baseline caches this beside it)."""
    return baseline_fidelity.of_baseline(inputs, base, baseline_config(spec, inputs)[1])


def _attainment(res, cfg, inputs):
    return attainment_of(res.jobs, cfg.budgets, inputs.start, inputs.end, capacity_gpus=inputs.capacity_gpus,
                                 capacity_cpus=inputs.capacity_cpus, unit=inputs.unit)


def _seconds_inside(a: pl.Expr, b: pl.Expr, start, end) -> pl.Expr:
    """Seconds of [a, b) inside [start, end) (None: unbounded); 0 where a bound is missing."""
    lo = a if start is None else pl.max_horizontal(a, pl.lit(start))
    hi = b if end is None else pl.min_horizontal(b, pl.lit(end))
    return ((hi - lo).dt.total_microseconds().cast(pl.Float64) / 1e6).clip(0.0).fill_null(0.0)


def usage_metrics(res, start=None, end=None) -> dict:
    """Queueing and idle reservation of a run inside [start, end) (None: unbounded): queued GPU-hours (requested
    GPUs x the wait of each simulated attempt, from its (re)submit) and job-hours; allocated CPU-hours (timeline)
    and the reserved-but-unused CPU, memory and GPU hours: allocated minus what the rows used at the log's rates
    (``transforms.with_usage``) while they ran. Pinned (warm-start) jobs count by what they held and used
    inside the window, never by their waits."""
    j, tl = res.jobs, res.timeline
    dur = _seconds_inside(pl.col("start"), pl.col("end"), start, end)
    alloc = tl.select((pl.col("cpus") * dur).sum().alias("c"), (pl.col("mem_bytes").fill_null(0.0) * dur).sum().alias("m"),
                      (pl.col("gpus") * dur).sum().alias("g")).row(0) if tl.height else (0.0, 0.0, 0.0)
    alloc_cpu, alloc_mem, alloc_gpu = (float(x or 0.0) for x in alloc)
    sim_rows = j.filter(~pl.col("pinned")) if "pinned" in j.columns else j
    waits = sim_rows.select(
        (pl.col("req_gpus").fill_null(0.0) * _seconds_inside(pl.col("submit"), pl.col("start"), start, end)).sum()
        .alias("g"), _seconds_inside(pl.col("submit"), pl.col("start"), start, end).sum().alias("n")).row(0)
    ran = _seconds_inside(pl.col("start"), pl.coalesce(pl.col("end"), pl.col("start")), start, end)

    def used(col):
        return float(j.select((pl.col(col).fill_null(0.0) * ran).sum()).item()) if col in j.columns else 0.0

    cores = [pl.col(c) for c in ("req_cpus", "alloc_cpus") if c in sim_rows.columns]  # SWF: often only allocated
    queued_cpu = sim_rows.select((pl.coalesce(cores).fill_null(0.0) * _seconds_inside(
        pl.col("submit"), pl.col("start"), start, end)).sum()).item() if cores else 0.0
    return {"waiting_gpu_hours": float(waits[0] or 0.0) / 3600.0, "wait_job_hours": float(waits[1] or 0.0) / 3600.0,
            "waiting_cpu_hours": float(queued_cpu or 0.0) / 3600.0,
            "allocated_cpu_hours": alloc_cpu / 3600.0, "idle_cpu_hours": (alloc_cpu - used("used_cpus")) / 3600.0,
            "idle_mem_tb_hours": (alloc_mem / 1e12 - used("used_mem_gb") / 1000.0) / 3600.0,
            "idle_gpu_hours": (alloc_gpu - used("used_gpus")) / 3600.0}


def _flat(metrics: dict, att: dict, usage: dict) -> dict:
    out = dict(metrics)
    out["attainment"] = att
    out["usage"] = usage
    flat = {}

    def walk(d, prefix):
        for k, x in d.items():
            if isinstance(x, dict):
                walk(x, f"{prefix}{k}.")
            elif isinstance(x, (int, float)) and not isinstance(x, bool):
                flat[prefix + k] = float(x)
    walk(out, "")
    return flat


def compare(base, scen, base_att: dict, scen_att: dict, start=None, end=None, unit: str = "gpu",
            usage: tuple | None = None) -> pl.DataFrame:
    """The comparison table; queueing and idle reservation inside [start, end) (``usage_metrics``, or ``usage``:
    both runs' when already measured); the rows of ``metrics_for(unit)``."""
    base_usage, scen_usage = usage or (usage_metrics(base, start, end), usage_metrics(scen, start, end))
    a = _flat(base.metrics, base_att, base_usage)
    b = _flat(scen.metrics, scen_att, scen_usage)
    rows = []
    for key, label, better in metrics_for(unit):
        x, y = a.get(key), b.get(key)
        if x is None and y is None:
            continue
        rows.append((key, label, better, x, y, None if x is None or y is None else y - x))
    return pl.DataFrame(rows, schema=COMPARISON_SCHEMA, orient="row")


def _waits_by_bucket(res) -> pl.DataFrame:
    """p50 / p90 wait per bucket of the simulated jobs until their first start (as the engine's ``wait_s``)."""
    j = res.jobs
    if "attempt" in j.columns:
        j = j.filter((pl.col("attempt") == 0) & ~pl.col("pinned"))
    return j.group_by(pl.col("budget_bucket").alias("node")).agg(
        pl.col("wait_s").quantile(0.5, "linear").alias("p50"), pl.col("wait_s").quantile(0.9, "linear").alias("p90"))


# a team gains / loses when its received GPU-hours move by more than this share of its baseline and this many
# GPU-hours (verdict by "received"), or its attainment by more than VERDICT_PTS (verdict by "attainment")
VERDICT_REL, VERDICT_ABS_H, VERDICT_PTS = 0.005, 1.0, 0.005


def verdict_basis(kind: str | None) -> str:
    """What "gains" measures for a scenario kind: received GPU-hours, or attainment for ``rightsize`` (whose jobs
    ask for, and so receive, fewer GPU-hours for the same work: by received hours every team would lose)."""
    return "attainment" if kind == "rightsize" else "received"


def verdict_rule(by: str) -> str:
    """The definition of gains / loses in words, as the page shows it above the table."""
    if by == "attainment":
        return (f"**Gains** / **loses**: the team's attainment (GPU-hours received ÷ entitled) rose / fell by more "
                f"than {100 * VERDICT_PTS:g} percentage points against the baseline replay; otherwise **same**. "
                "Right-sized jobs ask for, and so receive, fewer GPU-hours for the same work, so received hours "
                "alone would call every team a loser.")
    return (f"**Gains** / **loses**: the team received more / fewer GPU-hours in the scenario than in the baseline "
            f"replay (by more than {100 * VERDICT_REL:g} % of its baseline and {VERDICT_ABS_H:g} GPU-hour); otherwise "
            "**same**. Attainment (received ÷ entitled) can move the other way: a change of shares also changes "
            "what each team is entitled to.")


def verdict_notes(teams: pl.DataFrame, by: str = "received") -> list[str]:
    """One sentence per team whose attainment moved against its received-hours verdict (the table is right on
    both counts; the sentence says why they differ), so "loses" beside a rising attainment never goes unexplained."""
    if by != "received" or teams.is_empty():
        return []
    out = []
    for r in teams.iter_rows(named=True):
        a0, a1 = r.get("attainment_baseline"), r.get("attainment_scenario")
        if a0 is None or a1 is None or r["verdict"] == "same" or abs(a1 - a0) <= VERDICT_PTS:
            continue
        if (r["verdict"] == "gains") == (a1 > a0):
            continue
        e0, e1 = r.get("entitled_baseline_h"), r.get("entitled_scenario_h")
        moved = "more" if r["verdict"] == "gains" else "fewer"
        ent = (f": its entitlement {'rose' if (e1 or 0) > (e0 or 0) else 'fell'} from {e0:,.0f} to {e1:,.0f} GPU-hours"
               if e0 is not None and e1 is not None else "")
        out.append(f"**{r['node']}** {r['verdict']} ({abs(r['received_delta_h']):,.0f} {moved} GPU-hours received) "
                   f"while its attainment {'rose' if a1 > a0 else 'fell'} from {100 * a0:.1f} % to {100 * a1:.1f} %"
                   f"{ent}.")
    return out


def team_table(base, scen, base_att: pl.DataFrame, scen_att: pl.DataFrame, inputs: Inputs,
               by: str = "received", waits: tuple | None = None) -> pl.DataFrame:
    """Per budget bucket, both runs side by side (module doc); ``waits``: both runs' ``_waits_by_bucket`` when
    already measured."""
    hours = (inputs.end - inputs.start).total_seconds() / 3600.0
    cap = inputs.capacity * hours
    keep = ["node", "attainment", "entitled_gpu_hours", "received_gpu_hours", "demanded_gpu_hours"]
    base_waits, scen_waits = waits or (_waits_by_bucket(base), _waits_by_bucket(scen))
    a = base_att.select(keep).join(base_waits, on="node", how="left")
    b = scen_att.select(keep).join(scen_waits, on="node", how="left")
    t = a.join(b, on="node", how="full", coalesce=True, suffix="_s").sort("node")
    delta = pl.col("received_gpu_hours_s").fill_null(0.0) - pl.col("received_gpu_hours").fill_null(0.0)
    tol = pl.max_horizontal(pl.lit(VERDICT_ABS_H), VERDICT_REL * pl.col("received_gpu_hours").fill_null(0.0).abs())
    moved, band = (delta, tol) if by == "received" else \
        (pl.col("attainment_s").fill_null(0.0) - pl.col("attainment").fill_null(0.0), pl.lit(VERDICT_PTS))
    out = t.select(
        "node",
        pl.col("attainment").alias("attainment_baseline"), pl.col("attainment_s").alias("attainment_scenario"),
        pl.col("entitled_gpu_hours").alias("entitled_baseline_h"), pl.col("entitled_gpu_hours_s").alias("entitled_scenario_h"),
        pl.col("demanded_gpu_hours").alias("demanded_baseline_h"), pl.col("demanded_gpu_hours_s").alias("demanded_scenario_h"),
        pl.col("received_gpu_hours").alias("received_baseline_h"), pl.col("received_gpu_hours_s").alias("received_scenario_h"),
        delta.alias("received_delta_h"),
        (pl.col("received_gpu_hours") / cap if cap > 0 else pl.lit(None)).alias("cluster_share_baseline"),
        (pl.col("received_gpu_hours_s") / cap if cap > 0 else pl.lit(None)).alias("cluster_share_scenario"),
        pl.col("p50").alias("p50_wait_s_baseline"), pl.col("p50_s").alias("p50_wait_s_scenario"),
        pl.col("p90").alias("p90_wait_s_baseline"), pl.col("p90_s").alias("p90_wait_s_scenario"),
        pl.when(moved > band).then(pl.lit("gains")).when(moved < -band).then(pl.lit("loses")).otherwise(pl.lit("same"))
        .alias("verdict"))
    return out.with_columns(pl.col(c).cast(pl.Float64) for c in out.columns if c not in ("node", "verdict"))


def metric_kind(metric: str) -> str:
    """How a comparison metric is shown: pct (a fraction), dur (seconds), int or num."""
    if metric in ("occupancy", "utilisation", "attainment.mean", "attainment.worst", "unallocated_occupancy_share"):
        return "pct"
    if "wait_s" in metric:
        return "dur"
    if metric in ("attainment.at_least_95", "preemptions"):
        return "int"
    return "num"


def fmt_value(x, metric: str) -> str:
    """A metric value for text output: shares as %, seconds as durations, the rest as numbers."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    kind = metric_kind(metric)
    if kind == "pct":
        return f"{100 * x:.1f} %"
    if kind == "dur":
        return fmt_duration(x)
    return f"{x:,.0f}" if kind == "int" else f"{x:,.1f}"


def fmt_change(x, metric: str) -> str:
    """A delta or an error band for text: shares in percentage points, the rest as ``fmt_value``."""
    if metric_kind(metric) == "pct" and x is not None and not (isinstance(x, float) and math.isnan(x)):
        return f"{100 * x:.1f} pts"
    return fmt_value(x, metric)
