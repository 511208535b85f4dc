"""CSV exports neutralise spreadsheet formulas in text cells and headers, and change nothing else."""
from __future__ import annotations

import csv
import io

import polars as pl
from hypothesis import given, settings, strategies as st

from dashboard.safe_csv import TRIGGERS, neutralise, safe_frame, to_csv_bytes


def _rows(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode())))


def test_formula_cells_and_headers_are_quoted_numbers_are_not():
    df = pl.DataFrame({
        "job_name": ['=HYPERLINK("http://evil","x")', "+1", "-cmd|' /C calc'!A0", "@SUM(A1)", "\t=1", " =1",
                     "train-7", None, "a=b"],
        "wasted_gpu_hours": [-1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
        "=evil_header": ["x"] * 9,
    })
    rows = _rows(to_csv_bytes(df))
    assert rows[0] == ["job_name", "wasted_gpu_hours", "'=evil_header"]
    names = [r[0] for r in rows[1:]]
    assert names == ["'=HYPERLINK(\"http://evil\",\"x\")", "'+1", "'-cmd|' /C calc'!A0", "'@SUM(A1)", "'\t=1",
                     "' =1", "train-7", "", "a=b"]
    assert [r[1] for r in rows[1:]][0] == "-1.5"  # a negative number stays a number


def test_neutralise_single_values():
    assert neutralise("=1") == "'=1"
    assert neutralise("ok") == "ok"
    assert neutralise(-3) == -3
    assert neutralise(None) is None


@settings(deadline=None)  # no timing assertion: a loaded machine made this flaky
@given(st.lists(st.text(max_size=12), min_size=1, max_size=20))
def test_no_text_cell_starts_a_formula_and_harmless_cells_are_unchanged(values):
    out = safe_frame(pl.DataFrame({"v": values}))["v"].to_list()
    for before, after in zip(values, out):
        assert after in (before, "'" + before)           # only ever a leading quote is added
        if before[:1] in TRIGGERS:
            assert after == "'" + before                 # what a spreadsheet would evaluate is quoted
        if not any(ch in before for ch in TRIGGERS):
            assert after == before                       # harmless text is untouched


FULL_WIDTH = ["\uff1dSUM(A1)", "\uff0b1", "\uff0dcmd", "\uff20SUM(A1)", " \uff1d1", "\u3000\uff1d1",
              "\ufe66A1", "\ufe62A1", "\ufe63A1", "\ufe6bA1", "\u22121"]


def test_full_width_and_small_formula_signs_are_neutralised():
    """＝ ＋ － ＠ (U+FF1D, FF0B, FF0D, FF20), their small forms and the minus sign U+2212, also after a
    Unicode space such as the ideographic space U+3000: each cell and header gets the quote; a full-width
    sign inside a cell does not."""
    df = pl.DataFrame({"job_name": FULL_WIDTH + ["a\uff1db"], "\uff1devil": ["x"] * (len(FULL_WIDTH) + 1)})
    rows = _rows(to_csv_bytes(df))
    assert rows[0] == ["job_name", "'\uff1devil"]
    assert [r[0] for r in rows[1:]] == ["'" + v for v in FULL_WIDTH] + ["a\uff1db"]
    assert [neutralise(v) for v in FULL_WIDTH] == ["'" + v for v in FULL_WIDTH]
