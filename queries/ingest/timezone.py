"""Time zones at ingest: which zone a file's local wall-clock times are in, and where that zone's clocks go back.

The store holds UTC only. Formats that print local wall-clock times without a zone (``sacct`` text) are read in
one IANA zone: ``--timezone``, else this machine's zone (``machine_zone``: ``TZ``, then ``/etc/localtime``, then
``/etc/timezone``; UTC with a note when none names an IANA zone). Epoch times (``sacct --json``, SWF) and relative
times (openb, PAI) are never shifted by it.

Invariants:
- ``resolve`` returns a name both Python's ``zoneinfo`` and Polars accept, or raises ``IngestError`` (one line);
- ``fall_back_windows`` lists, for the given years, the UTC intervals ``[T - d, T)`` in which the *earlier*
  reading of an ambiguous wall-clock time lies (clocks go back by ``d`` at instant ``T``); outside them no
  wall-clock time of the zone has a second reading.
"""
from __future__ import annotations

import datetime as dt
import functools
import os
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

UTC = "UTC"
UTC_NAMES = frozenset({UTC, "Etc/UTC", "Etc/UCT", "UCT", "GMT", "Etc/GMT", "Etc/GMT0", "Etc/GMT+0", "Etc/GMT-0",
                       "GMT0", "Zulu", "Etc/Zulu", "Universal", "Etc/Universal", "Greenwich", "Etc/Greenwich"})
DEFAULT_NOTE = "this machine's zone; pass --timezone to change"
UNKNOWN_NOTE = "this machine's zone is not an IANA name, UTC assumed; pass --timezone"


def _valid(name: str) -> bool:
    """True when ``zoneinfo`` and Polars (which carries its own tz database) both know ``name``."""
    try:
        ZoneInfo(name)
        pl.Series([dt.datetime(2000, 1, 1)]).dt.replace_time_zone(name)
    except (ZoneInfoNotFoundError, ValueError, OSError, pl.exceptions.PolarsError):
        return False
    return True


def _key_from_path(path: str) -> str | None:
    """``/usr/share/zoneinfo/Europe/Amsterdam`` (or ``.../posix/...``) -> ``Europe/Amsterdam``."""
    if "zoneinfo/" not in path:
        return None
    key = path.rsplit("zoneinfo/", 1)[1]
    for prefix in ("posix/", "right/"):
        key = key.removeprefix(prefix)
    return key or None


def machine_zone() -> tuple[str, str]:
    """``(IANA name, note)`` of this machine's local zone. ``TZ`` wins (``Europe/Amsterdam``, ``:Europe/Amsterdam``
    or a zoneinfo file path), then the ``/etc/localtime`` link, then ``/etc/timezone``. A POSIX rule string
    (``CET-1CEST``) or a copied ``/etc/localtime`` names no zone: UTC, and the note says so. ``TZ`` set but
    empty is UTC, as for the C library."""
    candidates = []
    env = os.environ.get("TZ")
    if env == "":  # set but empty: the C library's UTC
        return UTC, DEFAULT_NOTE
    if env:
        env = env.removeprefix(":")
        candidates.append(_key_from_path(env) if env.startswith("/") else env)
    else:
        localtime = Path("/etc/localtime")
        if localtime.is_symlink():
            candidates.append(_key_from_path(str(localtime.resolve())))
        try:
            candidates.append(Path("/etc/timezone").read_text().strip())
        except OSError:
            pass
    for key in candidates:
        if key and _valid(key):
            return key, DEFAULT_NOTE
    return UTC, UNKNOWN_NOTE


def resolve(name: str | None) -> tuple[str, str]:
    """``(zone, note)``: ``name`` when given (note empty), else ``machine_zone()``. An unknown name raises
    ``IngestError`` naming ``--timezone``."""
    if name is None:
        return machine_zone()
    if not _valid(name):
        from .pipeline import IngestError  # here: the pipeline imports this module

        raise IngestError("--timezone", f"unknown time zone {name!r}; give an IANA name such as Europe/Amsterdam, "
                                        "America/New_York or UTC")
    return name, ""


def _offset_s(zone: ZoneInfo, t: int) -> int:
    return int(dt.datetime.fromtimestamp(t, zone).utcoffset().total_seconds())


@functools.lru_cache(maxsize=4096)
def _fall_backs(zone: str, year: int) -> tuple[tuple[int, int], ...]:
    """``(T, d)`` in epoch seconds for every instant ``T`` of ``year`` at which the zone's UTC offset drops by
    ``d`` > 0. Scanned in 6-hour steps (no zone changes its offset twice within 6 hours), then bisected to the
    second."""
    z = ZoneInfo(zone)
    t = int(dt.datetime(year, 1, 1, tzinfo=dt.timezone.utc).timestamp())
    stop = int(dt.datetime(year + 1, 1, 1, tzinfo=dt.timezone.utc).timestamp())
    step, out, before = 6 * 3600, [], _offset_s(z, t)
    while t < stop:
        after = _offset_s(z, t + step)
        if after < before:
            lo, hi = t, t + step  # offset(lo) = before, offset(hi) = after
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if _offset_s(z, mid) == before else (lo, mid)
            out.append((hi, before - after))
        before, t = after, t + step
    return tuple(out)


def fall_back_windows(zone: str, years) -> list[tuple[int, int, int]]:
    """``(from, to, d)`` in epoch seconds, sorted: a wall-clock time whose earlier reading lies in
    ``[from, to)`` also reads as that instant + ``d``. ``years``: the UTC years the data's instants fall in
    (the next year's windows are included, for a change just after New Year)."""
    if zone in UTC_NAMES:
        return []
    found = set()
    for y in years:
        if y is None or not 1900 <= y <= 9997:  # beyond that no zone has rules, and Python's datetime ends
            continue
        for year in (y, y + 1):
            found.update((t - d, t, d) for t, d in _fall_backs(zone, year))
    return sorted(found)
