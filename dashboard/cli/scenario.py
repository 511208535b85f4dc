"""``quotaloop scenario``: replay a window twice, as it is and under one named change, and compare.

    quotaloop scenario NAME --store DIR [--budgets budgets.toml] [--cluster NAME] [--window 7d]
        [--end latest|YYYY-MM-DD|ISO] [--cold-start] [--policy fairshare] [--backfill easy] [--seed N]
        [--config-file calibration.json] [--sched-interval DURATION [--sched-cycle all|backfill]]
        [--max-jobs-per-user N] [kind options] --out DIR [--json]

NAME: ``shares`` (--share PATH=X, --guarantee PATH=GPUS), ``backfill`` (--to none|easy|conservative,
--reservation-depth K, --walltime-margin F), ``min-runtime`` (--min-runtime [CLASS=]DURATION ..., default
training=8h debug=0; a duration without CLASS= is every job's, none = never preempted; the override beats the
log and the budget file: ``engine.min_runtime``; --checkpoint-interval DURATION),
``right-size`` (--margin 0.2, --gpus whole|fraction|keep),
``quota-loop`` (--period 7d, --history-periods 4, --backtest NAME=VALUE for quota_backtest's parameters),
``drains`` (the baseline with node drains: --drain NODES@TIME[..END] repeatable, NODES a name, a comma list or a
hostlist like gpu[001-004], TIME an ISO instant inside the window; --drain-file CSV with node,start,end,reason;
--drain-mode drain (default: jobs leave at their min runtime) | fail (killed at once); --node-mtbf DURATION),
``custom`` (the Fair share page's custom mix: --share, --guarantee, --min-runtime (none by default),
--checkpoint-interval, --to for the scenario's backfill together). The kinds are
``dashboard.whatif.registry``'s.

``--out DIR`` gets ``baseline/`` and ``scenario/`` (each a flat store: jobs.parquet, timeline.parquet,
metrics.json, so every query runs on them), ``comparison.csv``, ``teams.csv`` (attainment, received GPU-hours,
waits per budget bucket; gains / loses), the kind's own tables (quota loop: ``multipliers.csv``,
``stability.csv``) and ``scenario.json``: the parameters that produced it and the summary. The same command
with the same store gives byte-identical files. The window is [end - window, end); ``--end latest`` (default)
ends just after the newest submit. Both runs are warm-started at the window start (``engine.warm_start``): jobs running
then hold their logged nodes until their logged end, jobs pending then keep their real submit times, the jobs of
the fair-share lookback before it feed the usage ledger, and every metric covers the window. ``--cold-start``
replays only the jobs submitted in the window on an empty cluster (barely contended: a weak baseline).
Without ``--budgets`` each account gets share 1.
``--config-file`` applies the knobs ``quotaloop validate --calibrate`` saved (its ``calibration.json``, read by the
same loader as ``simulate --config-file``) to the baseline, and so to the scenario, which the kind then changes;
``--sched-interval`` / ``--sched-cycle`` / ``--max-jobs-per-user`` given explicitly win over the file. (``--reservation-depth`` is the
``backfill`` kind's scenario depth here, never the baseline's: a calibrated depth applies to the baseline.)
Without ``--config-file`` the store's own calibration (``STORE/calibration.json``, ``validate --calibrate --save``)
applies, said on stderr; ``--no-calibration`` ignores it.
Fidelity: the baseline replay is compared with the log over the window (``engine.fidelity``, as ``validate``):
the output says how closely it reproduces the logged waits and which deltas are inside that error
(``dashboard.whatif.fidelity``; ``fidelity.csv`` and ``scenario.json``'s ``fidelity``).
Guarantees above the cluster's GPUs (oversold quota) stop the command; tree nodes without an account in the
window and accounts outside the tree (counted as ``unbudgeted``) are warnings on stderr.
"""
from __future__ import annotations

import sys

from engine.backfill import BACKFILLS
from engine.policies import POLICIES

from dashboard.whatif import registry

from .errors import UserError, check_output_dir

# Polars, queries and the rest of engine are imported inside the functions (the kinds import theirs on use):
# see the start-up note in dashboard.cli.


def register(sub):
    p = sub.add_parser("scenario", help="compare a what-if scenario with the baseline replay of the same history",
                       description=__doc__.split("\n\n")[1] if __doc__ else None)
    names = registry.cli_names()
    p.add_argument("name", choices=sorted(names), metavar="NAME", help=" | ".join(names))
    p.add_argument("--store", required=True, help="store directory whose history to replay")
    p.add_argument("--budgets", metavar="TOML", help="budget tree (default: share 1 per account)")
    p.add_argument("--cluster", help="the cluster to replay (needed when the store holds several)")
    p.add_argument("--window", default="7d", help="replay the jobs submitted in this long a window (default 7d)")
    p.add_argument("--end", default="latest", help="window end: latest (default), YYYY-MM-DD or an ISO time (UTC)")
    p.add_argument("--cold-start", action="store_true",
                   help="replay only the jobs submitted in the window, on an empty cluster (default: warm start "
                        "from the logged state at the window start)")
    p.add_argument("--policy", default="fairshare", choices=sorted(POLICIES))
    p.add_argument("--backfill", default="easy", choices=sorted(BACKFILLS), help="baseline backfill")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--config-file", metavar="JSON", help="calibrated knobs saved by `quotaloop validate --calibrate` "
                                                         "(applied to the baseline and the scenario)")
    p.add_argument("--no-calibration", action="store_true",
                   help="ignore the store's calibration.json (replay on the engine's defaults)")
    p.add_argument("--sched-interval", metavar="DURATION",
                   help="scheduler cycle of both runs: a pass every DURATION (wins over --config-file)")
    p.add_argument("--sched-cycle", choices=["all", "backfill"],
                   help="with --sched-interval: all passes wait for the cycle or only backfilling")
    p.add_argument("--max-jobs-per-user", type=int, metavar="N",
                   help="per-user running limit of both runs (Maui's MAXJOB, Slurm's MaxJobsPerUser; 0 = none; "
                        "wins over --config-file)")
    g = p.add_argument_group("shares")
    g.add_argument("--share", action="append", default=[], metavar="PATH=X", help="new share of a budget node")
    g.add_argument("--guarantee", action="append", default=[], metavar="PATH=GPUS", help="new guaranteed GPUs")
    g = p.add_argument_group("backfill")
    g.add_argument("--to", choices=sorted(BACKFILLS), help="the scenario's backfill (default conservative)")
    g.add_argument("--reservation-depth", type=int, help="reserve for the first K blocked jobs")
    g.add_argument("--walltime-margin", type=float, help="fraction of a hole kept free of backfilled work")
    g = p.add_argument_group("min-runtime")
    g.add_argument("--min-runtime", action="append", default=[], metavar="[CLASS=]DURATION",
                   help="min runtime of a job class, or of every job without CLASS= (repeat; none = never "
                        "preempted; default training=8h debug=0)")
    g.add_argument("--checkpoint-interval", metavar="DURATION", help="work since the last checkpoint is lost")
    g = p.add_argument_group("right-size")
    g.add_argument("--margin", type=float, help="headroom over what a job used (default 0.2)")
    g.add_argument("--gpus", choices=["whole", "fraction", "keep"], help="GPU count of a single-node job whose GPUs x mean utilisation x (1 + margin) < 1 (default whole: 1 GPU)")
    g = p.add_argument_group("quota-loop")
    g.add_argument("--period", help="quota period (default 7d)")
    g.add_argument("--history-periods", type=int, help="back-test periods before the window (default 4)")
    g.add_argument("--backtest", action="append", default=[], metavar="NAME=VALUE",
                   help="a quota_backtest parameter (alpha, dead_band, max_step, ...)")
    g = p.add_argument_group("drains")
    g.add_argument("--drain", action="append", default=[], metavar="NODES@TIME[..END]",
                   help="drain these nodes at TIME (repeat), e.g. h100-[001-008]@2026-11-25T06:00")
    g.add_argument("--drain-file", metavar="CSV", help="drain windows: header node,start,end,reason")
    g.add_argument("--drain-mode", choices=["drain", "fail"],
                   help="drain: running jobs leave at their min runtime (default); fail: killed at once")
    g.add_argument("--node-mtbf", metavar="DURATION", help="random drains: mean time between drains per node")
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--json", action="store_true", help="print scenario.json (parameters and summary)")
    return p


def _pairs(items, flag, value=float):
    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"{flag} {item!r}: expected NAME=VALUE")
        try:
            out[key.strip()] = value(raw.strip())
        except (ValueError, ArithmeticError) as exc:
            raise UserError(f"{flag} {item!r}: {exc}") from None
    return out


def params(args) -> dict:
    """The kind's parameters from the command line (only what was given; the rest are the kind's defaults)."""
    from engine import min_runtime, parse_duration

    kind = registry.cli_names()[args.name]
    p: dict = {}
    if kind in ("shares", "custom"):
        p = {"shares": _pairs(args.share, "--share"), "guaranteed": _pairs(args.guarantee, "--guarantee")}
    if kind == "custom":
        if args.min_runtime:
            p["min_runtime_s"] = min_runtime.parse_overrides(args.min_runtime, "--min-runtime")
        if args.checkpoint_interval is not None:
            p["checkpoint_interval_s"] = parse_duration(args.checkpoint_interval, "--checkpoint-interval")
        if args.to is not None:
            p["scenario_backfill"] = args.to
    elif kind == "backfill":
        p = {k: v for k, v in (("to", args.to), ("reservation_depth", args.reservation_depth),
                               ("walltime_margin", args.walltime_margin)) if v is not None}
    elif kind == "min_runtime":
        if args.min_runtime:
            p["min_runtime_s"] = min_runtime.parse_overrides(args.min_runtime, "--min-runtime")
        if args.checkpoint_interval is not None:
            p["checkpoint_interval_s"] = parse_duration(args.checkpoint_interval, "--checkpoint-interval")
    elif kind == "rightsize":
        p = {k: v for k, v in (("margin", args.margin), ("gpus", args.gpus)) if v is not None}
    elif kind == "quota_loop":
        if args.period:
            p["period_s"] = parse_duration(args.period, "--period")
        if args.history_periods is not None:
            p["history_periods"] = args.history_periods
        if args.backtest:
            p["backtest"] = _pairs(args.backtest, "--backtest")
    elif kind == "drains":
        specs = list(args.drain)
        if args.drain_file:
            from engine import drains

            specs += [f"{e.node}@{e.time_s.isoformat() if hasattr(e.time_s, 'isoformat') else e.time_s}"
                      + ("" if e.until is None else f"..{e.until.isoformat() if hasattr(e.until, 'isoformat') else e.until}")
                      for e in drains.load_file(args.drain_file)]
        p["drains"] = specs
        if args.drain_mode:
            p["mode"] = args.drain_mode
        if args.node_mtbf:
            p["node_mtbf_s"] = parse_duration(args.node_mtbf, "--node-mtbf")
    return p


def sim_knobs(args) -> dict:
    """The calibrated knobs of both runs: ``--config-file`` through ``simulate``'s loader, explicit cycle flags
    winning. ``--reservation-depth`` is left out: here it is the ``backfill`` kind's scenario depth."""
    import argparse

    from .simulate import calibrated_knobs

    return calibrated_knobs(argparse.Namespace(config_file=args.config_file, sched_interval=args.sched_interval,
                                               sched_cycle=args.sched_cycle, reservation_depth=None,
                                               max_jobs_per_user=args.max_jobs_per_user,
                                               store=args.store, no_calibration=args.no_calibration,
                                               policy=args.policy), discover=True)


def _end(text):
    from engine.config import ConfigError, instant

    if text in (None, "", "latest"):
        return None
    try:
        return instant(text, "--end")
    except ConfigError:
        raise UserError(f"--end {text!r}: expected latest, YYYY-MM-DD or an ISO time") from None


def run(args) -> int:
    from dashboard.whatif import runner
    from dashboard.whatif.params import ScenarioError
    from dashboard.whatif.spec import ScenarioSpec
    from engine import parse_duration
    from engine.budgets import BudgetError, load, validate
    from queries.store import Store

    check_output_dir(args.out)
    Store(args.store).check()  # StoreError: missing, not a directory, corrupt manifest, truncated partition
    try:
        spec = ScenarioSpec.make(registry.cli_names()[args.name], policy=args.policy, backfill=args.backfill,
                                 seed=args.seed, sim_knobs=sim_knobs(args), **params(args))
    except ScenarioError as exc:
        raise UserError(str(exc)) from None
    if args.budgets:
        try:
            tree, source = load(args.budgets), args.budgets
        except BudgetError as exc:
            raise UserError(str(exc)) from None
    else:
        from dashboard.whatif.budgets import default_budgets
        from engine.tenants import to_tree

        accounts = Store(args.store).read("jobs")["account"].drop_nulls().unique().to_list()
        tree, source = to_tree(default_budgets(accounts)), "equal shares per account (no budget file)"
    try:
        inputs = runner.load_inputs(args.store, tree, window_s=parse_duration(args.window, "--window"),
                                    end=_end(args.end), cluster=args.cluster, budgets_source=source,
                                    warm_start=not args.cold_start)
        # oversold guarantees are an error; nodes without accounts / accounts outside the tree are warnings
        for warning in validate(tree, inputs.capacity_gpus or None, inputs.jobs["account"].to_list()):
            print(f"quotaloop scenario: warning: {warning}", file=sys.stderr)
        result = runner.run(spec, inputs)
    except (ValueError, BudgetError) as exc:
        if type(exc).__name__ in ("ConfigError", "QueryError"):
            raise
        raise UserError(str(exc)) from None
    try:
        out = result.write(args.out)
    except OSError as exc:
        raise UserError(f"--out {args.out}: cannot write: {exc.strerror or exc}") from None
    if args.json:
        sys.stdout.write(runner.json_text(result.summary()))
        return 0
    counts = inputs.counts()
    warm = (f"; warm start: {counts['jobs_started_before']} jobs started before it (as logged), "
            f"{counts['jobs_pending_at_start']} pending at it" if inputs.warm_start else "; cold start")
    print(f"{out}: {spec.describe()}; {counts['jobs']} jobs submitted {inputs.start:%Y-%m-%d %H:%M} .. "
          f"{inputs.end:%Y-%m-%d %H:%M} UTC on {inputs.cluster}{warm}")
    for note in result.notes:
        print(f"note: {note}")
    width = max(len(r["label"]) for r in result.comparison.iter_rows(named=True)) if result.comparison.height else 10
    status = dict(zip(*result.judged().select("metric", "status"))) if result.fidelity else {}
    print(f"{'metric':<{width}}  {'baseline':>14}  {'scenario':>14}  delta vs the baseline's error")
    for r in result.comparison.iter_rows(named=True):
        print(f"{r['label']:<{width}}  {runner.fmt_value(r['baseline'], r['metric']):>14}  "
              f"{runner.fmt_value(r['scenario'], r['metric']):>14}  {status.get(r['metric'], '')}".rstrip())
    for line in result.fidelity_words():
        print(f"fidelity: {line}")
    s = result.summary()
    print("gains: " + (", ".join(s["teams"]["gains"]) or "nobody") + "; loses: " +
          (", ".join(s["teams"]["loses"]) or "nobody"))
    if "loop_stable" in s:
        print("quota loop: " + ("stable (no team's multiplier oscillates)" if s["loop_stable"] else
                                "OSCILLATING: " + ", ".join(result.extra["stability"].filter("oscillating")["bucket"])))
    return 0
