"""One spelling per concept across ``quotaloop`` commands: ``--cluster NAME`` is always the cluster's name and
``--nodes-csv FILE`` the node-layout file; the old spellings of ``simulate`` / ``validate`` (``--store-cluster
NAME``, ``--cluster nodes.csv``) keep working as a hidden alias or fail with one line saying what to use."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dashboard.cli import COMMANDS, build_parser
from test_cli_errors import assert_one_line_error, run_cli
from test_queries_fixture import build

REPO = Path(__file__).resolve().parents[2]
OLD_SPELLING = "--cluster is the cluster name; give the layout file with --nodes-csv"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("cli-flags") / "store")  # one cluster, "c", with a nodes table


@pytest.fixture(scope="module")
def layout(tmp_path_factory) -> Path:
    """Two 8-GPU nodes: a layout other than the store's own, so a run that used it can be told apart."""
    path = tmp_path_factory.mktemp("cli-flags-layout") / "nodes.csv"
    path.write_text("node,partition,cpus,gpus,gpu_type,mem_bytes\n"
                    + "".join(f"l{i},gpu,64,8,,{512 * 2**30}\n" for i in range(2)))
    return path


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return next((a for a in parser._actions if flag in a.option_strings), None)


def test_cluster_is_a_name_and_the_layout_file_is_nodes_csv_in_every_command():
    parsers = _subcommands()
    assert sorted(parsers) == sorted(COMMANDS)
    with_cluster = {name for name, p in parsers.items() if _option(p, "--cluster")}
    assert with_cluster == {"ingest", "report", "sample", "scenario", "simulate", "validate"}
    for name in with_cluster:
        action = _option(parsers[name], "--cluster")
        words = f"{action.metavar or ''} {action.help or ''}".lower()
        assert "csv" not in words and "layout" not in words, (name, words)
        assert action.dest == "cluster", name
    # the commands that take a layout file take it as --nodes-csv, and only they have a layout flag
    with_layout = {name for name, p in parsers.items() if _option(p, "--nodes-csv")}
    assert with_layout == {"simulate", "validate"}
    for name in with_layout:
        assert _option(parsers[name], "--nodes-csv").metavar == "FILE"


@pytest.mark.parametrize("command", ["simulate", "validate"])
def test_store_cluster_is_a_hidden_alias_of_cluster(command):
    p = _subcommands()[command]
    old = _option(p, "--store-cluster")
    assert old is not None and old.dest == "cluster" and old.help == argparse.SUPPRESS
    assert "--store-cluster" not in p.format_help()
    assert p.parse_args(["--store", "s", "--store-cluster", "c", "--out", "o"]).cluster == "c"


def _digests(out: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir())}


def test_simulate_cluster_name_nodes_csv_and_the_alias(store, layout, tmp_path, capsys, monkeypatch):
    """--cluster c (the name) and its old spelling --store-cluster c write the same bytes; --nodes-csv replaces the
    store's layout (its 2 nodes instead of the store's gpu-01, gpu-02 and cpu-01; 16 GPUs in both)."""
    runs = {"name": ["--cluster", "c"], "alias": ["--store-cluster", "c"],
            "layout": ["--cluster", "c", "--nodes-csv", str(layout)]}
    for label, extra in runs.items():
        rc, out, err = run_cli(capsys, monkeypatch, "simulate", "--store", str(store), *extra,
                               "--out", str(tmp_path / label))
        assert rc == 0, (label, err)
        assert "jobs simulated" in out
    assert _digests(tmp_path / "name") == _digests(tmp_path / "alias")
    clusters = {k: json.loads((tmp_path / k / "metrics.json").read_text())["cluster"] for k in runs}
    assert {k: (c["nodes"], c["gpus"]) for k, c in clusters.items()} == {"name": (3, 16), "alias": (3, 16),
                                                                         "layout": (2, 16)}


def test_an_unknown_cluster_name_says_which_there_are(store, tmp_path, capsys, monkeypatch):
    rc, out, err = run_cli(capsys, monkeypatch, "simulate", "--store", str(store), "--cluster", "nope",
                           "--out", str(tmp_path / "o"))
    assert_one_line_error(rc, out, err, "simulate", "--cluster nope: no jobs; clusters: c")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", ["simulate", "validate"])
def test_the_old_cluster_csv_spelling_fails_with_one_line(command, store, layout, tmp_path, capsys, monkeypatch):
    rc, out, err = run_cli(capsys, monkeypatch, command, "--store", str(store), "--cluster", str(layout),
                           "--out", str(tmp_path / "o"))
    line = assert_one_line_error(rc, out, err, command)
    assert line == f"quotaloop {command}: {OLD_SPELLING}"
    assert not (tmp_path / "o").exists()


def test_the_old_cluster_csv_spelling_in_a_real_process(store, layout, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "QUOTALOOP_DEBUG"}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, "-m", "dashboard.cli", "simulate", "--store", str(store), "--cluster",
                           str(layout), "--out", str(tmp_path / "o")], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"quotaloop simulate: {OLD_SPELLING}\n"
    assert proc.stdout == "" and not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", ["simulate", "validate"])
def test_a_bad_budget_file_is_the_same_line_in_both_commands(command, store, tmp_path, capsys, monkeypatch):
    """One --budgets loader: the file's own error (engine.budgets) after the command's name."""
    bad = tmp_path / "bad.toml"
    bad.write_text("[org]\nshare = 'lots'\n")
    from engine.budgets import BudgetError, load

    with pytest.raises(BudgetError) as exc:
        load(bad)
    rc, out, err = run_cli(capsys, monkeypatch, command, "--store", str(store), "--budgets", str(bad),
                           "--out", str(tmp_path / "o"))
    assert assert_one_line_error(rc, out, err, command) == f"quotaloop {command}: {exc.value}"


def test_a_named_command_builds_only_its_own_parser_with_the_same_flags_and_help():
    """``main`` builds just the named sub-command's parser (start-up): it must be the same parser as the full one's
    (help text, every flag and default), and an unknown command still gets the full parser's error."""
    full = _subcommands()
    for name in COMMANDS:
        parser = build_parser(name)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        assert list(sub.choices) == [name]
        one = sub.choices[name]
        assert one.format_help() == full[name].format_help()
        assert [(a.option_strings, a.dest, a.default) for a in one._actions] == \
            [(a.option_strings, a.dest, a.default) for a in full[name]._actions]
    from dashboard.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["simulat", "--out", "x"])
    assert exc.value.code == 2
