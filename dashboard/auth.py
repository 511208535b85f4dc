"""Who is looking, and whose jobs they may see.

Identity sources, chosen by ``Config.effective_auth``:

- ``oidc``: Streamlit's built-in login (``st.user.is_logged_in``, ``st.user.email``); the email maps to a
  cluster user name (``alice@example.org`` -> ``alice`` by default).
- ``header``: a trusted reverse proxy authenticates and sets a header (``X-Forwarded-User`` by default).
  Only on when configured: the app cannot tell a proxy's header from a client's, so the operator must run a
  proxy that strips the header from client requests.
- ``demo``: the bundled sample store, no sign-in; a "View as" picker in the sidebar chooses the platform view
  (an admin: everything) or one researcher (the researcher rule below, exactly as a signed-in user gets it),
  and every page says so.
- ``open``: no sign-in, every viewer is an admin: for one operator on a trusted machine (``--auth open``).
- ``none``: nobody is identified; personal pages show how to configure sign-in.

Access rule (pure, unit-tested here and in ``dashboard.privacy``): a researcher sees only their own jobs, and
never another user's name next to that user's figures: per-user rankings, tables and curves show the viewer's
own row (and rank "r of N") beside one "N other users" aggregate; team-level aggregates stay visible; there is
no drill-down to another user's jobs. A user in the admin list sees everyone. Whatever the request asks for (a
widget value, a URL query parameter such as ``?user=bob`` or ``?demo_as=bob``) never widens this: the app reads
no URL query parameter, binds no widget to one, and ``visible_user`` falls back to the viewer.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .config import Config


@dataclass(frozen=True)
class Identity:
    user: str | None        # cluster user name, None when nobody is identified
    mode: str               # oidc | header | demo | open | none
    is_admin: bool = False
    label: str = ""         # what the sidebar shows (email or header value)

    @property
    def may_pick_any_user(self) -> bool:
        """Admins may open any user's page; everybody else sees their own."""
        return self.is_admin


def user_from_email(email: str | None, mapping: str = "local-part") -> str | None:
    if not email or not str(email).strip():
        return None
    email = str(email).strip()
    return email.split("@", 1)[0] if mapping == "local-part" else email


def is_admin(admins, *names) -> bool:
    wanted = {a.strip().lower() for a in admins if a and a.strip()}
    return any(n and str(n).strip().lower() in wanted for n in names)


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
        email = info.get("email")
        user = user_from_email(email, cfg.email_to_user)
        return Identity(user, "oidc", is_admin(cfg.admins, user, email), str(email or ""))
    if mode == "header":
        value = _header(headers, cfg.auth_header)
        user = user_from_email(value, cfg.email_to_user) if value and "@" in value else value
        return Identity(user, "header", is_admin(cfg.admins, user, value), value or "")
    if mode == "demo":
        if demo_user:
            return Identity(demo_user, "demo", False, f"demo: {demo_user}")
        return Identity(None, "demo", True, "demo: platform team")
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
    import streamlit as st

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
