"""Report windows and atomic file output for ``quotaloop report``.

Invariants:
- A report window is a whole number of UTC days ``[first_day 00:00, last_day + 1 00:00)``; its label
  ``YYYY-MM-DD_YYYY-MM-DD`` names the first and the last day, both inclusive, so a weekly report ending on
  Sunday 2026-11-29 is ``2026-11-23_2026-11-29``.
- A window lies within ``FIRST_DAY`` .. ``LAST_DAY`` (1970-01-01 .. 9999-12-01); outside, ``ReportError``.
- The end day defaults to today's date in UTC (the report then covers today so far); ``yesterday`` is the
  last complete UTC day (what a schedule wants); ``latest`` is the day of the newest job event in the store.
- ``Staging`` writes every file of a report to a temporary name in the destination directory, fsyncs it,
  and only when all of them are complete renames them over their final names (``os.replace``, atomic on
  POSIX) and fsyncs the directory. Any failure before the renames removes the temporaries and leaves the
  previous report files untouched: a reader never sees a half-written file.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

DAY_S = 86_400
_UNITS_S = {"s": 1, "m": 60, "h": 3_600, "d": DAY_S, "w": 7 * DAY_S}
# The days a report window may cover: job logs start with the Unix epoch, and the sections look back weeks
# before the window (quota back-test) and a day past it, all of which Python's dates must hold.
FIRST_DAY, LAST_DAY = dt.date(1970, 1, 1), dt.date(9999, 12, 1)


class ReportError(Exception):
    """A report could not be built or written; ``str()`` is one line a user can act on."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def parse_duration(text: str | int | float) -> float:
    """``7d``, ``2w``, ``36h``, ``90m`` or plain seconds -> seconds (> 0)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", str(text).lower())
        if not m:
            raise ReportError(f"window {text!r} is not a duration like 7d, 2w or 36h")
        seconds = float(m.group(1)) * _UNITS_S[m.group(2) or "s"]
    if not math.isfinite(seconds) or seconds <= 0:
        raise ReportError(f"window {text!r} must be a positive duration")
    return seconds


@dataclass(frozen=True)
class Window:
    first_day: dt.date
    last_day: dt.date  # inclusive

    @property
    def days(self) -> int:
        return (self.last_day - self.first_day).days + 1

    @property
    def start(self) -> dt.datetime:
        return dt.datetime.combine(self.first_day, dt.time(), tzinfo=dt.timezone.utc)

    @property
    def end(self) -> dt.datetime:
        """Exclusive end: midnight UTC after ``last_day``."""
        return dt.datetime.combine(self.last_day + dt.timedelta(days=1), dt.time(), tzinfo=dt.timezone.utc)

    @property
    def seconds(self) -> float:
        return self.days * float(DAY_S)

    @property
    def label(self) -> str:
        return f"{self.first_day.isoformat()}_{self.last_day.isoformat()}"

    def text(self) -> str:
        return f"{self.first_day:%a %d %b %Y} to {self.last_day:%a %d %b %Y} (UTC, {self.days} days)"


def parse_end(end, latest: Callable[[], dt.date | None] | None = None,
              today: Callable[[], dt.date] | None = None) -> dt.date:
    """The last day of the window: a date, a datetime (its UTC date), ``YYYY-MM-DD``, ``today``, ``yesterday``
    (both UTC) or ``latest`` (the day of the newest job event, from ``latest()``)."""
    now = today or (lambda: dt.datetime.now(dt.timezone.utc).date())
    if end is None or (isinstance(end, str) and end.strip().lower() in ("", "today")):
        return now()
    if isinstance(end, str) and end.strip().lower() == "yesterday":  # the last complete UTC day: for schedules
        return now() - dt.timedelta(days=1)
    if isinstance(end, dt.datetime):
        return (end.astimezone(dt.timezone.utc) if end.tzinfo else end).date()
    if isinstance(end, dt.date):
        return end
    text = str(end).strip()
    if text.lower() == "latest":
        day = latest() if latest else None
        if day is None:
            raise ReportError("--end latest: the store holds no job with a timestamp")
        return day
    try:
        return dt.date.fromisoformat(text[:10])
    except ValueError:
        raise ReportError(f"--end {text!r} is not a date (YYYY-MM-DD), 'today', 'yesterday' or 'latest'") from None


def make_window(window_s: float, end_day: dt.date) -> Window:
    """Whole UTC days ending on ``end_day``; a window that is not a whole number of days is rounded up."""
    days = max(1, math.ceil(float(window_s) / DAY_S - 1e-9))
    if not FIRST_DAY <= end_day <= LAST_DAY:
        raise ReportError(f"--end {end_day}: a report window lies between {FIRST_DAY} and {LAST_DAY}")
    if days - 1 > (end_day - FIRST_DAY).days:
        raise ReportError(f"--window of {days} days ending {end_day} would start before {FIRST_DAY}; "
                          f"at most {(end_day - FIRST_DAY).days + 1} days end on that day")
    return Window(end_day - dt.timedelta(days=days - 1), end_day)


class Staging:
    """Stage files in ``out_dir`` and swap them in together; use as a context manager."""

    def __init__(self, out_dir: str | os.PathLike):
        self.out_dir = Path(out_dir)
        self._staged: list[tuple[Path, Path]] = []  # (temporary, final)

    def __enter__(self) -> "Staging":
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ReportError(f"cannot create output directory {self.out_dir}: {exc.strerror or exc}") from exc
        if not self.out_dir.is_dir():
            raise ReportError(f"output path {self.out_dir} is not a directory")
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()

    def add(self, name: str, write: Callable[[Path], None]) -> Path:
        """Write ``name`` through ``write(tmp_path)`` to a temporary file, fsynced; returns the final path."""
        if "/" in name or name.startswith("."):
            raise ValueError(f"bad report file name {name!r}")
        final = self.out_dir / name
        tmp = self.out_dir / f".{name}.{uuid.uuid4().hex[:12]}.tmp"
        self._staged.append((tmp, final))
        try:
            write(tmp)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
        except OSError as exc:
            raise ReportError(f"cannot write {final}: {exc.strerror or exc}") from exc
        return final

    def add_bytes(self, name: str, data: bytes) -> Path:
        return self.add(name, lambda p: p.write_bytes(data))

    def commit(self) -> list[Path]:
        for _, final in self._staged:  # the one rename failure we can foresee: refuse before renaming any
            if final.is_dir():
                self.abort()
                raise ReportError(f"cannot write {final}: a directory of that name exists")
        finals = []
        try:
            for tmp, final in self._staged:
                os.replace(tmp, final)
                finals.append(final)
            fd = os.open(self.out_dir, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            self.abort()
            raise ReportError(f"cannot move report files into {self.out_dir}: {exc.strerror or exc}") from exc
        self._staged = []
        return finals

    def abort(self) -> None:
        for tmp, _ in self._staged:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
                tmp.unlink()
        self._staged = []
