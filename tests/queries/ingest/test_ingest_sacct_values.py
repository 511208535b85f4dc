"""sacct field parsers (``queries.ingest.common``): durations, memory sizes, TRES and GRES strings, states,
timestamps, job class and comments, each against hand-computed values and, where a scalar reference is easy
to write, against it on generated input."""
from __future__ import annotations

import datetime as dt

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queries.ingest import common

GiB, MiB = 2**30, 2**20
UTC = dt.timezone.utc


def col(values, dtype=pl.String) -> pl.DataFrame:
    return pl.DataFrame({"x": values}, schema={"x": dtype})


def one(df: pl.DataFrame, expr: pl.Expr) -> list:
    return df.select(expr.alias("v"))["v"].to_list()


# ------------------------------------------------------------------------------------------------ durations
DURATIONS = [
    ("00:05.908", 5.908), ("59:59", 3599.0), ("01:02:03", 3723.0), ("01:02:03.5", 3723.5),
    ("1-02:03:04", 93784.0), ("34-15:26:01", 34 * 86400 + 15 * 3600 + 26 * 60 + 1), ("7:05:00", 25500.0),
    ("123:00:00", 442800.0),
]


@pytest.mark.parametrize("text,seconds", DURATIONS)
def test_duration_forms(text, seconds):
    df = col([text])
    assert one(df, common.duration_expr(pl.col("x"))) == [pytest.approx(seconds)]
    assert common.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["UNLIMITED", "Partition_Limit", "INVALID", "Unknown", "", None])
def test_duration_no_value_tokens_are_null_not_errors(text):
    df = col([text])
    value = common.duration_expr(pl.col("x"))
    assert one(df, value) == [None]
    assert one(df, common.unparsed(pl.col("x"), value, common.DURATION_NULL)) == [False]
    assert common.parse_duration(text) is None


@pytest.mark.parametrize("text", ["1:xx:00", "12", "00:61", "01:60:00", "1-2", "abc", "-01:00:00"])
def test_duration_garbage_is_flagged(text):
    df = col([text])
    value = common.duration_expr(pl.col("x"))
    assert one(df, value) == [None]
    assert one(df, common.unparsed(pl.col("x"), value, common.DURATION_NULL)) == [True]
    with pytest.raises(ValueError):
        common.parse_duration(text)



def test_duration_garbage_beside_good_values_in_one_column():
    """Text whose hours would be cut at a negative length (``01:00:-1``: a dash after the minutes) sat beside
    real durations in the fuzz test's column; Polars 2.2 raised on it for the whole column instead of flagging
    the one value. Each value is parsed on its own, as the scalar twin does."""
    texts = ["00:30:00", "00:00:00", "00:10:00", "01:00:-1", "1-23:4", "5-1", "1-:00", "-", "9-", "1-02:03:04",
             "٣_[1-5%2]", None]
    value = common.duration_expr(pl.col("x"))
    got = one(col(texts), value)
    assert got == [1800.0, 0.0, 600.0, None, None, None, None, None, None, 93784.0, None, None]
    assert one(col(texts), common.unparsed(pl.col("x"), value, common.DURATION_NULL)) == [
        False, False, False, True, True, True, True, True, True, False, True, False]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="0123456789:-.x", max_size=12), min_size=1, max_size=8))
def test_duration_expression_equals_the_scalar_twin_on_any_text(texts):
    got = one(col(texts), common.duration_expr(pl.col("x")))
    for text, value in zip(texts, got):
        try:
            want = common.parse_duration(text)
        except ValueError:
            want = None
        assert value == (None if want is None else pytest.approx(want)), text

def test_fast_timestamp_path_hands_other_forms_to_the_general_parser():
    df = col(["2026-11-01T10:00:00", "2026-11-01 10:00:00", "1700000000", "bogus", "Unknown", None])
    out = common.with_fallbacks(df, [("t", "x", common.timestamp_fast_expr(pl.col("x")),
                                      common.timestamp_expr(pl.col("x")))])
    ten = dt.datetime(2026, 11, 1, 10, tzinfo=UTC)
    assert out["t"].to_list() == [ten, ten, dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC), None, None, None]


def _sacct_duration(d, h, m, s, ms):
    base = f"{h:02d}:{m:02d}:{s:02d}" if (h or d) else f"{m:02d}:{s:02d}"
    return (f"{d}-" if d else "") + base + (f".{ms:03d}" if ms is not None else "")


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 400), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59),
       st.one_of(st.none(), st.integers(0, 999)))
def test_duration_expression_scalar_and_arithmetic_agree(d, h, m, s, ms):
    text = _sacct_duration(d, h, m, s, ms)
    expected = d * 86400 + h * 3600 + m * 60 + s + (ms or 0) / 1000
    assert one(col([text]), common.duration_expr(pl.col("x")))[0] == pytest.approx(expected)
    assert common.parse_duration(text) == pytest.approx(expected)


# ------------------------------------------------------------------------------------------------ memory
@pytest.mark.parametrize("text,default,bytes_,per", [
    ("12756K", "", 12756 * 1024, None), ("4M", "", 4 * MiB, None), ("0", "", 0.0, None),
    ("1.19M", "", 1.19 * MiB, None), ("2T", "M", 2 * 2**40, None), ("4000", "M", 4000 * MiB, None),
    ("100Gn", "M", 100 * GiB, "n"), ("750Mc", "M", 750 * MiB, "c"), ("0n", "M", 0.0, "n"),
    ("1P", "", 2**50, None), ("512k", "", 512 * 1024, None),
])
def test_memory_units_are_binary_and_bare_numbers_take_the_field_default(text, default, bytes_, per):
    value, suffix = common.memory_expr(pl.col("x"), default)
    assert one(col([text]), value) == [pytest.approx(bytes_)]
    assert one(col([text]), suffix) == [per]
    assert common.parse_memory(text, default) == (pytest.approx(bytes_), per)


@pytest.mark.parametrize("text", ["100Mcd", "0.07Mnz", "12Q", "-5K", "1e5", "K", "1KK"])
def test_memory_garbage_is_flagged(text):
    value, _ = common.memory_expr(pl.col("x"), "M")
    assert one(col([text]), value) == [None]
    assert one(col([text]), common.unparsed(pl.col("x"), value)) == [True]
    with pytest.raises(ValueError):
        common.parse_memory(text)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**7), st.sampled_from(["", "K", "M", "G", "T"]), st.sampled_from(["", "n", "c"]))
def test_memory_expression_and_scalar_agree(num, unit, per):
    text = f"{num}{unit}{per}"
    expected = num * common.UNIT_BYTES[unit or "M"]
    value, suffix = common.memory_expr(pl.col("x"), "M")
    assert one(col([text]), value)[0] == pytest.approx(expected)
    assert one(col([text]), suffix)[0] == (per or None)
    assert common.parse_memory(text, "M") == (pytest.approx(expected), per or None)


# ------------------------------------------------------------------------------------------------ TRES
TRES = [
    # the brief's example: one GPU count (gres/gpu=4), not typed + untyped = 8; mem 199 GiB
    ("billing=24,cpu=8,gres/gpu:a100=4,gres/gpu=4,mem=199G,node=1",
     {"cpu": 8.0, "gpus": 4.0, "gpu_type": "a100", "mem_bytes": 199 * GiB, "nodes": 1.0}),
    # typed entries only: summed (2 + 1)
    ("cpu=16,gres/gpu:a100=2,gres/gpu:v100=1,mem=64000,node=2",
     {"cpu": 16.0, "gpus": 3.0, "gpu_type": "a100", "mem_bytes": 64000 * MiB, "nodes": 2.0}),
    ("billing=4,cpu=4,mem=8G,node=1", {"cpu": 4.0, "gpus": 0.0, "gpu_type": None, "mem_bytes": 8 * GiB, "nodes": 1.0}),
    ("", {"cpu": None, "gpus": None, "gpu_type": None, "mem_bytes": None, "nodes": None}),
]


@pytest.mark.parametrize("text,expected", TRES)
def test_tres_strings(text, expected):
    df = common.on_distinct(col([text, text]), "x", {k: e for k, e in common.tres_expr(pl.col("x")).items()})
    for key, value in expected.items():
        assert df[key].to_list() == [value, value], key
    assert df["bad"].to_list() == [False, False]
    assert common.parse_tres(text) == expected


def test_tres_with_unparseable_memory_is_bad():
    df = col(["cpu=4,mem=lots,node=1", "cpu=four,node=1", "garbage"]).with_columns(
        **{k: e for k, e in common.tres_expr(pl.col("x")).items()})
    assert df["bad"].to_list() == [True, True, True]


def test_gres_strings():
    df = col(["gpu:2", "gpu:tesla:2", "gpu:a100:4(IDX:0-3)", "craynetwork:1", None]).with_columns(
        **common.gres_expr(pl.col("x")))
    assert df["gpus"].to_list() == [2.0, 2.0, 4.0, 0.0, None]
    assert df["gpu_type"].to_list() == [None, "tesla", "a100", None, None]


# ------------------------------------------------------------------------------------------------ states
STATES = [("COMPLETED", "COMPLETED"), ("CANCELLED by 1234", "CANCELLED"), ("CANCELLED+", "CANCELLED"),
          ("OUT_OF_ME+", "OUT_OF_MEMORY"), ("OUT_OF_MEMORY", "OUT_OF_MEMORY"), ("REQUEUED", "PREEMPTED"),
          ("BOOT_FAIL", "NODE_FAIL"), ("DEADLINE", "TIMEOUT"), ("SUSPENDED", "RUNNING"),
          ("COMPLETING", "RUNNING"), ("NODE_FAIL", "NODE_FAIL"), ("PD", "PENDING"), ("CD", "COMPLETED"),
          ("SPECIAL_EXIT", "FAILED"), ("REVOKED", "CANCELLED"), ("running", "RUNNING"), ("TIMEOU+", "TIMEOUT"),
          ("INVALID", None), ("EXPLODED", None), ("", None), (None, None), ("CO+", None)]


@pytest.mark.parametrize("raw,state", STATES)
def test_state_normalisation(raw, state):
    assert one(col([raw]), common.state_expr(pl.col("x"))) == [state]
    assert common.normalise_state(raw) == state
    assert state is None or state in common.schema.STATES


# ------------------------------------------------------------------------------------------------ timestamps
def test_timestamps_default_to_utc_and_tokens_are_null():
    df = col(["2026-11-01T10:00:00", "Unknown", "None", "", None, "2026-13-01T00:00:00", "1700000000"])
    value = common.timestamp_expr(pl.col("x"))
    got = one(df, value)
    assert got[:5] == [dt.datetime(2026, 11, 1, 10, tzinfo=UTC), None, None, None, None]
    assert got[5] is None
    assert got[6] == dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)  # epoch 1.7e9
    assert one(df, common.unparsed(pl.col("x"), value, common.TIME_NULL)) == [False] * 5 + [True, False]


def test_timestamps_in_a_local_zone():
    df = col(["2026-07-01T12:00:00", "2026-01-15T12:00:00", "2026-03-29T02:30:00", "2026-10-25T02:30:00"])
    got = one(df, common.timestamp_expr(pl.col("x"), tz="Europe/Berlin"))
    assert got[0] == dt.datetime(2026, 7, 1, 10, tzinfo=UTC)   # CEST = UTC+2
    assert got[1] == dt.datetime(2026, 1, 15, 11, tzinfo=UTC)  # CET = UTC+1
    assert got[2] == dt.datetime(2026, 3, 29, 1, 30, tzinfo=UTC)  # in the gap (02:00 -> 03:00): offset before it
    assert got[3] == dt.datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # ambiguous: the earlier (CEST) instant


# ------------------------------------------------------------------------------------------------ class, comment
@pytest.mark.parametrize("qos,name,gpus,cls", [
    ("training", "whatever", 0, "training"), ("Debug", "train", 8, "debug"), ("normal", "bash", 1, "interactive"),
    ("normal", "jupyter-lab", 1, "interactive"), ("normal", "eval_ckpt", 1, "eval"), ("high", "prep_data", 0, "dataprep"),
    ("normal", "llama-sft-v2", 8, "training"), ("normal", "sweep", 8, "training"), ("normal", "sweep", 4, "batch"),
    (None, None, None, "batch"), ("normal", "my_debug_run", 1, "debug"),
])
def test_job_class(qos, name, gpus, cls):
    assert common.job_class(qos, name, gpus) == cls
    df = pl.DataFrame({"q": [qos], "n": [name], "g": [gpus]}, schema={"q": pl.String, "n": pl.String, "g": pl.Float64})
    assert one(df, common.job_class_expr(pl.col("q"), pl.col("n"), pl.col("g"))) == [cls]


def test_comment_key_values():
    text = "min_runtime_s=28800 team=nlp;prio=high"
    assert common.parse_comment(text) == {"min_runtime_s": "28800", "team": "nlp", "prio": "high"}
    df = col([text, "x min_runtime_s=60", "no_min_runtime_s=5", None])
    assert one(df, common.comment_value_expr(pl.col("x"), "min_runtime_s")) == ["28800", "60", None, None]


def test_on_distinct_keeps_row_order_and_maps_nulls():
    df = col(["b", None, "a", "b"])
    out = common.on_distinct(df, "x", {"u": pl.col("x").str.to_uppercase(), "n": pl.col("x").is_null()})
    assert out["u"].to_list() == ["B", None, "A", "B"]
    assert out["n"].to_list() == [False, True, False, False]
