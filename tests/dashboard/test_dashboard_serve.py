"""``quotaloop serve``: the Streamlit command it runs, its errors, and building the sample store when missing."""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

import dashboard_fixture as fx
from dashboard.cli import serve

REPO = Path(__file__).resolve().parents[2]


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

    monkeypatch.setattr(serve, "main", fake_main)
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



def test_the_start_up_thread_loads_the_data_layer_and_warms_only_when_asked(monkeypatch):
    """With the warm-up off the thread still imports the data layer (the first visitor does not pay for it) but
    runs no query; with it on it warms. Both wait for Streamlit's runtime first."""
    # the import, in a process that has not imported the data layer yet
    code = ("import sys; from dashboard import server\n"
            "class R:\n    exists = staticmethod(lambda: True)\n"
            "server.Runtime = R\n"
            "assert 'dashboard.data' not in sys.modules\n"
            "server._when_ready(False)\n"
            "print('dashboard.data' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True", out.stderr

    from dashboard import data, server

    checks: list[int] = []

    class Runtime:  # not started for the first two checks
        @staticmethod
        def exists():
            checks.append(1)
            return len(checks) > 2

    warmed: list[bool] = []
    monkeypatch.setattr(server, "Runtime", Runtime)
    monkeypatch.setattr(server.time, "sleep", lambda s: None)
    monkeypatch.setattr(data, "warm", lambda log=None: warmed.append(True))
    server._when_ready(False)
    assert warmed == [] and len(checks) == 3
    server._when_ready(True)
    assert warmed == [True]

# ------------------------------------------------------------------ first run: who may look
def _env_without_auth(monkeypatch, tmp_path):
    for var in ("QUOTALOOP_AUTH", "QUOTALOOP_CONFIG", "QUOTALOOP_ADMINS", "QUOTALOOP_EMAIL_DOMAINS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)  # no quotaloop.toml, no .streamlit/secrets.toml here
    monkeypatch.setenv("HOME", str(tmp_path))


def test_no_config_on_loopback_runs_single_operator_mode(tmp_path, monkeypatch):
    _env_without_auth(monkeypatch, tmp_path)
    store = fx.build(tmp_path / "s")
    parse = serve.register(argparse.ArgumentParser().add_subparsers()).parse_args
    for host in ("127.0.0.1", "localhost", "::1", "127.0.1.1"):
        _, env = serve.command(parse(["--store", str(store), "--host", host]))
        assert env["QUOTALOOP_AUTH"] == "operator", host


def test_no_config_on_a_public_address_refuses_in_one_line(tmp_path):
    store = fx.build(tmp_path / "s")
    env_dir = tmp_path / "cwd"
    env_dir.mkdir()
    out = subprocess.run([sys.executable, "-m", "dashboard.cli", "serve", "--store", str(store), "--host", "0.0.0.0",
                          "--dry-run"], cwd=env_dir, capture_output=True, text=True, timeout=120,
                         env={**_clean_env(), "HOME": str(env_dir), "PYTHONPATH": str(REPO)})
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr
    assert "0.0.0.0" in out.stderr and "--auth oidc" in out.stderr and "--auth header" in out.stderr
    assert out.stdout == ""  # nothing started


def _clean_env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("QUOTALOOP_")}


@pytest.mark.parametrize("auth, host, sample, oidc_ready, expected", [
    ("auto", "127.0.0.1", False, False, "operator"),
    ("auto", "127.0.0.1", False, True, "oidc"),      # [auth] secrets present: sign-in it is
    ("auto", "0.0.0.0", False, True, "oidc"),
    ("auto", "0.0.0.0", True, False, "demo"),        # the sample store: demo on any address
    ("auto", "127.0.0.1", True, False, "demo"),
    ("header", "0.0.0.0", False, False, "header"),   # chosen explicitly: kept as chosen
    ("open", "10.1.2.3", False, False, "open"),
    ("oidc", "127.0.0.1", False, False, "oidc"),
    ("none", "0.0.0.0", False, False, "none"),
])
def test_resolve_auth(auth, host, sample, oidc_ready, expected):
    assert serve.resolve_auth(auth, host, sample, oidc_ready) == expected


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "cluster-head.example.org", "192.168.1.10"])
def test_operator_mode_never_listens_beyond_this_machine(host):
    from dashboard.cli.errors import UserError

    with pytest.raises(UserError, match="reachable from other machines"):
        serve.resolve_auth("auto", host, False, False)
    with pytest.raises(UserError):
        serve.resolve_auth("operator", host, False, False)


def test_oidc_secrets_are_found_in_the_working_or_home_directory(tmp_path):
    cwd, home = tmp_path / "cwd", tmp_path / "home"
    for d in (cwd, home):
        (d / ".streamlit").mkdir(parents=True)
    assert not serve.oidc_secrets_present(cwd, home)
    (home / ".streamlit" / "secrets.toml").write_text('other = 1\n')
    assert not serve.oidc_secrets_present(cwd, home)  # secrets, but no [auth] table
    (cwd / ".streamlit" / "secrets.toml").write_text('[auth]\nredirect_uri = "http://x/oauth2callback"\n')
    assert serve.oidc_secrets_present(cwd, home)


def test_error_boxes_offer_no_internet_links(tmp_path, monkeypatch):
    """Air-gapped networks: no "Ask Google / Ask ChatGPT" in error boxes, from `serve` and from `streamlit run`."""
    import tomllib

    _env_without_auth(monkeypatch, tmp_path)
    store = fx.build(tmp_path / "s")
    argv, _ = serve.command(serve.register(argparse.ArgumentParser().add_subparsers()).parse_args(
        ["--store", str(store)]))
    assert dict(zip(argv[5::2], argv[6::2]))["--client.showErrorLinks"] == "false"
    with open(REPO / ".streamlit" / "config.toml", "rb") as fh:
        assert tomllib.load(fh)["client"]["showErrorLinks"] is False
    from streamlit import config as st_config

    assert "client.showErrorLinks" in st_config._config_options_template  # the option this Streamlit reads


def test_oidc_dependency_installs_with_the_package():
    import tomllib

    with open(REPO / "pyproject.toml", "rb") as fh:
        deps = tomllib.load(fh)["project"]["dependencies"]
    assert any(d.lower().replace(" ", "").startswith("authlib>=1.3.2") for d in deps)
    from streamlit.auth_util import is_authlib_installed

    assert is_authlib_installed()


def test_sign_in_without_email_domains_is_pointed_out(tmp_path, monkeypatch, capsys):
    _env_without_auth(monkeypatch, tmp_path)
    store = fx.build(tmp_path / "s")
    parse = serve.register(argparse.ArgumentParser().add_subparsers()).parse_args
    serve.command(parse(["--store", str(store), "--auth", "oidc"]))
    assert "email_domains is empty" in capsys.readouterr().err
    monkeypatch.setenv("QUOTALOOP_EMAIL_DOMAINS", "example.org")
    serve.command(parse(["--store", str(store), "--auth", "oidc"]))
    assert "email_domains" not in capsys.readouterr().err
