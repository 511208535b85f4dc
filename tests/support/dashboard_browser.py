"""Shared by the browser test and the dashboard benchmark: start the real server, drive headless Chromium.

``serve(store)`` runs ``python -m dashboard.cli serve`` (which execs Streamlit, so the child pid *is* the server),
waits for ``/_stcore/health`` and stops that pid afterwards. Loopback only.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
# Streamlit marks the app root with the script state; "notRunning" and no skeleton = the page finished drawing.
DONE = ("() => { const a = document.querySelector('[data-testid=stApp]');"
        " return !!a && a.getAttribute('data-test-script-state') === 'notRunning'"
        " && !document.querySelector('[data-testid=stSkeleton]'); }")


def require_chromium() -> str:
    """The Chromium path; skips with the reason when it is missing, except in CI (CI=true), where it fails."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    message = f"{CHROMIUM} is missing (scripts/test installs Debian's chromium)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + "; CI must run the browser tests")
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(store: Path | str, *, auth: str | None = "demo", extra_env: dict | None = None, log: Path | None = None,
          timeout_s: float = 90.0):
    """Yield the base URL of a real ``quotaloop serve`` on a free loopback port. ``auth=None``: no auth set at all
    (no ``QUOTALOOP_AUTH``, no config), as on a first run."""
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(extra_env or {}))
    env.pop("QUOTALOOP_CONFIG", None)
    env.pop("QUOTALOOP_AUTH", None)
    if auth is not None:
        env["QUOTALOOP_AUTH"] = auth
    out = open(log, "w") if log else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, "-m", "dashboard.cli", "serve", "--store", str(store), "--port",
                             str(port), "--host", "127.0.0.1"], cwd=REPO, env=env, stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"quotaloop serve exited with {proc.returncode}" + (f"; see {log}" if log else ""))
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"quotaloop serve did not become healthy in {timeout_s:.0f} s")
            time.sleep(0.3)
        yield url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        if log:
            out.close()


def launch(playwright):
    return playwright.chromium.launch(executable_path=require_chromium(), args=CHROMIUM_ARGS, headless=True)


def wait_done(page, timeout_ms: float = 120_000) -> None:
    page.wait_for_function(DONE, timeout=timeout_ms)


def open_page(page, url: str, timeout_ms: float = 120_000) -> float:
    """Navigate and wait for the first full render; returns the seconds it took."""
    t0 = time.perf_counter()
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("[data-testid=stApp][data-test-script-state=running], "
                           "[data-testid=stApp][data-test-script-state=notRunning]", timeout=timeout_ms)
    wait_done(page, timeout_ms)
    page.wait_for_selector("h1", timeout=timeout_ms)
    return time.perf_counter() - t0


def screenshot_full(page, path, max_height: int = 6000) -> None:
    """A screenshot of the whole page: Streamlit scrolls inside its main block, so grow the viewport to fit."""
    width = page.viewport_size["width"] if page.viewport_size else 1500
    height = page.evaluate("() => { const m = document.querySelector('[data-testid=stMain]');"
                           " return Math.max(m ? m.scrollHeight : 0, document.body.scrollHeight); }")
    old = page.viewport_size
    page.set_viewport_size({"width": width, "height": min(max(int(height) + 40, 600), max_height)})
    page.wait_for_timeout(600)  # Plotly re-lays out on resize
    page.screenshot(path=str(path), full_page=True)
    if old:
        page.set_viewport_size(old)
