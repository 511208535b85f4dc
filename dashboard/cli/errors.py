"""Errors the user can fix; the CLI prints them as one line and exits 2 (``dashboard.cli.main``).

Standard library only: every sub-command imports it at start-up (see ``dashboard.cli``).
"""
import os
from pathlib import Path


class UserError(Exception):
    """An error the user can fix; printed as one line."""


def check_output_dir(path, flag: str = "--out") -> None:
    """``UserError`` unless ``path`` is a directory or can be created as one: checked before minutes of work, so a
    typo in ``--out`` costs nothing (a command still reports a write that fails later as a ``UserError``)."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise UserError(f"{flag} {path}: exists and is not a directory")
    parent = target
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(f"{flag} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: {parent} is not writable")
