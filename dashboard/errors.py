"""Errors the user can fix; the CLI prints them as one line and exits 2.

Lives apart from ``dashboard.cli`` so that ``python -m dashboard.cli`` (where the CLI module is ``__main__``)
and the command modules see the same class.
"""


class UserError(Exception):
    """An error the user can fix; printed as one line."""
