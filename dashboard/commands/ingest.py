"""``quotaloop ingest PATH... --store DIR``: parse exports into the store in one atomic transaction."""
from __future__ import annotations

import json
import sys


def register(sub):
    p = sub.add_parser("ingest", help="ingest scheduler exports into a store")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--store", required=True, help="store directory (created if missing)")
    p.add_argument("--format", default="auto",
                   choices=["auto", "sacct", "sacct-json", "swf", "pai", "openb", "csv", "parquet", "samples"])
    p.add_argument("--cluster", help="cluster name (default: from the file, else 'default')")
    p.add_argument("--fields", help="sacct without header: comma-separated column names, as given to sacct --format")
    p.add_argument("--delimiter", help="sacct delimiter (default: detected)")
    p.add_argument("--procs-per-node", type=int, help="SWF: processors per node")
    p.add_argument("--gpus-per-node", type=int, help="SWF: GPUs per node (processors map to GPUs)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    return p


def run(args) -> int:
    from queries.ingest import ingest

    options = {k: v for k, v in {
        "fields": args.fields, "delimiter": args.delimiter,
        "procs_per_node": args.procs_per_node, "gpus_per_node": args.gpus_per_node,
    }.items() if v is not None}
    summaries = ingest(args.paths, args.store, fmt=args.format, cluster=args.cluster, **options)
    if args.json:
        json.dump([s.__dict__ for s in summaries], sys.stdout, indent=1)
        print()
    else:
        for s in summaries:
            print(s.line())
    return 0
