"""``quotaloop sample --store DIR``: generate the realistic sample cluster export and ingest it into DIR.

The export (``sacct.txt``, ``samples.parquet``, ``nodes.csv``, ``ground_truth.json``) is written to
``--export-dir`` (default: a sibling ``DIR-export``) and then read back by the same ingest path as
``quotaloop ingest``. Same arguments -> byte-identical export files.
"""
from __future__ import annotations

import json
import sys
import time

from .errors import UserError, check_output_dir

# queries is imported inside run(): see the start-up note in dashboard.cli. For the same reason the generator's
# default end is repeated here for --help (importing queries.samplegen takes ~1 s); tests/test_samplegen.py checks
# that the two agree.
DEFAULT_END = "2026-11-29T00:00:00"  # = queries.samplegen.DEFAULT_END


def register(sub):
    p = sub.add_parser("sample", help="generate a realistic sample cluster export and ingest it")
    p.add_argument("--store", required=True, help="store directory to ingest into (created if missing)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--export-dir", help="where to write the generated files (default: DIR-export)")
    p.add_argument("--days", type=int, default=30, help="length of the exported window in days (default 30)")
    p.add_argument("--nodes", type=int, default=128, help="GPU nodes, 8 GPUs each (default 128)")
    p.add_argument("--scale", type=float, default=1.0,
                   help="submitted GPU work relative to the calibrated load (default 1.0 = demand 2-3x capacity)")
    p.add_argument("--end", default=DEFAULT_END, help=f"window end, UTC (default {DEFAULT_END})")
    p.add_argument("--cluster", default="acme", help="cluster name (default acme)")
    p.add_argument("--no-ingest", action="store_true", help="only write the export files")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    return p


def run(args) -> int:
    from queries import samplegen
    from queries.ingest import ingest
    from queries.store import Store

    if args.days < 1 or args.nodes < 8 or args.scale <= 0:
        raise UserError("--days must be >= 1, --nodes >= 8 and --scale > 0")
    if not args.no_ingest:
        Store(args.store).check_writable()  # before minutes of generating: a bad --store fails at once
    params = dict(seed=args.seed, days=args.days, nodes=args.nodes, scale=args.scale, end=args.end,
                  cluster=args.cluster)
    export_dir = args.export_dir or samplegen.default_export_dir(args.store)
    check_output_dir(export_dir, "--export-dir")
    t0 = time.perf_counter()
    try:
        paths = samplegen.generate(export_dir, **params)
    except ValueError as exc:  # a bad --end
        raise UserError(str(exc)) from exc
    took_gen = time.perf_counter() - t0
    summaries = []
    if not args.no_ingest:
        summaries = ingest([paths["sacct"], paths["samples"], paths["nodes"]], args.store, cluster=args.cluster,
                           timezone="UTC")  # the generated sacct text prints UTC wall-clock times
    took = time.perf_counter() - t0
    if args.json:
        json.dump({"files": {k: str(v) for k, v in paths.items()}, "generate_s": round(took_gen, 2),
                   "total_s": round(took, 2), "ingest": [s.__dict__ for s in summaries]}, sys.stdout, indent=1)
        print()
        return 0
    print(f"generated {export_dir} in {took_gen:.1f} s: " + ", ".join(p.name for p in paths.values()))
    for s in summaries:
        print(s.line())
    if summaries:
        print(f"store {args.store} ready in {took:.1f} s")
    return 0
