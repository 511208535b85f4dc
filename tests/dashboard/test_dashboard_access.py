"""The access rule through the UI (AppTest on the fixture store): a researcher sees only their own jobs and never
another user's name, whatever the URL query parameters or the session state say; the platform view and admins
see everyone; a logged-out visitor sees a sign-in prompt; the sample store runs in a marked demo mode."""
from __future__ import annotations

import re

import polars as pl
import pytest

import dashboard_fixture as fx
from test_dashboard_pages import (  # noqa: F401 - store and make_app are fixtures
    PAGES, charts_by_key, downloaded, expected, make_app, metric, no_errors, rendered_text, store, walk,
)

ALICE = {"is_logged_in": True, "email": "alice@example.org"}


def test_researcher_sees_only_own_jobs_whatever_the_url_or_state_says(make_app):
    at = make_app("oidc", user=ALICE, query_params={"user": "bob", "view_user": "bob"})
    at.session_state["view_user"] = "bob"   # a forged widget value
    at.switch_page("views/my_jobs.py").run()
    no_errors(at)
    assert not [s for s in at.selectbox if s.key == "view_user"]
    text = rendered_text(at)
    assert "bob-private" not in text
    ids = set(at.dataframe[-1].value["job_id"])
    assert ids == set(fx.jobs_frame().filter(pl.col("user") == "alice")["job_id"])


def test_researcher_cannot_drill_into_another_users_jobs(make_app):
    at = make_app("oidc", user=ALICE)
    at.switch_page("views/waste.py").run()
    at.selectbox(key="w_team").select("lab/vision/detect").run()
    no_errors(at)
    assert at.selectbox(key="w_user").options == ["alice"]  # bob is in the team, but not on offer
    users = at.dataframe[-1].value
    assert list(users["user"]) == ["alice", "1 other user"]
    exp = expected("gpu", {"bob"})
    assert users["wasted_hours"].iloc[1] == pytest.approx(exp["bob"], rel=1e-9)  # the aggregate is bob's sum
    assert "bob-private" not in rendered_text(at)
    at.switch_page("views/layout.py").run()
    assert "bob-private" not in rendered_text(at)
    at.switch_page("views/reports.py").run()
    assert at.radio(key="rep_audience").options == ["Researcher"]


OTHERS = re.compile(r"\b(bob|carol|dave|erin)\b")
FORGED = {"user": "bob", "view_user": "bob", "demo_as": "bob", "w_user": "bob", "w_by": "user", "r_gaming_user": "bob",
          "rep_user": "bob", "rep_audience": "platform"}


def _visible_text(at, skip_keys=()) -> str:
    """rendered_text without the widgets in ``skip_keys`` (the demo's own "View as" picker lists every user)."""
    parts = []
    for el in walk(at._tree):
        if getattr(el, "key", None) in skip_keys:
            continue
        parts.append(str(getattr(el, "proto", "")))
        if type(el).__name__ == "Dataframe":
            parts.append(el.value.to_csv())
    return "\n".join(parts)


def _all_downloads(at) -> bytes:
    return b"".join(downloaded(at, b.proto.id.rsplit("-", 1)[-1]) for b in at.get("download_button"))


def _exercise(at, page: str) -> None:
    """Open ``page`` and move the widgets that could show other users (group by user, a team, a simulation)."""
    at.switch_page(f"views/{page}.py").run()
    if page == "waste":
        at.button_group(key="w_by").set_value("user").run()
        at.selectbox(key="w_team").select("lab/vision/detect").run()
    elif page == "rankings":
        at.button_group(key="r_period").set_value(1).run()
        if at.selectbox(key="r_gaming_user").options:
            at.button(key="r_gaming_run").click().run()
    elif page == "fairshare":
        at.button(key="fs_simulate").click().run()
    elif page == "reports":
        at.button(key="rep_build").click().run()
    no_errors(at)


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("source", ["oidc", "demo"])
def test_a_researcher_never_sees_another_users_name_on_any_page(make_app, page, source):
    """Whatever the URL says: no other user's name anywhere on the page, in its charts, tables or downloads."""
    if source == "oidc":
        at = make_app("oidc", user=ALICE, query_params=FORGED)
        at.session_state["demo_as"] = "bob"  # forged: the demo picker means nothing outside the demo
        at.session_state["view_user"] = "bob"
    else:
        at = make_app("demo", query_params=FORGED)
        at.selectbox(key="demo_as").select("alice").run()
    _exercise(at, page)
    text = _visible_text(at, skip_keys=("demo_as",))
    assert not OTHERS.findall(text), sorted(set(OTHERS.findall(text)))
    assert not OTHERS.findall(_all_downloads(at).decode("utf-8", "replace"))
    if page in ("overview", "waste", "rankings", "my_jobs"):
        assert "alice" in text  # the viewer's own figures are there


@pytest.mark.parametrize("page", ["overview", "waste", "rankings"])
def test_the_platform_view_names_everyone(make_app, page):
    """The control for the test above: the same pages, as an admin, do name the other users."""
    at = make_app("demo")
    _exercise(at, page)
    assert set(OTHERS.findall(_visible_text(at, skip_keys=("demo_as",)))) == {"bob", "carol", "dave", "erin"}


def test_researcher_rankings_show_own_row_and_rank(make_app):
    at = make_app("oidc", user=ALICE)
    at.switch_page("views/rankings.py").run()
    no_errors(at)
    exp = expected("gpu")
    rank = 1 + sum(v > exp["alice"] for v in exp.values())
    assert metric(at, "Your rank by wasted GPU-hours") == f"{rank} of {len(exp)}"
    table = at.dataframe[0].value
    assert list(table["user"]) == ["alice"]
    assert table["gpu_hours_wasted"].iloc[0] == pytest.approx(exp["alice"], rel=1e-9)
    scatter = charts_by_key(at)["r_scatter"]["data"]
    assert scatter[0]["text"] == ["another user"] * (len(exp) - 1) and scatter[1]["name"] == "you (alice)"
    at.button_group(key="r_period").set_value(1).run()
    assert at.multiselect(key="r_bt_users").value == ["alice"]
    assert at.selectbox(key="r_gaming_user").options == ["alice"]


def test_admin_may_view_anyone(make_app):
    at = make_app("oidc", user={"is_logged_in": True, "email": "boss@example.org"}, admins="boss@example.org")
    at.switch_page("views/my_jobs.py").run()
    at.selectbox(key="view_user").select("bob").run()
    no_errors(at)
    assert "bob-private" in rendered_text(at)
    assert set(at.dataframe[-1].value["job_id"]) == set(fx.jobs_frame().filter(pl.col("user") == "bob")["job_id"])


def test_logged_out_sees_a_sign_in_prompt_and_no_jobs(make_app, monkeypatch):
    from dashboard import auth

    # sign-in set up (AppTest's at.secrets does not reach the [auth] section st.login checks, so say it is)
    monkeypatch.setattr(auth, "oidc_setup_problem", lambda: None)
    at = make_app("oidc", user={"is_logged_in": False})
    at.switch_page("views/my_jobs.py").run()
    no_errors(at)
    assert any("Sign in" in i.value for i in at.info) and not at.dataframe
    # the settings vanish before the press: one line on the page, not StreamlitAuthError's traceback
    at.button(key="sign_in").click().run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "not set up" in errors[0] and "\n" not in errors[0]


@pytest.mark.parametrize("page", ["my_jobs", "reports"])
def test_oidc_without_auth_secrets_says_so_in_one_line(make_app, page):
    """Issue 12: pressing "Sign in" with no [auth] secrets raised a traceback; now the page says what is missing."""
    at = make_app("oidc", user={"is_logged_in": False})
    at.switch_page(f"views/{page}.py").run()
    if page == "reports":
        at.radio(key="rep_audience").set_value("user").run()
    no_errors(at)
    warnings = [w.value for w in at.warning if "not set up" in w.value]
    assert len(warnings) == 1 and "\n" not in warnings[0], [w.value for w in at.warning]
    assert "secrets.toml" in warnings[0] and "redirect_uri" in warnings[0]
    assert not [b for b in at.button if b.key == "sign_in"]  # no button that can only fail
    assert "Traceback" not in rendered_text(at) and not at.dataframe


def test_signed_in_address_outside_the_domains_sees_why_and_nothing_else(make_app):
    at = make_app("oidc", user={"is_logged_in": True, "email": "alice@evil.example"}, admins="alice")
    for page in PAGES:
        at.switch_page(f"views/{page}.py").run()
        no_errors(at)
        assert "bob-private" not in rendered_text(at), page
    at.switch_page("views/my_jobs.py").run()
    assert any("alice@evil.example maps to no cluster user" in w.value for w in at.warning)
    assert not at.dataframe and not [s for s in at.selectbox if s.key == "view_user"]  # not an admin either


def test_operator_mode_shows_everything_under_a_banner(make_app):
    at = make_app("operator")
    for page in PAGES:
        at.switch_page(f"views/{page}.py").run()
        no_errors(at)
        banner = [i.value for i in at.main.info if "Single-operator mode" in i.value]
        assert len(banner) == 1 and "--auth oidc" in banner[0] and "--auth header" in banner[0], page
    at.switch_page("views/my_jobs.py").run()
    at.selectbox(key="view_user").select("bob").run()  # everything visible: any user's page
    no_errors(at)
    assert set(at.dataframe[-1].value["job_id"]) == set(fx.jobs_frame().filter(pl.col("user") == "bob")["job_id"])
    assert any("Single-operator mode" in c.value for c in at.sidebar.caption)
    assert not [i for i in at.info if "Sign in" in i.value]


def test_demo_mode_is_marked_and_has_a_user_picker(make_app):
    at = make_app("demo")
    at.switch_page("views/my_jobs.py").run()
    assert any("Demo mode" in w.value for w in at.sidebar.warning)
    assert at.selectbox(key="demo_as").options[1:] == [f"Researcher {u}" for u in sorted(fx.USERS)]
    at.selectbox(key="view_user").select("dave").run()  # the platform view may open anyone's page
    no_errors(at)
    assert set(at.dataframe[-1].value["job_id"]) == set(fx.jobs_frame().filter(pl.col("user") == "dave")["job_id"])
    at.selectbox(key="demo_as").select("erin").run()  # view as a researcher: erin's page, no picker
    no_errors(at)
    assert not [s for s in at.selectbox if s.key == "view_user"]
    assert set(at.dataframe[-1].value["job_id"]) == set(fx.jobs_frame().filter(pl.col("user") == "erin")["job_id"])
    assert any("Viewing as **erin**" in c.value for c in at.sidebar.caption)
