"""What gaming_check's description says splitting does is what it does on the sample (issue 17.5): the legacy
score does not fall for everyone, so the header, queries/README.md and the page caption must not say so."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import queries

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "sample_data" / "store"


def test_gaming_check_header_counts_are_the_sample_counts():
    if not (SAMPLE / "_manifest.json").exists():
        pytest.skip(f"sample store not built: {SAMPLE}")
    text = queries.load("gaming_check").description
    m = re.search(r"at (\d+) pieces it falls for (\d+) of (\d+) users and rises for (\d+); the rank improves for "
                  r"(\d+) and worsens for (\d+)", text)
    assert m, text
    n, falls, users, rises, better, worse = map(int, m.groups())
    g = queries.run("gaming_check", SAMPLE, split_n=n)
    assert g.height == users
    assert int((g["legacy_score_after"] < g["legacy_score_before"]).sum()) == falls == int(g["legacy_improves"].sum())
    assert int((g["legacy_score_after"] > g["legacy_score_before"]).sum()) == rises
    assert int((g["legacy_rank_after"] < g["legacy_rank_before"]).sum()) == better
    assert int((g["legacy_rank_after"] > g["legacy_rank_before"]).sum()) == worse
    assert int(g["recommended_improves"].sum()) == 0


def test_no_document_claims_the_split_always_lowers_the_legacy_score():
    for path in ("queries/analytics/sql/gaming_check.sql", "queries/README.md", "dashboard/views/rankings.py"):
        text = " ".join((REPO / path).read_text().split())
        for claim in ("the legacy score falls (a shorter task", "splitting one job into N improves it",
                      "ln(job_count / 10 + 1), so it improves"):
            assert claim not in text, (path, claim)
