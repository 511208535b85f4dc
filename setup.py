"""Build configuration beyond pyproject.toml: the optional C extensions (the engine's backfill kernel
``engine/backfill/_fastpath.c``, its node pool ``engine/_nodecore.c``, the SWF number reader
``queries/ingest/_swfparse.c``, ...).

Each is optional: without a C compiler (or Python headers) the package installs and its pure-Python twin runs
(the same results, slower), and the install prints one line per extension that was not built. The build passes
each source's sha256 into its module (``SOURCE_SHA256``) so tests can tell a stale in-place build from a current
one.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE = "engine/backfill/_fastpath.c"
SHA256 = hashlib.sha256((Path(__file__).resolve().parent / SOURCE).read_bytes()).hexdigest()
# the SWF reader's numbers in C (``queries/ingest/_swfparse.c``; without it the Polars reader runs), same stamp
SWF_SOURCE = "queries/ingest/_swfparse.c"
SWF_SHA256 = hashlib.sha256((Path(__file__).resolve().parent / SWF_SOURCE).read_bytes()).hexdigest()
NODECORE = "engine/_nodecore.c"  # the compiled node-mode pool (engine/nodepool.py), optional in the same way
NODECORE_SHA256 = hashlib.sha256((Path(__file__).resolve().parent / NODECORE).read_bytes()).hexdigest()
FSORDER = "engine/_fsorder.c"  # the fair-share order's hot loops (engine/fsorder.py), optional in the same way
FSORDER_SHA256 = hashlib.sha256((Path(__file__).resolve().parent / FSORDER).read_bytes()).hexdigest()


class OptionalBuildExt(build_ext):
    """Build each extension if a compiler works; otherwise one line naming it, and the install goes on."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any build failure leaves the Python twins, by design
            self._note(exc, "the C extensions")
        if self.inplace or getattr(self, "editable_mode", False):
            _byte_compile_sources()

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001 - as above
            self._note(exc, ext.name)

    noted: set[str] = set()

    @classmethod
    def _note(cls, exc, what: str):
        if what not in cls.noted and "the C extensions" not in cls.noted:  # one line per extension is enough
            cls.noted.add(what)
            print(f"quotaloop: {what} not compiled ({type(exc).__name__}); its pure-Python twin will run (same "
                  "results, slower; see README: Speed of the simulator)", file=sys.stderr)


def _byte_compile_sources() -> None:
    """An editable install (``pip install -e .``) runs the packages from this checkout, where pip does not
    byte-compile them as it does a regular install's: under ``PYTHONDONTWRITEBYTECODE=1`` every start then
    compiles every module it imports (0.2 s of ``quotaloop simulate``'s start-up). So the build writes their
    ``__pycache__`` once, as a regular install would; Python still checks each cache against its source, so an
    edited module is compiled again, never run stale. Best effort: a failure leaves the sources as they were."""
    import compileall

    root = Path(__file__).resolve().parent
    for package in ("engine", "queries", "dashboard"):
        try:
            compileall.compile_dir(str(root / package), quiet=2)
        except Exception:  # noqa: BLE001 - a cache is an optimisation, never a reason to fail the install
            pass


setup(
    ext_modules=[Extension(
        "engine.backfill._fastpath", [SOURCE],
        define_macros=[("QL_SOURCE_SHA256", f'"{SHA256}"')],
        # no fused multiply-add: results must round exactly as the Python reference's separate * and +
        extra_compile_args=["-O2", "-ffp-contract=off"],
    ), Extension(
        "queries.ingest._swfparse", [SWF_SOURCE],
        define_macros=[("QL_SOURCE_SHA256", f'"{SWF_SHA256}"')],
        extra_compile_args=["-O2", "-ffp-contract=off"],
    ), Extension(
        "engine._nodecore", [NODECORE],
        define_macros=[("QL_SOURCE_SHA256", f'"{NODECORE_SHA256}"')],
        extra_compile_args=["-O2", "-ffp-contract=off"],
    ), Extension(
        "engine._fsorder", [FSORDER],
        define_macros=[("QL_SOURCE_SHA256", f'"{FSORDER_SHA256}"')],
        extra_compile_args=["-O2", "-ffp-contract=off"],
    )],
    cmdclass={"build_ext": OptionalBuildExt},
)
