"""``quotaloop serve [--store DIR] [--port P] [--host H]``: run the Streamlit dashboard over a store.

Without ``--store`` it serves the bundled sample store (``sample_data/store``), generating it with
``quotaloop sample`` on first run. The process *becomes* the Streamlit server (``exec`` of ``dashboard.server``,
which warms the caches with every page's default view in a background thread), so stopping this pid stops the
server. Headless, no usage statistics, no file watcher, no "Ask Google / Ask ChatGPT" links in error boxes
(``client.showErrorLinks = false``: the app is meant for air-gapped networks).

Who may look (``resolve_auth``): an explicit ``--auth`` or the config's ``auth`` wins. Otherwise (``auto``) the
sample store runs in demo mode, an ``[auth]`` section in ``.streamlit/secrets.toml`` turns on OIDC sign-in, and
with neither the dashboard runs in single-operator mode (``operator``: everything visible, a banner on every
page) on a loopback address only. On any other address it refuses to start (exit 2, one line): a dashboard that
shows every user's jobs to whoever reaches the port must be asked for by name (``--auth open``).
"""
from __future__ import annotations

import ipaddress
import os
import sys
import tomllib
from pathlib import Path

from ..config import AUTH_MODES, SAMPLE_STORE, ConfigError, load
from . import main
from .errors import UserError

# queries is imported inside the functions: see the start-up note in dashboard.cli.

APP = Path(__file__).resolve().parent.parent / "app.py"


def register(sub):
    p = sub.add_parser("serve", help="open the dashboard (Streamlit) over a store")
    p.add_argument("--store", help="store directory (default: the bundled sample store, built if missing)")
    p.add_argument("--port", type=int, default=8501, help="port (default 8501)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--config", help="dashboard TOML config (see dashboard/config.py)")
    p.add_argument("--auth", choices=list(AUTH_MODES),
                   help="identity source (overrides the config): `oidc` = Streamlit sign-in ([auth] in "
                        ".streamlit/secrets.toml); `header` = a trusted reverse proxy sets X-Forwarded-User; "
                        "`operator` = you alone on this machine, everything visible (the default off the sample "
                        "when nothing is configured, loopback only); `open` = no sign-in, everyone who reaches the "
                        "port is admin; `demo` = the sample's 'View as' picker; `auto` (default) picks")
    p.add_argument("--no-warm", action="store_true",
                   help="do not compute every page's default view at start-up (dashboard/data/prewarm.py)")
    p.add_argument("--dry-run", action="store_true", help="print the streamlit command instead of running it")
    return p


def ensure_sample_store(path: Path = SAMPLE_STORE) -> Path:
    """Build the bundled sample store with the sample generator if it does not exist yet."""
    from queries.store import Store

    if Store(path).exists():
        return path
    print(f"quotaloop serve: building the sample store in {path} (first run) ...", file=sys.stderr)
    try:
        rc = main(["sample", "--store", str(path)])
    except SystemExit as exc:  # argparse: no `sample` command yet
        rc = exc.code
    if rc not in (0, None) or not Store(path).exists():
        raise UserError(f"could not build the sample store in {path}; run `quotaloop sample --store {path}`")
    return path


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    host = host.strip().strip("[]")
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def oidc_secrets_present(cwd: Path | None = None, home: Path | None = None) -> bool:
    """True when a ``secrets.toml`` Streamlit reads (``./.streamlit/``, ``~/.streamlit/``) has an ``[auth]``
    table: the operator has set up OIDC sign-in."""
    for root in (cwd or Path.cwd(), home or Path.home()):
        path = root / ".streamlit" / "secrets.toml"
        try:
            with open(path, "rb") as fh:
                if isinstance(tomllib.load(fh).get("auth"), dict):
                    return True
        except (OSError, tomllib.TOMLDecodeError):
            continue
    return False


def resolve_auth(configured: str, host: str, sample: bool, oidc_ready: bool) -> str:
    """The identity source the server runs with (see the module docstring); raises ``UserError`` (exit 2) for a
    dashboard without sign-in on an address other machines reach."""
    mode = configured
    if mode == "auto":
        mode = "demo" if sample else "oidc" if oidc_ready else "operator"
    if mode == "operator" and not is_loopback(host):
        raise UserError(f"no sign-in is configured and --host {host} is reachable from other machines: choose "
                        "--auth oidc ([auth] in .streamlit/secrets.toml) or --auth header (behind a proxy), "
                        "--auth open to let anyone who reaches the port in as admin, or serve on 127.0.0.1")
    return mode


def command(args) -> tuple[list[str], dict]:
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
    try:
        configured = load(env).auth
    except ConfigError as exc:
        raise UserError(str(exc)) from exc
    sample = store.resolve() == SAMPLE_STORE.resolve()
    env["QUOTALOOP_AUTH"] = resolve_auth(configured, args.host, sample,
                                         configured == "auto" and oidc_secrets_present())
    cfg = load(env)
    if env["QUOTALOOP_AUTH"] == "oidc" and cfg.email_to_user == "local-part" and not cfg.email_domains:
        print("quotaloop serve: note: email_domains is empty, so no signed-in address maps to a cluster user; "
              "set email_domains = [\"your.org\"] in the dashboard config (QUOTALOOP_EMAIL_DOMAINS)", file=sys.stderr)
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
        "--client.showErrorLinks", "false",
        "--theme.base", "light",
        "--theme.primaryColor", "#2563eb",
    ]
    return argv, env


def run(args) -> int:
    argv, env = command(args)
    if args.dry_run:
        print(" ".join(argv))
        return 0
    print(f"quotaloop serve: http://{args.host}:{args.port}  (store {env['QUOTALOOP_STORE']}, "
          f"auth {env['QUOTALOOP_AUTH']})", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)
    return 0  # pragma: no cover - exec does not return
