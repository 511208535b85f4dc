"""``quotaloop`` command line: routes to one module per sub-command under ``dashboard/commands``.

Exit codes: 0 done; 2 an error the user can fix (a bad flag value, an unreadable input file, a store that is
missing, not a directory, corrupt or not writable, an unknown query), printed as one line on stderr
``quotaloop COMMAND: what is wrong`` (argparse's usage errors too); 1 anything else (a bug).
Nothing prints a traceback unless ``QUOTALOOP_DEBUG`` is set.
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys

from dashboard.errors import UserError  # noqa: F401  (re-exported for command modules)

COMMANDS = ("ingest", "query", "sample", "simulate", "serve", "report", "scenario", "validate")


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (``quotaloop report: argument --window: ...``), exit 2, like
    every other user error: a cron log or a wrapper script sees the reason, not a usage block."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: {' '.join(message.split())} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="quotaloop", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"dashboard.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"dashboard.commands.{name}":
                continue  # command not built yet
            raise
        p = mod.register(sub)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    if hasattr(signal, "SIGPIPE"):  # `quotaloop query ... | head` ends quietly, like any Unix tool
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except UserError as exc:
        print(f"quotaloop {args.command}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the one place that turns errors into exit codes
        if os.environ.get("QUOTALOOP_DEBUG"):
            raise
        known = _known_errors()
        if isinstance(exc, known):
            print(f"quotaloop {args.command}: {exc}", file=sys.stderr)
            return 2
        raise


def _known_errors() -> tuple[type[BaseException], ...]:
    from queries import QueryError
    from queries.ingest import IngestError
    from queries.store import StoreError

    errs: list[type[BaseException]] = [QueryError, IngestError, StoreError]
    try:
        from engine import ConfigError  # type: ignore[attr-defined]

        errs.append(ConfigError)
    except ImportError:
        pass
    return tuple(errs)


if __name__ == "__main__":
    sys.exit(main())
