"""``quotaloop rollup --store DIR [--rebuild]``: the per-job usage rollup (``queries.analytics.rollup``).

Every ingest keeps the rollup of the jobs it touches; ``--rebuild`` re-derives it from scratch from the jobs and
samples (a store ingested before the rollup existed, or a check that incremental = rebuild). Without
``--rebuild`` it says how many jobs have a rollup row.
"""
from __future__ import annotations


def register(sub):
    p = sub.add_parser("rollup", help="show or rebuild the per-job usage rollup the queries read")
    p.add_argument("--store", required=True, help="store directory")
    p.add_argument("--rebuild", action="store_true",
                   help="re-derive every job's rollup row from the samples (one atomic commit)")
    return p


def run(args) -> int:
    # imported here for start-up (see dashboard.cli)
    from queries.analytics import rollup
    from queries.store import Store

    Store(args.store).check()
    if args.rebuild:
        Store(args.store).check_writable()
        n = rollup.rebuild(args.store)
        print(f"{args.store}: job_rollup rebuilt: {n} rows")
        return 0
    st = rollup.status(args.store)
    hint = (f"; {st['missing']} jobs without a row are answered from their samples "
            f"(run `quotaloop rollup --store {args.store} --rebuild`)" if st["missing"] else "")
    print(f"{args.store}: {st['jobs']} jobs, {st['rows']} with a rollup row{hint}")
    return 0
