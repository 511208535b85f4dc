"""Every dashboard page under ``streamlit.testing.v1.AppTest`` on a real store: it renders, and its widgets change
what is shown (checked against numbers computed independently from the fixture). The access rule through the
UI is in ``test_dashboard_access.py``; the fixtures and helpers here serve both."""
from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import polars as pl
import pytest
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

import dashboard_fixture as fx

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
PAGES = ["overview", "waste", "layout", "rankings", "fairshare", "my_jobs", "reports"]
SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "store"


@pytest.fixture(scope="session")
def store(tmp_path_factory) -> Path:
    return fx.build(tmp_path_factory.mktemp("dash_pages_store"))


@pytest.fixture
def make_app(store, monkeypatch):
    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", _recording_load)
    _MEDIA.clear()

    def make(auth="open", *, user=None, admins="", query_params=None, root=None, timeout=90):
        monkeypatch.setenv("QUOTALOOP_STORE", str(root or store))
        monkeypatch.setenv("QUOTALOOP_AUTH", auth)
        monkeypatch.setenv("QUOTALOOP_ADMINS", admins)
        monkeypatch.setenv("QUOTALOOP_EMAIL_DOMAINS", "example.org")  # the test users' addresses map to users
        monkeypatch.delenv("QUOTALOOP_CONFIG", raising=False)
        at = AppTest.from_file(APP, default_timeout=timeout)
        if user is not None:
            at.user = user
        if query_params:
            at.query_params = dict(query_params)
        return at.run()
    return make


# ------------------------------------------------------------------ helpers
def walk(node):
    kids = getattr(node, "children", None)
    if isinstance(kids, dict):
        for child in kids.values():
            yield from walk(child)
    else:
        yield node


def rendered_text(at) -> str:
    """Everything a user could read on the page: element protos, table contents, chart specs."""
    parts = []
    for el in walk(at._tree):
        parts.append(str(getattr(el, "proto", "")))
        if type(el).__name__ == "Dataframe":
            parts.append(el.value.to_csv())
    return "\n".join(parts)


def charts_by_key(at) -> dict:
    out = {}
    for el in walk(at._tree):
        proto = getattr(el, "proto", None)
        if type(proto).__name__ == "PlotlyChart":
            out[proto.id.rsplit("-", 1)[-1]] = json.loads(proto.spec)
    return out


def metric(at, label: str) -> str:
    found = [m.value for m in at.metric if m.label == label]
    assert found, f"no metric {label!r}; have {[m.label for m in at.metric]}"
    return found[0]


def exact(at, label: str) -> float:
    """The exact number a metric card carries in its help text (the card itself shows a compact 262 k)."""
    found = [m for m in at.metric if m.label == label]
    assert found, f"no metric {label!r}"
    return float(found[0].proto.help.split()[0].replace(",", ""))


# AppTest drops its mock runtime, and with it the in-memory media store, when a run ends: the store then lives
# only until the next garbage collection. So the bytes are kept as they are stored, keyed by their file id.
_MEDIA: dict[str, bytes] = {}
_store_media = MemoryMediaFileStorage.load_and_get_id


def _recording_load(self, path_or_data, mimetype, kind, filename=None):
    file_id = _store_media(self, path_or_data, mimetype, kind, filename)
    _MEDIA[file_id] = bytes(self.get_file(file_id).content)
    return file_id


def downloaded(at, key: str) -> bytes:
    """The bytes behind a download button, as the page handed them to the media store."""
    url = next(b.proto.url for b in at.get("download_button") if b.proto.id.endswith(f"-{key}"))
    file_id = url.rsplit("/", 1)[-1].split(".")[0]
    if file_id not in _MEDIA:
        raise AssertionError(f"download {key} not found")
    return _MEDIA[file_id]


def no_errors(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


# independent expectations from the fixture definition (constant utilisation per user)
def expected(resource: str, users=None) -> dict:
    jobs = fx.jobs_frame()
    idx = {"gpu": 2, "cpu": 3}[resource]
    out: dict = {}
    for j in jobs.iter_rows(named=True):
        if users and j["user"] not in users:
            continue
        held = (j["req_gpus"] if resource == "gpu" else j["req_cpus"]) * j["elapsed_s"] / 3600
        out[j["user"]] = out.get(j["user"], 0.0) + held * (1 - fx.USERS[j["user"]][idx])
    return out


# ------------------------------------------------------------------ every page renders
@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_the_fixture_store(make_app, page):
    at = make_app()
    at.switch_page(f"views/{page}.py").run()
    no_errors(at)
    assert at.title and at.title[0].value
    assert "Traceback" not in rendered_text(at)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_explains_an_empty_store(make_app, tmp_path, page):
    at = make_app(root=tmp_path / "nothing-here")
    at.switch_page(f"views/{page}.py").run()
    no_errors(at)
    assert any("has no jobs yet" in i.value for i in at.info)


@pytest.mark.skipif(not (SAMPLE / "_manifest.json").exists(), reason="bundled sample store not built "
                    "(run `quotaloop sample --store sample_data/store`)")
@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_the_sample_store(make_app, page):
    at = make_app(root=SAMPLE, timeout=300)
    at.switch_page(f"views/{page}.py").run()
    no_errors(at)
    assert at.title and "has no jobs yet" not in rendered_text(at)
    if page in ("overview", "waste", "layout", "rankings", "my_jobs"):
        assert at.metric and charts_by_key(at)


# ------------------------------------------------------------------ widgets change what is shown
def test_overview_numbers_follow_the_account_filter(make_app):
    at = make_app()
    at.switch_page("views/overview.py").run()
    assert exact(at, "Wasted GPU-h") == pytest.approx(sum(expected("gpu").values()), abs=0.05)
    at.selectbox(key="flt_account").select("lab/nlp").run()
    no_errors(at)
    assert exact(at, "Wasted GPU-h") == pytest.approx(sum(expected("gpu", {"dave", "erin"}).values()), abs=0.05)
    assert [m.delta for m in at.metric if m.label == "Jobs"] == ["2 users"]


def test_waste_explorer_resource_grouping_and_drilldown(make_app):
    at = make_app()
    at.switch_page("views/waste.py").run()
    assert exact(at, "Wasted GPU-hours") == pytest.approx(sum(expected("gpu").values()), abs=0.05)
    at.button_group(key="w_resource").set_value("cpu").run()
    no_errors(at)
    assert exact(at, "Wasted core-hours") == pytest.approx(sum(expected("cpu").values()), abs=0.05)
    assert "CPU requested vs used" in charts_by_key(at)["gap_chart"]["layout"]["title"]["text"]

    at.button_group(key="w_by").set_value("user").run()
    table = at.dataframe[0].value
    exp = expected("cpu")
    assert list(table["user"]) == sorted(exp, key=exp.get, reverse=True)
    assert all(math.isclose(w, exp[u], rel_tol=1e-9) for u, w in zip(table["user"], table["wasted_hours"]))
    gap = charts_by_key(at)["gap_chart"]
    assert {t["legendgroup"] for t in gap["data"]} == set(fx.USERS)

    at.selectbox(key="w_team").select("lab/vision/detect").run()
    users = at.dataframe[-1].value
    assert sorted(users["user"]) == ["alice", "bob"]
    at.selectbox(key="w_user").select("alice").run()
    no_errors(at)
    jobs = at.dataframe[-1].value
    assert len(jobs) == fx.jobs_frame().filter(pl.col("user") == "alice").height
    assert set(jobs["job_id"].str[0]) == {"a"}


def test_waste_csv_download_neutralises_formulas(make_app):
    at = make_app()
    at.switch_page("views/waste.py").run()
    at.selectbox(key="w_team").select("lab/nlp/llm").run()
    at.selectbox(key="w_user").select("erin").run()
    body = downloaded(at, "dl_jobs").decode()
    assert "'=HYPERLINK" in body and "\n=HYPERLINK" not in body and ",=HYPERLINK" not in body


def test_rankings_follow_the_resource_choice(make_app):
    at = make_app()
    at.switch_page("views/rankings.py").run()
    no_errors(at)
    for resource in ("gpu", "cpu"):
        at.button_group(key="r_by").set_value(resource).run()
        exp = expected(resource)
        table = at.dataframe[0].value
        assert list(table["user"]) == sorted(exp, key=exp.get, reverse=True), resource
        assert metric(at, "Largest waster") == max(exp, key=exp.get)
    assert charts_by_key(at)["r_scatter"]["data"][0]["mode"] == "markers"


def test_rankings_quota_loop_reports_oscillation(make_app):
    at = make_app()
    at.switch_page("views/rankings.py").run()
    at.button_group(key="r_period").set_value(1).run()
    no_errors(at)
    assert int(metric(at, "Periods")) >= 6  # daily periods over the fixture's week
    assert metric(at, "Sign changes of the applied coefficient").isdigit()


def test_rankings_gaming_check_runs_on_demand(make_app):
    at = make_app()
    at.switch_page("views/rankings.py").run()
    at.selectbox(key="r_gaming_user").select("bob").run()
    at.button(key="r_gaming_run").click().run()
    no_errors(at)
    assert any("did not improve" in s.value for s in at.success)
    table = at.dataframe[-1].value
    row = table[table["metric"] == "job_count"].iloc[0]
    assert row["after_split"] == 10 * row["before"] == 10 * fx.jobs_frame().filter(pl.col("user") == "bob").height
    # everyone, their largest job split (SQL): one row per user, N - 1 more jobs each, recommended never rises
    every = at.dataframe[-2].value
    jobs = fx.jobs_frame().group_by("user").len()
    assert sorted(every["user"]) == sorted(fx.USERS)
    for r in every.itertuples():
        assert r.job_count_after == r.job_count_before + 9 == jobs.filter(pl.col("user") == r.user)["len"][0] + 9
    assert metric(at, "Recommended coefficient would rise") == f"0 of {len(fx.USERS)}"
    assert int(metric(at, "Legacy score would fall").split()[0]) == int(every["legacy_improves"].sum())


def test_layout_time_slider_moves_the_grid(make_app):
    at = make_app()
    at.switch_page("views/layout.py").run()
    jobs = fx.jobs_frame()
    for hour in (30, 100):
        when = (fx.T0 + dt.timedelta(hours=hour)).replace(tzinfo=None)
        at.slider(key="lay_at").set_value(when).run()
        no_errors(at)
        t = when.replace(tzinfo=dt.timezone.utc)
        running = jobs.filter((pl.col("start") <= t) & (pl.col("end") > t))
        busy = sum(min(int(g), round(fx.USERS[u][2] * g)) for u, g in zip(running["user"], running["req_gpus"]))
        held = int(running["req_gpus"].sum())
        assert metric(at, "Busy") == f"{busy} GPUs", hour
        assert metric(at, "Allocated, idle") == f"{held - busy} GPUs", hour
        heat = charts_by_key(at)["lay_heat"]
        assert len(heat["data"][0]["y"]) == 4  # four nodes


def test_fairshare_slider_and_simulate_change_the_comparison(make_app):
    at = make_app()
    at.switch_page("views/fairshare.py").run()
    assert any("press **Simulate**" in i.value for i in at.info)
    at.button(key="fs_simulate").click().run()  # unchanged settings: scenario == baseline
    no_errors(at)
    assert all(m.delta in (None, "no change") for m in at.metric if m.label != "Jobs")
    slider = at.slider(key="share_lab/vision")
    slider.set_value(round(slider.value * 3, 1))
    at.select_slider(key="mrt_training").set_value(4 * 3600)  # seconds; "4 h" is the label
    at.button(key="fs_simulate").click().run()
    no_errors(at)
    assert any(m.delta not in (None, "no change") for m in at.metric)
    captions = " ".join(c.value for c in at.caption)
    assert "shares vision=" in captions and "min runtime training 4 h" in captions
    att = charts_by_key(at)["fs_att"]
    assert [t["name"].split(" ")[0] for t in att["data"]] == ["baseline", "scenario"]
    assert at.markdown and any("GPU-hours" in m.value for m in at.markdown)  # "why does my team get less"
    at.switch_page("views/layout.py").run()
    no_errors(at)
    assert {"lay_sim_gantt", "lay_sim_heat"} <= set(charts_by_key(at))
    held = int(metric(at, "Held (simulated)").removesuffix(" GPUs"))
    assert 0 <= held <= 32 and len(charts_by_key(at)["lay_sim_heat"]["data"][0]["y"]) == 4


def test_simulated_layout_spans_the_replayed_window(make_app):
    # replaying the last 3 days warm-starts from the logged state: the run's timeline also holds the jobs that
    # ran before the window (the lookback), but the simulated time slider covers the window only
    at = make_app()
    at.switch_page("views/fairshare.py").run()
    at.select_slider(key="fs_days").set_value(3)
    at.button(key="fs_simulate").click().run()
    no_errors(at)
    sim_flt, spec = at.session_state["last_scenario"]
    from dashboard import data

    result = data.run_scenario(sim_flt, spec).scenario  # the page's cached run
    assert result.timeline["start"].min() < sim_flt.start  # history before the window is in the timeline
    at.switch_page("views/layout.py").run()
    no_errors(at)
    us = dt.timedelta(microseconds=1)
    epoch = dt.datetime(1970, 1, 1)
    lo, hi = (t.replace(tzinfo=None, minute=0, second=0, microsecond=0) for t in (sim_flt.start, sim_flt.end))
    slider = at.slider(key="lay_sim_at")
    first, last = epoch + slider.min * us, epoch + slider.max * us
    assert first == lo and last <= hi and first <= slider.value <= last


def test_reports_page_builds_a_download(make_app):
    at = make_app()
    at.switch_page("views/reports.py").run()
    assert at.radio(key="rep_audience").options == ["Platform team", "Manager", "Researcher"]
    at.button(key="rep_build").click().run()
    no_errors(at)
    assert at.success
    html_key = next(b.proto.id.rsplit("-", 1)[-1] for b in at.get("download_button") if "html" in b.proto.id)
    assert downloaded(at, html_key).lstrip().lower().startswith(b"<!doctype html")


def _filters_matching_nothing():
    """(day, account, state, class) with no job running in that day: found from the fixture, not hard-coded."""
    import itertools

    jobs = fx.jobs_frame()
    days = [(fx.T0 + dt.timedelta(days=d)).date() for d in range(fx.DAYS + 1)]
    accounts = sorted({a for a, *_ in fx.USERS.values()})
    for day, account, state, cls in itertools.product(days, accounts, ["FAILED"], fx.CLASSES):
        lo = dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)
        hit = jobs.filter((pl.col("account") == account) & (pl.col("state") == state) & (pl.col("job_class") == cls)
                          & (pl.col("start") < lo + dt.timedelta(days=1)) & (pl.col("end") > lo))
        if hit.is_empty():
            return day, account, state, cls
    raise AssertionError("the fixture has no empty filter combination")


@pytest.mark.parametrize("page", PAGES)
def test_every_page_explains_a_filter_that_matches_nothing(make_app, page):
    day, account, state, cls = _filters_matching_nothing()
    at = make_app()
    at.switch_page(f"views/{page}.py").run()
    at.date_input(key="flt_window").set_value((day, day)).run()
    for key, value in (("flt_account", account), ("flt_state", state), ("flt_class", cls)):
        at.selectbox(key=key).select(value).run()
    no_errors(at)
    assert at.title and "Traceback" not in rendered_text(at)
    infos = " ".join(i.value for i in at.info)
    if page in ("overview", "waste", "rankings", "my_jobs"):
        assert "No " in infos and "window" in infos, infos
    if page == "reports":
        at.button(key="rep_build").click().run()
        no_errors(at)
        html_key = next(b.proto.id.rsplit("-", 1)[-1] for b in at.get("download_button") if "html" in b.proto.id)
        assert b"No jobs ran in this window" in downloaded(at, html_key)


def test_a_hostile_job_name_is_inert_in_every_chart(make_app):
    """erin's job ``<script>alert(1)</script>`` reaches the charts escaped (Plotly draws text as markup)."""
    at = make_app("open")
    at.switch_page("views/my_jobs.py").run()
    at.selectbox(key="view_user").select("erin").run()
    no_errors(at)
    specs = json.dumps(charts_by_key(at))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in specs and "<script>" not in specs
    assert "<script>alert(1)</script>" in set(at.dataframe[-1].value["job_name"])  # the table shows it as text
    hostile = fx.jobs_frame().filter(pl.col("job_name") == "<script>alert(1)</script>").row(0, named=True)
    at.switch_page("views/layout.py").run()
    when = (hostile["start"] + dt.timedelta(hours=1)).replace(minute=0, second=0, microsecond=0, tzinfo=None)
    at.slider(key="lay_at").set_value(when).run()
    no_errors(at)
    gantt = json.dumps(charts_by_key(at)["lay_gantt"])
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in gantt and "<script>" not in gantt


def test_gaming_replay_is_bounded_on_a_big_window(make_app, monkeypatch):
    """The exact replay copies the window into a scratch store: past the bound only the SQL check runs."""
    from dashboard import data

    monkeypatch.setattr(data, "GAMING_REPLAY_MAX_JOBS", 10)
    at = make_app()
    at.switch_page("views/rankings.py").run()
    at.button(key="r_gaming_run").click().run()
    no_errors(at)
    assert any("it runs up to 10" in i.value for i in at.info)
    assert not at.success and metric(at, "Users checked") == str(len(fx.USERS))


def test_a_missing_query_leaves_a_notice_and_the_rest_of_the_page(make_app, monkeypatch):
    """A query the store's build lacks (``data.NotAvailable``) costs only its own part of the page."""
    from dashboard.data import query_cache

    real = query_cache.available
    monkeypatch.setattr(query_cache, "available", lambda name: name != "quota_backtest" and real(name))
    at = make_app()
    at.switch_page("views/rankings.py").run()
    no_errors(at)
    assert any("`quota_backtest` query is not available yet" in i.value for i in at.info)
    exp = expected("gpu")
    assert list(at.dataframe[0].value["user"]) == sorted(exp, key=exp.get, reverse=True)
