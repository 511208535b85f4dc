"""``quotaloop compact --store DIR --keep-samples 90d``: retention (``queries.analytics.compact``).

Replaces the raw samples older than the keep period (before each cluster's snapshot, from the UTC midnight at or
before it) by hourly samples with the same capped integrals, covered seconds and peaks, in one atomic commit
with the refreshed rollup: every query over windows of whole hours (the dashboard's days and weeks) answers as
before. Prints what it read, kept and replaced.
"""
from __future__ import annotations

from .errors import UserError


def register(sub):
    p = sub.add_parser("compact", help="roll raw samples older than N days up to hourly samples (same answers)")
    p.add_argument("--store", required=True, help="store directory")
    p.add_argument("--keep-samples", required=True, metavar="AGE",
                   help="keep raw samples this recent: Nd (days) or Nh (hours) before each cluster's snapshot")
    return p


def run(args) -> int:
    # imported here for start-up (see dashboard.cli)
    from queries.analytics import compact
    from queries.store import Store

    try:
        keep_s = compact.parse_keep(args.keep_samples)
    except compact.CompactError as exc:
        raise UserError(str(exc)) from None
    Store(args.store).check()
    Store(args.store).check_writable()
    try:
        done = compact.compact(args.store, keep_s)
    except compact.CompactError as exc:
        raise UserError(str(exc)) from None
    print(f"{args.store}: compacted samples older than {args.keep_samples}: {done.summary()}")
    return 0
