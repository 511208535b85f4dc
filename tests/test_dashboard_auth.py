"""The access rule and the dashboard config, as pure functions (no Streamlit)."""
from __future__ import annotations

import pytest

from dashboard import auth
from dashboard.config import SAMPLE_STORE, Config, ConfigError, load


def cfg(**kw) -> Config:
    base = dict(store=SAMPLE_STORE.parent / "elsewhere", auth="oidc", admins=("root-admin", "boss@example.org"))
    base.update(kw)
    return Config(**base)


def test_oidc_user_sees_only_own_jobs_whatever_is_requested():
    ident = auth.resolve(cfg(), {"is_logged_in": True, "email": "alice@example.org"})
    assert ident.user == "alice" and not ident.is_admin and ident.mode == "oidc"
    assert auth.visible_user(ident, "bob") == "alice"
    assert auth.visible_user(ident, None) == "alice"
    assert auth.can_view(ident, "alice") and not auth.can_view(ident, "bob")


def test_logged_out_oidc_sees_nobody():
    ident = auth.resolve(cfg(), {"is_logged_in": False, "email": "alice@example.org"})
    assert ident.user is None
    assert auth.visible_user(ident, "alice") is None
    assert not auth.can_view(ident, "alice")


def test_admin_by_email_or_user_name_may_view_anyone():
    by_email = auth.resolve(cfg(), {"is_logged_in": True, "email": "Boss@Example.org"})
    assert by_email.is_admin and auth.visible_user(by_email, "bob") == "bob"
    by_name = auth.resolve(cfg(), {"is_logged_in": True, "email": "root-admin@corp"})
    assert by_name.is_admin and auth.can_view(by_name, "carol")
    # an admin who asks for nobody in particular sees their own page
    assert auth.visible_user(by_name, None) == "root-admin"


def test_email_mapping_modes():
    assert auth.user_from_email("alice@example.org") == "alice"
    assert auth.user_from_email("alice@example.org", "email") == "alice@example.org"
    assert auth.user_from_email("  ") is None


def test_header_mode_reads_only_the_configured_header_case_insensitively():
    c = cfg(auth="header", auth_header="X-Remote-User")
    ident = auth.resolve(c, {"is_logged_in": True, "email": "mallory@x"}, {"x-remote-user": "carol"})
    assert ident.user == "carol" and ident.mode == "header"
    # another header (a client could send X-Forwarded-User) is not trusted
    nobody = auth.resolve(c, {}, {"X-Forwarded-User": "carol"})
    assert nobody.user is None and auth.visible_user(nobody, "carol") is None


def test_auto_never_trusts_headers_and_is_demo_only_on_the_sample_store():
    off_sample = cfg(auth="auto")
    assert off_sample.effective_auth == "oidc"
    assert auth.resolve(off_sample, {}, {"X-Forwarded-User": "carol"}).user is None
    on_sample = cfg(auth="auto", store=SAMPLE_STORE)
    assert on_sample.effective_auth == "demo"
    demo = auth.resolve(on_sample, {}, {}, demo_user="dave")
    assert demo.mode == "demo" and demo.user == "dave" and demo.may_pick_any_user
    assert auth.visible_user(demo, "erin") == "erin"


def test_none_mode_identifies_nobody():
    ident = auth.resolve(cfg(auth="none"), {"is_logged_in": True, "email": "a@b"}, {"X-Forwarded-User": "a"})
    assert ident.user is None and not auth.can_view(ident, "a")


def test_config_from_toml_and_env(tmp_path):
    path = tmp_path / "q.toml"
    path.write_text('[dashboard]\nstore = "/srv/s"\nauth = "header"\nauth_header = "X-User"\nadmins = ["a", "b"]\n')
    c = load({"QUOTALOOP_CONFIG": str(path)})
    assert (str(c.store), c.auth, c.auth_header, c.admins) == ("/srv/s", "header", "X-User", ("a", "b"))
    c2 = load({"QUOTALOOP_CONFIG": str(path), "QUOTALOOP_AUTH": "oidc", "QUOTALOOP_ADMINS": "x, y"})
    assert c2.auth == "oidc" and c2.admins == ("x", "y")


@pytest.mark.parametrize("text, needle", [
    ('[dashboard]\nauth = "magic"\n', "auth"),
    ('[dashboard]\nadmin = ["a"]\n', "unknown dashboard config key"),
    ('[dashboard]\nemail_to_user = "x"\n', "email_to_user"),
    ('[dashboard\n', "cannot read"),
])
def test_bad_config_is_one_clear_error(tmp_path, text, needle):
    path = tmp_path / "q.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=needle):
        load({"QUOTALOOP_CONFIG": str(path)})
