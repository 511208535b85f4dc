"""``quotaloop validate``: how far to trust a what-if: re-simulate the logged window under the modeled configuration
and compare with what the cluster really did (``engine.fidelity``; DOMAIN.md section 10).

    quotaloop validate --store DIR [--cluster NAME] [--warm-start TIME] [--window-end TIME]
        [--policy fcfs|priority|fairshare|drf|multifactor] [--backfill none|easy|conservative] [--reservation-depth K]
        [--backfill-order queue|area|smallest] [--bf-max-job-test K] [--budgets TOML] [--lookback DURATION]
        [--sched-interval DURATION [--sched-cycle all|backfill]] [--config-file JSON]
        [--nodes-csv nodes.csv | --nodes N --gpus-per-node G --cpus-per-node C | --procs P]
        [--format table|csv|json] [--out DIR]
        [--walltime-margin F] [--max-jobs-per-user N]
        [--calibrate [--grid S,S,...] [--cycles all,backfill] [--depths K,K,...] [--margins F,F,...]
                     [--weights A:S:F,...] [--drain-fractions F,F,...] [--train-fraction F]
                     [--user-limits N,N,...] [--workers N | --ray ADDRESS] [--save]]

The window is [--warm-start, --window-end) (default: the first submit to the end of the log); the replay starts
from the logged state at its start (``simulate --warm-start``, ``engine.warm_start``) and the jobs submitted in it are
compared, per job and in aggregate: Pearson / Spearman of waits, mean / p50 / p90 wait logged vs simulated per job
class and size bucket, start-order agreement, share of jobs started at once, hourly occupancy error and, with
``--budgets``, per-team attainment error. ``--out DIR`` gets ``validation.json`` (the report and a verdict).
``--calibrate`` fits the scheduler's cycle (``--sched-interval``) on the first ``--train-fraction`` (0.7) of the
window's jobs, one replay per ``--grid`` value in a process pool of ``--workers`` (default min(2, CPUs)), reports
the held-back rest before and after, and writes ``calibration.json`` to --out: ``simulate --config-file`` reads it;
``--save`` also saves it as the store's own ``STORE/calibration.json``, which the Fair share page, ``scenario`` and
``simulate --store`` then apply (``dashboard.whatif.calibration``).
``--depths`` adds the reservation depth as a knob, ``--margins`` the estimate handling (``walltime_margin``, with the
log's own run time / limit figures as its evidence), ``--weights`` (with ``--policy multifactor``) the priority
weights of age, size and fair share, ``--drain-fractions`` the capacity over time: that fraction of the capacity
the log left idle for an hour or more while its oldest waiting job fit it is drained in the replay
(``engine.idle_capacity``; whole nodes on a cluster of named nodes, a processor count under ``--procs``),
``--user-limits`` the per-user running limit (``max_running_jobs_per_user``, 0 = none; evidence: each user's largest
number of jobs running at once in the training part and the wait spent at it beside idle capacity,
``engine.user_limit_evidence``). ``--ray ADDRESS`` runs the replays as Ray tasks on a Ray cluster ("auto",
"ray://host:port", or "local" for a Ray on this machine) instead of the local pool; same results.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time

from engine.backfill import BACKFILLS
from engine.policies import POLICIES

from .errors import check_output_dir
from .simulate import (_cluster, _instant, _load_workload, add_layout_flags, add_user_limit_flag, calibrated_knobs,
                       check_budgets, check_cluster_name, load_budgets)

# Polars, queries and the rest of engine are imported inside the functions: see the start-up note in
# dashboard.cli.

KNOB_COLUMNS = ("n", "mean_log_s", "mean_sim_s", "mean_rel_err", "p50_log_s", "p50_sim_s", "p90_log_s", "p90_sim_s",
                "p90_rel_err", "median_abs_err_s", "pearson", "spearman", "zero_wait_share_log", "zero_wait_share_sim")


def register(sub):
    p = sub.add_parser("validate", help="compare a replay under the modeled policy with the log (fidelity)",
                       description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--store", required=True, help="store directory whose history to validate against")
    p.add_argument("--warm-start", metavar="TIME", help="window start (ISO time or YYYY-MM-DD, UTC; default: first submit)")
    p.add_argument("--window-end", metavar="TIME", help="window end (default: the end of the log)")
    add_layout_flags(p, "validate")
    p.add_argument("--policy", default="fcfs", choices=sorted(POLICIES))
    p.add_argument("--backfill", default="easy", choices=sorted(BACKFILLS))
    p.add_argument("--reservation-depth", type=int, help="reserve for the first K blocked jobs (1 = EASY)")
    p.add_argument("--backfill-order", default="queue", choices=["queue", "area", "smallest"])
    p.add_argument("--bf-max-job-test", type=int, metavar="K", help="test at most K backfill candidates per pass")
    p.add_argument("--budgets", metavar="TOML", help="budget tree: adds per-team attainment error")
    p.add_argument("--lookback", metavar="DURATION", default="7d", help="fair-share usage window (default 7d)")
    p.add_argument("--sched-interval", metavar="DURATION",
                   help="scheduler cycle: a pass every DURATION (default 0 = at every event)")
    p.add_argument("--sched-cycle", choices=["all", "backfill"],
                   help="with --sched-interval: all passes wait for the cycle (default) or only backfilling")
    p.add_argument("--walltime-margin", type=float, metavar="F",
                   help="estimate handling: a backfilled job must fit its limit / (1 - F) in the hole (default 0)")
    add_user_limit_flag(p)
    p.add_argument("--config-file", metavar="JSON", help="a calibration.json whose knobs to apply")
    p.add_argument("--cycles", metavar="all,backfill", default="all,backfill",
                   help="--calibrate: the --sched-cycle values to try with each --grid value (default both)")
    p.add_argument("--save", action="store_true",
                   help="--calibrate: also save the fitted configuration as the store's own calibration.json, "
                        "which the Fair share page, scenario and simulate --store then apply")
    p.add_argument("--format", default="table", choices=["table", "csv", "json"])
    p.add_argument("--out", metavar="DIR", help="write validation.json (and calibration.json) here")
    p.add_argument("--calibrate", action="store_true", help="fit the scheduler cycle on the first part of the "
                                                             "window, report the held-back rest")
    p.add_argument("--grid", metavar="S,S,...", help="candidate cycles in seconds or durations "
                                                     "(default 0,30,60,120,300,600)")
    p.add_argument("--depths", metavar="K,K,...", help="--calibrate: reservation depths to try with each setting "
                                                       "(default: the modeled one only; 1 = EASY)")
    p.add_argument("--margins", metavar="F,F,...", help="--calibrate: walltime margins to try with each setting, "
                                                          "fractions in [0, 0.9] (default: the modeled one only)")
    p.add_argument("--weights", metavar="A:S:F,...",
                   help="--calibrate with --policy multifactor: (age:size:fairshare) priority weights to try with "
                        "each setting, e.g. 1:0:0,1:-1:0,1:0:1 (default: the modeled ones only)")
    p.add_argument("--drain-fractions", metavar="F,F,...",
                   help="--calibrate: fractions in [0, 1] of the capacity the log left idle while its oldest "
                        "waiting job fit it >= 1 h to drain in the replay (nodes, or processors under --procs; "
                        "default: none)")
    p.add_argument("--user-limits", metavar="N,N,...",
                   help="--calibrate: per-user running limits to try with each setting, integers in 0..1000 "
                        "(0 = no limit; default: the modeled one only)")
    p.add_argument("--train-fraction", type=float, default=0.7, help="share of the window's jobs to fit on (0.7)")
    p.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                   help="replays in parallel (local process pool; default min(2, CPUs))")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="--calibrate: run the replays as Ray tasks at ADDRESS (auto, ray://host:port, local) "
                        "instead of the local pool (needs the ray extra: pip install 'quotaloop[ray]')")
    return p


def _err(msg):
    from engine import ConfigError

    return ConfigError(msg)


def base_config(args, budgets, warm, window_end):
    """The modeled configuration the flags describe (with ``--config-file``'s knobs unless a flag gives them)."""
    from engine import SimConfig, parse_duration

    knobs = calibrated_knobs(args)  # an explicit flag beats --config-file
    return SimConfig(policy=args.policy, backfill=args.backfill,
                     backfill_order=args.backfill_order, backfill_max_job_test=args.bf_max_job_test,
                     budgets=budgets, lookback_s=parse_duration(args.lookback, "--lookback"),
                     warm_start=warm, window_end=window_end, **knobs).validated()


def run(args) -> int:
    import polars as pl

    from engine import attainment, calibrate, fidelity, simulate

    if args.format not in ("table", "csv", "json"):
        raise _err(f"--format {args.format}: use table, csv or json")
    check_cluster_name(args)
    budgets = load_budgets(args.budgets)
    if args.out:
        check_output_dir(args.out)
    if args.save and not args.calibrate:
        raise _err("--save: saves what --calibrate fits; add --calibrate")
    if args.save:
        from queries.store import Store

        Store(args.store).check_writable()  # before the replays, not after them
    args.workload = None
    jobs, nodes, _read = _load_workload(args)  # validate replays a store; the read counts are for --workload
    if jobs.height == 0:
        raise _err(f"--store {args.store}: no jobs to validate against")
    if jobs.schema.get("submit") != pl.Datetime("us", "UTC"):
        raise _err(f"--store {args.store}: submit times are not UTC datetimes")
    warm, end = _instant(args.warm_start, "--warm-start"), _instant(args.window_end, "--window-end")
    if isinstance(warm, float) or isinstance(end, float):
        raise _err("--warm-start / --window-end: give ISO times or YYYY-MM-DD (the store holds datetimes)")
    if warm is None:
        warm = jobs["submit"].min()
    inside = jobs.filter((pl.col("submit") >= warm) & (True if end is None else pl.col("submit") < end))
    if inside.height == 0:
        raise _err(f"no job submitted in the window [{warm.isoformat()}, {'end' if end is None else end.isoformat()})"
                   f"; the log spans {jobs['submit'].min().isoformat()} to {jobs['submit'].max().isoformat()}")
    cfg = base_config(args, budgets, warm, end)
    cluster = _cluster(args, nodes)
    check_budgets(budgets, cluster, "validate")
    t0_s, t1_s = warm.timestamp(), None if end is None else end.timestamp()

    window = calibrate.window_jobs(jobs, warm, end, cfg.lookback_s)
    res = simulate(window, cluster, cfg)
    m = res.metrics
    att_log = att_sim = None
    if budgets is not None:
        w1 = end.timestamp() if end is not None else None
        win_us = None if w1 is None else (round(t0_s * 1e6), round(w1 * 1e6))
        if win_us is None:
            a = m["attainment"]
            win_us = tuple(round(dt.datetime.fromisoformat(a[k]).timestamp() * 1e6)
                           for k in ("window_start", "window_end"))
        att_log = attainment.of_run(window, budgets, m["capacity"], m["resource"], cfg.lookback_s,
                                    window_us=win_us)["teams"]
        att_sim = m["attainment"]["teams"]
    report = fidelity.compare_run(window, res, window_start=t0_s, window_end=t1_s, attainment_log=att_log,
                                  attainment_sim=att_sim)
    doc = {"window": {"start": warm.isoformat(), "end": None if end is None else end.isoformat()},
           "modeled": {k: v for k, v in cfg.params().items() if k not in ("warm_start", "window_end")},
           "resource": m["resource"], "capacity": m["capacity"], **report,
           "verdict": fidelity.verdict(report)}
    cal = None
    if args.calibrate:
        cal = _calibrate(args, jobs, cluster, cfg, warm, end, m["capacity"])
        doc["calibration"] = cal
    saved = None if cal is None else json.loads(json.dumps(calibrate.config_file(cfg, cal["chosen"], {
        "window": doc["window"], "split": cal["split"], "candidates": cal["candidates"],
        "held_back": {k: v["overall"] for k, v in cal["held_back"].items()}, "evidence": cal["evidence"]},
        jobs, cluster, warm, end), default=str))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        _dump(os.path.join(args.out, "validation.json"), doc)
        if saved is not None:
            _dump(os.path.join(args.out, "calibration.json"), saved)
    if saved is not None and args.save:
        from dashboard.whatif import calibration

        path = calibration.save(saved, args.store)
        print(f"{path}: saved as the store's calibration (the Fair share page, scenario and simulate --store "
              f"apply it; --no-calibration ignores it)", file=sys.stderr)
    _print(doc, args.format)
    return 0


def _calibrate(args, jobs, cluster, cfg, warm, end, capacity) -> dict:
    import polars as pl

    from engine import parse_duration
    from engine.idle_capacity import idle_while_waiting
    from engine.calibrate import (DEFAULT_GRID_S, DRAIN, KNOBS, MAX_MARGIN, check_weights, estimate_evidence,
                                  priority_evidence, split_time)
    from engine.calibrate import MAX_USER_LIMIT
    from engine.calibrate import run as run_calibration
    from engine.user_limit_evidence import user_limit_evidence

    grid = (DEFAULT_GRID_S if not args.grid else
            tuple(parse_duration(x.strip(), "--grid") for x in args.grid.split(",") if x.strip()))
    if not grid:
        raise _err("--grid: no candidate value")
    cycles = tuple(c.strip() for c in args.cycles.split(",") if c.strip())
    bad = [c for c in cycles if c not in ("all", "backfill")]
    if bad or not cycles:
        raise _err(f"--cycles {args.cycles}: use all, backfill or all,backfill")
    depths = (None,)
    if args.depths:
        try:
            depths = tuple(int(x) for x in args.depths.split(",") if x.strip())
        except ValueError:
            raise _err(f"--depths {args.depths}: expected integers >= 1, e.g. 1,2,4") from None
        if not depths or min(depths) < 1:
            raise _err(f"--depths {args.depths}: expected integers >= 1, e.g. 1,2,4")
        if cfg.backfill == "none":
            raise _err("--depths needs --backfill easy or conservative")
    margins = (None,)
    if args.margins:
        try:
            margins = tuple(float(x) for x in args.margins.split(",") if x.strip())
        except ValueError:
            raise _err(f"--margins {args.margins}: expected fractions in [0, {MAX_MARGIN}], e.g. 0,0.2,0.5") from None
        if not margins or min(margins) < 0 or max(margins) > MAX_MARGIN:
            raise _err(f"--margins {args.margins}: expected fractions in [0, {MAX_MARGIN}], e.g. 0,0.2,0.5")
        if cfg.backfill == "none":
            raise _err("--margins needs --backfill easy or conservative (the margin only changes backfilling)")
    weights = (None,)
    if args.weights:
        if cfg.policy != "multifactor":
            raise _err("--weights needs --policy multifactor (the weights are its priority factors)")
        try:
            weights = tuple(check_weights(tuple(float(x) for x in w.split(":")))
                            for w in args.weights.split(",") if w.strip())
        except ValueError as exc:
            raise _err(f"--weights {args.weights}: {exc} (e.g. 1:0:0,1:-1:0,1:0:1)") from None
        if not weights:
            raise _err(f"--weights {args.weights}: no candidate (e.g. 1:0:0,1:-1:0,1:0:1)")
    drains = (None,)
    if args.drain_fractions:
        try:
            drains = tuple(float(x) for x in args.drain_fractions.split(",") if x.strip())
        except ValueError:
            raise _err(f"--drain-fractions {args.drain_fractions}: expected fractions in [0, 1], e.g. 0,0.5,1") \
                from None
        if not drains or min(drains) < 0 or max(drains) > 1:
            raise _err(f"--drain-fractions {args.drain_fractions}: expected fractions in [0, 1], e.g. 0,0.5,1")
    user_limits = (None,)
    if args.user_limits:
        msg = f"--user-limits {args.user_limits}: expected integers in 0..{MAX_USER_LIMIT} (0: no limit), e.g. 0,4,8"
        try:
            user_limits = tuple(int(x) for x in args.user_limits.split(",") if x.strip())
        except ValueError:
            raise _err(msg) from None
        if not user_limits or min(user_limits) < 0 or max(user_limits) > MAX_USER_LIMIT:
            raise _err(msg)
    if not 0.0 < args.train_fraction < 1.0:
        raise _err(f"--train-fraction: must be in (0, 1), got {args.train_fraction}")
    if args.workers < 1:
        raise _err(f"--workers: must be >= 1, got {args.workers}")
    inside = jobs.filter(pl.col("submit") >= warm)
    if end is not None:
        inside = inside.filter(pl.col("submit") < end)
    try:
        split = split_time(inside["submit"].to_list(), args.train_fraction)
    except ValueError as exc:
        raise _err(str(exc)) from None
    if args.ray:
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise _err("--ray: Ray is not installed (pip install 'quotaloop[ray]')")
    train = inside.filter(pl.col("submit") < split)
    size_col = f"req_{cluster.charge_resource}"
    t = time.perf_counter()
    found = run_calibration(jobs, cluster, cfg, warm, split, end, grid, args.workers, cycles, depths, margins,
                            weights, ray_address=args.ray, drains=drains, user_limits=user_limits)
    seconds = time.perf_counter() - t
    print(f"calibration: {found['replays']} replays ({len(found['candidates'])} candidates on [{warm.isoformat()}, "
          f"{split.isoformat()}), the held-back rest under each) in {seconds:.1f} s with "
          f"{f'Ray at {args.ray}' if args.ray else f'{args.workers} worker(s)'}; "
          f"chosen {_knobs(found['chosen'])}", file=sys.stderr)
    return {"knobs": sorted({k for c in found["candidates"] for k in c if k in KNOBS or k == DRAIN}), "train_fraction": args.train_fraction, "split": split.isoformat(),
            "seconds": round(seconds, 3), "workers": args.workers, "ray": args.ray, **found,
            # evidence from the training part only: the held-back jobs inform nothing
            "evidence": {"estimates": estimate_evidence(train),
                         "priority": priority_evidence(train, size_col),
                         # every job that ran before the split holds capacity, whenever it was submitted
                         "capacity": idle_while_waiting(jobs.filter(pl.col("submit") < split), size_col, capacity,
                                                        warm.timestamp(), split.timestamp()),
                         "user_limits": user_limit_evidence(jobs.filter(pl.col("submit") < split), size_col,
                                                            capacity, warm.timestamp(), split.timestamp())},
            "held_back_verdict": {k: _verdict(v) for k, v in found["held_back"].items()}}


def _verdict(report):
    from engine import fidelity

    return fidelity.verdict(report)


def _dump(path, doc) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, sort_keys=True, default=str)
        fh.write("\n")


def rows(doc: dict) -> list[dict]:
    """The table: one row per scope (overall, class:X, size:Y; held-back rows when calibrated)."""
    out = [{"scope": "overall", **_cols(doc["overall"])}]
    out += [{"scope": f"class:{k}", **_cols(v)} for k, v in doc["by_class"].items()]
    out += [{"scope": f"size:{k}", **_cols(v)} for k, v in doc["by_size"].items()]
    cal = doc.get("calibration")
    if cal:
        for k, v in cal["held_back"].items():
            out.append({"scope": f"held-back:{k}", **_cols(v["overall"])})
    return out


def _cols(stats: dict) -> dict:
    return {k: stats.get(k) for k in KNOB_COLUMNS}


def _print(doc: dict, fmt: str) -> None:
    if fmt == "json":
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
        return
    table = rows(doc)
    if fmt == "csv":
        import polars as pl

        from dashboard.safe_csv import to_csv_bytes

        sys.stdout.write(to_csv_bytes(pl.DataFrame(table, infer_schema_length=None)).decode("utf-8"))
        return
    cols = ["scope"] + list(KNOB_COLUMNS)
    cells = [[_cell(r[c]) for c in cols] for r in table]
    width = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cols, width))))
    for x in cells:
        print("  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(x, width))))
    so, oc = doc["start_order"], doc["occupancy"]
    print(f"start order: concordant pairs {_cell(so['concordant_fraction'])} (gamma {_cell(so['gamma'])}) over "
          f"{so['pairs']} pairs at most {so['neighbours']} apart in submit order; hourly occupancy log {_cell(oc['mean_log'])} "
          f"sim {_cell(oc['mean_sim'])}, mean |difference| {_cell(oc['mean_abs_diff'])} over {oc['hours']} h")
    if doc.get("attainment"):
        print(f"attainment: mean |error| {_cell(doc['attainment']['mean_abs_err'])} over "
              f"{len(doc['attainment']['teams'])} teams")
    print(f"verdict: {doc['verdict']}")
    cal = doc.get("calibration")
    if cal:
        print(f"calibrated {_knobs(cal['chosen'])} on the first "
              f"{100 * cal['train_fraction']:.0f} % (split {cal['split']}); held-back: "
              f"{cal['held_back_verdict']['calibrated']}")


def _knobs(chosen: dict) -> str:
    return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in chosen.items())


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3f}"
    return str(v)
