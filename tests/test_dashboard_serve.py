"""``quotaloop serve``: the Streamlit command it runs, its errors, and building the sample store when missing."""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import dashboard_fixture as fx
from dashboard.commands import serve

REPO = Path(__file__).resolve().parent.parent


def _run(*args):
    return subprocess.run([sys.executable, "-m", "dashboard.cli", "serve", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_dry_run_is_headless_loopback_and_without_telemetry(tmp_path):
    store = fx.build(tmp_path / "s")
    out = _run("--store", str(store), "--port", "8765", "--dry-run")
    assert out.returncode == 0, out.stderr
    cmd = out.stdout.split()
    assert cmd[1:4] == ["-m", "dashboard.server", "run"] and cmd[4].endswith("dashboard/app.py")
    pairs = dict(zip(cmd[5::2], cmd[6::2]))
    assert pairs["--server.port"] == "8765" and pairs["--server.address"] == "127.0.0.1"
    assert pairs["--server.headless"] == "true" and pairs["--browser.gatherUsageStats"] == "false"


def test_a_store_that_does_not_exist_is_one_clear_line(tmp_path):
    out = _run("--store", str(tmp_path / "nope"), "--dry-run")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "no such directory" in out.stderr and "Traceback" not in out.stderr


def test_the_store_reaches_the_app_through_the_environment(tmp_path):
    store = fx.build(tmp_path / "s")
    args = serve.register(argparse.ArgumentParser().add_subparsers()).parse_args(
        ["--store", str(store), "--auth", "demo"])
    argv, env = serve.command(args)
    assert env["QUOTALOOP_STORE"] == str(store.resolve()) and env["QUOTALOOP_AUTH"] == "demo"


def test_missing_sample_store_is_built_with_the_sample_command(tmp_path, monkeypatch):
    calls = []

    def fake_main(argv):
        calls.append(argv)
        fx.build(argv[argv.index("--store") + 1])  # what `quotaloop sample` leaves behind: a store
        return 0

    import dashboard.cli

    monkeypatch.setattr(dashboard.cli, "main", fake_main)
    target = tmp_path / "sample"
    assert serve.ensure_sample_store(target) == target
    assert calls == [["sample", "--store", str(target)]]
    serve.ensure_sample_store(target)  # already there: not rebuilt
    assert len(calls) == 1


def test_no_warm_reaches_the_server_and_warm_is_on_by_default(tmp_path):
    from dashboard import server

    store = fx.build(tmp_path / "s")
    parse = serve.register(argparse.ArgumentParser().add_subparsers()).parse_args
    _, env = serve.command(parse(["--store", str(store), "--no-warm"]))
    assert env["QUOTALOOP_WARM"] == "0" and not server.warm_enabled(env)
    _, env = serve.command(parse(["--store", str(store)]))
    assert server.warm_enabled(env)
