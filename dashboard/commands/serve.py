"""``quotaloop serve [--store DIR] [--port P] [--host H]``: run the Streamlit dashboard over a store.

Without ``--store`` it serves the bundled sample store (``sample_data/store``), generating it with
``quotaloop sample`` on first run. The process *becomes* the Streamlit server (``exec`` of ``dashboard.server``,
which warms the caches with every page's default view in a background thread), so stopping this pid stops the
server. Headless, no usage statistics, no file watcher.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..config import SAMPLE_STORE

APP = Path(__file__).resolve().parent.parent / "app.py"


def register(sub):
    p = sub.add_parser("serve", help="open the dashboard (Streamlit) over a store")
    p.add_argument("--store", help="store directory (default: the bundled sample store, built if missing)")
    p.add_argument("--port", type=int, default=8501, help="port (default 8501)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--config", help="dashboard TOML config (see dashboard/config.py)")
    p.add_argument("--auth", choices=["auto", "oidc", "header", "demo", "open", "none"],
                   help="identity source (overrides the config); `open` = no sign-in, everyone is admin "
                        "(one operator on a trusted machine only)")
    p.add_argument("--no-warm", action="store_true",
                   help="do not compute every page's default view at start-up (dashboard/data/warm.py)")
    p.add_argument("--dry-run", action="store_true", help="print the streamlit command instead of running it")
    return p


def ensure_sample_store(path: Path = SAMPLE_STORE) -> Path:
    """Build the bundled sample store with the sample generator if it does not exist yet."""
    from queries.store import Store

    if Store(path).exists():
        return path
    from ..cli import UserError, main

    print(f"quotaloop serve: building the sample store in {path} (first run) ...", file=sys.stderr)
    try:
        rc = main(["sample", "--store", str(path)])
    except SystemExit as exc:  # argparse: no `sample` command yet
        rc = exc.code
    if rc not in (0, None) or not Store(path).exists():
        raise UserError(f"could not build the sample store in {path}; run `quotaloop sample --store {path}`")
    return path


def command(args) -> tuple[list[str], dict]:
    from ..cli import UserError

    env = dict(os.environ)
    if args.store:
        store = Path(args.store).expanduser().resolve()
        from queries.store import Store, StoreError

        try:
            Store(store).check()
        except StoreError as exc:  # names what is wrong: missing, not a directory, not a store, corrupt
            raise UserError(str(exc)) from None
    else:
        store = ensure_sample_store() if not args.dry_run else SAMPLE_STORE
    env["QUOTALOOP_STORE"] = str(store)
    config = args.config or ("quotaloop.toml" if Path("quotaloop.toml").is_file() else None)
    if config:
        env["QUOTALOOP_CONFIG"] = str(Path(config).expanduser().resolve())
    if args.auth:
        env["QUOTALOOP_AUTH"] = args.auth
    if args.no_warm:
        env["QUOTALOOP_WARM"] = "0"
    env.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
    argv = [
        sys.executable, "-m", "dashboard.server", "run", str(APP),
        "--server.port", str(args.port),
        "--server.address", args.host,
        "--server.headless", "true",
        "--browser.gatherUsageStats", "false",
        "--server.fileWatcherType", "none",
        "--server.runOnSave", "false",
        "--client.toolbarMode", "minimal",
        "--theme.base", "light",
        "--theme.primaryColor", "#2563eb",
    ]
    return argv, env


def run(args) -> int:
    argv, env = command(args)
    if args.dry_run:
        print(" ".join(argv))
        return 0
    print(f"quotaloop serve: http://{args.host}:{args.port}  (store {env['QUOTALOOP_STORE']})", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)
    return 0  # pragma: no cover - exec does not return
