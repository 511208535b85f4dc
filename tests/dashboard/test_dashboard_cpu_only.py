"""CPU-only clusters in the dashboard (issue 12): every page picks its resource from the data
(``selection_resource``) and a log without peak CPU shows the legacy score as missing, never a crash.

Two stores: the tiny SWF fixture (seven jobs on four 2-core nodes; the core-hour figures below are computed by
hand from tests/fixtures/swf/tiny.swf) and the real HPC2N log (``shared_data``; 120 dual-CPU nodes, no GPUs,
no peak CPU), checked against an independent Polars computation from the store's Parquet."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from queries.ingest import ingest
from queries.store import Store

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TINY = Path(__file__).resolve().parents[1] / "fixtures" / "swf" / "tiny.swf"

# tiny.swf after ingest (procs_per_node=2): jobs 1 (4 cores x 100 s, 200 core-s used), 10 (3 x 10 s, all used),
# 2 (1 x 30.25 s, usage unknown), 4 (2 x 60 s, all used), 5 (2 x 50 s) and its first part 5-part1 (2 x 40 s),
# both fully used. Requested 400 + 30 + 30.25 + 120 + 100 + 80 = 760.25 core-s; used 200 + 30 + 120 + 100 + 80
# = 530 core-s of the 730 whose usage is known; all on one UTC day (the sidebar's window); 4 nodes x 2 cores.
TINY_OCCUPANCY = 760.25 / (8 * 86400)      # 0.0011
TINY_UTILISATION = 530 / 730               # 0.7260
TINY_USER1_WASTED_H = (400 - 200) / 3600   # user1's jobs 1, 5, 5-part1: only job 1 wastes


def _ingest(src, root: Path) -> Path:
    ingest([src], root, fmt="swf", procs_per_node=2)
    return root


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return _ingest(TINY, tmp_path_factory.mktemp("cpu_tiny") / "store")


@pytest.fixture(scope="module")
def hpc2n(shared_data, tmp_path_factory) -> Path:
    return _ingest(shared_data / "swf" / "HPC2N-2002-2.2-cln.swf.gz", tmp_path_factory.mktemp("cpu_hpc2n") / "store")


def app(monkeypatch, store: Path, *, researcher: str | None = None, timeout: int = 180) -> AppTest:
    """The app on ``store``: open (the operator sees everything), or ``--auth header`` with ``researcher`` in the
    trusted header (X-Forwarded-User), read through the real header path of ``dashboard.auth``."""
    from dashboard import auth

    monkeypatch.setenv("QUOTALOOP_STORE", str(store))
    monkeypatch.setenv("QUOTALOOP_AUTH", "header" if researcher else "open")
    monkeypatch.setenv("QUOTALOOP_ADMINS", "")
    monkeypatch.delenv("QUOTALOOP_CONFIG", raising=False)
    if researcher:
        monkeypatch.setattr(auth, "current", lambda cfg, demo_user=None: auth.resolve(
            cfg, {}, {cfg.auth_header: researcher}, demo_user))
    return AppTest.from_file(APP, default_timeout=timeout).run()


def page(at: AppTest, name: str) -> AppTest:
    at.switch_page(f"views/{name}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def metric(at, label: str):
    found = [m for m in at.metric if m.label == label]
    assert found, f"no metric {label!r}; have {[m.label for m in at.metric]}"
    return found[0]


def charts(at) -> dict:
    out = {}
    for el in _walk(at._tree):
        proto = getattr(el, "proto", None)
        if type(proto).__name__ == "PlotlyChart":
            out[proto.id.rsplit("-", 1)[-1]] = json.loads(proto.spec)
    return out


def _walk(node):
    kids = getattr(node, "children", None)
    if isinstance(kids, dict):
        for child in kids.values():
            yield from _walk(child)
    else:
        yield node


def _ys(fig: dict) -> list[float]:
    return [y for tr in fig["data"] for y in (tr.get("y") or []) if isinstance(y, (int, float))]


def _xs(fig: dict) -> list[float]:
    return [x for tr in fig["data"] for x in (tr.get("x") or []) if isinstance(x, (int, float))]


def teams_table(at):
    """The "who gains, who loses" table (AppTest keeps no dataframe keys: found by its columns, as
    test_scenarios_page.py does)."""
    found = [d.value for d in at.dataframe if {"node", "verdict", "received_baseline_h"} <= set(d.value.columns)]
    assert found, "no teams table"
    return found[0]


def _pct(text: str) -> float:
    return float(text.replace("%", "").strip()) / 100


# ------------------------------------------------------------------ the tiny fixture, hand-computed
def test_tiny_overview_is_in_core_hours(monkeypatch, tiny):
    at = page(app(monkeypatch, tiny), "overview")
    labels = [m.label for m in at.metric]
    assert not [x for x in labels if "GPU" in x], labels
    assert metric(at, "CPU cores").value == "8"  # 4 nodes x 2 cores
    assert _pct(metric(at, "CPU occupancy").value) == pytest.approx(TINY_OCCUPANCY, abs=0.0005) and TINY_OCCUPANCY > 0.0005
    assert _pct(metric(at, "CPU utilisation").value) == pytest.approx(TINY_UTILISATION, abs=0.0005)
    figs = charts(at)
    assert "CPU cores" in figs["ov_occ"]["layout"]["title"]["text"]
    assert max(_ys(figs["ov_occ"])) > 0            # allocated cores, not a flat zero line
    assert 8.0 in _ys(figs["ov_occ"])              # the capacity line: 4 nodes x 2 cores
    pyramid = figs["ov_pyramid"]
    assert "CPU" in pyramid["layout"]["title"]["text"] and max(_xs(pyramid)) > 0
    top = figs["ov_top"]
    assert "CPU" in top["layout"]["title"]["text"]
    bars = dict(zip(top["data"][0]["y"], top["data"][0]["x"]))
    assert bars["user1"] == pytest.approx(TINY_USER1_WASTED_H)
    # wasted per day leaves out job 2's unknown usage (neither used nor wasted): (760.25 - 30.25 - 530) / 3600
    assert sum(_ys(figs["ov_trend"])) == pytest.approx((760.25 - 30.25 - 530) / 3600)


def test_tiny_rankings_default_to_core_hours(monkeypatch, tiny):
    at = page(app(monkeypatch, tiny), "rankings")
    assert at.segmented_control(key="r_by").value == "cpu"
    top = metric(at, "Largest waster")
    assert top.value == "user1" and "core-hours" in top.delta and "GPU" not in top.delta


def test_tiny_researcher_pages_show_the_missing_legacy_score(monkeypatch, tiny):
    """No peak CPU in an SWF log: the legacy coefficient is missing, and says why, on both researcher pages."""
    at = page(app(monkeypatch, tiny, researcher="user1"), "my_jobs")
    coef = metric(at, "Quota coefficient")
    assert coef.value == "1.00 ×" and "n/a: this log has no peak CPU" in coef.help
    # user1's jobs 1, 5 and 5-part1 held 400 + 100 + 80 core-s; job 1 used half of its 400 (the cards are in
    # the score's GPU-equivalent hours; their help names the resource-hours behind them)
    assert f"core-hours wasted: {TINY_USER1_WASTED_H:.1f} of {580 / 3600:.1f} held" in metric(at, "Wasted (GPU-eq. h)").help
    assert not [m.label for m in at.metric if "GPU-hours" in m.label]
    at = page(at, "rankings")
    assert (metric(at, "Legacy coefficient").value, metric(at, "Legacy coefficient").delta) == ("–", "n/a: this log has no peak CPU")
    assert metric(at, "Your rank by wasted CPU core-hours").value == "1 of 4"


def test_tiny_fair_share_compares_in_core_hours(monkeypatch, tiny):
    at = page(app(monkeypatch, tiny), "fairshare")
    assert any("Measured in core-hours" in c.value for c in at.caption)
    at.button(key="fs_simulate").click().run()
    assert not at.exception and not at.error, [e.value for e in at.exception] + [e.value for e in at.error]
    assert not any("no GPUs" in i.value for i in at.info)
    labels = [m.label for m in at.metric]
    assert "Mean attainment" in labels and not any("GPU" in x for x in labels)
    teams = teams_table(at)
    received = dict(zip(teams["node"], teams["received_baseline_h"]))
    # the replay runs every job of the log: swf/group1 holds jobs 1, 10, 5 and 5-part1, group2 job 4; job 10's
    # 3 cores span two 2-core nodes in the replay, which allocates both nodes' cores: 4 x 10 s, not 3 x 10 s
    assert received["swf/group1"] == pytest.approx((400 + 4 * 10 + 100 + 80) / 3600, rel=1e-6)
    assert received["swf/group2"] == pytest.approx(120 / 3600, rel=1e-6)
    why = [m.value for m in at.markdown if "is funded for" in m.value]  # "Why does my team get less?"
    assert why and all("core-hours" in w and "GPU-hours" not in w for w in why)


# ------------------------------------------------------------------ the real HPC2N log
def _hpc2n_reference(store: Path) -> dict:
    """Independent of the queries: core-hours held per user from the Parquet, whole log (the default window)."""
    jobs = Store(store).read("jobs").filter(pl.col("start").is_not_null())
    held = jobs.with_columns(((pl.col("end") - pl.col("start")).dt.total_seconds() * pl.coalesce("alloc_cpus", "req_cpus")
                              / 3600.0).alias("core_h"))
    return {"core_h": held["core_h"].sum(), "cores": Store(store).read("nodes")["cpus"].sum()}


def test_hpc2n_overview_rankings_and_pyramid_in_core_hours(monkeypatch, hpc2n):
    at = page(app(monkeypatch, hpc2n), "overview")
    occ = _pct(metric(at, "CPU occupancy").value)
    util = _pct(metric(at, "CPU utilisation").value)
    assert 0.05 < occ <= 1.0 and 0.5 < util <= 1.0
    figs = charts(at)
    assert max(_ys(figs["ov_occ"])) > 0 and max(_xs(figs["ov_pyramid"])) > 0
    assert max(_xs(figs["ov_top"])) > 0 and "CPU" in figs["ov_top"]["layout"]["title"]["text"]
    at = page(at, "rankings")
    assert at.segmented_control(key="r_by").value == "cpu"
    top = metric(at, "Largest waster")
    assert "core-hours" in top.delta and float(top.delta.split()[0].replace(",", "")) > 0


def test_hpc2n_researcher_pages_render_n_a(monkeypatch, hpc2n):
    at = page(app(monkeypatch, hpc2n, researcher="user171"), "my_jobs")
    assert "n/a: this log has no peak CPU" in metric(at, "Quota coefficient").help
    at = page(at, "rankings")
    assert (metric(at, "Legacy coefficient").value, metric(at, "Legacy coefficient").delta) == ("–", "n/a: this log has no peak CPU")
    rank = metric(at, "Your rank by wasted CPU core-hours").value
    assert rank.split(" of ")[0] != "1" or float(metric(at, "Your wasted CPU core-hours").value.replace(",", "")) > 0


def test_hpc2n_fair_share_runs_a_scenario_in_core_hours(monkeypatch, hpc2n):
    at = page(app(monkeypatch, hpc2n, timeout=600), "fairshare")
    at.select_slider(key="fs_days").set_value(1)
    at.button(key="fs_simulate").click().run()
    assert not at.exception and not at.error, [e.value for e in at.exception] + [e.value for e in at.error]
    teams = teams_table(at)
    assert teams["node"].str.startswith("swf/group").any()
    assert teams["received_baseline_h"].sum() > 0
    assert teams["attainment_baseline"].notna().any()


# ------------------------------------------------------------------ a mixed cluster: the CPU partition
def test_the_cpu_partition_of_a_mixed_cluster_reads_in_core_hours(monkeypatch, sample_store):
    """The sample store's GPU cluster has a `cpu` partition (8 nodes x 128 cores): picking it in the sidebar turns
    the Overview into cores, and clearing it turns it back into GPUs."""
    at = page(app(monkeypatch, sample_store), "overview")
    assert "GPU occupancy" in [m.label for m in at.metric]
    at.selectbox(key="flt_partition").set_value("cpu").run()
    assert not at.exception and not at.error
    labels = [m.label for m in at.metric]
    assert "CPU occupancy" in labels and "GPU occupancy" not in labels
    assert metric(at, "CPU cores").value == "1,024"
    assert 0 < _pct(metric(at, "CPU occupancy").value) <= 1
    assert 8.0 * 128 in _ys(charts(at)["ov_occ"])  # the capacity line


# ------------------------------------------------------------------ a log without usage and without a node list
@pytest.fixture(scope="module")
def kth(shared_data, tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("cpu_kth") / "store"
    ingest([shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf.gz"], store, fmt="swf")  # no --procs-per-node
    return store


def test_kth_without_usage_says_the_waste_is_unknown(monkeypatch, kth):
    """KTH's SWF log has no CPU times: nobody's waste is known. The pages say so instead of ranking users by
    nothing (alphabetically) or formatting a missing number."""
    jobs = Store(kth).read("jobs")
    assert jobs["cpu_seconds_used"].null_count() == jobs.height  # the premise
    at = page(app(monkeypatch, kth), "overview")
    assert "CPU occupancy" in [m.label for m in at.metric]
    assert "this log" in json.dumps(charts(at)["ov_top"]["layout"]["annotations"])
    # unknown, not 0: no "0.0 %" busy, no "0" wasted, no day of waste drawn, no busy line at 0
    assert metric(at, "CPU utilisation").value == "–"
    assert metric(at, "Wasted core-h").value == "–" and metric(at, "Wasted core-h").help.startswith("Unknown")
    figs = charts(at)
    assert "records no usage" in json.dumps(figs["ov_trend"]["layout"]["annotations"])
    busy = [tr for tr in figs["ov_occ"]["data"] if tr["name"] == "busy (used)"][0]
    held = [tr for tr in figs["ov_occ"]["data"] if tr["name"] == "allocated"][0]["y"]
    assert any(held) and all(y is None if h else y == 0 for y, h in zip(busy["y"], held))  # busy 0 only when idle
    at = page(at, "waste")
    assert metric(at, "Used core-hours").value == "–" and metric(at, "Efficiency").value == "–"
    assert metric(at, "Wasted core-hours").value == "–"
    assert metric(at, "Requested core-hours").value not in ("–", "0")
    at = page(at, "rankings")
    top = metric(at, "Largest waster")
    assert top.value == "–" and top.delta == "n/a: this log records no usage"
    latest = jobs.sort("end", nulls_last=True).drop_nulls("end")["user"][-1]
    at = page(app(monkeypatch, kth, researcher=latest), "rankings")
    assert (metric(at, "Your rank by wasted CPU core-hours").value, metric(at, "Your rank by wasted CPU core-hours").delta) == ("–", "n/a: your usage is not recorded")
    assert (metric(at, "Legacy coefficient").value, metric(at, "Legacy coefficient").delta) == ("–", "n/a: this log has no peak CPU")
    at = page(at, "my_jobs")
    # nothing measured is not "0 wasted": no zero card, no table of zero-waste "drivers", no empty scatter
    assert metric(at, "Wasted (GPU-eq. h)").value == "–"
    assert metric(at, "Held (GPU-eq. h)").value not in ("–", "0")
    assert any("has recorded usage" in i.value for i in at.info)
    assert not [d for d in at.dataframe if "wasted_gpu_equiv_hours" in d.value.columns]
    assert "No usage recorded" in json.dumps(charts(at)["my_scatter"]["layout"]["annotations"])
    page(at, "overview")
    assert any("records no CPU usage of your jobs" in c.value for c in at.caption)


def test_a_log_without_users_names_no_user_none(monkeypatch, tmp_path):
    """A sacct --format without User (the aws-hpc-cost-simulator dumps) gives jobs of no named user: the
    rankings say so instead of printing "None", and a count of jobs reads as a count."""
    src = tmp_path / "jobs.csv"
    src.write_text("job_id,submit,start,end,req_cpus,cpu_seconds_used,state\n"
                   "1,2024-03-01T10:00:00Z,2024-03-01T10:00:00Z,2024-03-01T12:00:00Z,4,7200,COMPLETED\n"
                   "2,2024-03-01T11:00:00Z,2024-03-01T11:00:00Z,2024-03-01T12:00:00Z,2,3600,COMPLETED\n")
    store = tmp_path / "store"
    ingest([src], store, fmt="csv")
    at = page(app(monkeypatch, store), "overview")
    assert metric(at, "Jobs").value == "2"
    at = page(at, "rankings")
    top = metric(at, "Largest waster")
    # 4 x 2 h + 2 x 1 h held, 2 + 1 core-hours used: 7 core-hours wasted
    assert top.value == "(user not logged)" and top.delta == "7 CPU core-hours"
    ranked = metric(at, "Users ranked")
    assert (ranked.value, ranked.delta) == ("0", "and jobs of no named user")  # not "1": nobody is named
    table = [d.value for d in at.dataframe if "rec_coefficient" in d.value.columns][0]
    assert table["user"].to_list() == ["(user not logged)"]
    assert any("no per-user coefficient to back-test" in i.value for i in at.info)  # not "no periods with jobs"
    # the admin's My jobs page has nobody to open: it says why, not "Sign-in is not configured"
    at = page(at, "my_jobs")
    assert any("names no users" in i.value for i in at.info)
    assert not [b for b in at.selectbox if b.key == "view_user"] and not any("Sign-in" in i.value for i in at.info)


def test_gpu_usage_unknown_but_for_jobs_without_gpus(monkeypatch, tmp_path):
    """openb's shape: GPU pods without GPU usage beside CPU pods (0 GPUs: known to use 0). The GPU figures are
    unknown, not "0 used, 0 wasted"; once one GPU job records its usage, utilisation is over the known part."""
    head = "job_id,user,submit,start,end,req_cpus,req_gpus,cpu_seconds_used,mean_gpu_util,state\n"
    rows = ["1,ann,2024-03-01T10:00:00Z,2024-03-01T10:00:00Z,2024-03-01T12:00:00Z,8,4,,,COMPLETED\n",
            "2,bob,2024-03-01T11:00:00Z,2024-03-01T11:00:00Z,2024-03-01T12:00:00Z,2,0,3600,,COMPLETED\n"]
    src = tmp_path / "jobs.csv"
    src.write_text(head + "".join(rows))
    ingest([src], tmp_path / "a", fmt="csv")
    at = page(app(monkeypatch, tmp_path / "a"), "overview")
    assert metric(at, "GPU utilisation").value == "–" and metric(at, "Wasted GPU-h").value == "–"
    at = page(at, "waste")
    assert metric(at, "Used GPU-hours").value == "–" and metric(at, "Wasted GPU-hours").value == "–"
    assert metric(at, "Requested GPU-hours").value == "8"
    at = page(at, "rankings")
    at.segmented_control(key="r_by").set_value("gpu").run()
    assert metric(at, "Largest waster").value == "–" and metric(at, "Wasted GPU-hours").value == "–"

    # job 3: 2 GPUs for 1 h at 50 %: known GPU request 2 GPU-h, 1 used, 1 wasted; the 8 of job 1 stay unknown
    src.write_text(head + "".join(rows) +
                   "3,cat,2024-03-01T13:00:00Z,2024-03-01T13:00:00Z,2024-03-01T14:00:00Z,4,2,,0.5,COMPLETED\n")
    ingest([src], tmp_path / "b", fmt="csv")
    at = page(app(monkeypatch, tmp_path / "b"), "overview")
    assert _pct(metric(at, "GPU utilisation").value) == pytest.approx(0.5)  # not 1 / 10
    assert metric(at, "Wasted GPU-h").value == "1"
    at = page(at, "waste")
    assert metric(at, "Efficiency").value == "50.0 %" and metric(at, "Requested GPU-hours").value == "10"
    at = page(at, "rankings")
    at.segmented_control(key="r_by").set_value("gpu").run()
    assert metric(at, "Largest waster").value == "cat" and metric(at, "Wasted GPU-hours").value == "1"


def test_a_pod_list_without_users_or_gpu_usage(monkeypatch, tmp_path):
    """openb's pod list: no user names, GPU pods without usage beside CPU pods (0 GPUs). One unnamed "user" holds
    both, so its GPU waste is unknown (not the 0 its CPU pods add up to), and the Jobs card names no "0 users"."""
    src = tmp_path / "pods.csv"
    src.write_text("job_id,submit,start,end,req_cpus,req_gpus,state\n"
                   "1,2024-03-01T10:00:00Z,2024-03-01T10:00:00Z,2024-03-01T12:00:00Z,8,4,COMPLETED\n"
                   "2,2024-03-01T11:00:00Z,2024-03-01T11:00:00Z,2024-03-01T12:00:00Z,2,0,COMPLETED\n")
    ingest([src], tmp_path / "store", fmt="csv")
    at = page(app(monkeypatch, tmp_path / "store"), "overview")
    jobs = metric(at, "Jobs")
    assert jobs.value == "2" and jobs.delta == "users not logged" and "names no users" in jobs.help
    at = page(at, "rankings")
    at.segmented_control(key="r_by").set_value("gpu").run()
    assert metric(at, "Wasted GPU-hours").value == "–"
