"""``quotaloop`` command line: routes to one module per sub-command under ``dashboard/cli``.

Each sub-command is ``dashboard/cli/NAME.py`` with ``register(subparsers)`` and ``run(args) -> int``;
``errors`` holds the one-line user error. ``python -m dashboard.cli`` is the same as ``quotaloop``.

Exit codes: 0 done; 2 an error the user can fix (a bad flag value, an unreadable input file, a store that is
missing, not a directory, corrupt or not writable, an unknown query), printed as one line on stderr
``quotaloop COMMAND: what is wrong`` (argparse's usage errors too); 1 anything else (a bug).
Nothing prints a traceback unless ``QUOTALOOP_DEBUG`` is set.

Start-up: every sub-command module is imported to build the parser, so they import only the standard library and
``dashboard.cli.errors`` at the top; Polars, DuckDB, ``queries``, ``engine`` and Streamlit are imported inside
``run`` (and the helpers it calls); the exceptions are the registries that ``choices=`` read (engine policies and
backfill rules, ingest formats, the what-if scenario kinds of ``dashboard.whatif.registry``, whose kind modules
import their engine and Polars on use). Measured on the shared 2-core machine (2026-12-01): ``quotaloop --help`` took
0.17-0.24 s this way before the registries and 0.36-0.51 s with them, against 2.6-3.1 s with every import at the
top (``engine`` alone 1.2 s, ``dashboard.report`` 2.2 s, ``queries.ingest`` 0.8 s), which every ``--help``, every
usage error and every shell completion would pay.
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys

from .errors import UserError

COMMANDS = ("ingest", "query", "sample", "simulate", "serve", "report", "scenario", "validate", "rollup", "compact")


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (``quotaloop report: argument --window: ...``), exit 2, like
    every other user error: a cron log or a wrapper script sees the reason, not a usage block."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: {' '.join(message.split())} (see {self.prog} --help)\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``quotaloop`` parser; ``only``: just that sub-command's (``main`` when the command line names one:
    the other modules and the registries they read are not imported, 0.04 s of ``quotaloop simulate``)."""
    parser = _Parser(prog="quotaloop", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        mod = importlib.import_module(f"dashboard.cli.{name}")
        p = mod.register(sub)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    if hasattr(signal, "SIGPIPE"):  # `quotaloop query ... | head` ends quietly, like any Unix tool
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    first = (sys.argv[1:] if argv is None else argv)[:1]
    args = build_parser(first[0] if first and first[0] in COMMANDS else None).parse_args(argv)
    try:
        code = int(args._run(args) or 0)
        if argv is None and args.command in ENDS_WITHOUT_TEARDOWN:
            _end_process(code)
        return code
    except UserError as exc:
        print(f"quotaloop {args.command}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the one place that turns errors into exit codes
        if os.environ.get("QUOTALOOP_DEBUG"):
            raise
        if isinstance(exc, _known_errors()):
            print(f"quotaloop {args.command}: {exc}", file=sys.stderr)
            return 2
        raise


# Commands whose run ends with every output written and closed (``simulate``: the Parquet files and metrics.json
# are complete before it prints its summary): the process may leave without the interpreter's teardown
ENDS_WITHOUT_TEARDOWN = ("simulate",)


def _end_process(code: int) -> None:
    """Flush stdout and stderr and leave at once (``os._exit``): freeing every object of a run is CPU spent for
    nothing (0.15-0.2 s on HPC2N's 202,871 jobs). Only when ``main`` runs as the program (``argv`` None: the
    ``quotaloop`` script, ``python -m dashboard.cli``), never for an in-process call (tests pass ``argv``). A flush
    that fails returns to the normal exit, which reports it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        return
    os._exit(code)


def _known_errors() -> tuple[type[BaseException], ...]:
    """The libraries' own one-line errors (imported here, not at the top: see the start-up note above)."""
    from engine import ConfigError
    from queries import QueryError
    from queries.ingest import IngestError
    from queries.store import StoreError

    return (QueryError, IngestError, StoreError, ConfigError)
