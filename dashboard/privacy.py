"""The access rule applied to per-user results (pure: frames and an ``auth.Identity`` in, frames out).

A viewer who is not an admin never sees another user's name next to that user's figures:

- a per-user table keeps the viewer's own row and folds everybody else into one "N other users" row whose
  sums are the sums of the rows it replaces (so totals and shares still add up; ``fold_users``);
- a per-user time series keeps the viewer's own curve and sums the others into one curve (``fold_series``);
- a per-user ranking becomes the viewer's own row and rank "r of N" (``own_rank``), competition ranking as SQL's
  ``rank()`` gives it: 1 + the number of users strictly ahead;
- points of a per-user scatter keep their figures but lose their names (``unnamed``);
- a per-user list (back-test series, pickers) keeps the viewer's rows only (``own_rows``).

Team-level aggregates are not per user and pass unchanged. Admins (``Identity.is_admin``: the config's admin
list, ``--auth open``, or the demo mode's platform view) see every frame as it is.
"""
from __future__ import annotations

import polars as pl

from .auth import Identity


def others_label(n: int) -> str:
    return f"{n:,} other user" + ("" if n == 1 else "s")


def restricted(viewer: Identity) -> bool:
    return not viewer.is_admin


def own_rows(frame: pl.DataFrame, viewer: Identity, name: str = "user") -> pl.DataFrame:
    """Only the viewer's rows (all rows for an admin; none for an anonymous viewer)."""
    if not restricted(viewer):
        return frame
    return frame.filter(pl.col(name) == viewer.user) if viewer.user else frame.clear()


def fold_users(frame: pl.DataFrame, viewer: Identity, *, name: str = "user", sums: tuple[str, ...] = (),
               ratio: tuple[str, str, str] | None = None) -> pl.DataFrame:
    """The viewer's row(s) as they are, then one row for "N other users" whose ``sums`` columns are summed and
    ``ratio = (column, numerator, denominator)`` recomputed from those sums (requested only where used is known,
    as the queries define efficiency). Other columns of that row are null."""
    if not restricted(viewer):
        return frame
    mine = frame.filter(pl.col(name) == viewer.user) if viewer.user else frame.clear()
    rest = frame.filter(pl.col(name) != viewer.user) if viewer.user else frame
    if rest.is_empty():
        return mine
    aggs = [pl.col(c).sum() for c in sums]
    if ratio is not None:
        col, num, den = ratio
        known = pl.col(den).filter(pl.col(num).is_not_null()).sum()
        aggs.append(pl.when(known > 0).then(pl.col(num).sum() / known).otherwise(None).alias(col))
    folded = rest.select(aggs).with_columns(pl.lit(others_label(rest.height)).alias(name))
    return pl.concat([mine, folded], how="diagonal_relaxed").select(frame.columns)


def fold_series(series: pl.DataFrame, viewer: Identity, *, group: str = "group", t: str = "t",
                sums: tuple[str, ...] = ("requested", "used", "unknown")) -> pl.DataFrame:
    """Per-user curves -> the viewer's curve and one summed curve of everybody else (levels add up)."""
    if not restricted(viewer):
        return series
    n_others = series.filter(pl.col(group) != (viewer.user or "")).select(pl.col(group).n_unique()).item()
    label = pl.when(pl.col(group) == (viewer.user or "")).then(pl.col(group)).otherwise(
        pl.lit(others_label(n_others)))
    present = [c for c in sums if c in series.columns]
    return (series.with_columns(label.alias(group)).group_by(t, group, maintain_order=True)
            .agg([pl.col(c).sum() for c in present]).sort(t, group))


def own_rank(frame: pl.DataFrame, viewer: Identity, value: str, *, name: str = "user",
             descending: bool = True) -> dict | None:
    """``{"rank": r, "of": N, "row": {...}}`` of the viewer by ``value`` (largest first when ``descending``);
    None when the viewer has no row. Users without a value rank after everybody who has one."""
    if not viewer.user:
        return None
    rows = frame.filter(pl.col(name) == viewer.user)
    if rows.is_empty():
        return None
    row = rows.row(0, named=True)
    mine = row[value]
    vals = frame[value]
    if mine is None:
        ahead = vals.is_not_null().sum()
    else:
        ahead = (vals > mine).sum() if descending else (vals < mine).sum()
    return {"rank": int(ahead) + 1, "of": frame.height, "row": row}


def unnamed(frame: pl.DataFrame, viewer: Identity, name: str = "user", label: str = "another user") -> pl.DataFrame:
    """Other users' names replaced by ``label`` (their figures stay: a distribution without identities)."""
    if not restricted(viewer):
        return frame
    return frame.with_columns(pl.when(pl.col(name) == (viewer.user or "")).then(pl.col(name))
                              .otherwise(pl.lit(label)).alias(name))
