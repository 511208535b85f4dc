"""Report windows and the all-or-nothing file staging (dashboard/report/files.py), on real files."""
from __future__ import annotations

import datetime as dt

import pytest

from dashboard.report.files import ReportError, Staging, make_window, parse_duration, parse_end


@pytest.mark.parametrize("text, seconds", [("7d", 7 * 86400), ("2w", 14 * 86400), ("36h", 36 * 3600),
                                           ("90m", 5400), ("3600", 3600), (86400, 86400)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["7x", "", "-1d", "0d", "d7"])
def test_bad_durations(text):
    with pytest.raises(ReportError):
        parse_duration(text)


def test_end_day():
    today = lambda: dt.date(2026, 11, 29)  # noqa: E731
    assert parse_end(None, today=today) == dt.date(2026, 11, 29)
    assert parse_end("today", today=today) == dt.date(2026, 11, 29)
    assert parse_end("yesterday", today=lambda: dt.date(2026, 3, 1)) == dt.date(2026, 2, 28)
    assert parse_end("2026-11-22") == dt.date(2026, 11, 22)
    assert parse_end(dt.datetime(2026, 11, 22, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-2)))) == \
        dt.date(2026, 11, 23)  # 23:30 at UTC-2 is already the 23rd in UTC
    assert parse_end("latest", latest=lambda: dt.date(2026, 11, 28)) == dt.date(2026, 11, 28)
    with pytest.raises(ReportError, match="no job"):
        parse_end("latest", latest=lambda: None)
    with pytest.raises(ReportError, match="is not a date"):
        parse_end("22/11/2026")


def test_window_edges():
    w = make_window(86400, dt.date(2026, 1, 1))
    assert (w.days, w.label) == (1, "2026-01-01_2026-01-01")
    w = make_window(30 * 86400, dt.date(2026, 3, 1))  # across February
    assert w.first_day == dt.date(2026, 1, 31) and w.days == 30
    assert make_window(86400 + 1, dt.date(2026, 1, 2)).days == 2


def test_staging_swaps_all_files_or_none(tmp_path):
    (tmp_path / "a.txt").write_text("old a")
    with Staging(tmp_path) as st:
        st.add_bytes("a.txt", b"new a")
        st.add_bytes("b.txt", b"new b")
        assert (tmp_path / "a.txt").read_text() == "old a"  # nothing visible before commit
        assert not (tmp_path / "b.txt").exists()
        st.commit()
    assert (tmp_path / "a.txt").read_text() == "new a" and (tmp_path / "b.txt").read_text() == "new b"

    def boom(path):
        path.write_bytes(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(ReportError, match="No space left"):
        with Staging(tmp_path) as st:
            st.add_bytes("a.txt", b"newer a")
            st.add("c.txt", boom)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]
    assert (tmp_path / "a.txt").read_text() == "new a"


def test_staging_refuses_before_renaming_anything(tmp_path):
    (tmp_path / "b.txt").mkdir()  # a rename onto a directory would fail half-way through the swap
    (tmp_path / "a.txt").write_text("old a")
    with pytest.raises(ReportError, match="directory"):
        with Staging(tmp_path) as st:
            st.add_bytes("a.txt", b"new a")
            st.add_bytes("b.txt", b"new b")
            st.commit()
    assert (tmp_path / "a.txt").read_text() == "old a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]


def test_output_path_that_is_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ReportError, match="cannot create output directory|not a directory"):
        with Staging(tmp_path / "f"):
            pass
