"""``quotaloop report --store DIR --window 7d [--end DATE] [--audience A] [--team T] [--user U] [--cluster C]
[--partition P] [--state S] [--job-class J] [--budgets TOML] --out DIR``: a dated report export.

The dashboard's Reports page builds the same report for its sidebar filters and prints this command for it.

Meant to run unattended (cron, systemd timer, Kubernetes CronJob): it prints the written paths, one per line,
and exits 0; on any failure it prints one line to stderr, exits 2 and leaves no half-written file. The report
itself is ``dashboard.report``; this module only maps the flags onto ``build_report``.
"""
from __future__ import annotations

import os
import sys

from .errors import UserError

# dashboard.report (Polars, Altair, Plotly) is imported inside run(): see the start-up note in dashboard.cli.


def register(sub):
    p = sub.add_parser(
        "report", help="export a self-contained HTML report plus CSV/Parquet tables for a window",
        description="Export the waste and fair-share report of a window of whole UTC days. Output names carry "
                    "the window (quotaloop-report-FIRST_LAST.html); re-running a window overwrites atomically.")
    p.add_argument("--store", default=None, help="store directory (default: the bundled sample store)")
    p.add_argument("--window", default="7d", help="window length: 7d, 2w, 30d, ... (whole days; default 7d)")
    p.add_argument("--end", default=None,
                   help="last day of the window, inclusive: YYYY-MM-DD, 'today' (default, UTC; covers today so "
                        "far), 'yesterday' (the last complete UTC day: use it in schedules) or 'latest' (the day "
                        "of the newest job in the store)")
    p.add_argument("--audience", default="platform", choices=["platform", "manager", "user"])
    p.add_argument("--team", help="account subtree (manager audience: the team, required; platform and user: an "
                                  "optional filter)")
    p.add_argument("--user", help="user name (user audience: required)")
    p.add_argument("--team-level", type=int, default=3,
                   help="a team is the first N '/'-separated parts of the account path (default 3: org/group/team)")
    p.add_argument("--budgets", metavar="TOML",
                   help="budget tree (budgets.toml): fair share against its water-filled entitlements "
                        "(default: equal shares per account level)")
    p.add_argument("--cluster", help="only jobs of this cluster")
    p.add_argument("--partition", help="only jobs of this partition")
    p.add_argument("--state", help="only jobs in this normalised state (COMPLETED, FAILED, CANCELLED, ...)")
    p.add_argument("--job-class", dest="job_class", help="only jobs of this class (training, debug, ...)")
    p.add_argument("--no-validation", dest="validation", action="store_false",
                   help="leave out the validation section (the platform and manager reports replay the window once "
                        "in the simulator to say how far to trust a what-if)")
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--format", default="html,csv,parquet",
                   help="comma-separated: html, csv, parquet, png, svg (default html,csv,parquet)")
    return p


def run(args) -> int:
    from dashboard.report import ReportError, build_report, filters_of, parse_duration, parse_formats

    try:
        paths = build_report(args.store, parse_duration(args.window), end=args.end, audience=args.audience,
                             team=args.team, user=args.user, formats=parse_formats(args.format), out_dir=args.out,
                             team_level=args.team_level, budgets=args.budgets, filters=filters_of(args),
                             validation=args.validation)
    except ReportError as exc:
        raise UserError(str(exc)) from None
    except Exception as exc:  # unattended runs need one line, not a traceback
        if os.environ.get("QUOTALOOP_DEBUG"):
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        print(f"quotaloop report: internal error: {type(exc).__name__}: {first} "
              "(set QUOTALOOP_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0
