"""``quotaloop simulate``: replay a job history under another scheduling policy (see ``engine``).

    quotaloop simulate --store DIR [--cluster NAME] | --workload FILE [--format swf|sacct|csv]
        [--nodes-csv nodes.csv | --nodes N --gpus-per-node G --cpus-per-node C | --procs P]
        --policy fcfs|priority|fairshare|drf|multifactor --backfill none|easy|conservative [--reservation-depth K]
        [--backfill-order queue|area|smallest] [--bf-max-job-test K] [--budgets budgets.toml]
        [--min-runtime [CLASS=]DURATION]... [--checkpoint-interval DURATION] [--walltime-margin FRACTION]
        [--replay none|logged] [--warm-start TIME [--window-end TIME]] [--attainment-history] [--seed N]
        [--drain NODES@TIME[..END] | PROCS@TIME..END (--procs)]... [--drain-file CSV] [--node-mtbf DURATION] [--repair-time DURATION]
        [--qos-preempt QOS=QOS[,QOS]]... [--sched-interval DURATION [--sched-cycle all|backfill]]
        [--max-jobs-per-user N] [--config-file calibration.json]
        --out DIR [--json]

``--out DIR`` gets ``jobs.parquet`` (simulated jobs in the store's jobs schema plus wait_s, node list,
preemptions, lost GPU-seconds, wait_reason, ...), ``timeline.parquet`` and ``metrics.json``; the directory is
a flat store, so every query runs on it. ``--cluster NAME`` picks the store's cluster (as in every command);
without ``--nodes-csv``/``--nodes``/``--procs`` the layout comes from the store's (or the workload file's) nodes
table. ``--budgets`` takes the budgets.toml of ``engine.budgets``
(shares per org/team, guarantees, per-class min runtimes). Durations: 3600, 90s, 30m, 8h, 1h30m, 2d.
``--min-runtime 8h`` (every job) or ``--min-runtime training=8h`` (a class; repeatable) is a what-if override:
it beats the job's logged min runtime and the budget file's (``engine.min_runtime``), as ``scenario min-runtime``.
``--replay logged`` runs the log's own schedule instead of a policy (the "no policy change" baseline);
``--bf-max-job-test K`` caps each backfill pass at K candidates (Slurm's bf_max_job_test; default: exact).
``--warm-start TIME`` (ISO time or YYYY-MM-DD, UTC; seconds for a numeric trace) starts from the logged state at
TIME (``engine.warm_start``): jobs that started before it run as logged on their logged nodes, the rest are simulated
from TIME on (a job pending then keeps its real submit time); only the jobs that matter are replayed (running or
pending at TIME, submitted before ``--window-end``, and those of the fair-share lookback before TIME), and
metrics and attainment cover [TIME, --window-end) (default: to the last end).
``--drain NODES@TIME`` drains nodes at TIME (repeatable; NODES a name, a comma list or a Slurm hostlist like
``gpu[001-004]``; TIME like ``--warm-start``; ``..END`` brings them back at END): no new work, each running job is
requeued once it has run its min runtime (DOMAIN.md section 6's drain at min runtime), the node is down once
empty and returns ``--repair-time`` later (default 4h) or at END. ``--drain-file CSV`` reads drain windows
(header ``node,start,end,reason``, ``engine.drains``); ``--node-mtbf DURATION`` adds random drains (seeded).
Under ``--procs P`` (one pool, no node names) a drain is ``--drain PROCS@TIME..END``: PROCS processors take no new
work from TIME to END (running jobs keep running; ``engine.capacity``), e.g. ``--drain 20@1997-03-01..1997-03-02``.
``--qos-preempt high=low,normal`` (repeatable; or a ``[qos]`` table in the budget file) lets jobs of QoS high
preempt running jobs of QoS low and normal once they have run their min runtime (Slurm's preempt/qos).
``--sched-interval DURATION`` runs the scheduler in cycles, a pass every DURATION (Slurm's sched_interval /
bf_interval, Maui's poll interval; default 0 = a pass at every event); ``--sched-cycle backfill`` keeps a main pass
(queue order, no backfill) at every event and lets only backfilling wait for the cycle, as Slurm's
event-triggered scheduler does. ``--config-file`` applies the knobs a
``quotaloop validate --calibrate`` saved (its ``calibration.json``: cycle, scope, reservation depth); a flag given
explicitly wins over the file. ``--max-jobs-per-user N`` caps each user's running jobs at N (Maui's MAXJOB, Slurm's
MaxJobsPerUser; a job over it waits with the reason ``user_limit``). With ``--store`` and no ``--config-file``, the store's own calibration
(``STORE/calibration.json``, ``validate --calibrate --save``) applies, said on stderr; ``--no-calibration`` ignores it.
With ``--workload`` the summary (and ``metrics.json``'s ``workload``) first counts what reading the file found,
``read = accepted + rejected``: a record the reader rejects is never simulated nor counted as skipped.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import sys

from engine.backfill import BACKFILLS
from engine.policies import POLICIES
from queries.ingest import formats

from .errors import UserError, check_output_dir

# Polars and the rest of engine and queries are imported inside the functions: see the start-up note in
# dashboard.cli.


def register(sub):
    p = sub.add_parser("simulate", help="re-simulate a job history under another scheduling policy",
                       description=__doc__.split("\n\n")[1] if __doc__ else None)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--store", help="store directory whose jobs (and nodes) to replay")
    src.add_argument("--workload", metavar="FILE", help="a scheduler export to replay (SWF, sacct, canonical CSV, ...: see --format)")
    p.add_argument("--format", choices=formats.job_log_names(),
                   help="format of --workload (default: detected)")
    add_layout_flags(p, "replay")
    p.add_argument("--policy", default="fcfs", choices=sorted(POLICIES))
    p.add_argument("--backfill", default="easy", choices=sorted(BACKFILLS))
    p.add_argument("--reservation-depth", type=int, help="reserve for the first K blocked jobs (1 = EASY)")
    p.add_argument("--backfill-order", default="queue", choices=["queue", "area", "smallest"])
    p.add_argument("--bf-max-job-test", type=int, metavar="K", help="test at most K backfill candidates per pass "
                                                                      "(Slurm's bf_max_job_test; default: all, exact)")
    p.add_argument("--budgets", metavar="TOML", help="budget tree: shares, guarantees, min runtimes per class")
    p.add_argument("--quota", default="none", choices=["none", "guarantee"],
                   help="guarantee: guaranteed GPUs protected, work beyond them reclaimable (needs --budgets)")
    p.add_argument("--min-runtime", action="append", default=[], metavar="[CLASS=]DURATION",
                   help="min runtime override (repeatable): DURATION for every job, CLASS=DURATION for a job class; "
                        "beats the log and the budget file (engine.min_runtime); 0 = preemptible at once, "
                        "none = never preempted")
    p.add_argument("--checkpoint-interval", metavar="DURATION", help="work since the last checkpoint is lost on "
                                                                     "preemption (default: no checkpoints)")
    p.add_argument("--walltime-margin", type=float, default=None, metavar="FRACTION",
                   help="a backfilled job must fit its limit / (1 - FRACTION) in the hole (e.g. 0.2; default 0, "
                        "or --config-file's)")
    p.add_argument("--lookback", metavar="DURATION", default="7d", help="fair-share usage window (default 7d)")
    p.add_argument("--replay", default="none", choices=["none", "logged"],
                   help="logged: replay the log's own schedule (logged starts, nodes, run times, states); "
                        "the 'no policy change' baseline")
    p.add_argument("--warm-start", metavar="TIME", help="start from the logged cluster state at TIME (ISO time or "
                                                          "YYYY-MM-DD, UTC; seconds for numeric traces)")
    p.add_argument("--window-end", metavar="TIME", help="end of the measured window (default: the last job end)")
    p.add_argument("--attainment-history", action="store_true",
                   help="also report attainment per lookback-long window ending every day")
    p.add_argument("--drain", action="append", default=[], metavar="NODES@TIME[..END]",
                   help="drain these nodes at TIME (repeatable): jobs leave at their min runtime, e.g. "
                        "gpu[001-004]@2026-11-25T06:00")
    p.add_argument("--drain-file", metavar="CSV", help="drain windows, header node,start,end,reason")
    p.add_argument("--node-mtbf", metavar="DURATION", help="random drains: mean time between drains per node")
    p.add_argument("--repair-time", metavar="DURATION", default="4h",
                   help="a drained node returns this long after it emptied (default 4h)")
    p.add_argument("--qos-preempt", action="append", default=[], metavar="QOS=QOS[,QOS]",
                   help="jobs of the first QoS may preempt the others' after their min runtime (repeatable)")
    p.add_argument("--sched-interval", metavar="DURATION",
                   help="scheduler cycle: a pass every DURATION (default 0 = at every event)")
    p.add_argument("--sched-cycle", choices=["all", "backfill"],
                   help="with --sched-interval: all passes wait for the cycle (all, default) or only backfilling "
                        "(backfill: a main pass in queue order at every event, as Slurm's)")
    add_user_limit_flag(p)
    p.add_argument("--config-file", metavar="JSON", help="calibrated knobs saved by `quotaloop validate --calibrate` "
                   "(default with --store: the store's own calibration.json, if any)")
    p.add_argument("--no-calibration", action="store_true",
                   help="with --store: ignore the store's calibration.json (run on the engine's defaults)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON")
    return p


def add_user_limit_flag(p) -> None:
    """``--max-jobs-per-user N`` (``SimConfig.max_running_jobs_per_user``), shared by simulate, validate, scenario."""
    p.add_argument("--max-jobs-per-user", type=int, metavar="N",
                   help="per-user running limit: a user's jobs running at once (Maui's MAXJOB, Slurm's "
                        "MaxJobsPerUser); 0 = no limit (default 0, or --config-file's)")


def add_layout_flags(p, verb: str) -> None:
    """The cluster and node-layout flags ``simulate`` and ``validate`` share. ``--cluster`` is the cluster's name,
    as in every command (``--store-cluster``, its old spelling here, is a hidden alias); the layout file is
    ``--nodes-csv``."""
    p.add_argument("--cluster", metavar="NAME", help=f"with --store: the cluster to {verb} (needed when the store "
                                                      "holds several)")
    p.add_argument("--store-cluster", dest="cluster", metavar="NAME", help=argparse.SUPPRESS)
    p.add_argument("--nodes-csv", metavar="FILE", help="node layout: canonical nodes CSV or an openb node list "
                                                       "(default: the store's or the workload's nodes table)")
    p.add_argument("--nodes", type=int, help="uniform layout: number of nodes")
    p.add_argument("--gpus-per-node", type=float, default=0.0)
    p.add_argument("--cpus-per-node", type=float, default=None)
    p.add_argument("--mem-per-node", help="uniform layout: memory per node in GiB (default: not a constraint)",
                   type=float, default=None)
    p.add_argument("--procs", type=int, help="processor-count mode: one pool of P processors (SWF traces)")


def _user_error(msg):
    # engine.ConfigError is one of the CLI's one-line errors however the CLI was started (python -m included)
    from engine import ConfigError

    return ConfigError(msg)


def _load_workload(args):
    """``(jobs, nodes, read)``: ``read`` is None for a store, else what reading the workload file found:
    ``{"file", "rows_read", "rows_accepted", "rows_rejected"}`` (a rejected record is not simulated, and the
    summary must say so: "800 simulated" of an 801-record file is otherwise a silent loss)."""
    if args.store:
        from dashboard.whatif import loader
        from queries.store import Store

        Store(args.store).check()  # StoreError: missing, not a directory, corrupt
        clusters = sorted(c for c in loader.clusters(args.store)["cluster"].to_list() if c is not None)
        if args.cluster:
            if args.cluster not in clusters:
                raise _user_error(f"--cluster {args.cluster}: no jobs; clusters: {', '.join(clusters)}")
        elif len(clusters) > 1:
            raise _user_error(f"the store holds clusters {', '.join(clusters)}: choose one with --cluster")
        # every job of the cluster: the warm-start window is cut in ``run``, for a store and a file alike
        jobs, nodes = loader.load(args.store, cluster=args.cluster)
        if nodes.height and loader.layout_inferred(args.store, args.cluster):
            print(f"quotaloop simulate: note: {loader.INFERRED_NOTE}", file=sys.stderr)
        return jobs, nodes, None
    from queries.ingest import detect_format

    fmt = args.format or detect_format(args.workload)
    if fmt not in formats.job_log_names():
        raise _user_error(f"--workload: format {fmt} is not a job log (use {', '.join(formats.job_log_names())})")
    parsed = formats.REGISTRY[fmt].reader()(args.workload)
    read = {"file": str(args.workload), "rows_read": parsed.rows_read, "rows_accepted": parsed.rows_accepted,
            "rows_rejected": parsed.rejects.height}
    return parsed.jobs, parsed.nodes, read


def check_cluster_name(args) -> None:
    """``--cluster`` names a cluster; before it did, ``simulate --cluster nodes.csv`` gave the layout file. An
    existing file as the name is that old spelling: say where the file goes instead of "no jobs in cluster"."""
    if args.cluster and os.path.isfile(args.cluster):
        raise UserError("--cluster is the cluster name; give the layout file with --nodes-csv")


def _cluster(args, nodes):
    from engine import Cluster

    chosen = [x for x in ("nodes_csv", "nodes", "procs") if getattr(args, x) is not None]
    if len(chosen) > 1:
        raise _user_error("give one of --nodes-csv, --nodes (with --gpus-per-node/--cpus-per-node) or --procs")
    if args.nodes_csv:
        return Cluster.from_csv(args.nodes_csv)
    if args.nodes is not None:
        if args.cpus_per_node is None and not args.gpus_per_node:
            raise _user_error("--nodes needs --gpus-per-node and/or --cpus-per-node")
        mem = None if args.mem_per_node is None else args.mem_per_node * 2**30
        return Cluster.uniform(args.nodes, args.gpus_per_node, args.cpus_per_node or 0.0, mem)
    if args.procs is not None:
        return Cluster.procs(args.procs)
    if nodes is not None and nodes.height:
        return Cluster.from_frame(nodes)
    raise _user_error("no cluster layout: the input has no node list and no job names its nodes; give --nodes-csv "
                      "FILE, --nodes N --gpus-per-node G --cpus-per-node C, or --procs P")


def _instant(text, flag):
    """None, seconds (a number) or an aware UTC datetime (ISO time / YYYY-MM-DD)."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    from engine.config import ConfigError, instant

    try:
        return instant(text, flag)
    except ConfigError as exc:
        raise _user_error(str(exc)) from None


def _require_work_after(jobs, warm) -> None:
    """A warm start at or after the log's last event (submit, start or end) leaves nothing to simulate: say so in
    one line instead of failing inside the engine."""
    import polars as pl

    last = jobs.select(pl.max_horizontal(pl.col("submit").max(), pl.col("start").max(), pl.col("end").max())).item()
    if last is None or warm >= last:
        raise _user_error(f"--warm-start {warm:%Y-%m-%d %H:%M:%S} UTC: after the log's last job event"
                          f"{f' ({last:%Y-%m-%d %H:%M:%S} UTC)' if last is not None else ' (the log has no jobs)'}: "
                          "nothing to simulate")


def load_budgets(path):
    """The ``--budgets`` tree (None without the flag); a bad file is a one-line error."""
    from engine.budgets import BudgetError, load

    if not path:
        return None
    try:
        return load(path)
    except BudgetError as exc:
        raise _user_error(str(exc)) from exc


def check_budgets(budgets, cluster, command: str) -> None:
    """The check ``scenario`` and ``report --budgets`` make too: guarantees above the layout's GPUs (oversold quota)
    stop the command; the tree's other findings are warnings on stderr."""
    from engine.budgets import BudgetError, validate

    if budgets is None:
        return
    try:
        warnings = validate(budgets, sum(cluster.gpus) or None)
    except BudgetError as exc:
        raise _user_error(str(exc)) from None
    for warning in warnings:
        print(f"quotaloop {command}: warning: {warning}", file=sys.stderr)


def run(args) -> int:
    import polars as pl

    from engine import SimConfig, min_runtime, parse_duration, simulate
    from engine.config import CapacityEvent

    check_cluster_name(args)
    budgets = load_budgets(args.budgets)
    check_output_dir(args.out)
    jobs, nodes, read = _load_workload(args)
    warm, window_end = _instant(args.warm_start, "--warm-start"), _instant(args.window_end, "--window-end")
    lookback_s = parse_duration(args.lookback, "--lookback")
    if warm is not None and isinstance(warm, dt.datetime) and jobs.schema.get("submit") == pl.Datetime("us", "UTC"):
        from engine.warm_start import window_filter

        _require_work_after(jobs, warm)
        jobs = jobs.filter(window_filter(warm, window_end, lookback_s))
    cluster = _cluster(args, nodes)
    events, qos_preempts = node_events(args, cluster.procs_mode), qos_pairs(args.qos_preempt)
    procs_drains = tuple(e for e in events if isinstance(e, CapacityEvent))  # --drain PROCS@TIME..END under --procs
    events = [e for e in events if not isinstance(e, CapacityEvent)]
    check_budgets(budgets, cluster, "simulate")
    cfg = SimConfig(
        policy=args.policy, backfill=args.backfill, reservation_depth=args.reservation_depth,
        backfill_order=args.backfill_order, backfill_max_job_test=args.bf_max_job_test,
        walltime_margin=args.walltime_margin or 0.0, budgets=budgets,
        quota=args.quota,
        min_runtime_by_class=min_runtime.parse_overrides(args.min_runtime, "--min-runtime"),
        checkpoint_interval_s=(None if args.checkpoint_interval is None
                               else parse_duration(args.checkpoint_interval, "--checkpoint-interval")),
        lookback_s=lookback_s, replay=args.replay, warm_start=warm, window_end=window_end,
        attainment_history=args.attainment_history, seed=args.seed, node_events=tuple(events),
        node_mtbf_s=None if args.node_mtbf is None else parse_duration(args.node_mtbf, "--node-mtbf"),
        repair_time_s=parse_duration(args.repair_time, "--repair-time"), qos_preempts=qos_preempts,
        capacity_events=procs_drains)
    knobs = calibrated_knobs(args, discover=bool(args.store))
    if knobs.get("node_events") and cfg.node_events:  # the calibration's drains join --drain's, never replace them
        knobs["node_events"] = (*knobs["node_events"], *cfg.node_events)
    if knobs.get("capacity_events") and cfg.capacity_events:
        knobs["capacity_events"] = (*knobs["capacity_events"], *cfg.capacity_events)
    cfg = dataclasses.replace(cfg, **knobs)
    res = simulate(jobs, cluster, cfg)
    if read:
        res.metrics["workload"] = read
    try:
        out = res.write(args.out)
    except OSError as exc:
        raise UserError(f"--out {args.out}: cannot write: {exc.strerror or exc}") from None
    m = res.metrics
    if args.json:
        from engine.result import metrics_json

        sys.stdout.write(metrics_json(m))
    else:
        if read:
            print(f"{read['file']}: read {read['rows_read']} = accepted {read['rows_accepted']}"
                  f" + rejected {read['rows_rejected']} (rejected records are not simulated)")
        w = m["wait_s"]
        ws = m.get("warm_start")
        pinned = (f", {ws['jobs_running']} running and {ws['jobs_history']} finished as logged before the warm start"
                  if ws and "jobs_running" in ws else "")
        print(f"{out}: {m['jobs_simulated']} jobs simulated ({m['jobs_skipped']} skipped{pinned}); "
              f"occupancy {_pct(m['occupancy'])}, utilisation {_pct(m['utilisation'])}; "
              f"wait mean {_num(w['mean'])} s, p90 {_num(w['p90'])} s; "
              f"bounded slowdown {_num(m['bounded_slowdown_mean'])}; preemptions {m['preemptions']}, "
              f"lost GPU-hours {_num(m['lost_gpu_hours'])}")
    return 0


def calibrated_knobs(args, *, discover: bool = False) -> dict:
    """SimConfig fields from the calibration (``--config-file``; with ``discover`` also the store's own
    ``calibration.json`` unless ``--no-calibration``: ``dashboard.whatif.calibration``), then the explicit
    ``--sched-interval`` / ``--sched-cycle`` / ``--reservation-depth`` / ``--walltime-margin`` /
    ``--max-jobs-per-user`` flags, which win."""
    from engine import parse_duration

    knobs = {}
    store = getattr(args, "store", None) if discover else None
    try:
        # no file to read (a --workload run without --config-file): the what-if package is not even imported
        cal = None if not args.config_file and store is None else _calibration().resolve(
            store, args.config_file, ignore_store=getattr(args, "no_calibration", False))
    except ValueError as exc:
        flag = "--config-file" if args.config_file else "--store's calibration:"
        raise _user_error(f"{flag} {exc} (--no-calibration ignores a store's file)") from None
    if cal is not None and cal.discovered:  # said aloud: a replay must never run calibrated without saying so
        knobs, notes = cal.for_policy(args.policy)
        print(f"{cal.path}: applying the store's {cal.describe()} (--no-calibration to ignore it)",
              *(f"  note: {n}" for n in notes), sep="\n", file=sys.stderr)
    elif cal is not None:
        knobs = dict(cal.knobs)
    if args.sched_interval is not None:
        knobs["sched_interval_s"] = parse_duration(args.sched_interval, "--sched-interval")
    if args.sched_cycle is not None:
        knobs["sched_cycle"] = args.sched_cycle
    if args.reservation_depth is not None:
        knobs["reservation_depth"] = args.reservation_depth
    if getattr(args, "walltime_margin", None) is not None:  # given explicitly: beats the file, as the others do
        knobs["walltime_margin"] = args.walltime_margin
    if getattr(args, "max_jobs_per_user", None) is not None:
        knobs["max_running_jobs_per_user"] = args.max_jobs_per_user
    return knobs


def _calibration():
    from dashboard.whatif import calibration

    return calibration


def node_events(args, procs: bool = False) -> list:
    """The ``--drain`` specs, then the ``--drain-file`` rows, as engine node events (under ``--procs`` a spec is
    ``PROCS@TIME..END``, a ``CapacityEvent``)."""
    from engine import drains

    events = [e for spec in args.drain for e in ([drains.parse_procs_spec(spec)] if procs else drains.parse_spec(spec))]
    if args.drain_file:
        events += drains.load_file(args.drain_file)
    return events


def qos_pairs(specs) -> dict:
    """``["high=low,normal", ...]`` -> {"high": ["low", "normal"]} (a later spec of the same QoS adds to it)."""
    out: dict[str, list[str]] = {}
    for spec in specs:
        qos, eq, victims = spec.partition("=")
        names = [v.strip() for v in victims.split(",") if v.strip()]
        if not eq or not qos.strip() or not names:
            raise _user_error(f"--qos-preempt {spec!r}: expected QOS=QOS[,QOS] (e.g. high=low,normal)")
        out.setdefault(qos.strip(), []).extend(n for n in names if n not in out.get(qos.strip(), []))
    return out


def _pct(x):
    return "n/a" if x is None else f"{100 * x:.1f} %"


def _num(x):
    return "n/a" if x is None else f"{x:,.1f}"

