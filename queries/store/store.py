"""The job-log store: partitioned Parquet tables, committed atomically through a manifest.

Layout::

    STORE/_manifest.json                       the only source of truth for which files are live
    STORE/jobs/cluster=C/month=YYYY-MM/part-<uuid>.parquet
    STORE/samples/cluster=C/month=YYYY-MM/part-<uuid>.parquet
    STORE/nodes/cluster=C/part-<uuid>.parquet
    STORE/rejects/cluster=C/part-<uuid>.parquet
    STORE/ingest_log/part-<uuid>.parquet
    STORE/job_rollup/cluster=C/month=YYYY-MM/part-<uuid>.parquet       derived (``DERIVED``), by submit month
    STORE/job_day_rollup/cluster=C/month=YYYY-MM/part-<uuid>.parquet

Invariants:
- A writer only ever adds new files; files a commit replaces are deleted one commit later (readers of the
  previous manifest never see a file vanish); the manifest is replaced with ``os.replace`` (atomic on POSIX)
  after every new file is fsynced. A crash before that leaves the old manifest, hence the old store,
  untouched; stray files not named in the manifest are ignored by readers and removed by the next commit.
- ``(cluster, job_id)`` is unique in ``jobs`` (and ``job_rollup``): an upsert rewrites the files of the partitions
  it touches that hold one of its keys, and writes new keys into a new file beside them, together with the
  partition's small files of a full size tier (``MERGE_FANIN``): the number of files of a partition stays
  bounded however many daily ingests it sees, and merged rows are the same rows (not touched).
- Every file of a table keyed by job carries in its footer the range of its job ids (and a ``jobs`` file its
  RUNNING jobs), and the hashes of its job ids beside it (``part-<uuid>.parquet.keys``): ``keyindex``, written
  with the file, retired and collected with it. Writers read only the files that may hold the jobs they
  look for; a file without a usable summary may hold any (``rollup --rebuild`` writes the missing ones).
- A transaction that upserts jobs or samples into a store holding derived tables commits only after they were
  refreshed (``derived_fresh``; ``queries.analytics.rollup.refresh`` does it, in the same transaction).
- One writer at a time (``flock`` on ``STORE/.lock``); readers never lock.
- The manifest's ``snapshots`` maps each cluster to the last instant its ingested logs know (the latest submit,
  start, end, start + elapsed or sample time of any file ingested for it: for a ``sacct`` export, its export
  time). A job still RUNNING in the log ran until then, never later (``Store.snapshots``; SQL sees it as the
  ``store_snapshot`` relation).
- The manifest's ``layouts`` maps a derived table to the layout all its live files were written in (set by the
  writer that knows it, ``queries.analytics.cells``), so that a writer need not open every file to find out; a
  store without the entry (older, or written by an older version, which drops it) is looked at file by file.
- What cannot be opened is a ``StoreError`` (one line naming the path): a missing store or one that is not a
  directory, a manifest that does not parse or names a path outside the store, a live file that is missing or
  not Parquet (``check`` looks at every live file's magic bytes, so a truncated partition is found before a
  query or a writer reads it), a store the process may not write. A failed check changes nothing.

A directory without a manifest is read as a *flat* store (``DIR/jobs.parquet`` or ``DIR/jobs/**.parquet``),
which is what ``quotaloop simulate --out DIR`` writes, so every query runs on simulated history too.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import polars as pl

from . import keyindex, schema

MANIFEST = "_manifest.json"
PARTITIONED = {"jobs": "submit", "samples": "ts", "job_rollup": "submit", "job_day_rollup": "submit",
               "usage_cube": "submit"}  # table -> timestamp column giving the month
KEYED_BY_JOB = ("jobs", "job_rollup")  # one row per (cluster, job_id): an upsert replaces the job's row wherever it is
GROUPED_BY_JOB = ("job_day_rollup",)  # several rows per (cluster, job_id): an upsert replaces all of the job's rows
DERIVED = ("job_rollup", "job_day_rollup", "usage_cube")  # derived from jobs and samples (``queries.analytics.rollup``), never ingested
WRITERS = 2  # partition files written at a time
# Small files are merged by size tier (as an LSM tree does): a daily ingest adds one small file per partition
# it touches, and a file's tier is how many times MERGE_FANIN its size is of MERGE_BASE_BYTES. When a tier of a
# partition holds MERGE_FANIN - 1 files, the next upsert there writes them into its new file, so a partition
# holds at most MERGE_FANIN - 1 files a tier below MERGE_MAX_BYTES and a row is rewritten about once a tier
# (log of the partition's size), never the whole partition; files of MERGE_MAX_BYTES and more are left alone.
MERGE_FANIN = 4
MERGE_BASE_BYTES = 64 << 10
MERGE_MAX_BYTES = 64 << 20


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# zstd level 1: about 30 % less CPU than the default level 3 for files about 8 % larger (the 1M-line sacct
# benchmark's jobs); min/max statistics stay on, DuckDB prunes row groups with them
ZSTD_LEVEL = 1
# DuckDB's own row group size. A file is sorted by job id, and a scheduler numbers jobs in submit order, so a row
# group spans a few days of submits: a window's scan skips the others by their start / end statistics (one group
# per month file, as written until 2026-12-07, read every job of the month for a window that cut it)
ROW_GROUP_ROWS = 122_880


def _write_parquet(df: pl.DataFrame, path: Path, table: str | None = None) -> None:
    """Write ``df`` durably; a file of a table keyed by job carries its job summary in its footer and its key
    hashes beside it (``keyindex``), so they are written, and committed, with the rows they describe."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".parquet.tmp")
    df.write_parquet(tmp, compression="zstd", compression_level=ZSTD_LEVEL, statistics=True,
                     row_group_size=ROW_GROUP_ROWS, metadata=keyindex.footer(df, table, path) if table else None)
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class StoreError(ValueError):
    """A store that cannot be opened, read or written; ``str`` is one line naming the store or the file."""


def _check_parquet(path: Path) -> None:
    """``StoreError`` unless ``path`` is readable and starts and ends with Parquet's magic ``PAR1`` (a truncated
    file loses its footer)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(size - 4, 0))
            tail = fh.read(4)
    except FileNotFoundError:
        raise StoreError(f"{path}: listed in the store's {MANIFEST} but missing") from None
    except OSError as exc:
        raise StoreError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if size < 12 or head != b"PAR1" or tail != b"PAR1":
        raise StoreError(f"{path}: not a Parquet file (truncated or corrupt; {size} bytes)")


def _read_parquet(path, **kwargs) -> pl.DataFrame:
    """``pl.read_parquet`` whose failures are one-line ``StoreError``s naming the file."""
    try:
        return pl.read_parquet(path, **kwargs)
    except (OSError, pl.exceptions.PolarsError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StoreError(f"{path}: cannot read Parquet file: {first}") from None


def _month_number(table: str) -> pl.Expr:
    """``YYYYMM`` of the table's partition timestamp as an integer (null when the timestamp is)."""
    ts = pl.col(PARTITIONED[table])
    return ts.dt.year().cast(pl.Int32) * 100 + ts.dt.month().cast(pl.Int32)


def _month_name(month: int | None) -> str:
    return "unknown" if month is None else f"{month // 100:04d}-{month % 100:02d}"


MAX_NAME_BYTES = 200  # a cluster name becomes the directory ``cluster=NAME``: 255 bytes at most on every file system


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a cluster name (it becomes a partition directory), or None when it can.
    Scalar twin of ``name_problem_expr``; callers reject the row (or refuse the flag) before any path is built."""
    if not name.strip():
        return "empty cluster name"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        return "control character in cluster name"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"cluster name longer than {MAX_NAME_BYTES} bytes"
    return None


def name_problem_expr(name: pl.Expr) -> pl.Expr:
    """``name_problem`` over a String column (null stays null: a missing cluster is filled in later)."""
    return (pl.when(name.str.strip_chars() == "").then(pl.lit("empty cluster name"))
            .when(name.str.contains(r"[\x00-\x1f\x7f]")).then(pl.lit("control character in cluster name"))
            .when(name.str.len_bytes() > MAX_NAME_BYTES).then(pl.lit(f"cluster name longer than {MAX_NAME_BYTES} bytes")))


def _probe(keys: pl.DataFrame, key: str) -> keyindex.Probe | None:
    """The footer probe of ``keys`` (``keyindex``: job ids only), hashed once for all the files looked at."""
    return keyindex.Probe(keys.get_column(key)) if key == "job_id" else None


def _partition_dir(table: str, cluster: str, month: str | None) -> str:
    if name_problem(cluster):  # the parsers reject such rows; never let one reach the file system
        raise ValueError(f"invalid cluster name {cluster!r}: {name_problem(cluster)}")
    safe = cluster.replace("/", "_").replace("..", "_") or "_"
    parts = [table, f"cluster={safe}"]
    if month is not None:
        parts.append(f"month={month}")
    return "/".join(parts)


class Store:
    """A store directory. Read files with ``files(table)``; write with ``transaction()``."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    # ---------------------------------------------------------------- reading
    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    def exists(self) -> bool:
        return self.manifest_path.exists() or (self.root / "jobs.parquet").exists() or (self.root / "jobs").is_dir()

    def manifest(self) -> dict:
        """The parsed manifest (an empty one when there is none); ``StoreError`` when it cannot be trusted."""
        path = self.manifest_path
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"version": 0, "tables": {}}
        except NotADirectoryError:
            raise StoreError(f"store {self.root}: not a directory") from None
        except OSError as exc:
            raise StoreError(f"{path}: cannot read: {exc.strerror or exc}") from None
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
            raise StoreError(f"{path}: corrupt manifest: {str(exc).splitlines()[0]}") from None
        tables = data.get("tables") if isinstance(data, dict) else None
        if not isinstance(tables, dict) or not isinstance(data.get("version", 0), int):
            raise StoreError(f"{path}: corrupt manifest: expected an object with a version and tables")
        for table, files in tables.items():
            if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
                raise StoreError(f"{path}: corrupt manifest: tables.{table} is not a list of file names")
            for rel in files:  # a manifest never points outside its store
                if rel.startswith("/") or ".." in rel.split("/") or "\0" in rel:
                    raise StoreError(f"{path}: corrupt manifest: tables.{table} names {rel!r}, outside the store")
        snapshots = data.get("snapshots", {})
        if not isinstance(snapshots, dict):
            raise StoreError(f"{path}: corrupt manifest: snapshots is not an object")
        for cluster, when in snapshots.items():
            try:
                dt.datetime.fromisoformat(when)
            except (TypeError, ValueError):
                raise StoreError(f"{path}: corrupt manifest: snapshots.{cluster} = {when!r} is not an ISO time") from None
        return data

    def check(self) -> "Store":
        """This store, or ``StoreError`` unless it can be read: an existing directory holding a manifest or a
        flat store, the manifest sound and every live file present and Parquet (magic bytes only: cheap)."""
        if not self.root.exists():
            raise StoreError(f"store {self.root}: no such directory")
        if not self.root.is_dir():
            raise StoreError(f"store {self.root}: not a directory")
        if not self.exists():
            raise StoreError(f"store {self.root}: not a store (no {MANIFEST}, jobs.parquet or jobs/); "
                             "create one with `quotaloop ingest` or `quotaloop sample`")
        self._check_files()
        return self

    def check_writable(self) -> "Store":
        """This store, or ``StoreError`` unless a writer may commit to it: absent (it is created) or a directory
        the process may write, with a sound manifest and live files (an upsert reads the partitions it merges)."""
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"store {self.root}: not a directory")
        if self.root.is_dir():
            self._check_files()
            if not os.access(self.root, os.W_OK):
                raise StoreError(f"store {self.root}: not writable (permission denied)")
        return self

    def _check_files(self) -> None:
        for table in schema.TABLES:
            for f in self.files(table):
                _check_parquet(Path(f))

    def snapshots(self) -> dict[str, dt.datetime]:
        """Cluster -> the last instant its ingested logs know (UTC); empty for a flat store or an older manifest."""
        raw = self.manifest().get("snapshots", {}) if self.manifest_path.exists() else {}
        return {c: dt.datetime.fromisoformat(t) for c, t in sorted(raw.items())}

    def files(self, table: str) -> list[str]:
        """Absolute paths of the live Parquet files of ``table`` (possibly empty)."""
        if self.manifest_path.exists():
            return [str(self.root / rel) for rel in self.manifest()["tables"].get(table, [])]
        flat = self.root / f"{table}.parquet"
        if flat.exists():
            return [str(flat)]
        return sorted(str(p) for p in (self.root / table).glob("**/*.parquet")) if (self.root / table).is_dir() else []

    def read(self, table: str) -> pl.DataFrame:
        files = self.files(table)
        if not files:
            return schema.empty(table)
        return schema.conform(pl.concat([_read_parquet(f) for f in files], how="diagonal_relaxed"), table)

    # ---------------------------------------------------------------- writing
    @contextlib.contextmanager
    def transaction(self) -> Iterator["Transaction"]:
        self.check_writable()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            lock = open(self.root / ".lock", "w")
        except OSError as exc:
            raise StoreError(f"store {self.root}: cannot write: {exc.strerror or exc}") from None
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            tx = Transaction(self)
            try:
                yield tx
            except BaseException:
                tx.abort()
                raise
            tx.commit()


class Transaction:
    """Stages new files; ``commit`` swaps the manifest. Not thread-safe; one per writer."""

    def __init__(self, store: Store):
        self.store = store
        base = store.manifest()
        self.version = base.get("version", 0)
        self.tables: dict[str, list[str]] = {k: list(v) for k, v in base.get("tables", {}).items()}
        self.base_files = {r for files in self.tables.values() for r in files}
        self.snapshots: dict[str, str] = dict(base.get("snapshots", {}))
        layouts = base.get("layouts", {})
        self.layouts: dict[str, str] = dict(layouts) if isinstance(layouts, dict) else {}
        self.written: list[Path] = []
        # what this transaction changed that the derived tables depend on: the (cluster, job_id) of every upserted
        # job or sample, and the clusters whose snapshot moved (their RUNNING jobs run until it)
        self.touched: list[pl.DataFrame] = []
        self.moved_snapshots: set[str] = set()
        self.derived_fresh = False  # set by whoever brought the derived tables up to date with ``touched``

    def record_snapshot(self, cluster: str, last: dt.datetime | None) -> None:
        """The cluster's log knows up to ``last`` (UTC): the store keeps the latest such instant per cluster."""
        if last is None:
            return
        last = last.astimezone(dt.timezone.utc) if last.tzinfo else last.replace(tzinfo=dt.timezone.utc)
        old = self.snapshots.get(cluster)
        if old is None or dt.datetime.fromisoformat(old) < last:
            self.snapshots[cluster] = last.isoformat()
            self.moved_snapshots.add(cluster)
            self.derived_fresh = False

    def _stage(self, table: str, rel_dir: str) -> tuple[str, Path]:
        """A new file of ``table`` under ``rel_dir`` (relative and absolute path), registered for commit and abort
        before anything is written (an abort removes whatever part of it exists)."""
        rel = f"{rel_dir}/part-{uuid.uuid4().hex}.parquet"
        path = self.store.root / rel
        self.written.append(path)
        self.tables.setdefault(table, []).append(rel)
        return rel, path

    def _write(self, table: str, rel_dir: str, df: pl.DataFrame) -> None:
        _write_parquet(schema.conform(df, table), self._stage(table, rel_dir)[1], table)

    def _write_async(self, pool: ThreadPoolExecutor, table: str, rel_dir: str, df: pl.DataFrame) -> Future:
        """``_write`` on ``pool``; the file is registered (for commit and abort) now, in the calling thread."""
        return pool.submit(_write_parquet, schema.conform(df, table), self._stage(table, rel_dir)[1], table)

    def _live_in(self, table: str, rel_dir: str) -> list[str]:
        prefix = rel_dir + "/"
        return [r for r in self.tables.get(table, []) if r.startswith(prefix)]

    def _full_tier(self, table: str, rel_dir: str, busy: set[str]) -> list[str]:
        """The live files of the partition ``rel_dir`` (but ``busy``) in its lowest size tier that holds
        ``MERGE_FANIN - 1`` of them or more: an upsert into the partition merges them into its new file."""
        tiers: dict[int, list[str]] = {}
        for rel in self._live_in(table, rel_dir):
            try:
                size = os.stat(self.store.root / rel).st_size
            except OSError:  # a missing live file is ``check``'s to report, not the merge's
                continue
            if rel in busy or size >= MERGE_MAX_BYTES:
                continue
            tier, bound = 0, MERGE_BASE_BYTES * MERGE_FANIN
            while size >= bound:
                tier, bound = tier + 1, bound * MERGE_FANIN
            tiers.setdefault(tier, []).append(rel)
        full = [files for _, files in sorted(tiers.items()) if len(files) >= MERGE_FANIN - 1]
        return full[0] if full else []

    def _month_groups(self, df: pl.DataFrame, table: str, key: str):
        """``(cluster, month, part)`` for each partition ``df`` touches, each part sorted by ``key`` (samples:
        then ``ts``). One sort of the whole frame and zero-copy slices of it: cheaper than splitting into groups
        and sorting each (every split or sort copies all columns). The month is sorted as a number and spelled
        ``YYYY-MM`` once per partition, not per row."""
        keyed = df.with_columns(pl.col("cluster").fill_null("default"), _month_number(table).alias("__month"))
        order = ["cluster", "__month", key] + (["ts"] if table == "samples" else [])
        if table in KEYED_BY_JOB + GROUPED_BY_JOB and keyed.select(pl.col(key).is_sorted()).item():
            # rows already in key order (sacct lists jobs by id): a stable sort by partition keeps it, and sorts
            # integers (plus the cluster, when there are several) instead of comparing job id strings
            one_cluster = keyed.select(pl.col("cluster").n_unique()).item() == 1
            order = ["__month"] if one_cluster else ["cluster", "__month"]
        keyed = keyed.sort(order, maintain_order=True, nulls_last=True)
        offset = 0
        for cluster, month, n in keyed.group_by(["cluster", "__month"], maintain_order=True).len().iter_rows():
            yield cluster, _month_name(month), keyed.slice(offset, n).drop("__month")
            offset += n

    def upsert(self, table: str, df: pl.DataFrame, key: str = "job_id") -> int:
        """Write rows of a partitioned table; rows of existing (cluster, key) in touched partitions are replaced
        (for ``jobs`` in every partition of the cluster, so a job whose submit month changed is not kept twice).

        For ``samples`` the key is ``job_id``: the earlier samples of a job inside the time span its new samples
        cover (first to last ``ts``) are dropped, so re-ingesting a samples file is idempotent, while samples of
        another span are kept (a cron job that ingests the last hour of Prometheus data adds to the earlier
        hours). Every file is sorted by the key.

        Only the partition's files that may hold an incoming key (their footer's job summary, ``keyindex``) are
        read and rewritten with the new rows; when none may, the rows go into a new file beside them. So adding
        new jobs (a day of logs) costs what they are, not what the partition already holds.
        """
        if df.height == 0:
            return 0
        df = schema.conform(df, table)
        if table in ("jobs", "samples"):
            self.touched.append(df.select(pl.col("cluster").fill_null("default"), "job_id").unique())
            self.derived_fresh = False
        if table in KEYED_BY_JOB:
            # a 64-bit hash per key first (equal keys hash equal, so no duplicate is missed); the exact check
            # only when the hashes collide
            if not df.select(pl.struct("cluster", "job_id").hash().is_unique().all()).item():
                df = df.unique(subset=["cluster", "job_id"], keep="last", maintain_order=True)
            self._drop_moved(table, df, key)
        order = [key, "ts"] if table == "samples" else [key]

        def merged(rel_dir: str, part: pl.DataFrame) -> pl.DataFrame:
            probe = keyindex.Probe(part.get_column(key))
            keys = part.select(pl.col(key).unique())
            # a file the summary cannot rule out is merged only if its key column does hold an incoming key (a
            # large upsert's false positives would otherwise rewrite files it does not touch)
            old = [r for r in self._live_in(table, rel_dir) if keyindex.may_hold(self.store.root / r, probe)
                   and pl.read_parquet(self.store.root / r, columns=[key]).join(keys, on=key, how="semi").height]
            # small files of a full tier hold none of the incoming keys: the filters below keep all their rows
            old += self._full_tier(table, rel_dir, busy=set(old))
            if old:
                previous = pl.concat([pl.read_parquet(self.store.root / r) for r in old], how="diagonal_relaxed")
                if table == "samples":
                    spans = part.group_by(key).agg(pl.col("ts").min().alias("__lo"), pl.col("ts").max().alias("__hi"))
                    previous = schema.conform(previous, table).join(spans, on=key, how="left").filter(
                        pl.col("__lo").is_null() | (pl.col("ts") < pl.col("__lo")) | (pl.col("ts") > pl.col("__hi"))
                    ).drop("__lo", "__hi")
                else:
                    keys = part.select(pl.col(key).unique())
                    previous = schema.conform(previous, table).join(keys, on=key, how="anti")
                part = pl.concat([previous, part]).sort(order, maintain_order=True)
                self.tables[table] = [r for r in self.tables[table] if r not in old]
            return part

        # partitions are written side by side (Polars releases the GIL while it encodes and compresses)
        with ThreadPoolExecutor(max_workers=WRITERS) as pool:
            pending = []
            for cluster, month, part in self._month_groups(df, table, key):
                rel_dir = _partition_dir(table, cluster, month)
                pending.append(self._write_async(pool, table, rel_dir, merged(rel_dir, part)))
            for done in pending:
                done.result()
        return df.height

    def _drop_moved(self, table: str, df: pl.DataFrame, key: str) -> None:
        """Remove incoming keys from the cluster's *untouched* partitions: a corrected submit time can move a
        job to another month, and its old row must not survive there. Only the key column is read to look."""
        keyed = df.select(pl.col("cluster").fill_null("default"), key, _month_number(table).alias("__month"))
        for (cluster,), part in keyed.group_by(["cluster"], maintain_order=True):
            prefix = _partition_dir(table, cluster, None) + "/"
            touched = tuple(_partition_dir(table, cluster, _month_name(m)) + "/" for m in part["__month"].unique())
            others = [r for r in self.tables.get(table, []) if r.startswith(prefix) and not r.startswith(touched)]
            keys = part.select(pl.col(key).unique()) if others else None
            probe = _probe(keys, key) if others else None
            for rel in others:
                self._drop_rows(table, rel, keys, key, probe)

    def delete_keys(self, table: str, keys: pl.DataFrame, key: str = "job_id", where: bool = False) -> None:
        """Remove every row of ``table`` whose (cluster, ``key``) is in ``keys``, whatever its partition (the rows
        of a derived table for the jobs about to be re-derived: a job may now have fewer rows, or none). Only the
        key column of the cluster's files is read to look. ``where``: ``keys`` also holds the table's partition
        column, the partition each key's rows are known to be in, and only those partitions are looked at."""
        if where:
            keys = keys.with_columns(_month_number(table).alias("__month"))
        for (cluster,), part in keys.group_by(["cluster"], maintain_order=True):
            prefix = _partition_dir(table, cluster, None) + "/"
            ids = part.select(pl.col(key).cast(pl.String)).unique()
            dirs = None if not where else tuple(
                _partition_dir(table, cluster, _month_name(m)) + "/" for m in part["__month"].unique())
            probe = _probe(ids, key)
            for rel in [r for r in self.tables.get(table, [])
                        if r.startswith(prefix) and (dirs is None or r.startswith(dirs))]:
                self._drop_rows(table, rel, ids, key, probe)

    def _drop_rows(self, table: str, rel: str, keys: pl.DataFrame, key: str,
                   probe: keyindex.Probe | None) -> None:
        """Retire the live file ``rel`` if it holds a row keyed in ``keys`` and write back its other rows. Only the
        key column is read to look (unless ``probe``, the keys' ``_probe``, rules the file out); the whole file
        only when it must be rewritten."""
        path = self.store.root / rel
        if probe is not None and not keyindex.may_hold(path, probe):
            return
        if pl.read_parquet(path, columns=[key]).join(keys, on=key, how="semi").height:
            rest = schema.conform(pl.read_parquet(path), table).join(keys, on=key, how="anti")
            self.tables[table].remove(rel)
            if rest.height:
                self._write(table, rel.rsplit("/", 1)[0], rest)

    def replace_table(self, table: str, df: pl.DataFrame, apart: pl.DataFrame | None = None) -> int:
        """Replace every file of a partitioned ``table`` by ``df`` (a rebuild of a derived table, a compaction).
        ``apart``: (cluster, job_id) whose rows go into files of their own in each partition (the RUNNING jobs'
        rollup rows, which every snapshot move rewrites: their small file is rewritten, not the month)."""
        self.tables[table] = []
        if df.height == 0:
            return 0
        key = "job_id"
        df = schema.conform(df, table)
        parts = [df] if apart is None or not apart.height else [
            df.join(apart, on=["cluster", "job_id"], how="anti"), df.join(apart, on=["cluster", "job_id"], how="semi")]
        with ThreadPoolExecutor(max_workers=WRITERS) as pool:
            pending = [self._write_async(pool, table, _partition_dir(table, cluster, month), part)
                       for frame in parts if frame.height
                       for cluster, month, part in self._month_groups(frame, table, key)]
            for done in pending:
                done.result()
        return df.height

    def reindex(self, table: str) -> int:
        """Rewrite each live file of ``table`` whose job summary is missing or not in its current form
        (``keyindex.is_current``), the same rows with a current one, one file at a time; the number of files
        rewritten. Rows do not change, so it does not count as touching the jobs or samples."""
        done = 0
        for rel in list(self.tables.get(table, [])):
            path = self.store.root / rel
            if keyindex.is_current(path):
                continue
            rows = schema.conform(_read_parquet(path), table)
            self.tables[table].remove(rel)
            self._write(table, rel.rsplit("/", 1)[0], rows)
            done += 1
        return done

    def write_file(self, table: str, rel_dir: str, df: pl.DataFrame) -> str:
        """Write ``df`` (sorted by job) as a new file of ``table`` under ``rel_dir`` that is not live yet:
        ``swap_partition`` makes it live, ``unwrite`` removes it (an abort does too). A compaction writes a
        partition this way chunk by chunk, holding one chunk in memory, not the partition."""
        order = ["job_id", "ts"] if table == "samples" else ["job_id"]
        rel = f"{rel_dir}/part-{uuid.uuid4().hex}.parquet"
        path = self.store.root / rel
        self.written.append(path)
        _write_parquet(schema.conform(df, table).sort(order, maintain_order=True), path, table)
        return rel

    def unwrite(self, rels: list[str]) -> None:
        """Remove files ``write_file`` wrote and nothing made live."""
        for rel in rels:
            path = self.store.root / rel
            self.written.remove(path)
            for p in (path, keyindex.sidecar(path)):
                with contextlib.suppress(OSError):
                    p.unlink()

    def swap_partition(self, table: str, rel_dir: str, rels: list[str], changed: pl.DataFrame) -> None:
        """Replace every live file of the partition directory ``rel_dir`` of ``table`` by ``rels``
        (``write_file``'s: a compaction of ``samples``). ``changed`` are the (cluster, job_id) whose rows differ:
        for jobs or samples they count as touched, so the commit requires the rollup refreshed for them."""
        self.tables[table] = [r for r in self.tables.get(table, []) if not r.startswith(rel_dir + "/")] + rels
        if table in ("jobs", "samples") and changed.height:
            self.touched.append(changed.select("cluster", "job_id"))
            self.derived_fresh = False

    def replace_nodes(self, cluster: str, df: pl.DataFrame) -> int:
        rel_dir = _partition_dir("nodes", cluster, None)
        self.tables["nodes"] = [r for r in self.tables.get("nodes", []) if not r.startswith(rel_dir + "/")]
        if df.height:
            self._write("nodes", rel_dir, df.with_columns(pl.lit(cluster).alias("cluster")))
        return df.height

    def append(self, table: str, df: pl.DataFrame, cluster: str | None = None) -> int:
        if df.height == 0:
            return 0
        rel_dir = table if cluster is None else _partition_dir(table, cluster, None)
        self._write(table, rel_dir, df)
        return df.height

    def replace_rejects(self, cluster: str, source_file: str, df: pl.DataFrame) -> int:
        """Rejects of a re-ingested file replace that file's earlier rejects (idempotent re-ingest), and a
        reject whose ``(field, reason, raw)`` arrives again from another file (the same bytes under a new name,
        or overlapping dumps) replaces the earlier copy: a rejected record is stored once, as a job is."""
        rel_dir = _partition_dir("rejects", cluster, None)
        content = ["field", "reason", "raw"]
        incoming = df.select(content).unique() if df.height else None
        kept = []
        for rel in self._live_in("rejects", rel_dir):
            old = pl.read_parquet(self.store.root / rel)
            rest = old.filter(pl.col("source_file") != source_file)
            if incoming is not None and rest.height:
                rest = rest.join(incoming, on=content, how="anti", nulls_equal=True)
            if rest.height == old.height:
                kept.append(rel)
            elif rest.height:
                new_rel, path = self._stage("rejects", rel_dir)  # the table's list is rebuilt below
                _write_parquet(rest, path)
                kept.append(new_rel)
        others = [r for r in self.tables.get("rejects", []) if not r.startswith(rel_dir + "/")]
        self.tables["rejects"] = others + kept
        return self.append("rejects", df, cluster)

    def commit(self) -> None:
        root = self.store.root
        if any(self.tables.get(t) for t in DERIVED) and (self.touched or self.moved_snapshots) and not self.derived_fresh:
            # a writer that changes jobs or samples of a store holding a rollup must refresh it in this commit
            # (``queries.analytics.rollup.refresh``): a stale rollup would give wrong answers, not slow ones
            raise AssertionError(f"store {root}: jobs or samples changed without refreshing job_rollup")
        live = {r for files in self.tables.values() for r in files}
        # Files this commit replaces stay on disk until the next commit: a reader that opened the old
        # manifest a moment ago can still read them.
        manifest = {"version": self.version + 1, "tables": self.tables, "retired": sorted(self.base_files - live)}
        if self.snapshots:
            manifest["snapshots"] = dict(sorted(self.snapshots.items()))
        layouts = {t: v for t, v in sorted(self.layouts.items()) if t in self.tables}
        if layouts:
            manifest["layouts"] = layouts
        tmp = root / f"{MANIFEST}.{uuid.uuid4().hex}.tmp"
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        for d in {p.parent for p in self.written}:
            _fsync_dir(d)
        os.replace(tmp, root / MANIFEST)
        _fsync_dir(root)
        self._collect_garbage()

    def abort(self) -> None:
        """Remove every file this transaction staged (and its temporary twin). Never raises: it runs while
        another error propagates, and a file it cannot remove is a stray that the next commit collects."""
        for path in self.written:
            keys = keyindex.sidecar(path)
            for p in (path, path.with_suffix(".parquet.tmp"), keys, keys.with_name(keys.name + ".tmp")):
                with contextlib.suppress(OSError, ValueError):
                    p.unlink()

    def _collect_garbage(self) -> None:
        root = self.store.root
        keep = {r for files in self.tables.values() for r in files} | self.base_files
        live = {str(root / r) for r in keep}
        live |= {str(keyindex.sidecar(p)) for p in live}  # a file's key hashes live and die with it
        for table in schema.TABLES:
            tdir = root / table
            if not tdir.is_dir():
                continue
            for path in tdir.glob("**/*.parquet*"):
                if str(path) not in live:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
        for tmp in root.glob(f"{MANIFEST}.*.tmp"):
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
