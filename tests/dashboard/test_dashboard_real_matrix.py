"""Every dashboard page x every real store x every role, under ``streamlit.testing.v1.AppTest`` (issue 12).

Stores: every export in ../shared/data that ingests (``real_stores.SOURCES``: HPC2N and KTH SWF, both sacct text
sites, SARC sacct-json, openb, Alibaba PAI 2020's machine list, the Philly subset where it ingests), each built
once per session in a tmp dir, plus the generated sample store. Roles: the single operator (``quotaloop serve``
with nothing configured), an admin and two researchers signed in through OIDC (one with jobs in the sidebar's
default window, one without), and an anonymous visitor in header mode (no proxy header).

Each cell asserts: no exception and no error box, a title, and, where the data supports it, the page's main
figure on the data: the Overview's job count equals the ``job_waste`` query's count for the window and its
occupancy curve is not flat zero; the Waste explorer's gap chart and the Rankings' bars carry non-zero waste;
Cluster layout draws a grid or a Gantt; a researcher's My jobs lists exactly their jobs in the window (from the
query, not from the page); a researcher never sees the platform's report audiences. Cells that fail on today's
code because of bugs fixed on other branches are ``xfail(strict=False)`` with the bug named (``KNOWN``).

The window is the sidebar's default (the last 30 days of each store); one AppTest session per store and role
clicks through the seven pages. The whole matrix (315 cells, the real stores ingested in about 5 s) takes 3.7
minutes on the shared 2-core machine when it is quiet, 8.6 under the load of other jobs. Skipped with a reason
when ../shared is absent.
"""
from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import real_stores
from test_dashboard_pages import APP, PAGES, charts_by_key, rendered_text

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "store"
STORES = [*real_stores.SOURCES, "sample"]
ROLES = ["operator", "admin", "researcher", "researcher-no-jobs", "anonymous-header"]
ADMIN = "platform-admin"
DOMAIN = "example.org"

# (store, page, role) -> the bug that breaks the cell today; None in a position matches every value. Empty:
# every cell of the matrix passes (the CPU-only, missing-usage and My jobs bugs of issue 12 are fixed).
KNOWN: dict[tuple, str] = {}


def _known(store: str, page: str, role: str) -> str | None:
    for (s, p, r), reason in KNOWN.items():
        if s in (None, store) and p in (None, page) and r in (None, role):
            return reason
    return None


def _cells():
    for store in STORES:
        for role in ROLES:
            for page in PAGES:
                reason = _known(store, page, role)
                marks = [pytest.mark.xfail(strict=False, reason=reason)] if reason else []
                yield pytest.param(store, role, page, marks=marks, id=f"{store}-{role}-{page}")


# ------------------------------------------------------------------ stores, built once per session
@pytest.fixture(scope="session")
def real_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("real-stores")


@pytest.fixture(scope="session")
def facts_cache() -> dict:
    return {}


def _store_path(name: str, request, real_root: Path) -> Path:
    if name == "sample":
        if not (SAMPLE / "_manifest.json").exists():
            pytest.skip("bundled sample store not built (run `quotaloop sample --store sample_data/store`)")
        return SAMPLE
    shared = request.getfixturevalue("shared_data")  # skips with the reason when ../shared/data is absent
    try:
        return real_stores.build(name, shared, real_root)
    except real_stores.NotIngestible as exc:
        pytest.skip(f"{name} does not ingest: {exc}")


class Facts:
    """What the store holds in the sidebar's default window, from the queries (not from the pages)."""

    def __init__(self, store: Path):
        import queries
        from dashboard import data
        from dashboard.data.prewarm import default_window, window_filters

        self.store = store
        opts = data.options(store)  # the sidebar's own span, so the window is the one the pages open on
        self.window = default_window(opts) if opts.jobs else None
        flt = window_filters(self.window)
        self.start, self.end = flt.start, flt.end
        jobs = opts.jobs
        self.waste = (queries.run("job_waste", store=store, start=self.start, end=self.end) if jobs else None)
        self.jobs = 0 if self.waste is None else self.waste.height
        users = [] if self.waste is None else [u for u in self.waste["user"].drop_nulls().to_list()]
        counts: dict[str, int] = {}
        for u in users:
            counts[u] = counts.get(u, 0) + 1
        # the researcher with the most jobs in the window (ties: by name, for a stable choice)
        self.researcher = min(counts, key=lambda u: (-counts[u], u)) if counts else None
        all_users = [] if not jobs else queries.run("user_ranking", store=store)["user"].drop_nulls().to_list()
        idle = sorted(set(all_users) - set(counts))
        self.idle_researcher = idle[0] if idle else "nobody-in-this-store"
        # whether the export lets any waste be computed (openb's pod lists hold requests only: no use, no waste)
        self.waste_known = self.waste is not None and any(
            (self.waste[f"{r}_seconds_wasted"].fill_null(0) > 0).any() for r in ("gpu", "cpu", "mem"))
        # whether the researcher's own waste of the Overview's resource (GPUs where jobs hold any, else CPU cores)
        # is known: a job holding it records its use, or none of theirs holds it (0, knowingly). sarc-json's GPU
        # jobs record CPU time but no GPU use: their CPU waste is known, their GPU waste is not
        self.own_waste_known = False
        if self.researcher is not None:
            import polars as pl

            r = "gpu" if (self.waste["gpu_seconds_requested"].fill_null(0) > 0).any() else "cpu"
            mine = self.waste.filter(pl.col("user") == self.researcher)
            holds = mine[f"{r}_seconds_requested"].fill_null(0) > 0
            self.own_waste_known = bool((holds & mine[f"{r}_seconds_wasted"].is_not_null()).any() or not holds.any())

    def own_job_ids(self, user: str) -> set[str]:
        import polars as pl

        return set(self.waste.filter(pl.col("user") == user)["job_id"].to_list())


@pytest.fixture
def facts(request, real_root, facts_cache):
    def get(name: str) -> Facts:
        if name not in facts_cache:
            facts_cache[name] = Facts(_store_path(name, request, real_root))
        return facts_cache[name]
    return get


# ------------------------------------------------------------------ driving a page as a role
_SESSION: dict = {}  # (store, role) -> the AppTest of the one browser session currently open


def open_page(monkeypatch, store: Path, role: str, page: str, facts: Facts) -> AppTest:
    """``page`` as ``role`` sees it. One AppTest (one browser session) per store and role, reused across its
    pages as a user clicks through them: the cells run in that order, and it saves the first page's run."""
    auth = {"operator": "operator", "anonymous-header": "header"}.get(role, "oidc")
    monkeypatch.setenv("QUOTALOOP_STORE", str(store))
    monkeypatch.setenv("QUOTALOOP_AUTH", auth)
    monkeypatch.setenv("QUOTALOOP_ADMINS", ADMIN)
    monkeypatch.setenv("QUOTALOOP_EMAIL_DOMAINS", DOMAIN)
    monkeypatch.delenv("QUOTALOOP_CONFIG", raising=False)
    key = (str(store), role)
    at = _SESSION.get(key)
    if at is None:
        _SESSION.clear()
        at = AppTest.from_file(APP, default_timeout=300)
        user = {"admin": ADMIN, "researcher": facts.researcher, "researcher-no-jobs": facts.idle_researcher}.get(role)
        if auth == "oidc":
            at.user = {"is_logged_in": True, "email": f"{user}@{DOMAIN}"}
        at.run()
        _SESSION[key] = at
    at.switch_page(f"views/{page}.py")
    return at.run()


def numbers(trace: dict, axis: str) -> np.ndarray:
    """A Plotly trace's values on ``axis`` as floats (plain lists or the ``{dtype, bdata}`` binary form)."""
    values = trace.get(axis)
    if values is None:
        return np.array([])
    if isinstance(values, dict) and "bdata" in values:
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=np.dtype(values["dtype"])).astype(float)
    flat = np.array(values, dtype=object).ravel()
    return np.array([v for v in flat if isinstance(v, (int, float)) and v is not None], dtype=float)


def nonzero(fig: dict, axis: str, names: tuple[str, ...] | None = None, points: bool = False) -> bool:
    """True when a trace (one of ``names``; with ``points``, a marker trace, not a reference line) has a non-zero
    value on ``axis``."""
    return any(np.nansum(np.abs(numbers(tr, axis))) > 0 for tr in fig.get("data", [])
               if (names is None or tr.get("name") in names) and (not points or "markers" in tr.get("mode", "")))


def exact_metric(at, label: str) -> str | None:
    found = [m for m in at.metric if m.label == label]
    return found[0].proto.help if found else None


# ------------------------------------------------------------------ the matrix
@pytest.mark.shared_data
@pytest.mark.parametrize("store_name, role, page", list(_cells()))
def test_page_store_role(store_name, role, page, facts, monkeypatch):
    f = facts(store_name)
    if role in ("researcher",) and f.researcher is None:
        pytest.skip(f"{store_name}: the export names no user with jobs in the window (no User field)")
    at = open_page(monkeypatch, f.store, role, page, f)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert at.title and at.title[0].value
    text = rendered_text(at)
    assert "Traceback" not in text
    if not f.jobs:  # a node list without jobs (PAI 2020's machine table): every page says so
        assert "has no jobs yet" in text or "No jobs ran" in text
        return
    CHECKS[page](at, f, role)


def _platform(role: str) -> bool:
    return role in ("operator", "admin")


def check_overview(at, f: Facts, role: str) -> None:
    help_text = exact_metric(at, "Jobs")
    assert help_text and help_text.startswith(f"{f.jobs:,} jobs"), help_text
    charts = charts_by_key(at)
    assert "ov_occ" in charts and nonzero(charts["ov_occ"], "y", ("allocated",)), \
        "the occupancy chart's allocated curve is flat zero although jobs ran in the window"
    if role == "researcher":  # their own rank, or why there is none: the log records no usage at all
        assert ("You rank" if f.own_waste_known else "usage of your jobs, so your wasted") in rendered_text(at)


def check_waste(at, f: Facts, role: str) -> None:
    charts = charts_by_key(at)
    assert "gap_chart" in charts and nonzero(charts["gap_chart"], "y"), "the gap chart is flat zero"


def check_layout(at, f: Facts, role: str) -> None:
    charts = charts_by_key(at)
    drawn = [k for k in ("lay_heat", "lay_gantt") if k in charts and charts[k].get("data")]
    explained = [i.value for i in at.info if "node" in i.value.lower()]
    assert drawn or explained, "neither a GPU grid, a Gantt, nor a word on why not"


def check_rankings(at, f: Facts, role: str) -> None:
    text = rendered_text(at)
    if _platform(role):
        charts = charts_by_key(at)
        assert "r_users_bars" in charts
        if f.waste_known:
            assert nonzero(charts["r_users_bars"], "x"), "the user bars carry no waste"
    elif role == "researcher":
        assert [m for m in at.metric if m.label.startswith("Your rank")], "a researcher with jobs sees no rank"
        assert f.researcher in text
    else:
        assert "not ranked" in text


def check_fairshare(at, f: Facts, role: str) -> None:
    assert [b for b in at.button if b.key == "fs_simulate"] or at.info


def check_my_jobs(at, f: Facts, role: str) -> None:
    if _platform(role):
        if f.researcher is None:
            return
        at.selectbox(key="view_user").select(f.researcher).run()
        assert not at.exception, [e.value for e in at.exception]
        user = f.researcher
    elif role == "researcher":
        user = f.researcher
    elif role == "researcher-no-jobs":
        assert not at.dataframe and f"No jobs of {f.idle_researcher}" in rendered_text(at)
        return
    else:
        assert not at.dataframe and any("header" in w.value for w in at.warning)
        return
    table = at.dataframe[-1].value
    assert set(table["job_id"]) == f.own_job_ids(user)
    charts = charts_by_key(at)
    assert "my_scatter" in charts
    wasted = next(c for c in ("gpu_hours_wasted", "cpu_hours_wasted") if c in table.columns)
    if table[wasted].isna().all():  # a log without usage (KTH's SWF): the chart says so instead of no dots
        assert "No usage recorded" in json.dumps(charts["my_scatter"]["layout"]["annotations"])
    else:
        assert nonzero(charts["my_scatter"], "x", points=True), \
            "the scatter of the user's jobs puts every job at zero requested resource-hours"


def check_reports(at, f: Facts, role: str) -> None:
    expected = ["Platform team", "Manager", "Researcher"] if _platform(role) else ["Researcher"]
    assert at.radio(key="rep_audience").options == expected


CHECKS = {"overview": check_overview, "waste": check_waste, "layout": check_layout, "rankings": check_rankings,
          "fairshare": check_fairshare, "my_jobs": check_my_jobs, "reports": check_reports}


@pytest.mark.shared_data
@pytest.mark.parametrize("store_name", STORES)
def test_admin_my_jobs_opens_on_a_user_with_jobs(store_name, facts, monkeypatch):
    f = facts(store_name)
    if f.researcher is None:
        pytest.skip(f"{store_name}: the export names no user")
    _SESSION.clear()  # a fresh session: the page's own default user, not one picked by an earlier cell
    at = open_page(monkeypatch, f.store, "admin", "my_jobs", f)
    _SESSION.clear()
    assert not at.exception, [e.value for e in at.exception]
    assert at.dataframe, "the admin's My jobs opened on a user without jobs in the window"
    assert set(at.dataframe[-1].value["job_id"]) <= set(f.waste["job_id"].to_list())
