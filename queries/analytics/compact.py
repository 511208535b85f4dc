"""Retention (``quotaloop compact``): raw samples older than a cut-off become hourly samples with the same figures.

What a compaction does, per cluster: the cut-off is the UTC midnight at or before (the cluster's snapshot - keep).
Every sample that ends before it (and, for a job still RUNNING, before the whole hour its run last reached, since
its run grows) is replaced, per job and UTC hour its clipped interval lies in, by one **coarse sample**:

* placed inside the job's run interval (as ``job_rollup`` records it) and inside the hour, at the first raw
  sample's clipped start, holding for the seconds the raw samples covered (their summed clipped overlaps);
* holding per resource the mean of the raw values **capped at the job's level** (CPUs, ``min(gpu_util, 1)``,
  GB), weighted by overlap. The mean of capped values is at most the level, so the queries' own cap leaves it
  alone and its integral is the raw capped integral.

So every figure the queries integrate (the capped CPU / GPU / memory integrals, the sampled seconds) is the same
for any window, bucket or period whose bounds are whole UTC hours (the dashboard's days and weeks, ``gap_area``
buckets and ``quota_backtest`` periods of whole hours from an origin on the hour). Per job a zero-length sample
at its first compacted sample's time keeps the sampled peaks of the samples it replaced, and per partition one
more, without values, at its last sample's time when that was replaced, so ``window_bounds``' first and last
sample times hold: a zero-length sample adds nothing
to an integral but counts as "sampled" wherever the raw ones did. All compaction rows have ``source = 'compact'``
and are never compacted again.

Kept as they are (exactness over size): samples without a time or an interval (no query reads them), samples of a
job without a ``job_rollup`` row or a run interval, samples whose clipped interval crosses an hour boundary or the
cut-off, a job-hour of one sample, and a job-hour whose samples overlap (their covered seconds would not fit the
hour). What changes: the number of stored samples (``window_bounds.samples``, ``job_rollup.n_*`` — the queries
use these counts only as "has samples"), windows that cut an hour, and a later change of a compacted job's run
interval or levels (a re-ingest that moves its start or its allocation: the coarse values were capped at the old
levels). A re-ingested samples file replaces the coarse samples inside its time span like any earlier samples.

Memory: a partition is coarsened in chunks of whole jobs (``CHUNK_SAMPLES`` samples), each written to a file of
its own, and the rollup of the changed jobs is refreshed ``rollup.CHUNK_JOBS`` jobs at a time, so a compaction
holds one chunk, not a partition or the store's changed jobs.

Invariants: one store transaction (the rewritten sample partitions and the refreshed rollup of every job whose
samples changed commit together, or nothing does); ``read = kept + replaced`` and ``written = kept + coarse +
peaks`` are counted; compacting twice changes nothing the second time.
"""
from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass

import polars as pl

from ..store import Store, StoreError
from ..store import schema
from . import rollup

HOUR_S = 3600.0
DAY_S = 86400.0
SOURCE = "compact"
KEYS = ["cluster", "job_id"]
_EPS_S = 1e-6  # float slack when checking that a coarse sample fits its hour
# samples coarsened at a time: a partition is read and rewritten in chunks of whole jobs of about this many
# samples, so memory is bounded by the chunk, not the partition (a job's samples are never split: its hours are)
CHUNK_SAMPLES = 250_000


class CompactError(ValueError):
    """A compaction that cannot proceed (bad argument, store without a rollup): one line for the user."""


@dataclass
class Compaction:
    read: int = 0          # samples in the partitions looked at
    kept: int = 0          # of those, left as they were
    replaced: int = 0      # raw samples dropped (their figures live on in coarse and peak samples)
    coarse: int = 0        # hourly samples written
    peaks: int = 0         # zero-length peak / last-time samples written
    jobs: int = 0          # jobs whose samples changed (their rollup rows refreshed)
    partitions: int = 0    # sample partitions rewritten

    def summary(self) -> str:
        return (f"read {self.read} samples = kept {self.kept} + replaced {self.replaced}; wrote {self.coarse} "
                f"hourly + {self.peaks} peak samples for {self.jobs} jobs in {self.partitions} partitions")


def parse_keep(text: str) -> float:
    """``90d`` / ``36h`` -> seconds; ``CompactError`` for anything else (no zero, no negative)."""
    m = re.fullmatch(r"\s*(\d+)\s*([dh])\s*", str(text))
    if not m or int(m.group(1)) == 0:
        raise CompactError(f"--keep-samples {text!r}: expected a positive whole number of days or hours, e.g. 90d or 36h")
    return int(m.group(1)) * (DAY_S if m.group(2) == "d" else HOUR_S)


def _epoch_s(col: str) -> pl.Expr:
    return pl.col(col).dt.epoch("us").cast(pl.Float64) / 1e6


def _cutoffs(tx, keep_s: float) -> dict[str, float]:
    """Cluster -> cut-off (epoch seconds, a UTC midnight): the cluster's snapshot (else its last sample) - keep."""
    last: dict[str, float] = {c: dt.datetime.fromisoformat(t).timestamp() for c, t in tx.snapshots.items()}
    files = [str(tx.store.root / r) for r in tx.tables.get("samples", [])]
    if files:
        ends = (pl.scan_parquet(files).select("cluster", "ts").group_by("cluster")
                .agg(_epoch_s("ts").max().alias("t")).collect())
        for cluster, t in ends.iter_rows():
            if cluster not in last and t is not None:
                last[cluster] = t
    return {c: (t - keep_s) // DAY_S * DAY_S for c, t in last.items()}


def _runs(tx) -> pl.DataFrame:
    """Per job with a rollup row: its run interval and levels as the rollup derived them, and whether the run
    may still grow (RUNNING without an end)."""
    rows = [str(tx.store.root / r) for r in tx.tables.get(rollup.TABLE, [])]
    jobs = [str(tx.store.root / r) for r in tx.tables.get("jobs", [])]
    if not rows or not jobs:
        raise CompactError(f"store {tx.store.root}: no usage rollup; run `quotaloop rollup --store "
                           f"{tx.store.root} --rebuild` first (compaction keeps every figure in it)")
    open_ = (pl.scan_parquet(jobs).select(*KEYS, pl.col("end").is_null().alias("growing")))
    # an open run's row may record no run end (its samples all end by it, ``rollup.derive``): clipping them at
    # their own end is clipping them at the run's, and its last whole hour is then at or before the run's
    t_end = (pl.when(pl.col("t_end").is_null() & pl.col("t_start").is_not_null())
             .then(pl.max_horizontal("samples_end_s", "t_start")).otherwise(pl.col("t_end")).alias("t_end"))
    wanted = [*KEYS, "t_start", "t_end", "samples_end_s", "cpus", "mem_gb"]
    runs = pl.concat([rollup.scan_columns(pl.scan_parquet(f), f, wanted) for f in rows])
    return (runs.with_columns(t_end).select(*KEYS, "t_start", "t_end", "cpus", "mem_gb")
            .join(open_, on=KEYS, how="left").collect())


def coarsen(samples: pl.DataFrame, runs: pl.DataFrame, cutoff_s: float,
            mark_last: bool = True) -> tuple[pl.DataFrame, int, int, pl.Series]:
    """``(samples after compaction, raw samples replaced, hourly samples written, which input rows were replaced)`` for one cluster's ``samples`` and its jobs' ``runs``
    (``_runs``), compacting what ends before ``cutoff_s``. Pure: the module docstring states the rules.
    ``mark_last``: add the partition's last-time sample (False: ``samples`` is one chunk of a partition, the
    caller adds it once, ``_last_marker``)."""
    cols = list(samples.columns)
    s = (samples.with_row_index("__i")
         .with_columns(pl.col("job_id").cast(pl.String), pl.col("cluster").cast(pl.String))
         .join(runs, on=KEYS, how="left")
         .with_columns(_epoch_s("ts").alias("__t0"))
         .with_columns(
             # a RUNNING job's run grows: only whole hours before the last one it reached are final
             pl.when(pl.col("growing").fill_null(True))
             .then(pl.min_horizontal(pl.lit(cutoff_s), (pl.col("t_end") // HOUR_S) * HOUR_S))
             .otherwise(pl.lit(cutoff_s)).alias("__limit"),
             pl.max_horizontal(pl.col("__t0"), pl.col("t_start")).alias("__c0"),
             pl.min_horizontal(pl.col("__t0") + pl.col("interval_s"), pl.col("t_end")).alias("__c1"))
         .with_columns((pl.col("__c1") - pl.col("__c0")).clip(lower_bound=0).alias("__ov"),
                       ((pl.col("__c0") // HOUR_S) * HOUR_S).alias("__h")))
    candidate = (pl.col("__t0").is_not_null() & pl.col("interval_s").is_not_null()
                 & pl.col("t_start").is_not_null() & pl.col("t_end").is_not_null()
                 & (pl.col("source").fill_null("") != SOURCE)
                 & (pl.col("__t0") + pl.col("interval_s").clip(lower_bound=0) <= pl.col("__limit")))
    s = s.with_columns(
        pl.when(~candidate).then(pl.lit("keep"))
        .when(pl.col("__ov") <= 0).then(pl.lit("zero"))        # outside the run: only its values' peaks count
        .when(pl.col("__c1") > pl.col("__h") + HOUR_S).then(pl.lit("keep"))  # crosses an hour
        .otherwise(pl.lit("group")).alias("__kind"))

    cap_cpu = (pl.when(pl.col("cpus").is_null()).then(pl.col("cpu_used"))
               .when(pl.col("cpu_used") > pl.col("cpus")).then(pl.col("cpus")).otherwise(pl.col("cpu_used")))
    cap_gpu = pl.when(pl.col("gpu_util") > 1.0).then(1.0).otherwise(pl.col("gpu_util"))
    mem_gb = pl.col("mem_bytes") / 1e9
    cap_mem = (pl.when(pl.col("mem_gb").is_null()).then(mem_gb)
               .when(mem_gb > pl.col("mem_gb")).then(pl.col("mem_gb")).otherwise(mem_gb))
    group_keys = [*KEYS, "__h"]
    groups = (s.filter(pl.col("__kind") == "group").group_by(group_keys).agg(
        pl.len().alias("__n"),
        pl.col("__ov").sum().alias("__d"),
        pl.col("__c0").min().alias("__a"),
        pl.col("__t0").max().alias("__tmax"),
        (pl.col("__h").first() + HOUR_S).alias("__hend"),
        pl.col("t_end").first().alias("__tend"),
        (cap_cpu * pl.col("__ov")).sum().alias("__icpu"), pl.col("cpu_used").count().alias("__ncpu"),
        (cap_gpu * pl.col("__ov")).sum().alias("__igpu"), pl.col("gpu_util").count().alias("__ngpu"),
        (cap_mem * pl.col("__ov")).sum().alias("__imem"), pl.col("mem_bytes").count().alias("__nmem"),
        (pl.col("gpu_mem_bytes") * pl.col("__ov")).sum().alias("__igmem"),
        pl.col("gpu_mem_bytes").count().alias("__ngmem"),
    ).with_columns(
        # the coarse sample must lie inside the hour and the run, and inside the raw samples' time span (a
        # re-ingest of their file replaces what lies in its span); one sample gains nothing
        ((pl.col("__n") >= 2) & (pl.col("__a") <= pl.col("__tmax"))
         & (pl.col("__a") + pl.col("__d") <= pl.min_horizontal("__hend", "__tend") + _EPS_S)).alias("__ok")))
    s = (s.join(groups.select(*group_keys, "__ok"), on=group_keys, how="left")
         .with_columns(pl.when(pl.col("__kind") == "zero").then(True)
                       .when(pl.col("__kind") == "group").then(pl.col("__ok"))
                       .otherwise(False).alias("__drop")))

    def mean(total: str, n: str) -> pl.Expr:
        return pl.when(pl.col(n) > 0).then(pl.col(total) / pl.col("__d"))

    ts_of = (pl.col("__a") * 1e6).round().cast(pl.Int64).cast(pl.Datetime("us", "UTC"))
    coarse = groups.filter("__ok").select(
        *KEYS, ts_of.alias("ts"), pl.col("__d").alias("interval_s"),
        mean("__icpu", "__ncpu").alias("cpu_used"), (mean("__imem", "__nmem") * 1e9).alias("mem_bytes"),
        mean("__igpu", "__ngpu").alias("gpu_util"), mean("__igmem", "__ngmem").alias("gpu_mem_bytes"),
        pl.lit(SOURCE).alias("source"))
    dropped = s.filter("__drop")
    firsts = dropped.group_by(KEYS).agg(
        pl.col("ts").min(), pl.col("ts").max().alias("__last"),
        pl.col("cpu_used").max(), pl.col("mem_bytes").max(), pl.col("gpu_util").max(), pl.col("gpu_mem_bytes").max())
    peaks = firsts.select(*KEYS, "ts", pl.lit(0.0).alias("interval_s"), "cpu_used", "mem_bytes", "gpu_util",
                          "gpu_mem_bytes", pl.lit(SOURCE).alias("source"))
    kept = s.filter(~pl.col("__drop")).sort("__i").select(cols)
    out = pl.concat([schema.conform(kept, "samples"), schema.conform(coarse, "samples"),
                     schema.conform(peaks, "samples")])
    # the partition's last sample time (``window_bounds``): one value-less zero-length sample when it was replaced
    if mark_last:
        marker = _last_marker(dropped, out["ts"].max())
        if marker is not None:
            out = pl.concat([out, marker])
    dropped_mask = s.sort("__i")["__drop"]
    return out, dropped.height, coarse.height, dropped_mask


def _last_marker(dropped: pl.DataFrame, kept_last) -> pl.DataFrame | None:
    """The value-less zero-length sample at the latest time of the ``dropped`` samples when no sample left
    (latest ``kept_last``) reaches it: ``window_bounds``' last sample time holds."""
    if not dropped.height:
        return None
    last = dropped.sort("ts", descending=True, nulls_last=True).head(1)
    if last["ts"][0] is None or (kept_last is not None and last["ts"][0] <= kept_last):
        return None
    return schema.conform(last.select(*KEYS, "ts", pl.lit(0.0).alias("interval_s"), pl.lit(SOURCE).alias("source")),
                          "samples")


def _chunks(files: list, size: int):
    """The (cluster, job_id) of the samples in ``files`` cut into runs of whole jobs, in key order, of about
    ``size`` samples each (one job more than ``size`` is a chunk of its own). Only the key columns are read."""
    counts = (pl.concat([pl.scan_parquet(f).select(pl.col("cluster").cast(pl.String), pl.col("job_id").cast(pl.String))
                         .collect() for f in files])
              .group_by(KEYS).len().sort(KEYS))
    chunk = (counts["len"].cum_sum() - counts["len"]) // size
    for _, part in counts.with_columns(chunk.alias("__chunk")).group_by("__chunk", maintain_order=True):
        yield part.select(KEYS)


def _chunk_rows(files: list, keys: pl.DataFrame) -> pl.DataFrame:
    """The samples of ``files`` whose job is in ``keys``, conformed; file by file, so only the chunk's rows (and
    one file's decoded columns) are held."""
    lo, hi = keys["job_id"].min(), keys["job_id"].max()
    parts = [schema.conform(pl.scan_parquet(f).filter(pl.col("job_id").cast(pl.String).is_between(pl.lit(lo), pl.lit(hi)))
                            .collect(), "samples")
             .join(keys, on=KEYS, how="semi") for f in files]
    return pl.concat(parts)


def _partition_month_start(rel: str) -> float | None:
    m = re.search(r"/month=(\d{4})-(\d{2})/", rel)
    if not m:
        return None
    return dt.datetime(int(m.group(1)), int(m.group(2)), 1, tzinfo=dt.timezone.utc).timestamp()


def compact(store: str | os.PathLike, keep_s: float) -> Compaction:
    """Compact ``store``'s samples older than ``keep_s`` before each cluster's snapshot, in one transaction."""
    if not keep_s > 0:
        raise CompactError("--keep-samples must be positive")
    result = Compaction()
    st = Store(store)
    if not st.exists():
        raise StoreError(f"store {st.root}: not a store (no _manifest.json)")
    st.check()
    with st.transaction() as tx:
        runs = _runs(tx)
        cutoffs = _cutoffs(tx, keep_s)
        by_dir: dict[str, list[str]] = {}
        for rel in tx.tables.get("samples", []):
            by_dir.setdefault(rel.rsplit("/", 1)[0], []).append(rel)
        changed = []
        for rel_dir, rels in sorted(by_dir.items()):
            cluster_dir = re.search(r"cluster=([^/]*)", rel_dir)
            month_s = _partition_month_start(rel_dir + "/")
            files = [tx.store.root / r for r in rels]
            clusters = (pl.concat([pl.scan_parquet(f).select(pl.col("cluster").cast(pl.String)).unique().collect()
                                   for f in files])["cluster"].unique().to_list())
            cutoff = min((cutoffs.get(c, float("-inf")) for c in clusters), default=float("-inf"))
            if cluster_dir is None or month_s is None or month_s >= cutoff:
                continue  # nothing in this partition can be old enough
            # chunk by chunk of whole jobs (``CHUNK_SAMPLES``): each is coarsened alone (the rules are per job
            # and hour) and written to a file of its own; the partition's files are swapped once all are written
            n_read = n_replaced = n_coarse = n_out = 0
            written, touched, dropped_last, kept_last = [], [], [], None
            for keys in _chunks(files, CHUNK_SAMPLES):
                part = _chunk_rows(files, keys)
                out, replaced, coarse, dropped_mask = coarsen(
                    part, runs.join(keys, on=KEYS, how="semi"), cutoff, mark_last=False)
                n_read, n_replaced, n_coarse = n_read + part.height, n_replaced + replaced, n_coarse + coarse
                dropped = part.filter(dropped_mask)
                touched.append(dropped.select(KEYS).unique())
                dropped_last.append(dropped.sort("ts", descending=True, nulls_last=True).head(1))
                last = out["ts"].max()
                kept_last = last if kept_last is None or (last is not None and last > kept_last) else kept_last
                n_out += out.height
                written.append(tx.write_file("samples", rel_dir, out))
            if not n_replaced:
                tx.unwrite(written)
                continue
            marker = _last_marker(pl.concat(dropped_last), kept_last)
            if marker is not None:
                written.append(tx.write_file("samples", rel_dir, marker))
                n_out += marker.height
            result.read += n_read
            result.replaced += n_replaced
            result.kept += n_read - n_replaced
            result.coarse += n_coarse
            result.peaks += n_out - (n_read - n_replaced) - n_coarse
            # the jobs whose samples changed: their rollup rows are re-derived from what is left
            touched = pl.concat(touched).unique()
            changed.append(touched)
            tx.swap_partition("samples", rel_dir, written, touched)
            result.partitions += 1
        if changed:
            result.jobs = pl.concat(changed).unique().height
        rollup.refresh(tx, chunk_jobs=rollup.CHUNK_JOBS)
    return result
