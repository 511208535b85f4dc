"""textio.read_delimited: the cheap proof that a clean text has the right field count everywhere, and the exact
per-line check it falls back to. Whatever the text, both must give the same frame; the fast one must be taken
for clean text and must never accept a line with the wrong number of fields."""
from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queries.ingest import sacct, textio


def exact(data: bytes, delimiter: str, n: int):
    """The per-line check alone (the clean-text proof switched off)."""
    orig = textio._clean_frame
    textio._clean_frame = lambda *a, **k: None
    try:
        return textio.read_delimited(data, delimiter, n)
    finally:
        textio._clean_frame = orig


@pytest.fixture
def exact_calls(monkeypatch):
    calls = []
    orig = textio._read_exact

    def spy(*a, **k):
        calls.append(1)
        return orig(*a, **k)
    monkeypatch.setattr(textio, "_read_exact", spy)
    return calls


def same(data: bytes, delimiter: str, n: int):
    fast, lines, bad = textio.read_delimited(data, delimiter, n)
    slow, slow_lines, slow_bad = exact(data, delimiter, n)
    assert fast.equals(slow), (fast, slow)
    assert bad == slow_bad
    every = pl.Series(range(1, len(lines) + 1))
    assert lines.text(every).equals(slow_lines.text(every))
    return fast


def test_clean_text_with_blank_comment_and_empty_lines_takes_the_proof(exact_calls):
    # line 3 blank, 4 whitespace only, 5 a comment holding delimiters (no more than a data line may: a longer
    # line fails the strict read), 6 all fields empty (a data line), 7 CRLF
    data = b"a|b|c\n1|2|3\n\n   \n# x|y\n||\n4|5|6\r\n7|8|\n"
    frame = same(data, "|", 3)
    assert not exact_calls[1:]  # `same` calls the exact path once itself; read_delimited did not
    assert frame["_blank"].to_list() == [False, False, True, True, False, False, False, False]
    # blank lines and the 2-field comment do not have 3 fields (they are not data, so nothing is rejected)
    assert frame["_fields_ok"].to_list() == [True, True, False, False, False, True, True, True]
    assert frame["_line"].to_list() == list(range(1, 9))


def test_a_short_line_is_found_even_when_a_comment_holds_spare_delimiters(exact_calls):
    # two short lines lack two delimiters, the comment holds two: the total of the text is what four full data
    # lines hold, so the comment's delimiters must be counted apart
    data = b"a|b|c\n1|2\n3|4\n#||\n4|5|6\n"
    frame = same(data, "|", 3)
    assert exact_calls  # the proof failed, the exact check ran
    assert frame["_fields_ok"].to_list() == [True, False, False, True, True]


def test_a_long_line_deep_in_a_large_text_fails_the_strict_read(exact_calls):
    rows = [b"JobID|State|Elapsed"] + [b"%d|COMPLETED|01:00:00" % i for i in range(200_000)]
    rows[150_001] += b"|extra"
    data = b"\n".join(rows) + b"\n"
    frame, _, _ = textio.read_delimited(data, "|", 3)
    assert len(exact_calls) == 1
    assert frame.filter(~pl.col("_fields_ok"))["_line"].to_list() == [150_002]


def test_a_long_line_and_a_short_one_cannot_cancel_out():
    data = b"a|b|c\n1|2|3|4\n1|2\n"
    frame = same(data, "|", 3)
    assert frame["_fields_ok"].to_list() == [True, False, False]


def test_a_multibyte_delimiter_and_a_trailing_one(exact_calls):
    data = "JobID☃State☃\n1☃COMPLETED☃\n2☃FAILED\n# a☃b\n3☃PENDING☃\n".encode()
    frame = same(data, "☃", 3)
    assert exact_calls  # line 3 lacks the trailing delimiter
    assert frame["_fields_ok"].to_list() == [True, True, False, False, True]  # line 4 is a comment
    clean = "JobID☃State☃\n1☃COMPLETED☃\n# a☃b\n3☃PENDING☃\n".encode()
    exact_calls.clear()
    assert same(clean, "☃", 3)["_fields_ok"].to_list() == [True, True, False, True]
    assert len(exact_calls) == 1  # only `same`'s own call: the clean text took the proof


def test_the_sacct_parser_on_a_clean_dump_never_runs_the_exact_check(exact_calls, tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("JobID|State|Elapsed|AllocCPUS|TotalCPU\n\n# note|with|bars\n"
                 "1|COMPLETED|01:00:00|2|01:30:00\n1.0|COMPLETED|01:00:00|2|01:30:00\n")
    p = sacct.parse(f)
    assert not exact_calls
    assert (p.rows_read, p.rows_accepted, p.jobs["cpu_seconds_used"].to_list()) == (2, 2, [5400.0])


LINE = st.one_of(
    st.lists(st.sampled_from(["", "1", "ab", " ", "x y", "#", "é"]), min_size=1, max_size=6).map("|".join),
    st.sampled_from(["", "   ", "\t", "#", "# c|d", "||", "|||", "a|b|c\r", "\r"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINE, max_size=12), st.booleans(), st.integers(1, 5))
def test_fast_and_exact_agree_on_any_text(lines, final_newline, n):
    data = "\n".join(lines).encode() + (b"\n" if final_newline and lines else b"")
    try:
        slow = exact(data, "|", n)
    except ValueError:  # a text Polars splits into other lines than the newlines (a lone CR): both refuse
        with pytest.raises(ValueError):
            textio.read_delimited(data, "|", n)
        return
    fast = textio.read_delimited(data, "|", n)
    assert fast[0].equals(slow[0]), (data, fast[0], slow[0])
    assert fast[2] == slow[2]


FIELD = st.sampled_from(["", "1", "ab", " ", "x y", "é", "#"])
ODD = st.sampled_from(["", "   ", "\t", "#", "# c", "#|", "a|b|c\r"])


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.one_of(
    st.lists(FIELD, min_size=n, max_size=n).map("|".join), ODD), max_size=12))))
def test_mostly_clean_texts_take_the_proof_and_agree(case):
    n, lines = case
    data = "\n".join(lines).encode() + b"\n"
    calls = []
    orig = textio._read_exact
    textio._read_exact = lambda *a, **k: calls.append(1) or orig(*a, **k)
    try:
        fast = textio.read_delimited(data, "|", n)
    finally:
        textio._read_exact = orig
    slow = exact(data, "|", n)
    assert fast[0].equals(slow[0]), (data, fast[0], slow[0])
    # a full-length line that starts with '#' is a comment: its count is its own; "a|b|c\r" is data only if n = 3
    data_lines = [x for x in lines if x.strip() and not x.startswith("#")]
    if all(x.count("|") == n - 1 for x in data_lines) and all(x.count("|") <= n - 1 for x in lines):
        assert not calls, data  # every data line has n fields: the cheap proof holds


@pytest.mark.parametrize("data", [b"|1\n|||", b"a|b\na|b|c|", b"a|b|c|\na|b\n"])
def test_a_last_line_without_newline_with_an_empty_field_too_many(data):
    """Found by the property test above: Polars' strict read lets an unterminated last line hold one empty field
    too many, so the fast path's delimiter total balanced a short line against it and called both right. Both
    lines have the wrong field count (three asked for), in the fast path as in the exact one."""
    assert textio.read_delimited(data, "|", 3)[0]["_fields_ok"].to_list() == [False, False]
    assert exact(data, "|", 3)[0]["_fields_ok"].to_list() == [False, False]
