"""A scenario kind is one module + one registry line: a toy kind defined here, registered, runs end to end
(``ScenarioSpec``, the loader over a tiny store, the runner, ``quotaloop scenario``) without touching any other
file; the registry is what the CLI, the page and the runner read."""
from __future__ import annotations

import json

import polars as pl
import pytest

from dashboard.cli import main
from dashboard.whatif import registry, runner
from dashboard.whatif.kind import Change
from dashboard.whatif.params import ScenarioError, number
from dashboard.whatif.spec import ScenarioSpec
from test_scenarios import TWO, job, write_store


class Nothing:
    """The toy kind: changes nothing (``factor`` is checked but unused), and counts its ``apply`` calls."""
    name, cli_name, label = "nothing", "nothing", "A toy kind that changes nothing"
    defaults = {"factor": 1.0}
    applied = 0

    def check(self, p: dict) -> None:
        number("factor", p["factor"], 0.0, 10.0)

    def describe(self, v: dict, spec) -> str:
        return f"nothing (factor {v['factor']:g})"

    def apply(self, change: Change) -> None:
        type(self).applied += 1


@pytest.fixture
def toy():
    kind = registry.register(Nothing())
    yield kind
    registry.unregister(kind.name)


def _store(tmp_path):
    # two 8-GPU jobs of two teams on two 8-GPU nodes, then two more that must queue behind them (1 h each)
    rows = [job("a1", "lab/a", 8, 0, 2), job("b1", "lab/b", 8, 0, 2), job("a2", "lab/a", 8, 1, 1),
            job("b2", "lab/b", 8, 1, 1)]
    return write_store(tmp_path / "store", rows)


def test_the_registry_lists_every_kind_once():
    assert list(registry.KINDS) == ["shares", "backfill", "min_runtime", "rightsize", "quota_loop", "drains", "custom"]
    assert registry.cli_names()["min-runtime"] == "min_runtime" and len(set(registry.cli_names())) == 7
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.KINDS["shares"])


def test_a_toy_kind_registered_runs_end_to_end_with_zero_deltas(toy, tmp_path):
    store = _store(tmp_path)
    with pytest.raises(ScenarioError, match="factor"):
        ScenarioSpec.make("nothing", factor=-1.0)
    spec = ScenarioSpec.make("nothing", factor=2)
    assert spec.describe() == "nothing (factor 2) · baseline fairshare/easy · seed 0"
    inputs = runner.load_inputs(store, TWO, window_s=86400.0, cluster="c")
    assert inputs.jobs["job_id"].to_list() == ["a1", "b1", "a2", "b2"]  # the loader's (submit, job_id) order
    before = Nothing.applied
    res = runner.run(spec, inputs)
    assert Nothing.applied == before + 1
    assert res.scenario is res.baseline  # a kind that changes nothing is not simulated twice
    # by hand: a2 and b2 wait from 1 h to 2 h (the nodes are full), so the p90 wait is 1 h in both runs
    assert res.comparison.filter(pl.col("metric") == "wait_s.p90")["baseline"].item() == pytest.approx(3600.0)
    assert res.comparison.height > 10
    assert res.comparison["delta"].drop_nulls().abs().max() == 0.0
    assert set(res.teams["verdict"]) == {"same"}


def test_the_cli_offers_and_runs_the_toy_kind(toy, tmp_path, capsys):
    store = _store(tmp_path)
    out = tmp_path / "out"
    assert main(["scenario", "nothing", "--store", store, "--window", "1d", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["scenario"]["kind"] == "nothing" and summary["scenario"]["params"] == {"factor": 1.0}
    assert all(m["delta"] == 0.0 for m in summary["metrics"].values() if m["delta"] is not None)
    assert (out / "baseline" / "jobs.parquet").read_bytes() == (out / "scenario" / "jobs.parquet").read_bytes()
