"""The CLI error matrix: every ``quotaloop`` command against bad stores and bad flag values.

For each case: exit 2 (an error the user can fix), exactly one line on stderr naming what is wrong, no
traceback anywhere, no output directory created, and every file of the store byte-identical afterwards (a
SHA-256 of each). The matrix runs through ``dashboard.cli.main`` in this process (one import of Polars and
DuckDB for all of it); ``test_real_process_*`` check the same contract on a real ``python -m dashboard.cli``
process, including a read-only store (as root, by dropping the capabilities that bypass file modes).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dashboard.cli import COMMANDS, main
from queries.store import MANIFEST
from test_queries_fixture import build

REPO = Path(__file__).resolve().parents[2]
FIX = Path(__file__).resolve().parents[1] / "fixtures"
TINY_SWF = FIX / "swf" / "tiny.swf"
LAST_EVENT = "2026-01-05 03:30:00"  # the fixture store's last job end (j3)


# ------------------------------------------------------------------------------------------------ helpers
def snapshot(path: Path) -> dict[str, str]:
    """SHA-256 of every file under ``path`` (or of ``path`` itself when it is a file), by relative name."""
    if path.is_file():
        return {".": hashlib.sha256(path.read_bytes()).hexdigest()}
    if not path.exists():
        return {}
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def run_cli(capsys, monkeypatch, *argv: str) -> tuple[int, str, str]:
    """``quotaloop ARGV`` in this process: (exit code, stdout, stderr). An exception escaping ``main`` fails the
    test with its traceback, which is what a user would have seen."""
    monkeypatch.delenv("QUOTALOOP_DEBUG", raising=False)
    old_pipe = signal.getsignal(signal.SIGPIPE)
    try:
        rc = main(list(argv))
    except SystemExit as exc:  # argparse
        rc = exc.code
    finally:
        signal.signal(signal.SIGPIPE, old_pipe)
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc: int, out: str, err: str, command: str, *needles: str) -> str:
    assert rc == 2, (rc, out, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"quotaloop {command}: "), lines[0]
    assert "Traceback" not in out + err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("cli-errors") / "store")


# Bad stores, each built from the good one. name -> (make(tmp, good) -> store path, text the error names).
def _missing(tmp: Path, good: Path) -> tuple[Path, str]:
    return tmp / "no-such-store", "no such directory"


def _regular_file(tmp: Path, good: Path) -> tuple[Path, str]:
    path = tmp / "store.txt"
    path.write_text("not a store\n")
    return path, "not a directory"


def _copy(tmp: Path, good: Path) -> Path:
    return Path(shutil.copytree(good, tmp / "store"))


def _corrupt_manifest(tmp: Path, good: Path) -> tuple[Path, str]:
    store = _copy(tmp, good)
    text = (store / MANIFEST).read_text()
    (store / MANIFEST).write_text(text[: len(text) // 2])  # a manifest cut mid-write by a full disk
    return store, f"{MANIFEST}: corrupt manifest"


def _manifest_outside(tmp: Path, good: Path) -> tuple[Path, str]:
    store = _copy(tmp, good)
    (store / MANIFEST).write_text('{"version": 3, "tables": {"jobs": ["../../etc/passwd"]}}')
    return store, "outside the store"


def _bad_snapshot(tmp: Path, good: Path) -> tuple[Path, str]:
    store = _copy(tmp, good)
    manifest = json.loads((store / MANIFEST).read_text())
    manifest["snapshots"] = {"c": "last tuesday"}
    (store / MANIFEST).write_text(json.dumps(manifest))
    return store, "snapshots.c"


def _truncated_parquet(tmp: Path, good: Path) -> tuple[Path, str]:
    store = _copy(tmp, good)
    part = sorted((store / "jobs").rglob("*.parquet"))[0]
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])
    return store, f"{part.name}: not a Parquet file"


def _listed_file_missing(tmp: Path, good: Path) -> tuple[Path, str]:
    store = _copy(tmp, good)
    part = sorted((store / "samples").rglob("*.parquet"))[0]
    part.unlink()
    return store, "listed in the store's _manifest.json but missing"


def _not_a_store(tmp: Path, good: Path) -> tuple[Path, str]:
    store = tmp / "empty-dir"
    store.mkdir()
    (store / "notes.txt").write_text("hello\n")
    return store, "not a store"


BAD_STORES = {"missing": _missing, "regular_file": _regular_file, "corrupt_manifest": _corrupt_manifest,
              "manifest_outside": _manifest_outside, "bad_snapshot": _bad_snapshot, "truncated_parquet": _truncated_parquet,
              "listed_file_missing": _listed_file_missing, "not_a_store": _not_a_store}

# Every command with its minimal arguments; {store} and {out} are filled in. ingest and sample create a missing
# store (and may ingest into an empty directory): those two cases are not errors for them.
COMMAND_ARGS = {
    "ingest": [str(TINY_SWF), "--store", "{store}"],
    "query": ["user_ranking", "--store", "{store}"],
    "simulate": ["--store", "{store}", "--out", "{out}"],
    "validate": ["--store", "{store}", "--out", "{out}"],
    "scenario": ["backfill", "--store", "{store}", "--out", "{out}"],
    "report": ["--store", "{store}", "--end", "2026-01-05", "--out", "{out}"],
    "serve": ["--store", "{store}", "--dry-run"],
    "rollup": ["--store", "{store}", "--rebuild"],
    "compact": ["--store", "{store}", "--keep-samples", "90d"],
    "sample": ["--store", "{store}", "--days", "1", "--nodes", "8", "--export-dir", "{out}"],
}
CREATES_STORE = {"ingest", "sample"}


def test_the_matrix_covers_every_command():
    assert set(COMMAND_ARGS) == set(COMMANDS)


def _fill(args: list[str], store: Path, out: Path) -> list[str]:
    return [a.format(store=store, out=out) for a in args]


@pytest.mark.parametrize("kind", sorted(BAD_STORES))
@pytest.mark.parametrize("command", sorted(COMMAND_ARGS))
def test_bad_store(command, kind, good, tmp_path, capsys, monkeypatch):
    if command in CREATES_STORE and kind in ("missing", "not_a_store"):
        pytest.skip(f"{command} creates a missing store and writes into any directory: not an error")
    store, needle = BAD_STORES[kind](tmp_path, good)
    before = snapshot(store)
    out = tmp_path / "out"
    rc, stdout, stderr = run_cli(capsys, monkeypatch, command, *_fill(COMMAND_ARGS[command], store, out))
    assert_one_line_error(rc, stdout, stderr, command, needle)
    assert snapshot(store) == before
    assert store.exists() or kind == "missing"
    assert not out.exists()


def test_a_readable_store_passes_every_reader(good, tmp_path, capsys, monkeypatch):
    """The other side of the matrix: the good store gets through the same checks (0, no stderr)."""
    rc, out, err = run_cli(capsys, monkeypatch, "query", "user_ranking", "--store", str(good), "-f", "csv",
                           "-c", "user")
    assert (rc, err) == (0, "") and sorted(out.split()[1:]) == ["alice", "bob", "carol"]
    rc, out, err = run_cli(capsys, monkeypatch, "serve", "--store", str(good), "--dry-run")
    assert rc == 0 and "dashboard.server run" in out


# ------------------------------------------------------------------------------------------ bad flag values
OVERSOLD = """
cluster_gpus = 16
[tree.lab]
share = 1
guaranteed_gpus = 12
[tree.other]
share = 1
guaranteed_gpus = 8
"""

BAD_FLAGS = [
    # (command, extra arguments, text the error names)
    ("query", ["user_ranking", "-p", "start=2026-11-28", "-p", "end=2026-11-01"], "is not after start"),
    ("query", ["user_ranking", "-p", "start=2026-11-28", "-p", "end=2026-11-28"], "is not after start"),
    ("query", ["user_ranking", "-p", "team_level=-1"], "team_level=-1 must be >= 1"),
    ("query", ["user_ranking", "-p", "team_level=two"], "team_level='two' is not a integer"),
    ("query", ["user_ranking", "-p", "eff_floor=nan"], "eff_floor=nan is not a finite number"),
    ("query", ["user_ranking", "-p", "eff_floor=1.5"], "eff_floor=1.5 must be <= 1"),
    ("query", ["user_ranking", "-p", "limit_rows=-3"], "limit_rows=-3 must be >= 0"),
    ("query", ["user_ranking", "-p", "start=yesterday-ish"], "is not a timestamp"),
    ("query", ["user_ranking", "-p", "colour=red"], "has no parameter colour"),
    ("query", ["user_ranking", "-p", "novalue"], "--param needs KEY=VALUE"),
    ("query", ["user_ranking", "-c", "nope"], "unknown column(s) nope"),
    ("query", ["no_such_query"], "unknown query 'no_such_query'"),
    ("query", ["user_ranking", "--limit", "ten"], "argument --limit: invalid int value"),
    ("report", ["--window", "100000000d", "--end", "2026-01-05"], "would start before 1970-01-01"),
    ("report", ["--window", "7d", "--end", "0001-01-01"], "a report window lies between"),
    ("report", ["--window", "7d", "--end", "9999-12-31"], "a report window lies between"),
    ("report", ["--window", "0d"], "must be a positive duration"),
    ("report", ["--window", "a week"], "is not a duration"),
    ("report", ["--end", "2026-02-30"], "is not a date"),
    ("report", ["--end", "2026-01-05", "--format", "html,docx"], "unknown report format docx"),
    ("report", ["--end", "2026-01-05", "--budgets", "{oversold}"], "oversold quota"),
    ("report", ["--end", "2026-01-05", "--budgets", "{tmp}/none.toml"], "none.toml"),
    ("report", ["--audience", "user"], "needs --user"),
    ("report", ["--team-level", "x"], "argument --team-level: invalid int value"),
    ("simulate", ["--warm-start", "2026-02-01"], f"after the log's last job event ({LAST_EVENT} UTC)"),
    ("simulate", ["--warm-start", "not-a-time"], "--warm-start"),
    ("simulate", ["--min-runtime", "eight hours"], "--min-runtime"),
    ("simulate", ["--lookback", "-7d"], "--lookback"),
    ("simulate", ["--budgets", "{oversold}"], "oversold quota"),
    ("simulate", ["--budgets", "{tmp}/none.toml"], "none.toml"),
    ("simulate", ["--policy", "lottery"], "argument --policy: invalid choice"),
    ("simulate", ["--out", "{tmp}/a_file"], "a_file: exists and is not a directory"),
    ("simulate", ["--out", "{tmp}/a_file/sub"], "a_file is not a directory"),
    ("simulate", ["--window-end", "2026-01-01", "--warm-start", "2026-01-05"], "must be after warm_start"),
    ("simulate", ["--walltime-margin", "nan"], "walltime_margin"),
    ("simulate", ["--nodes", "0", "--gpus-per-node", "8"], "--nodes must be an integer >= 1"),
    ("scenario", ["backfill", "--out", "{tmp}/a_file"], "a_file: exists and is not a directory"),
    ("simulate", ["--drain", "gpu-01@notatime"], "--drain 'gpu-01@notatime'"),
    ("simulate", ["--qos-preempt", "high"], "--qos-preempt 'high': expected QOS=QOS"),
    ("simulate", ["--drain-file", "{tmp}/none.csv"], "none.csv: cannot read the drain file"),
    ("scenario", ["drains", "--drain", "nonsense"], "--drain 'nonsense': expected NODES@TIME"),
    ("sample", ["--export-dir", "{tmp}/a_file"], "--export-dir"),
    ("scenario", ["backfill", "--budgets", "{oversold}"], "oversold quota"),
    ("scenario", ["shares", "--guarantee", "lab=1000"], "guaranteed_gpus sum to 1000 GPUs, above the cluster's 16"),
    ("scenario", ["backfill", "--window", "forever"], "--window"),
    ("scenario", ["backfill", "--end", "someday"], "--end 'someday'"),
    ("scenario", ["shares", "--share", "lab"], "--share 'lab': expected NAME=VALUE"),
    ("scenario", ["nope"], "argument NAME: invalid choice"),
    ("sample", ["--days", "0", "--export-dir", "{tmp}/export"], "--days must be >= 1"),
    ("sample", ["--days", "x"], "argument --days: invalid int value"),
    ("sample", ["--end", "not-a-date", "--no-ingest", "--export-dir", "{tmp}/export"], "not-a-date"),
    ("ingest", ["{tmp}/no-such-file.swf"], "no-such-file.swf: no such file"),
    ("ingest", [str(TINY_SWF), "--format", "xml"], "argument --format: invalid choice"),
    ("ingest", [str(TINY_SWF), "--timezone", "Mars/Olympus"], "unknown time zone 'Mars/Olympus'"),
    ("ingest", [str(TINY_SWF), "--procs-per-node", "many"], "argument --procs-per-node: invalid int value"),
    ("serve", ["--port", "http"], "argument --port: invalid int value"),
    ("validate", ["--warm-start", "not-a-time"], "--warm-start"),
    ("validate", ["--warm-start", "2030-01-01"], "no job submitted in the window"),
    ("validate", ["--out", "{tmp}/a_file"], "a_file: exists and is not a directory"),
    ("validate", ["--budgets", "{oversold}"], "oversold quota"),
    ("validate", ["--calibrate", "--grid", "soon"], "--grid: not a duration"),
    ("validate", ["--calibrate", "--depths", "0"], "--depths 0"),
    ("validate", ["--config-file", "{tmp}/a_file"], "not JSON"),
    ("simulate", ["--cluster", "{oversold}"], "--cluster is the cluster name; give the layout file with --nodes-csv"),
    ("validate", ["--cluster", "{oversold}"], "--cluster is the cluster name; give the layout file with --nodes-csv"),
]
NEEDS_OUT = {"simulate", "scenario", "report", "validate"}


@pytest.mark.parametrize("command,extra,needle", BAD_FLAGS, ids=[f"{c}-{'_'.join(e)[:40]}" for c, e, _ in BAD_FLAGS])
def test_bad_flag_value(command, extra, needle, good, tmp_path, capsys, monkeypatch):
    store = _copy(tmp_path, good)
    (tmp_path / "oversold.toml").write_text(OVERSOLD)
    (tmp_path / "a_file").write_text("an output path that is a file\n")
    before = snapshot(store)
    out = tmp_path / "out"
    fill = {"oversold": tmp_path / "oversold.toml", "tmp": tmp_path}
    argv = [command, *(a.format(**fill) for a in extra), "--store", str(store)]
    if command in NEEDS_OUT and "--out" not in extra:
        argv += ["--out", str(out)]
    rc, stdout, stderr = run_cli(capsys, monkeypatch, *argv)
    assert_one_line_error(rc, stdout, stderr, command, needle)
    assert snapshot(store) == before
    assert not out.exists() and not (tmp_path / "export").exists() and (tmp_path / "a_file").is_file()


def test_the_oversold_check_is_the_budget_trees_own(good, tmp_path, capsys, monkeypatch):
    """simulate, report and scenario refuse the same file with the same words: engine.budgets.validate."""
    from engine.budgets import BudgetError, load, validate

    path = tmp_path / "oversold.toml"
    path.write_text(OVERSOLD)
    with pytest.raises(BudgetError) as err:
        validate(load(path), 16.0)
    expected = str(err.value)
    assert "guaranteed_gpus sum to 20 GPUs, above the cluster's 16 GPUs" in expected  # 12 + 8 > 8 + 8 + 0
    lines = {}
    for command, extra in (("simulate", []), ("scenario", ["backfill"]), ("report", ["--end", "2026-01-05"])):
        rc, out, errtext = run_cli(capsys, monkeypatch, command, *extra, "--store", str(good), "--budgets",
                                   str(path), "--out", str(tmp_path / command))
        lines[command] = assert_one_line_error(rc, out, errtext, command)
        assert lines[command].endswith(expected), lines[command]
    # within capacity the same file passes: 12 + 4 = 16 GPUs
    path.write_text(OVERSOLD.replace("guaranteed_gpus = 8", "guaranteed_gpus = 4"))
    rc, out, errtext = run_cli(capsys, monkeypatch, "simulate", "--store", str(good), "--budgets", str(path),
                               "--policy", "fairshare", "--out", str(tmp_path / "ok"))
    assert rc == 0, errtext
    assert "jobs simulated" in out


def test_warm_start_before_the_last_event_still_runs(good, tmp_path, capsys, monkeypatch):
    """The warm-start check refuses only a start after the log's last event: one second before it runs."""
    rc, out, err = run_cli(capsys, monkeypatch, "simulate", "--store", str(good), "--replay", "logged",
                           "--warm-start", "2026-01-05T03:29:59", "--out", str(tmp_path / "sim"))
    assert rc == 0, err
    assert "jobs simulated" in out
    rc, out, err = run_cli(capsys, monkeypatch, "simulate", "--store", str(good), "--replay", "logged",
                           "--warm-start", "2026-01-05T03:30:00", "--out", str(tmp_path / "sim2"))
    assert_one_line_error(rc, out, err, "simulate", LAST_EVENT)


# ---------------------------------------------------------------------------------------- real processes
def _process(*argv: str, drop_root: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "QUOTALOOP_DEBUG"}
    env["PYTHONPATH"] = str(REPO)
    cmd = [sys.executable, "-m", "dashboard.cli", *argv]
    if drop_root:  # root ignores file modes through these capabilities; without them it is an ordinary owner
        cmd = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", *cmd]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def _one_line(proc: subprocess.CompletedProcess, command: str, *needles: str) -> str:
    return assert_one_line_error(proc.returncode, proc.stdout, proc.stderr, command, *needles)


def test_real_process_query_on_a_missing_store_is_an_error_not_an_empty_table(tmp_path):
    proc = _process("query", "user_ranking", "--store", str(tmp_path / "typo"))
    _one_line(proc, "query", f"store {tmp_path / 'typo'}: no such directory")
    assert proc.stdout == ""
    assert not (tmp_path / "typo").exists()


def test_real_process_corrupt_manifest_and_truncated_partition(good, tmp_path):
    (tmp_path / "a").mkdir()
    store, needle = _corrupt_manifest(tmp_path / "a", good)
    before = snapshot(store)
    for argv in (["ingest", str(TINY_SWF), "--store", str(store)],
                 ["simulate", "--store", str(store), "--out", str(tmp_path / "sim")]):
        _one_line(_process(*argv), argv[0], needle)
    assert snapshot(store) == before
    (tmp_path / "b").mkdir()
    store, needle = _truncated_parquet(tmp_path / "b", good)
    before = snapshot(store)
    _one_line(_process("report", "--store", str(store), "--end", "2026-01-05", "--out", str(tmp_path / "r")),
              "report", needle)
    assert snapshot(store) == before and not (tmp_path / "r").exists()


def _read_only(store: Path) -> None:
    for p in [store, *store.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)


def _writable(store: Path) -> None:
    for p in [store, *store.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)


def test_real_process_read_only_store(good, tmp_path):
    """ingest and sample refuse a store they may not write (one line, the store untouched); query and report
    still read it (a report's store may be mounted read-only)."""
    as_root = os.geteuid() == 0
    if as_root and not shutil.which("setpriv"):
        pytest.skip("running as root (file modes do not apply) and setpriv is not there to drop that privilege")
    store = _copy(tmp_path, good)
    _read_only(store)
    try:
        before = snapshot(store)
        proc = _process("ingest", str(TINY_SWF), "--store", str(store), drop_root=as_root)
        _one_line(proc, "ingest", f"store {store}: not writable")
        proc = _process("sample", "--store", str(store), "--days", "1", "--nodes", "8",
                        "--export-dir", str(tmp_path / "export"), drop_root=as_root)
        _one_line(proc, "sample", f"store {store}: not writable")
        assert not (tmp_path / "export").exists()
        proc = _process("query", "user_ranking", "--store", str(store), "-f", "csv", "-c", "user",
                        drop_root=as_root)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert sorted(proc.stdout.split()[1:]) == ["alice", "bob", "carol"]
        assert snapshot(store) == before
    finally:
        _writable(store)


def test_real_process_argparse_errors_are_one_line(tmp_path):
    proc = _process("report", "--window")
    _one_line(proc, "report", "argument --window: expected one argument", "(see quotaloop report --help)")
    proc = _process("frobnicate")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "invalid choice: 'frobnicate'" in proc.stderr
