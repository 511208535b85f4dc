"""Who is looking, and whose jobs they may see.

Identity sources, chosen by ``Config.effective_auth``:

- ``oidc``: Streamlit's built-in login (``st.user.is_logged_in``, ``st.user.email``); the email maps to a
  cluster user name (``alice@example.org`` -> ``alice`` by default, and only at a domain listed in
  ``email_domains``: ``alice@anywhere-else`` is nobody, because any provider account could claim that address).
- ``header``: a trusted reverse proxy authenticates and sets a header (``X-Forwarded-User`` by default).
  Only on when configured: the app cannot tell a proxy's header from a client's, so the operator must run a
  proxy that strips the header from client requests.
- ``demo``: the bundled sample store, no sign-in; a "View as" picker in the sidebar chooses the platform view
  (an admin: everything) or one researcher (the researcher rule below, exactly as a signed-in user gets it),
  and every page says so.
- ``operator``: no sign-in, the viewer is the one operator and sees everything as an admin; ``quotaloop serve``
  picks it when nothing else is configured and it listens on a loopback address only, and every page carries a
  banner saying so and how to turn on sign-in.
- ``open``: no sign-in, every viewer is an admin: for one operator on a trusted machine (``--auth open``).
- ``none``: nobody is identified; personal pages show how to configure sign-in.

Access rule (pure, unit-tested here and in ``dashboard.privacy``): a researcher sees only their own jobs, and
never another user's name next to that user's figures: per-user rankings, tables and curves show the viewer's
own row (and rank "r of N") beside one "N other users" aggregate; team-level aggregates stay visible; there is
no drill-down to another user's jobs. A user in the admin list sees everyone. Whatever the request asks for (a
widget value, a URL query parameter such as ``?user=bob`` or ``?demo_as=bob``) never widens this: the app reads
no URL query parameter, binds no widget to one, and ``visible_user`` falls back to the viewer.

Admins are compared exactly: an entry without ``@`` is a cluster user name and matches only the mapped user
(``OPSADMIN`` is not ``opsadmin``); an entry with ``@`` is an address and matches only that address (its
domain case-insensitively, as mail does). An unmapped address (a domain not in ``email_domains``) is nobody and
never an admin by name.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import streamlit as st

from .config import Config


@dataclass(frozen=True)
class Identity:
    user: str | None        # cluster user name, None when nobody is identified
    mode: str               # oidc | header | operator | demo | open | none
    is_admin: bool = False
    label: str = ""         # what the sidebar shows (email or header value)
    problem: str = ""       # why a signed-in viewer maps to no user (shown instead of a sign-in prompt)

    @property
    def may_pick_any_user(self) -> bool:
        """Admins may open any user's page; everybody else sees their own."""
        return self.is_admin


def _split_address(email: str) -> tuple[str, str] | None:
    local, at, domain = email.partition("@")
    if not at or not local or not domain or "@" in domain:
        return None
    return local, domain.lower()


def user_from_email(email: str | None, mapping: str = "local-part", domains=()) -> str | None:
    """The cluster user an address stands for: its local part when its domain is one of ``domains``
    (``"local-part"``), or the whole address (``"email"``); None for anything else (no address, a malformed one,
    or a domain nobody configured: ``x@evil.example`` must not become cluster user ``x``)."""
    if not email or not str(email).strip():
        return None
    email = str(email).strip()
    if mapping != "local-part":
        return email
    parts = _split_address(email)
    wanted = {str(d).strip().lower().lstrip("@") for d in domains or () if str(d).strip()}
    if parts is None or parts[1] not in wanted:
        return None
    return parts[0]


def _same_address(a: str, b: str) -> bool:
    pa, pb = _split_address(a.strip()), _split_address(b.strip())
    return pa is not None and pa == pb


def is_admin(admins, user: str | None, email: str | None = None) -> bool:
    """True when an entry of ``admins`` is exactly ``user`` (a name, no ``@``) or exactly ``email`` (an address;
    only its domain compares case-insensitively)."""
    for entry in (str(a).strip() for a in admins or ()):
        if not entry:
            continue
        if "@" in entry:
            if email and _same_address(entry, str(email)):
                return True
        elif user is not None and entry == user:
            return True
    return False


def _unmapped(cfg: Config, address: str) -> str:
    domains = ", ".join(cfg.email_domains) or "none configured"
    return (f"{address} maps to no cluster user: only addresses at the configured email_domains ({domains}) do. "
            "Ask the operator to add your domain to email_domains in the dashboard config.")


def _header(headers: Mapping | None, name: str) -> str | None:
    if not headers or not name:
        return None
    lname = name.lower()
    for key, value in headers.items():
        if str(key).lower() == lname:
            value = str(value).strip()
            return value or None
    return None


def resolve(cfg: Config, user_info: Mapping | None = None, headers: Mapping | None = None,
            demo_user: str | None = None) -> Identity:
    """The viewer's identity from the login info, request headers and (demo only) the "View as" picker: a user
    name views as that researcher, None as the platform team (admin)."""
    mode = cfg.effective_auth
    if mode == "oidc":
        info = dict(user_info or {})
        if not info.get("is_logged_in"):
            return Identity(None, "oidc")
        email = str(info.get("email") or "")
        user = user_from_email(email, cfg.email_to_user, cfg.email_domains)
        if user is None:
            return Identity(None, "oidc", False, email, _unmapped(cfg, email or "(no email)"))
        return Identity(user, "oidc", is_admin(cfg.admins, user, email), email)
    if mode == "header":
        value = _header(headers, cfg.auth_header)
        if value and "@" in value:
            user = user_from_email(value, cfg.email_to_user, cfg.email_domains)
            if user is None:
                return Identity(None, "header", False, value, _unmapped(cfg, value))
            return Identity(user, "header", is_admin(cfg.admins, user, value), value)
        return Identity(value, "header", is_admin(cfg.admins, value), value or "")
    if mode == "demo":
        if demo_user:
            return Identity(demo_user, "demo", False, f"demo: {demo_user}")
        return Identity(None, "demo", True, "demo: platform team")
    if mode == "operator":
        return Identity(None, "operator", True, "single operator")
    if mode == "open":
        return Identity(None, "open", True, "open access")
    return Identity(None, "none")


def visible_user(identity: Identity, requested: str | None) -> str | None:
    """Whose jobs to show: ``requested`` if the viewer may see it, else the viewer's own user (or None)."""
    if requested and identity.may_pick_any_user:
        return requested
    return identity.user


def can_view(identity: Identity, target_user: str | None) -> bool:
    if not target_user:
        return False
    return identity.may_pick_any_user or (identity.user is not None and identity.user == target_user)


def current(cfg: Config, demo_user: str | None = None) -> Identity:
    """The identity of the current Streamlit session (reads ``st.user`` and ``st.context.headers``; ``demo_user``
    is the demo mode's "View as" choice and is ignored in every other mode)."""
    info: dict = {}
    if cfg.effective_auth == "oidc":
        try:
            info = {"is_logged_in": bool(st.user.is_logged_in), "email": st.user.get("email")}
        except Exception:  # noqa: BLE001 - auth not configured in secrets: nobody is logged in
            info = {}
    headers: Mapping = {}
    if cfg.effective_auth == "header":
        try:
            headers = st.context.headers or {}
        except Exception:  # noqa: BLE001 - no request context (tests): no header
            headers = {}
    return resolve(cfg, info, headers, demo_user)


def oidc_setup_problem() -> str | None:
    """None when Streamlit's OIDC sign-in can start, else one line saying what is missing (Authlib, or the
    ``[auth]`` settings in ``.streamlit/secrets.toml``): shown on the page instead of the traceback that
    ``st.login()`` would raise."""
    try:
        from streamlit.auth_util import is_authlib_installed, validate_auth_credentials
        from streamlit.errors import StreamlitAuthError
    except ImportError:  # a Streamlit without built-in sign-in
        return "this Streamlit version has no built-in sign-in (st.login); upgrade Streamlit or use --auth header"
    if not is_authlib_installed():
        return "sign-in needs Authlib>=1.3.2, which is missing: reinstall quotaloop (`pip install -e .`)"
    try:
        validate_auth_credentials("default")
    except StreamlitAuthError as exc:
        return sign_in_error(exc)
    return None


def sign_in_error(exc: Exception) -> str:
    """Streamlit's multi-line auth error as one line, with the settings it needs."""
    text = " ".join(str(exc).split())
    return (f"sign-in (OIDC) is not set up on this server: {text} The `[auth]` section needs redirect_uri, "
            "cookie_secret, client_id, client_secret and server_metadata_url (see the README's Dashboard section).")
