"""Dashboard configuration: a TOML file plus environment overrides.

Sources, later wins: built-in defaults < TOML file (``$QUOTALOOP_CONFIG``, else ``./quotaloop.toml``; the
``[dashboard]`` table) < environment (``QUOTALOOP_STORE``, ``QUOTALOOP_AUTH``, ``QUOTALOOP_AUTH_HEADER``,
``QUOTALOOP_ADMINS`` and ``QUOTALOOP_EMAIL_DOMAINS`` comma-separated, ``QUOTALOOP_BUDGETS``,
``QUOTALOOP_MEMORY_LIMIT``, ``QUOTALOOP_CALIBRATION``).

Example::

    [dashboard]
    store = "/srv/quotaloop/store"
    auth = "oidc"                    # auto | oidc | header | operator | demo | open | none
    auth_header = "X-Forwarded-User" # only read when auth = "header" (a trusted reverse proxy sets it)
    admins = ["alice", "ops-lead@example.org"]   # exact user names or exact addresses (domain case-insensitive)
    email_to_user = "local-part"     # email -> cluster user: "local-part" (alice@x -> alice) or "email"
    email_domains = ["example.org"]  # "local-part" maps only addresses at these domains; others are nobody
    budgets = "/srv/quotaloop/budgets.toml"
    memory_limit = "8GB"             # DuckDB's memory bound for the dashboard's queries (default: 80 % of RAM)
    calibration = "/srv/quotaloop/calibration.json"  # the Fair share page's simulator knobs (default: the
                                     # store's own calibration.json, written by validate --calibrate --save)

Invariants: the config is read fresh on every call (cheap; lets tests and operators change it without a
restart); it never reads URL query parameters; ``auth = "auto"`` never trusts a request header, because only
an operator who runs a proxy that strips and sets the header may turn that on. ``quotaloop serve`` resolves
``auto`` before Streamlit starts (``dashboard.cli.serve.resolve_auth``): ``demo`` on the sample store,
``oidc`` when ``.streamlit/secrets.toml`` has an ``[auth]`` section, ``operator`` (one person on this machine,
everything visible) on a loopback address, and a refusal to start on any other address. ``email_to_user =
"local-part"`` maps an address to its local part only at a domain listed in ``email_domains``: ``x@elsewhere``
is nobody, not user ``x``.
"""
from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_STORE = REPO_ROOT / "sample_data" / "store"
SAMPLE_BUDGETS = REPO_ROOT / "sample_data" / "budgets.toml"
AUTH_MODES = ("auto", "oidc", "header", "operator", "demo", "open", "none")


class ConfigError(ValueError):
    """The dashboard configuration is invalid; the message names the key."""


@dataclass(frozen=True)
class Config:
    store: Path = SAMPLE_STORE
    auth: str = "auto"
    auth_header: str = "X-Forwarded-User"
    admins: tuple[str, ...] = field(default_factory=tuple)
    email_to_user: str = "local-part"
    email_domains: tuple[str, ...] = field(default_factory=tuple)  # lower-case domains "local-part" maps
    budgets: Path | None = None
    memory_limit: str | None = None
    calibration: Path | None = None

    @property
    def is_sample_store(self) -> bool:
        try:
            return self.store.resolve() == SAMPLE_STORE.resolve()
        except OSError:
            return False

    @property
    def effective_auth(self) -> str:
        """``auto`` becomes ``demo`` on the bundled sample store and ``oidc`` elsewhere."""
        if self.auth != "auto":
            return self.auth
        return "demo" if self.is_sample_store else "oidc"

    @property
    def budgets_path(self) -> Path | None:
        if self.budgets is not None:
            return self.budgets
        for candidate in (self.store / "budgets.toml", self.store.parent / "budgets.toml"):
            if candidate.is_file():
                return candidate
        return SAMPLE_BUDGETS if self.is_sample_store and SAMPLE_BUDGETS.is_file() else None

    @property
    def calibration_path(self) -> Path | None:
        """The simulator calibration the Fair share page replays under: the configured file, else the store's own
        (``dashboard.whatif.calibration``), else none (the engine's defaults)."""
        if self.calibration is not None:
            return self.calibration
        candidate = self.store / "calibration.json"
        return candidate if candidate.is_file() else None


def _split(value) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split(",")
    return tuple(v.strip() for v in value or () if str(v).strip())


def load(env: dict | None = None) -> Config:
    """The current configuration (see the module docstring for the sources)."""
    env = os.environ if env is None else env
    values: dict = {}
    path = env.get("QUOTALOOP_CONFIG") or ("quotaloop.toml" if Path("quotaloop.toml").is_file() else None)
    if path:
        try:
            with open(path, "rb") as fh:
                values.update(tomllib.load(fh).get("dashboard", {}))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read dashboard config {path}: {exc}") from exc
    for key, var in (("store", "QUOTALOOP_STORE"), ("auth", "QUOTALOOP_AUTH"),
                     ("auth_header", "QUOTALOOP_AUTH_HEADER"), ("admins", "QUOTALOOP_ADMINS"),
                     ("email_domains", "QUOTALOOP_EMAIL_DOMAINS"),
                     ("budgets", "QUOTALOOP_BUDGETS"), ("memory_limit", "QUOTALOOP_MEMORY_LIMIT"),
                     ("calibration", "QUOTALOOP_CALIBRATION")):
        if env.get(var):
            values[key] = env[var]
    unknown = sorted(set(values) - set(Config.__dataclass_fields__))
    if unknown:
        raise ConfigError(f"unknown dashboard config key(s): {', '.join(unknown)}")
    auth = str(values.get("auth", "auto")).lower()
    if auth not in AUTH_MODES:
        raise ConfigError(f"auth = {auth!r}; expected one of {', '.join(AUTH_MODES)}")
    mapping = str(values.get("email_to_user", "local-part"))
    if mapping not in ("local-part", "email"):
        raise ConfigError(f"email_to_user = {mapping!r}; expected 'local-part' or 'email'")
    header = str(values.get("auth_header", "X-Forwarded-User")).strip()
    if auth == "header" and not header:
        raise ConfigError("auth = 'header' needs auth_header (the header your proxy sets)")
    memory = str(values["memory_limit"]).strip().replace(" ", "") if values.get("memory_limit") else None
    if memory is not None and not re.fullmatch(r"\d+(\.\d+)?([KMGT]i?B|%)", memory, re.I):
        raise ConfigError(f"memory_limit = {memory!r}; expected a size such as '8GB' or '4GiB'")
    return Config(
        store=Path(values.get("store", SAMPLE_STORE)).expanduser(),
        auth=auth,
        auth_header=header,
        admins=_split(values.get("admins")),
        email_to_user=mapping,
        email_domains=tuple(d.lower().lstrip("@") for d in _split(values.get("email_domains"))),
        budgets=Path(values["budgets"]).expanduser() if values.get("budgets") else None,
        memory_limit=memory,
        calibration=Path(values["calibration"]).expanduser() if values.get("calibration") else None,
    )
