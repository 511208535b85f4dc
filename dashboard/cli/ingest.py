"""``quotaloop ingest PATH... --store DIR``: parse exports into the store in one atomic transaction."""
from __future__ import annotations

import json
import os
import sys

from queries.ingest import formats


def register(sub):
    p = sub.add_parser("ingest", help="ingest scheduler exports into a store")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--store", required=True, help="store directory (created if missing)")
    p.add_argument("--format", default="auto",
                   choices=["auto", *formats.names()])
    p.add_argument("--cluster", help="cluster name (default: from the file, else 'default')")
    p.add_argument("--fields", help="sacct without header: comma-separated column names, as given to sacct --format")
    p.add_argument("--delimiter", help="sacct delimiter (default: detected)")
    p.add_argument("--timezone", metavar="ZONE",
                   help="IANA zone sacct text's wall-clock times are in, e.g. Europe/Amsterdam (default: this "
                        "machine's zone); times are stored as UTC. Epoch times (sacct --json, SWF) and relative "
                        "ones (openb, PAI) are never shifted")
    p.add_argument("--procs-per-node", type=int, help="SWF: processors per node")
    p.add_argument("--gpus-per-node", type=int, help="SWF: GPUs per node (processors map to GPUs)")
    p.add_argument("--job-label", help="prometheus: label(s) naming the job, comma list joined with '/' "
                                       "(e.g. namespace,pod; default: jobid, else hpc_job, else slurm_job_id)")
    p.add_argument("--step", type=float, help="prometheus: the query_range step in seconds (default: inferred)")
    p.add_argument("--metric", help="prometheus: metric name of series without __name__ (e.g. DCGM_FI_DEV_GPU_UTIL)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    return p


def _keep_freed_pages() -> None:
    """Polars' allocator (jemalloc; Polars sets its decay to 0.5 s / 1 s when it loads) hands freed pages back
    to the kernel and faults fresh ones in moments later; a one-shot batch command does better keeping them
    until it exits (one ``quotaloop ingest`` of the 1M-line sacct benchmark dump: about 5 % less CPU). The
    setting is read when Polars loads, so it can only be made before the first import, and only here: a
    long-lived process (the dashboard) should give memory back. An explicit ``_RJEM_MALLOC_CONF`` wins."""
    if "polars" not in sys.modules:
        os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:-1,muzzy_decay_ms:-1")


def run(args) -> int:
    _keep_freed_pages()
    # imported here, not at the top: after _keep_freed_pages (it must run before Polars loads), and for start-up
    # (see dashboard.cli)
    from queries.ingest import ingest
    from queries.store import Store, StoreError

    Store(args.store).check_writable()
    options = {k: v for k, v in {
        "fields": args.fields, "delimiter": args.delimiter,
        "procs_per_node": args.procs_per_node, "gpus_per_node": args.gpus_per_node,
        "job_label": args.job_label, "step": args.step, "metric": args.metric,
    }.items() if v is not None}
    try:
        summaries = ingest(args.paths, args.store, fmt=args.format, cluster=args.cluster, timezone=args.timezone,
                           **options)
    except OSError as exc:  # inputs are read inside ingest (IngestError): this is the store failing mid-write
        raise StoreError(f"store {args.store}: cannot write: {exc.strerror or exc}"
                         f"{f' ({exc.filename})' if exc.filename else ''}; the store is unchanged") from None
    if args.json:
        json.dump([s.__dict__ for s in summaries], sys.stdout, indent=1)
        print()
    else:
        for s in summaries:
            print(s.line())
    return 0
