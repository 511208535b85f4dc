"""Run ``quotaloop simulate ARGS`` in this process and print where its CPU time goes, as one JSON line.

    python tests/benchmarks/simulate_phases.py --workload FILE --procs 240 --out DIR

Phases (process CPU seconds, ``time.process_time``: every thread, so Polars' worker threads count):
``startup`` (interpreter, imports, argument parsing: everything before reading the input), ``parse`` (reading the
workload file or the store), ``prepare`` (``engine.workload.prepare``), ``kernel`` (``Simulator.run``),
``metrics`` (metrics and attainment), ``build`` (``engine.result.build``), ``write`` (``SimResult.write``) and
``other`` (the rest: layout, config, the summary line). The functions are wrapped, not changed, so the command
does exactly what it does without this script. Used by ``bench_engine.py``.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's packages, whatever is installed


def _timed(owner, name: str, phase: str, spent: dict) -> None:
    fn = getattr(owner, name)

    def wrapper(*args, **kw):
        c0 = time.process_time()
        try:
            return fn(*args, **kw)
        finally:
            spent[phase] = spent.get(phase, 0.0) + time.process_time() - c0

    setattr(owner, name, wrapper)


def main(argv: list[str]) -> int:
    from dashboard.cli import main as cli_main

    spent: dict[str, float] = {}
    # the modules the command calls through, imported before the clock so their import counts as start-up
    import engine.run as run
    from dashboard.cli import simulate as cmd
    from engine import attainment, metrics, result
    from engine.core import Simulator

    _timed(cmd, "_load_workload", "parse", spent)
    _timed(run, "prepare", "prepare", spent)
    _timed(Simulator, "run", "kernel", spent)
    _timed(metrics, "compute", "metrics", spent)
    _timed(attainment, "of_run", "metrics", spent)
    _timed(result, "build", "build", spent)
    _timed(result.SimResult, "write", "write", spent)
    startup = time.process_time()
    code = cli_main(["simulate", *argv])
    total = time.process_time()
    phases = {"startup": startup, **spent}
    phases["other"] = total - sum(phases.values())
    print(json.dumps({"total": total, **phases}), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
