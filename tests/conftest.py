"""Shared fixtures. Tests over ../shared/data skip with a visible reason when it is absent (fresh clone)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# `quotaloop ingest` reads sacct text in this machine's zone by default; the tests state theirs (subprocesses
# inherit this), so they pass on a machine in any zone
os.environ["TZ"] = "UTC"
SHARED_DATA = Path(os.environ.get("QUOTALOOP_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ../shared/data; skips the test (with the reason shown by -ra) when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real traces not available: {SHARED_DATA} does not exist (set QUOTALOOP_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def sample_store() -> Path:
    """The bundled sample store (``scripts/test`` builds it); skips with a visible reason when it is not built."""
    store = REPO / "sample_data" / "store"
    if not (store / "_manifest.json").is_file():
        pytest.skip(f"the sample store is not built: run `quotaloop sample --store {store}` (scripts/test does)")
    return store


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture
def hang_guard():
    """``with hang_guard(60): ...`` fails with TimeoutError instead of hanging the run when the block takes
    longer (for engine runs whose bug would be an endless loop; SIGALRM, main thread only)."""
    import contextlib
    import signal

    @contextlib.contextmanager
    def guard(seconds: int):
        def hung(*_):
            raise TimeoutError(f"did not finish in {seconds} s: an endless loop?")

        old = signal.signal(signal.SIGALRM, hung)
        signal.alarm(seconds)
        try:
            yield
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
    return guard
