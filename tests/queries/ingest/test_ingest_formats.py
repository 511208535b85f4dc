"""The ingest-format registry (``queries.ingest.formats``): adding a format is one module and one registry line.

The proof is a toy format defined in this module, a tab-separated job list (``parse_tsv``, ``sniff_tsv``):
registered, it is a ``--format`` choice of ``quotaloop ingest``, ``detect_format`` finds it, and a file of it
goes end to end into a real store with read = accepted + rejected and its rejected rows kept with their reason.
Nothing else in the code base knows about it.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import queries
from dashboard.cli import main
from queries.ingest import IngestError, Parsed, detect_format, formats, ingest
from queries.store import Store
from queries.store.units import UTC_TS, parse_ts

REPO = Path(__file__).resolve().parents[3]
TSV_COLUMNS = ("job_id", "user", "account", "submit", "start", "end", "req_gpus")


def sniff_tsv(head: bytes, name: str) -> bool:
    return head.startswith(("\t".join(TSV_COLUMNS) + "\n").encode())


def parse_tsv(path, **_options) -> Parsed:
    """One job a line; a line with the wrong number of fields or a GPU count that is not a number is rejected."""
    lines = Path(path).read_text().splitlines()
    if not lines or lines[0].split("\t") != list(TSV_COLUMNS):
        raise IngestError(path, "header is not " + " ".join(TSV_COLUMNS), line=1)
    jobs, rejects = [], []
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split("\t")
        if len(cells) != len(TSV_COLUMNS):
            rejects.append((number, None, f"{len(cells)} fields, expected {len(TSV_COLUMNS)}", line))
            continue
        row = dict(zip(TSV_COLUMNS, cells))
        try:
            gpus = float(row["req_gpus"])
        except ValueError:
            rejects.append((number, "req_gpus", f"not a number: {row['req_gpus']!r}", line))
            continue
        start, end = parse_ts(row["start"]), parse_ts(row["end"])
        jobs.append({**row, "submit": parse_ts(row["submit"]), "start": start, "end": end, "req_gpus": gpus,
                     "alloc_gpus": gpus, "state": "COMPLETED", "elapsed_s": (end - start).total_seconds()})
    frame = pl.DataFrame(jobs, schema_overrides={"submit": UTC_TS, "start": UTC_TS, "end": UTC_TS})
    rejected = pl.DataFrame(rejects, schema={"line": pl.Int64, "field": pl.String, "reason": pl.String,
                                             "raw": pl.String}, orient="row")
    return Parsed(rows_read=len(lines) - 1, rows_accepted=len(jobs), jobs=frame, rejects=rejected)


TOY = formats.Format("tsv", __name__, "parse_tsv", "sniff_tsv", detect_rank=5)


@pytest.fixture
def toy_format(monkeypatch):
    """The registry line that adds the toy format, for this test only."""
    monkeypatch.setitem(formats.REGISTRY, TOY.name, TOY)
    return TOY


TSV = "\n".join([
    "\t".join(TSV_COLUMNS),
    "t1\talice\tlab/vision\t2026-11-02T08:00:00\t2026-11-02T09:00:00\t2026-11-02T11:00:00\t2",
    "t2\tbob\tlab/nlp\t2026-11-02T08:30:00\t2026-11-02T09:00:00\t2026-11-02T09:30:00\t4",
    "t3\tbob\tlab/nlp\t2026-11-02T10:00:00",                                             # 4 fields
    "t4\tcarol\tlab/nlp\t2026-11-02T10:00:00\t2026-11-02T10:00:00\t2026-11-02T11:00:00\tmany",  # not a number
    "t5\tcarol\tlab/nlp\t2026-11-02T10:00:00\t2026-11-02T10:00:00\t2026-11-02T11:00:00\t1",
]) + "\n"


def test_builtin_formats_are_registered_in_cli_order_and_detected_specific_first():
    assert formats.names() == ("sacct", "sacct-json", "swf", "pai", "openb", "csv", "parquet", "samples",
                               "prometheus", "scontrol", "philly")
    assert formats.job_log_names() == ("sacct", "sacct-json", "swf", "csv", "parquet", "philly")
    order = [f.name for f in formats.detection_order()]
    assert order[0] == "parquet" and order[-1] == "sacct" and sorted(order) == sorted(formats.names())
    for fmt in formats.REGISTRY.values():  # every line names a function that exists
        assert callable(fmt.reader()) and callable(fmt.detector())


def test_a_name_is_registered_once(toy_format):
    with pytest.raises(ValueError, match="'tsv' is already registered"):
        formats.register(toy_format)
    with pytest.raises(ValueError, match="'sacct' is already registered"):
        formats.register(formats.Format("sacct", __name__, "parse_tsv", None, detect_rank=1))


def test_toy_format_end_to_end_through_the_cli(toy_format, tmp_path, capsys):
    src = tmp_path / "jobs.tsv"
    src.write_text(TSV)
    store = tmp_path / "store"
    assert detect_format(src) == "tsv"
    assert main(["ingest", str(src), "--store", str(store), "--cluster", "toy", "--format", "tsv", "--json"]) == 0
    summary, = json.loads(capsys.readouterr().out)
    assert (summary["format"], summary["rows_read"], summary["rows_accepted"], summary["rows_rejected"]) == \
        ("tsv", 5, 3, 2)

    st = Store(store)
    jobs = st.read("jobs").sort("job_id")
    assert jobs["job_id"].to_list() == ["t1", "t2", "t5"]
    assert set(jobs["source"]) == {"tsv"} and set(jobs["cluster"]) == {"toy"}
    rejects = st.read("rejects").sort("line")
    assert rejects.select("line", "field", "reason").rows() == [
        (4, None, "4 fields, expected 7"), (5, "req_gpus", "not a number: 'many'")]
    assert rejects["raw"].to_list() == TSV.splitlines()[3:5]
    log = st.read("ingest_log").row(0, named=True)
    assert log["rows_read"] == log["rows_accepted"] + log["rows_rejected"] == 5

    # the named queries read the toy format's jobs like any other: GPU-hours by hand, 2x2 h + 4x0.5 h + 1x1 h
    waste = queries.run("job_waste", store=store)
    assert waste.height == 3
    assert waste["gpu_seconds_requested"].sum() == pytest.approx((2 * 2 + 4 * 0.5 + 1 * 1) * 3600)


def test_toy_format_detected_by_ingest_and_gone_when_unregistered(tmp_path, monkeypatch):
    src = tmp_path / "jobs.tsv"
    src.write_text(TSV)
    with monkeypatch.context() as m:
        m.setitem(formats.REGISTRY, TOY.name, TOY)
        summary, = ingest([src], tmp_path / "store")  # fmt="auto": found by its detector
        assert (summary.format, summary.rows_read, summary.rows_accepted, summary.rows_rejected) == ("tsv", 5, 3, 2)
    assert "tsv" not in formats.names()
    with pytest.raises(IngestError, match="unknown format 'tsv'; use one of auto|sacct"):
        ingest([src], tmp_path / "store", fmt="tsv")


def test_building_the_cli_parser_loads_no_polars():
    """The CLI reads the registry when it builds its parser; the ingest command sets Polars' allocator before
    Polars' first import, so the registry must come without it (queries/ingest/__init__.py)."""
    code = ("import sys; from dashboard.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('polars', 'duckdb', 'queries.ingest.pipeline') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
