"""The SWF reader's compiled numbers (``queries/ingest/_swfparse.c``) against their oracle, the Polars paths of
``swf._numbers`` / ``swf._tokens`` (which run when the module is not built or returns None).

Same numbers bit for bit (``-0.0`` included) wherever the C reader accepts a record set, and the same ``Parsed``
(rows read / accepted, every job field, every reject with its line, field and reason, nodes) on every SWF trace
of ``../shared/data``, on the hand-made fixtures and on generated lines of odd tokens.
"""
from __future__ import annotations

import gzip
import hashlib
import shutil
import sysconfig
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from queries.ingest import swf
from tests.queries.ingest.test_ingest_swf import _same_parsed

REPO = Path(__file__).resolve().parents[3]
SOURCE = REPO / "queries" / "ingest" / "_swfparse.c"
FIXTURES = sorted((REPO / "tests" / "fixtures" / "swf").glob("*.swf"))

needs_compiled = pytest.mark.skipif(swf.compiled is None, reason="_swfparse not built (see "
                                    "test_compiled_reader_is_built, which fails in that case when gcc is here)")


def test_compiled_reader_is_built():
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if shutil.which("gcc") is None or not headers.is_file():
        pytest.skip("no gcc or no Python headers: the Polars reader runs by design")
    assert swf.compiled is not None, "gcc is here but queries.ingest._swfparse is not built: pip install -e ."
    assert swf.compiled.SOURCE_SHA256 == hashlib.sha256(SOURCE.read_bytes()).hexdigest(), \
        "queries.ingest._swfparse was built from another _swfparse.c: rebuild with pip install -e ."


def _records(text: str) -> pl.Series:
    return pl.Series("raw", [ln for ln in text.split("\n") if ln.strip() and not ln.strip().startswith(";")])


def _polars_numbers(raw: pl.Series, monkeypatch) -> pl.DataFrame | None:
    with monkeypatch.context() as m:
        m.setattr(swf, "compiled", None)
        return swf._numbers(raw)


def _bits(frame: pl.DataFrame) -> list[bytes]:
    return [frame[f].to_numpy().astype(np.float64).view(np.int64).tobytes() for f in swf.FIELDS]


def _parse_both(path, monkeypatch, **kw):
    fast = swf.parse(path, **kw)
    with monkeypatch.context() as m:
        m.setattr(swf, "compiled", None)
        return fast, swf.parse(path, **kw)


@needs_compiled
def test_values_by_hand():
    text = ("1 2.5 -1 0 .5 5. -0 -.0 007 0.1 123456789012345 1234567890123456 0.30000000000000004 9 9 9 9 9\n"
            "2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19")
    cols = np.frombuffer(swf.compiled.numbers(text.encode(), 2), np.float64).reshape(18, 2)
    first = cols[:, 0]
    assert list(first[:10]) == [1.0, 2.5, -1.0, 0.0, 0.5, 5.0, 0.0, 0.0, 7.0, 0.1]
    assert np.signbit(first[6]) and np.signbit(first[7]) and not np.signbit(first[3])  # "-0" and "-.0" are -0.0
    assert first[10] == 123456789012345.0 and first[11] == 1234567890123456.0
    assert first[12] == 0.30000000000000004  # 17 significant digits: the correctly rounded path
    assert list(cols[:, 1]) == [float(k) for k in range(2, 20)]


@needs_compiled
@pytest.mark.parametrize("bad", ["1 2 3", "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19", "1-2", "--1", "1.2.3",
                                 ".", "-", "1e3", "inf", "1\t2", "1\r", "+1", "0x1"])
def test_any_doubt_is_none(bad):
    line = " ".join((bad.split(" ") + ["1"] * 18)[:18]) if len(bad.split(" ")) < 18 and " " not in bad else bad
    assert swf.compiled.numbers(line.encode(), 1) is None
    assert swf.compiled.numbers(b"1 " * 17 + b"1", 2) is None  # fewer records than announced


@needs_compiled
@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_fixtures_parse_identically(path, monkeypatch):
    for kw in ({}, {"procs_per_node": 2}, {"gpus_per_node": 4}):
        _same_parsed(*_parse_both(path, monkeypatch, **kw))


@needs_compiled
@pytest.mark.parametrize("name", sorted(p.name for p in (Path(__file__).resolve().parents[4] / "shared" / "data"
                                                         / "swf").glob("*.swf.gz")) or ["HPC2N-2002-2.2-cln.swf.gz"])
def test_real_traces_same_numbers_and_parse(shared_data, monkeypatch, name):
    path = shared_data / "swf" / name
    raw = _records(gzip.open(path, "rt").read())
    text = "\n".join(raw.to_list()).encode("ascii")
    assert swf.compiled.numbers(text, raw.len()) is not None  # the logs are plain decimals: the C path is taken
    fast, reference = swf._numbers(raw), _polars_numbers(raw, monkeypatch)
    assert reference is not None and _bits(fast) == _bits(reference)
    _same_parsed(*_parse_both(path, monkeypatch))


GOOD = st.one_of(
    st.integers(-1, 10**6).map(str),
    st.integers(0, 10**17).map(str),
    st.tuples(st.integers(0, 10**9), st.integers(0, 22)).map(lambda t: f"{t[0] / 7:.{t[1]}f}"),
    st.sampled_from(["-0", "-.0", "5.", ".5", "-.5", "00", "0.1", "2.675"]),
)
ODD = st.one_of(st.text("0123456789.-", min_size=1, max_size=6), st.sampled_from(["1e3", "\t1", "x", "+1", "-"]))
LINE = st.tuples(st.lists(GOOD, min_size=18, max_size=18), st.integers(0, 17), st.none() | ODD,
                 st.sampled_from([0, 0, 0, 1, -1])).map(
    lambda t: [*t[0][:t[1]], *([t[2]] if t[2] is not None else [t[0][t[1]]]), *t[0][t[1] + 1:]][:18 + t[3]]
    + (["1"] if t[3] > 0 else []))


ACCEPTED: list[bool] = []


@needs_compiled
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINE, min_size=1, max_size=4),
       gaps=st.lists(st.sampled_from([" ", "  ", "   "]), min_size=19, max_size=19))
def test_generated_tokens(lines, gaps, monkeypatch):
    """Wherever C accepts, the Polars reader accepts too and reads the same bits; the whole parse is the same."""
    rows = ["  " + "".join(t + g for t, g in zip(toks, gaps)).rstrip() for toks in lines]
    raw = pl.Series("raw", rows)
    text = "\n".join(rows).encode("ascii")
    fast = swf.compiled.numbers(text, len(rows))
    ACCEPTED.append(fast is not None)
    if fast is not None:
        reference = _polars_numbers(raw, monkeypatch)
        assert reference is not None
        assert np.frombuffer(fast, np.int64).tobytes() == b"".join(_bits(reference))


@needs_compiled
def test_generated_tokens_were_often_accepted():
    """The property above compares only where C accepts: it must have done so for a fair share of examples."""
    if not ACCEPTED:
        pytest.skip("run with test_generated_tokens")
    assert sum(ACCEPTED) >= 20, f"C accepted only {sum(ACCEPTED)} of {len(ACCEPTED)} generated inputs"
