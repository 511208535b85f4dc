"""Errors the user can fix; the CLI prints them as one line and exits 2.

Lives apart from ``dashboard.cli`` so that ``python -m dashboard.cli`` (where the CLI module is ``__main__``)
and the command modules see the same class.
"""


class UserError(Exception):
    """An error the user can fix; printed as one line."""


def check_output_dir(path, flag: str = "--out") -> None:
    """``UserError`` unless ``path`` is a directory or can be created as one: checked before minutes of work, so a
    typo in ``--out`` costs nothing (a command still reports a write that fails later as a ``UserError``)."""
    import os
    from pathlib import Path

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
