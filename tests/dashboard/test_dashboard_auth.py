"""The access rule and the dashboard config, as pure functions (no Streamlit)."""
from __future__ import annotations

import pytest

from dashboard import auth
from dashboard.config import SAMPLE_STORE, Config, ConfigError, load


def cfg(**kw) -> Config:
    base = dict(store=SAMPLE_STORE.parent / "elsewhere", auth="oidc", admins=("root-admin", "boss@example.org"),
                email_domains=("example.org", "corp"))
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
    by_email = auth.resolve(cfg(), {"is_logged_in": True, "email": "boss@Example.ORG"})  # domains: any case
    assert by_email.is_admin and auth.visible_user(by_email, "bob") == "bob"
    by_name = auth.resolve(cfg(), {"is_logged_in": True, "email": "root-admin@corp"})
    assert by_name.is_admin and auth.can_view(by_name, "carol")
    # an admin who asks for nobody in particular sees their own page
    assert auth.visible_user(by_name, None) == "root-admin"


def test_email_mapping_modes():
    assert auth.user_from_email("alice@example.org", domains=["example.org"]) == "alice"
    assert auth.user_from_email("alice@EXAMPLE.org", domains=["Example.Org"]) == "alice"
    assert auth.user_from_email("alice@example.org", "email") == "alice@example.org"
    assert auth.user_from_email("  ", domains=["example.org"]) is None


@pytest.mark.parametrize("email", ["alice@evil.example", "alice@example.org.evil.example", "alice@sub.example.org",
                                   "alice@", "@example.org", "alice", "alice@example.org@evil.example"])
def test_local_part_maps_only_configured_domains(email):
    assert auth.user_from_email(email, "local-part", ["example.org"]) is None
    assert auth.user_from_email(email, "local-part", []) is None  # no domain configured: nobody is mapped


def test_a_foreign_address_is_nobody_and_never_an_admin():
    c = cfg(admins=("opsadmin", "boss@example.org"))
    for email in ("opsadmin@evil.example", "alice@evil.example", "boss@evil.example"):
        ident = auth.resolve(c, {"is_logged_in": True, "email": email})
        assert ident.user is None and not ident.is_admin, email
        assert auth.visible_user(ident, "alice") is None and not auth.can_view(ident, "alice")
        assert email in ident.problem and "email_domains" in ident.problem
    # the same refusal through a proxy header that carries an address
    h = cfg(auth="header", admins=("opsadmin",))
    ident = auth.resolve(h, {}, {"X-Forwarded-User": "opsadmin@evil.example"})
    assert ident.user is None and not ident.is_admin and ident.problem


def test_admins_compare_exactly():
    c = cfg(admins=("opsadmin", "boss@example.org"))
    assert not auth.resolve(c, {"is_logged_in": True, "email": "OPSADMIN@example.org"}).is_admin
    assert not auth.resolve(c, {"is_logged_in": True, "email": "Boss@example.org"}).is_admin  # local part: exact
    assert not auth.resolve(c, {"is_logged_in": True, "email": "opsadmin2@example.org"}).is_admin
    assert auth.resolve(c, {"is_logged_in": True, "email": "opsadmin@example.org"}).is_admin
    h = cfg(auth="header", admins=("opsadmin",))
    assert not auth.resolve(h, {}, {"X-Forwarded-User": "OPSADMIN"}).is_admin
    assert auth.resolve(h, {}, {"X-Forwarded-User": "opsadmin"}).is_admin
    # an admin address never makes its local part an admin name, nor the reverse
    assert not auth.is_admin(("boss@example.org",), "boss", None)
    assert not auth.is_admin(("opsadmin",), None, "opsadmin@example.org")


def test_email_domains_from_config_and_env(tmp_path):
    path = tmp_path / "q.toml"
    path.write_text('[dashboard]\nemail_domains = ["Example.org", "@lab.example"]\n')
    assert load({"QUOTALOOP_CONFIG": str(path)}).email_domains == ("example.org", "lab.example")
    assert load({"QUOTALOOP_EMAIL_DOMAINS": "a.example, b.example"}).email_domains == ("a.example", "b.example")
    assert load({}).email_domains == ()


def test_header_mode_reads_only_the_configured_header_case_insensitively():
    c = cfg(auth="header", auth_header="X-Remote-User")
    ident = auth.resolve(c, {"is_logged_in": True, "email": "mallory@x"}, {"x-remote-user": "carol"})
    assert ident.user == "carol" and ident.mode == "header"
    # another header (a client could send X-Forwarded-User) is not trusted
    nobody = auth.resolve(c, {}, {"X-Forwarded-User": "carol"})
    assert nobody.user is None and auth.visible_user(nobody, "carol") is None


def test_operator_mode_is_an_admin_without_a_name():
    ident = auth.resolve(cfg(auth="operator"), {"is_logged_in": True, "email": "mallory@example.org"},
                         {"X-Forwarded-User": "carol"}, demo_user="carol")
    assert (ident.user, ident.mode, ident.is_admin) == (None, "operator", True)
    assert auth.visible_user(ident, "bob") == "bob" and auth.can_view(ident, "carol")


def test_auto_never_trusts_headers_and_is_demo_only_on_the_sample_store():
    off_sample = cfg(auth="auto")
    assert off_sample.effective_auth == "oidc"
    assert auth.resolve(off_sample, {}, {"X-Forwarded-User": "carol"}).user is None
    on_sample = cfg(auth="auto", store=SAMPLE_STORE)
    assert on_sample.effective_auth == "demo"
    # demo, viewing as a researcher: exactly a signed-in researcher's rule (the demo shows the rule, not a hole)
    demo = auth.resolve(on_sample, {}, {}, demo_user="dave")
    assert demo.mode == "demo" and demo.user == "dave" and not demo.may_pick_any_user
    assert auth.visible_user(demo, "erin") == "dave" and not auth.can_view(demo, "erin")
    # demo, platform view (no researcher picked): an admin
    platform = auth.resolve(on_sample, {}, {}, demo_user=None)
    assert platform.mode == "demo" and platform.user is None and platform.is_admin
    assert auth.visible_user(platform, "erin") == "erin"


def test_open_mode_is_an_admin_without_a_name():
    ident = auth.resolve(cfg(auth="open"), {}, {"X-Forwarded-User": "carol"}, demo_user="carol")
    assert ident.user is None and ident.is_admin and auth.visible_user(ident, "bob") == "bob"


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


# ------------------------------------------------------------------ dashboard.privacy (pure, hand-computed)
def _ranking():
    import polars as pl

    return pl.DataFrame({"user": ["erin", "bob", "alice", "carol"], "jobs": [3, 2, 5, 1],
                         "requested_hours": [10.0, 8.0, 6.0, 4.0], "used_hours": [1.0, None, 3.0, 2.0],
                         "wasted_hours": [9.0, 8.0, 3.0, 2.0], "efficiency": [0.1, None, 0.5, 0.5]})


ALICE_ID = auth.Identity("alice", "oidc")
ADMIN_ID = auth.Identity("root-admin", "oidc", is_admin=True)


def test_fold_users_keeps_own_row_and_sums_the_others():
    from dashboard import privacy

    folded = privacy.fold_users(_ranking(), ALICE_ID, sums=("jobs", "requested_hours", "used_hours", "wasted_hours"),
                                ratio=("efficiency", "used_hours", "requested_hours"))
    assert folded["user"].to_list() == ["alice", "3 other users"]
    assert folded.row(0) == _ranking().row(2)
    others = folded.row(1, named=True)
    assert (others["jobs"], others["requested_hours"], others["used_hours"], others["wasted_hours"]) == \
        (6, 22.0, 3.0, 19.0)
    # efficiency over the users whose usage is known (erin 10 h, carol 4 h requested; bob's usage is unknown)
    assert others["efficiency"] == pytest.approx(3.0 / 14.0)
    assert privacy.fold_users(_ranking(), ADMIN_ID, sums=("jobs",)).equals(_ranking())
    nobody = privacy.fold_users(_ranking(), auth.Identity(None, "oidc"), sums=("jobs",))
    assert nobody["user"].to_list() == ["4 other users"] and nobody["jobs"].to_list() == [11]


def test_own_rank_is_competition_rank_out_of_everyone():
    from dashboard import privacy

    r = privacy.own_rank(_ranking(), ALICE_ID, "wasted_hours")
    assert (r["rank"], r["of"], r["row"]["user"]) == (3, 4, "alice")
    # carol ties with alice at 50 %: both rank 1, erin (10 %) ranks 3
    assert privacy.own_rank(_ranking(), auth.Identity("carol", "oidc"), "efficiency")["rank"] == 1
    assert privacy.own_rank(_ranking(), auth.Identity("erin", "oidc"), "efficiency")["rank"] == 3
    assert privacy.own_rank(_ranking(), auth.Identity("bob", "oidc"), "efficiency")["rank"] == 4  # unknown: last
    assert privacy.own_rank(_ranking(), auth.Identity("zed", "oidc"), "wasted_hours") is None


def test_fold_series_and_unnamed():
    import polars as pl

    from dashboard import privacy

    series = pl.DataFrame({"t": [1, 1, 1, 2, 2], "group": ["alice", "bob", "carol", "alice", "bob"],
                           "requested": [1.0, 2.0, 3.0, 4.0, 5.0], "used": [0.5, 1.0, 1.0, 2.0, 2.5]})
    out = privacy.fold_series(series, ALICE_ID)
    assert out.rows() == [(1, "2 other users", 5.0, 2.0), (1, "alice", 1.0, 0.5), (2, "2 other users", 5.0, 2.5),
                          (2, "alice", 4.0, 2.0)]
    assert privacy.unnamed(_ranking(), ALICE_ID)["user"].to_list() == ["another user"] * 2 + ["alice", "another user"]
    assert privacy.own_rows(_ranking(), ALICE_ID)["user"].to_list() == ["alice"]
    assert privacy.own_rows(_ranking(), auth.Identity(None, "oidc")).is_empty()


def test_memory_limit_is_validated_and_reaches_duckdb(tmp_path):
    import queries

    assert load({"QUOTALOOP_MEMORY_LIMIT": "4 GB"}).memory_limit == "4GB"
    assert load({}).memory_limit is None
    with pytest.raises(ConfigError, match="memory_limit"):
        load({"QUOTALOOP_MEMORY_LIMIT": "lots"})
    con = queries.connect(tmp_path / "no-store", memory_limit="1GB")
    try:
        limit = con.execute("select current_setting('memory_limit')").fetchone()[0]
    finally:
        con.close()
    assert limit.replace(" ", "") in ("1.0GB", "953.6MiB", "1GB", "0.9GiB")


def test_oidc_setup_problem_names_what_is_missing(monkeypatch):
    import streamlit.auth_util as au
    from streamlit.errors import StreamlitAuthError

    def no_section(provider):  # what Streamlit raises without an [auth] section (its message spans lines)
        raise StreamlitAuthError("""To use authentication features you need to configure credentials for at
            least one authentication provider in `.streamlit/secrets.toml`.""")

    monkeypatch.setattr(au, "is_authlib_installed", lambda: True)
    monkeypatch.setattr(au, "validate_auth_credentials", no_section)
    problem = auth.oidc_setup_problem()
    assert problem and "\n" not in problem and "  " not in problem
    assert "configure credentials for at least one" in problem and "client_id" in problem
    monkeypatch.setattr(au, "is_authlib_installed", lambda: False)
    problem = auth.oidc_setup_problem()
    assert "Authlib>=1.3.2" in problem and "\n" not in problem
    monkeypatch.setattr(au, "is_authlib_installed", lambda: True)
    monkeypatch.setattr(au, "validate_auth_credentials", lambda provider: None)
    assert auth.oidc_setup_problem() is None
