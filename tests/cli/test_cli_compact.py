"""``quotaloop compact``: the summary line, one commit, and one-line errors (exit 2) for bad arguments."""
from __future__ import annotations

import re

import pytest
from polars.testing import assert_frame_equal

from dashboard.cli import main
from queries.analytics import rollup, run
from queries.store import Store

from test_queries_random import random_store


def _cli(capsys, *args) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def test_compact_prints_what_it_did(tmp_path, capsys):
    store = random_store(tmp_path / "store", seed=4)
    rollup.rebuild(store)
    before = run("user_ranking", store, start="2026-03-03", end="2026-03-10")
    samples = Store(store).read("samples").height
    rc, out, err = _cli(capsys, "compact", "--store", str(store), "--keep-samples", "2d")
    assert (rc, err) == (0, "")
    m = re.search(r"read (\d+) samples = kept (\d+) \+ replaced (\d+); wrote (\d+) hourly \+ (\d+) peak", out)
    assert m, out
    read, kept, replaced, hourly, peaks = map(int, m.groups())
    assert read == kept + replaced and replaced > 0
    assert Store(store).read("samples").height == samples - replaced + hourly + peaks
    after = run("user_ranking", store, start="2026-03-03", end="2026-03-10")
    assert_frame_equal(after, before, check_exact=False, rel_tol=1e-8, abs_tol=1e-5)


@pytest.mark.parametrize("keep,msg", [("0d", "positive whole number"), ("ninety", "positive whole number"),
                                      ("-5d", "positive whole number"), ("2.5d", "positive whole number")])
def test_bad_keep_is_one_line(tmp_path, capsys, keep, msg):
    store = random_store(tmp_path / "store", seed=4, n_jobs=20)
    rollup.rebuild(store)
    manifest = (store / "_manifest.json").read_text()
    rc, out, err = _cli(capsys, "compact", "--store", str(store), f"--keep-samples={keep}")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("quotaloop compact: --keep-samples") and msg in err
    assert (store / "_manifest.json").read_text() == manifest


def test_store_problems_are_one_line(tmp_path, capsys):
    rc, out, err = _cli(capsys, "compact", "--store", str(tmp_path / "nope"), "--keep-samples", "90d")
    assert rc == 2 and err.startswith("quotaloop compact: ") and err.count("\n") == 1
    store = random_store(tmp_path / "norollup", seed=4, n_jobs=20)
    rc, out, err = _cli(capsys, "compact", "--store", str(store), "--keep-samples", "90d")
    assert rc == 2 and err.count("\n") == 1 and "rollup --store" in err and "--rebuild" in err
    with pytest.raises(SystemExit) as exc:  # argparse's usage error, one line too
        main(["compact", "--store", str(store)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--keep-samples" in err and err.count("\n") == 1
