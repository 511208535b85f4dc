"""Time zones at ingest (issue 13, item 13): sacct text prints local wall-clock times without a zone; the store
holds UTC. Expected instants below are hand-computed from the zones' rules:

- Europe/Amsterdam (east of UTC): CET = UTC+1, CEST = UTC+2; 2024-03-31 02:00 CET -> 03:00 CEST (at 01:00 UTC),
  2024-10-27 03:00 CEST -> 02:00 CET (at 01:00 UTC), so 02:00-03:00 is skipped in March and repeated in October.
- America/New_York (west): EST = UTC-5, EDT = UTC-4; 2024-03-10 02:00 EST -> 03:00 EDT (at 07:00 UTC),
  2024-11-03 02:00 EDT -> 01:00 EST (at 06:00 UTC), so 02:00-03:00 is skipped and 01:00-02:00 repeated.
"""
from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest

from queries import run
from queries.ingest import IngestError, ingest, sacct
from queries.ingest import timezone as TZ
from queries.store import Store

REPO = Path(__file__).resolve().parents[3]
FIX = Path(__file__).resolve().parents[2] / "fixtures"
UTC = dt.timezone.utc


def utc(*args) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def job(p, job_id: str) -> dict:
    return p.jobs.filter(pl.col("job_id") == job_id).row(0, named=True)


def run_s(j: dict) -> float:
    return (j["end"] - j["start"]).total_seconds()


# ------------------------------------------------------------------------------------------ the example
def test_a_job_across_the_march_change_keeps_slurms_elapsed(tmp_path):
    """2024-03-25 10:00 CET -> 2024-04-04 11:00:27 CEST: 10 days + 1 h + 27 s on the wall clock, but the clocks
    skipped an hour, so 864,027 s ran (Slurm's Elapsed 10-00:00:27). TotalCPU 9-21:32:08 = 855,128 s:
    efficiency 855,128 / 864,027 = 0.98970, not 855,128 / 867,627 = 0.98559."""
    f = tmp_path / "march.txt"
    f.write_text("JobID|User|Account|State|Submit|Start|End|Elapsed|AllocCPUS|ReqCPUS|TotalCPU\n"
                 "42|ann|lab|COMPLETED|2024-03-25T09:59:00|2024-03-25T10:00:00|2024-04-04T11:00:27|10-00:00:27|1|1|"
                 "9-21:32:08\n")
    right, wrong = tmp_path / "ams", tmp_path / "utc"
    [s] = ingest([f], right, timezone="Europe/Amsterdam")
    ingest([f], wrong, timezone="UTC")
    j = Store(right).read("jobs").row(0, named=True)
    assert (j["start"], j["end"]) == (utc(2024, 3, 25, 9), utc(2024, 4, 4, 9, 0, 27))
    assert run_s(j) == j["elapsed_s"] == 864_027.0
    w = Store(wrong).read("jobs").row(0, named=True)
    assert run_s(w) == 867_627.0 and w["elapsed_s"] == 864_027.0  # the bug: read as UTC; Elapsed still wins
    eff = run("job_waste", right)["cpu_efficiency"][0]
    assert eff == pytest.approx(855_128 / 864_027) and round(eff, 4) == 0.9897
    assert round(run("job_waste", wrong)["cpu_efficiency"][0], 4) == 0.9856
    assert s.time_zone == "Europe/Amsterdam" and s.line().endswith("; local times read in Europe/Amsterdam")
    log = Store(right).read("ingest_log").row(0, named=True)
    assert log["time_zone"] == "Europe/Amsterdam"


# ------------------------------------------------------------------------------------------ both changes, both sides
# One dump per zone, with the same shape of jobs around its two changes. Per job: (Submit, Start, End, Elapsed) as
# printed, and the expected UTC (submit, start, end) and elapsed_s.
SPRING = {"Europe/Amsterdam": "2024-03-31", "America/New_York": "2024-03-10"}
FALL = {"Europe/Amsterdam": "2024-10-27", "America/New_York": "2024-11-03"}
CASES = {
    "Europe/Amsterdam": [
        # across the spring change: 01:30 CET -> 03:30 CEST is one hour
        ("spring", "T01:00:00", "T01:30:00", "T03:30:00", "01:00:00",
         (utc(2024, 3, 31, 0), utc(2024, 3, 31, 0, 30), utc(2024, 3, 31, 1, 30)), 3600.0),
        # across the fall change: 01:30 CEST -> 03:30 CET is three hours
        ("fall", "T01:00:00", "T01:30:00", "T03:30:00", "03:00:00",
         (utc(2024, 10, 26, 23), utc(2024, 10, 26, 23, 30), utc(2024, 10, 27, 2, 30)), 10800.0),
        # started in the repeated hour's second pass (02:20 CET), Elapsed says so
        ("fall", "T02:10:00", "T02:20:00", "T04:00:00", "01:40:00",
         (utc(2024, 10, 27, 0, 10), utc(2024, 10, 27, 1, 20), utc(2024, 10, 27, 3)), 6000.0),
        # started 02:50 CEST (first pass), ended 02:10 CET (second pass): 20 minutes, not "end before start"
        ("fall", "T02:40:00", "T02:50:00", "T02:10:00", "00:20:00",
         (utc(2024, 10, 27, 0, 40), utc(2024, 10, 27, 0, 50), utc(2024, 10, 27, 1, 10)), 1200.0),
        # the same without Elapsed: the only readings with End >= Start; run time end - start
        ("fall", "T02:40:00", "T02:50:00", "T02:10:00", "",
         (utc(2024, 10, 27, 0, 40), utc(2024, 10, 27, 0, 50), utc(2024, 10, 27, 1, 10)), 1200.0),
        # without Elapsed, both passes fit: the earlier readings (fold=0)
        ("fall", "T02:05:00", "T02:10:00", "T02:40:00", "",
         (utc(2024, 10, 27, 0, 5), utc(2024, 10, 27, 0, 10), utc(2024, 10, 27, 0, 40)), 1800.0),
        # a submit time the clocks skipped (02:30): read with the offset before the gap (+01:00), i.e. 03:30 CEST
        ("spring", "T02:30:00", "T03:40:00", "T04:00:00", "00:20:00",
         (utc(2024, 3, 31, 1, 30), utc(2024, 3, 31, 1, 40), utc(2024, 3, 31, 2)), 1200.0),
    ],
    "America/New_York": [
        ("spring", "T01:00:00", "T01:30:00", "T03:30:00", "01:00:00",
         (utc(2024, 3, 10, 6), utc(2024, 3, 10, 6, 30), utc(2024, 3, 10, 7, 30)), 3600.0),
        # 00:30 EDT -> 02:30 EST is three hours
        ("fall", "T00:00:00", "T00:30:00", "T02:30:00", "03:00:00",
         (utc(2024, 11, 3, 4), utc(2024, 11, 3, 4, 30), utc(2024, 11, 3, 7, 30)), 10800.0),
        # started 01:20 EST (second pass) -> 03:00 EST
        ("fall", "T01:10:00", "T01:20:00", "T03:00:00", "01:40:00",
         (utc(2024, 11, 3, 5, 10), utc(2024, 11, 3, 6, 20), utc(2024, 11, 3, 8)), 6000.0),
        # 01:50 EDT -> 01:10 EST
        ("fall", "T01:40:00", "T01:50:00", "T01:10:00", "00:20:00",
         (utc(2024, 11, 3, 5, 40), utc(2024, 11, 3, 5, 50), utc(2024, 11, 3, 6, 10)), 1200.0),
        ("fall", "T01:40:00", "T01:50:00", "T01:10:00", "",
         (utc(2024, 11, 3, 5, 40), utc(2024, 11, 3, 5, 50), utc(2024, 11, 3, 6, 10)), 1200.0),
        ("fall", "T01:05:00", "T01:10:00", "T01:40:00", "",
         (utc(2024, 11, 3, 5, 5), utc(2024, 11, 3, 5, 10), utc(2024, 11, 3, 5, 40)), 1800.0),
        # 02:30 was skipped: offset before the gap (-05:00) -> 07:30 UTC (= 03:30 EDT)
        ("spring", "T02:30:00", "T03:40:00", "T04:00:00", "00:20:00",
         (utc(2024, 3, 10, 7, 30), utc(2024, 3, 10, 7, 40), utc(2024, 3, 10, 8)), 1200.0),
    ],
}


def _dump(tmp_path: Path, zone: str, elapsed_column: str = "Elapsed") -> Path:
    f = tmp_path / f"{zone.replace('/', '_')}_{elapsed_column}.txt"
    lines = [f"JobID|State|Submit|Start|End|{elapsed_column}"]
    for i, (change, sub, start, end, elapsed, _, _) in enumerate(CASES[zone], 1):
        day = (SPRING if change == "spring" else FALL)[zone]
        if elapsed_column == "ElapsedRaw" and elapsed:
            h, m, s = map(int, elapsed.split(":"))
            elapsed = str(h * 3600 + m * 60 + s)
        lines.append(f"{i}|COMPLETED|{day}{sub}|{day}{start}|{day}{end}|{elapsed}")
    f.write_text("\n".join(lines) + "\n")
    return f


@pytest.mark.parametrize("zone", sorted(CASES))
@pytest.mark.parametrize("elapsed_column", ["Elapsed", "ElapsedRaw"])
def test_both_dst_changes_east_and_west(tmp_path, zone, elapsed_column):
    p = sacct.parse(_dump(tmp_path, zone, elapsed_column), tz=zone)
    assert p.rejects.height == 0 and p.jobs.height == len(CASES[zone]) and p.time_zone == zone
    for i, (*_, (submit, start, end), elapsed_s) in enumerate(CASES[zone], 1):
        j = job(p, str(i))
        assert (j["submit"], j["start"], j["end"]) == (submit, start, end), f"job {i}"
        assert j["elapsed_s"] == elapsed_s == run_s(j), f"job {i}"


def test_sacct_epoch_times_are_not_shifted(tmp_path):
    """``SLURM_TIME_FORMAT=%s`` prints epoch seconds: absolute, whatever the zone."""
    f = tmp_path / "epoch.txt"
    f.write_text("JobID|State|Submit|Start|End|Elapsed\n1|COMPLETED|1711846800|1711846800|1711850400|01:00:00\n")
    for zone in ("UTC", "Europe/Amsterdam", "America/New_York"):
        j = job(sacct.parse(f, tz=zone), "1")
        assert (j["start"], j["end"], j["elapsed_s"]) == (utc(2024, 3, 31, 1), utc(2024, 3, 31, 2), 3600.0), zone


def test_expected_instants_agree_with_zoneinfo():
    """An independent check of the hand-computed table: Python's zoneinfo, fold=0 unless the case is one that
    Elapsed (or End >= Start) moves to the second pass."""
    second_pass_start = {(z, 3) for z in CASES}
    second_pass_end = {(z, k) for z in CASES for k in (4, 5)}
    for zone, cases in CASES.items():
        for i, (change, sub, start, end, _, expected, _) in enumerate(cases, 1):
            day = (SPRING if change == "spring" else FALL)[zone]
            folds = (0, int((zone, i) in second_pass_start), int((zone, i) in second_pass_end))
            got = tuple(dt.datetime.fromisoformat(day + t).replace(tzinfo=ZoneInfo(zone), fold=f).astimezone(UTC)
                        for t, f in zip((sub, start, end), folds))
            assert got == expected, (zone, i)


def test_fall_back_windows_are_the_repeated_hours():
    assert TZ.fall_back_windows("Europe/Amsterdam", [2024]) == [
        (int(utc(2024, 10, 27, 0).timestamp()), int(utc(2024, 10, 27, 1).timestamp()), 3600),
        (int(utc(2025, 10, 26, 0).timestamp()), int(utc(2025, 10, 26, 1).timestamp()), 3600)]  # next year's too
    assert TZ.fall_back_windows("America/New_York", [2024])[0] == (
        int(utc(2024, 11, 3, 5).timestamp()), int(utc(2024, 11, 3, 6).timestamp()), 3600)
    assert TZ.fall_back_windows("Australia/Lord_Howe", [2024])[0][2] == 1800  # half-hour DST
    assert TZ.fall_back_windows("UTC", [2024]) == [] and TZ.fall_back_windows("Asia/Tokyo", [2024]) == []


# ------------------------------------------------------------------------------------------ the zone flag
def test_unknown_zone_is_one_line_and_writes_nothing(tmp_path):
    f = _dump(tmp_path, "Europe/Amsterdam")
    with pytest.raises(IngestError) as err:
        ingest([f], tmp_path / "store", timezone="Mars/Olympus_Mons")
    assert str(err.value) == ("--timezone: unknown time zone 'Mars/Olympus_Mons'; give an IANA name such as "
                              "Europe/Amsterdam, America/New_York or UTC")
    assert not (tmp_path / "store").exists()
    env = {k: v for k, v in os.environ.items() if k != "QUOTALOOP_DEBUG"}
    r = subprocess.run([sys.executable, "-m", "dashboard.cli", "ingest", str(f), "--store", str(tmp_path / "s2"),
                        "--timezone", "CEST"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stdout == "" and not (tmp_path / "s2").exists()
    assert r.stderr == ("quotaloop ingest: --timezone: unknown time zone 'CEST'; give an IANA name such as "
                        "Europe/Amsterdam, America/New_York or UTC\n")


def test_cli_flag_converts_and_names_the_zone(tmp_path):
    f = _dump(tmp_path, "America/New_York")
    env = {k: v for k, v in os.environ.items() if k != "QUOTALOOP_DEBUG"}
    r = subprocess.run([sys.executable, "-m", "dashboard.cli", "ingest", str(f), "--store", str(tmp_path / "s"),
                        "--timezone", "America/New_York"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("7 jobs, 0 samples, 0 nodes; local times read in America/New_York")
    jobs = Store(tmp_path / "s").read("jobs").sort("job_id")
    assert jobs["start"][0] == utc(2024, 3, 10, 6, 30)


@pytest.mark.parametrize("env_tz,zone,note", [
    ("Europe/Amsterdam", "Europe/Amsterdam", TZ.DEFAULT_NOTE),
    (":America/New_York", "America/New_York", TZ.DEFAULT_NOTE),
    ("/usr/share/zoneinfo/Europe/Amsterdam", "Europe/Amsterdam", TZ.DEFAULT_NOTE),
    ("CET-1CEST,M3.5.0,M10.5.0/3", "UTC", TZ.UNKNOWN_NOTE),  # a POSIX rule names no IANA zone
    ("Nowhere/Special", "UTC", TZ.UNKNOWN_NOTE),
    ("", "UTC", TZ.DEFAULT_NOTE),  # set but empty: UTC, as the C library reads it
])
def test_machine_zone_from_tz(monkeypatch, env_tz, zone, note):
    monkeypatch.setenv("TZ", env_tz)
    assert TZ.machine_zone() == (zone, note)


def test_machine_zone_without_tz_reads_etc_localtime(monkeypatch):
    monkeypatch.delenv("TZ")
    zone, note = TZ.machine_zone()
    link = Path("/etc/localtime")
    if link.is_symlink():
        assert zone == str(link.resolve()).rsplit("zoneinfo/", 1)[1] and note == TZ.DEFAULT_NOTE
    else:
        assert zone == "UTC" or note == TZ.DEFAULT_NOTE


def test_default_is_the_machine_zone(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    [s] = ingest([_dump(tmp_path, "America/New_York")], tmp_path / "s")
    assert s.time_zone == "America/New_York" and s.line().endswith(
        "; local times read in America/New_York (this machine's zone; pass --timezone to change)")
    jobs = Store(tmp_path / "s").read("jobs").sort("job_id")
    assert jobs["start"][0] == utc(2024, 3, 10, 6, 30)
    assert Store(tmp_path / "s").read("ingest_log")["time_zone"].to_list() == ["America/New_York"]


# ------------------------------------------------------------------------------------------ formats the flag leaves
def _ingested(paths, store: Path, zone: str | None, **kw) -> pl.DataFrame:
    ingest(paths, store, timezone=zone, **kw)
    return Store(store).read("jobs").sort("cluster", "job_id")


def test_sacct_json_epochs_are_not_shifted(tmp_path):
    rec = {"job_id": 7, "user": "u", "account": "a", "partition": "p", "state": {"current": ["COMPLETED"]},
           "time": {"submission": 1711846800, "start": 1711846800, "end": 1711850400, "elapsed": 3600}}
    f = tmp_path / "jobs.json"
    f.write_text(json.dumps({"jobs": [rec], "meta": {}}))
    frames = [_ingested([f], tmp_path / z.replace("/", "_"), z)
              for z in ("UTC", "Europe/Amsterdam", "America/New_York")]
    assert frames[0]["start"][0] == utc(2024, 3, 31, 1) and frames[0]["end"][0] == utc(2024, 3, 31, 2)
    assert all(fr.equals(frames[0]) for fr in frames[1:])
    assert Store(tmp_path / "Europe_Amsterdam").read("ingest_log")["time_zone"].to_list() == [None]


def test_swf_epochs_are_not_shifted_and_the_site_zone_is_recorded(tmp_path):
    f = tmp_path / "site.swf"
    f.write_text("; UnixStartTime: 1711846800\n; TimeZone: 3600\n; TimeZoneString: Europe/Stockholm\n"
                 "; MaxProcs: 8\n"
                 "1 0 10 3600 4 -1 -1 4 7200 -1 1 1 1 1 1 -1 -1 -1\n"
                 "2 600 0 60 2 -1 -1 2 600 -1 1 2 1 1 1 -1 -1 -1\n")
    frames = [_ingested([f], tmp_path / z.replace("/", "_"), z)
              for z in ("UTC", "Europe/Amsterdam", "America/New_York")]
    # UnixStartTime 1711846800 = 2024-03-31 01:00 UTC; TimeZone (a deprecated offset) is not applied either
    assert frames[0]["submit"].to_list() == [utc(2024, 3, 31, 1), utc(2024, 3, 31, 1, 10)]
    assert frames[0]["start"][0] == utc(2024, 3, 31, 1, 0, 10) and frames[0]["end"][0] == utc(2024, 3, 31, 2, 0, 10)
    assert all(fr.equals(frames[0]) for fr in frames[1:])
    log = Store(tmp_path / "America_New_York").read("ingest_log").row(0, named=True)
    assert log["time_zone"] == "Europe/Stockholm"
    [s] = ingest([f], tmp_path / "again", timezone="UTC")
    assert s.line().endswith("; site zone Europe/Stockholm (times are absolute, stored as UTC)")


def test_openb_and_pai_relative_times_are_not_shifted(tmp_path):
    openb = FIX / "alibaba" / "openb" / "openb_pod_list_tiny.csv"
    pai = FIX / "alibaba" / "pai"
    for paths, kw in (([openb], {}), ([pai], {"fmt": "pai", "cluster": "pai"})):
        frames = [_ingested(paths, tmp_path / f"{paths[0].name}-{z.replace('/', '_')}", z, **kw)
                  for z in ("UTC", "Europe/Amsterdam", "America/New_York")]
        assert frames[0].height > 0 and frames[0]["submit"].null_count() < frames[0].height
        assert all(fr.equals(frames[0]) for fr in frames[1:])


# ------------------------------------------------------------------------------------------ real data
AWS_FIELDS = ("State,JobID,ReqCPUS,ReqMem,ReqNodes,Constraints,Submit,Eligible,Start,Elapsed,Suspended,End,"
              "ExitCode,DerivedExitCode,AllocNodes,NCPUS,MaxDiskRead,MaxDiskWrite,MaxPages,MaxRSS,MaxVMSize,"
              "CPUTime,UserCPU,SystemCPU,TotalCPU")  # the 846 lines without the later Partition column


def test_real_sacct_dump_in_two_zones_shifts_by_the_offset(shared_data, tmp_path):
    """sacct-output-v2.txt (2022-02-18 .. 2022-03-02, no DST change in either zone): read in Amsterdam and in New
    York, every start moves by exactly that zone's UTC offset at that wall-clock time (zoneinfo, computed
    independently from the raw text) and nothing else changes."""
    src = shared_data / "sacct" / "aws-hpc-cost-simulator" / "sacct-output-v2.txt"
    frames = {z: _ingested([src], tmp_path / z.replace("/", "_"), z, fields=AWS_FIELDS, cluster="aws")
              for z in ("Europe/Amsterdam", "America/New_York")}
    ams, ny = frames["Europe/Amsterdam"], frames["America/New_York"]
    assert ams.height == ny.height > 400
    assert ams.select("job_id", "elapsed_s", "state", "cpu_seconds_used").equals(
        ny.select("job_id", "elapsed_s", "state", "cpu_seconds_used"))
    raw = {}  # job id -> Start as printed, from the allocation rows
    for line in src.read_text().splitlines():
        f = line.split("|")
        if len(f) >= 12 and "." not in f[1] and f[8] not in ("Unknown", "None", ""):
            raw[f[1]] = dt.datetime.fromisoformat(f[8])
    checked = 0
    for a, n in zip(ams.iter_rows(named=True), ny.iter_rows(named=True)):
        if a["start"] is None:
            assert n["start"] is None
            continue
        local = raw[a["job_id"]]
        off = {z: local.replace(tzinfo=ZoneInfo(z)).utcoffset() for z in frames}
        assert a["start"] == local.replace(tzinfo=UTC) - off["Europe/Amsterdam"]
        assert n["start"] - a["start"] == off["Europe/Amsterdam"] - off["America/New_York"] == dt.timedelta(hours=6)
        assert (n["end"] - n["start"]) == (a["end"] - a["start"])
        if a["end"] is not None:  # no DST change inside: end - start is Slurm's Elapsed in either zone
            assert (a["end"] - a["start"]).total_seconds() == a["elapsed_s"]
        checked += 1
    assert checked > 400


def test_real_swf_header_is_utc_epoch_with_a_site_zone(shared_data):
    """Every PWA log's UnixStartTime, shown in its TimeZoneString, is the StartTime the header prints (so the
    epoch is UTC and the zone only names the site): e.g. HPC2N 1027839845 = Sun Jul 28 09:04:05 CEST 2002."""
    seen = 0
    for path in sorted((shared_data / "swf").glob("*.swf.gz")):
        header = {}
        with gzip.open(path, "rt", errors="replace") as fh:
            for line in fh:
                if not line.startswith(";"):
                    break
                key, _, value = line[1:].partition(":")
                header.setdefault(key.strip(), value.strip())
        if not {"UnixStartTime", "TimeZoneString", "StartTime"} <= set(header):
            continue
        local = dt.datetime.fromtimestamp(int(header["UnixStartTime"]), ZoneInfo(header["TimeZoneString"]))
        printed = header["StartTime"].split()
        assert local.strftime("%a %b %d %H:%M:%S") == " ".join(printed[:4]), path.name
        assert local.year == int(printed[-1]), path.name
        seen += 1
    assert seen >= 5


def test_sample_store_reads_its_utc_export_as_utc_on_any_machine(tmp_path, monkeypatch):
    """The generator prints UTC wall-clock times into its sacct text: the machine's zone must not shift them."""
    from queries import samplegen

    monkeypatch.setenv("TZ", "America/New_York")
    paths, summaries = samplegen.build_store(tmp_path / "store", export_dir=tmp_path / "export", seed=3, days=2,
                                             nodes=8)
    assert summaries[0].format == "sacct" and summaries[0].time_zone == "UTC"
    header, first = Path(paths["sacct"]).read_text().splitlines()[:2]
    row = dict(zip(header.split("|"), first.split("|")))
    stored = Store(tmp_path / "store").read("jobs").filter(pl.col("job_id") == row["JobID"]).row(0, named=True)
    assert stored["submit"] == dt.datetime.fromisoformat(row["Submit"]).replace(tzinfo=UTC)
