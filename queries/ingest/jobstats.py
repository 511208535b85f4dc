"""jobstats job summaries (Princeton's open-source job monitor) read from sacct's ``AdminComment``.

At job end jobstats' slurmctld epilog stores a summary in the job's ``AdminComment``: ``JS1:`` followed by the
base64 of a gzipped JSON document, or ``JS1:Short`` (job too short to sample) / ``JS1:None`` (no data). The
document (jobstats' docs, "Generating Job Summaries")::

    {"gpus": 1, "total_time": 50944,                        # GPUs of the job; run time, seconds
     "nodes": {"della-k1g1": {"cpus": 12,                   # cores on this node
                              "total_time": 57620.8,        # CPU-seconds used on this node
                              "total_memory": 137438953472, # memory allocated on this node, bytes
                              "used_memory": 84683702272,   # the node's peak memory, bytes
                              "gpu_utilization": {"1": 98.6},          # per GPU index: mean %, 0..100
                              "gpu_used_memory": {"1": 83314868224},   # per GPU index: peak, bytes
                              "gpu_total_memory": {"1": 85899345920}}}}

What a summary gives a job (``schema.JOBS``), and only when the summary is *trusted* (below):
``cpu_seconds_used`` = sum of the nodes' ``total_time``; ``max_rss_bytes`` = sum of the nodes' peaks (the job's
peak, an upper bound: the nodes need not peak together); ``node_mem_peak_bytes`` = the busiest node's peak;
``mean_gpu_util`` = mean of the per-GPU means / 100; ``gpu_mem_used_bytes`` = the largest per-GPU peak;
``gpus_measured`` = GPUs listed; ``gpus_idle`` = those whose mean utilisation is 0 % (never used: an average over
all GPUs hides them). ``jobstats`` records what was found: ``ok``, ``short`` (``JS1:Short``), ``none``
(``JS1:None``), ``rejected`` (malformed), ``untrusted`` (disagrees with sacct); null when the AdminComment holds
no ``JS1:`` text (any other admin comment is left alone).

Invariants: decoding never raises on any input. A malformed, truncated or hostile summary (bad base64, a gzip
stream that is truncated or inflates beyond ``MAX_JSON_BYTES`` - a zip bomb is cut off there, never inflated
whole - bad JSON, a value of the wrong type, negative, not finite or beyond the sizes a real job can have) is a
*rejected field*: the row stays accepted with sacct's own values, and a field reject names the reason. A summary
whose CPU time disagrees with sacct's TotalCPU by more than ``CPU_TOLERANCE_S`` seconds *and* more than
``CPU_TOLERANCE_FRACTION`` of the larger is flagged ``untrusted`` (a field reject says by how much) and not used:
the two measure the same cgroup's CPU time, so a larger gap means the summary belongs to another job or run
(a requeued job keeps its id) or is corrupt. Where sacct has no CPU time (``sacct -X`` dumps), the summary is
used unchecked.
"""
from __future__ import annotations

import base64
import binascii
import json
import math
import zlib

import polars as pl

from . import limits

PREFIX = "JS1:"
MAX_ENCODED_CHARS = 1 << 20  # jobstats' largest summaries are ~5,000 characters; anything near this is not one
MAX_JSON_BYTES = 4 << 20  # decompressed cap: a bomb stops inflating here
CPU_TOLERANCE_S = 60.0
CPU_TOLERANCE_FRACTION = 0.10
MAX_COUNT = limits.MAX_COUNT  # CPUs or GPUs of one node, nodes of one job
MAX_BYTES = limits.MAX_BYTES
MAX_SECONDS = limits.MAX_SECONDS * 1e4  # CPU-seconds of one node: 100 years x 10,000 cores

# the columns a trusted summary sets (the rest of the row stays sacct's)
COLUMNS = {"cpu_seconds_used": pl.Float64, "max_rss_bytes": pl.Float64, "node_mem_peak_bytes": pl.Float64,
           "mean_gpu_util": pl.Float64, "gpu_mem_used_bytes": pl.Float64, "gpus_measured": pl.Float64,
           "gpus_idle": pl.Float64}


class SummaryError(ValueError):
    """A summary that cannot be used; ``str`` is the reason."""


def _number(v, where: str, limit: float) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SummaryError(f"{where}: not a number ({type(v).__name__})")
    try:
        v = float(v)
    except OverflowError:  # an integer of hundreds of digits (JSON allows it): beyond float, so beyond any job
        raise SummaryError(f"{where}: an integer of {len(str(v))} digits is beyond any real job") from None
    if not math.isfinite(v) or v < 0:
        raise SummaryError(f"{where}: {v!r} is not a finite non-negative number")
    if v > limit:
        raise SummaryError(f"{where}: {v:g} is beyond any real job (> {limit:g})")
    return v


def _per_gpu(node: dict, key: str, where: str, limit: float) -> dict[str, float]:
    d = node.get(key, {})
    if not isinstance(d, dict):
        raise SummaryError(f"{where}.{key}: not an object of GPU index -> value")
    if len(d) > MAX_COUNT:
        raise SummaryError(f"{where}.{key}: too many GPUs")
    out = {}
    for idx, v in d.items():
        # ASCII digits only: str.isdigit() also holds for '²', which int() refuses
        if not (str(idx).isascii() and str(idx).isdigit()) or len(str(idx)) > 7:
            raise SummaryError(f"{where}.{key}: GPU index {str(idx)[:20]!r} is not a number")
        out[str(int(idx))] = _number(v, f"{where}.{key}.{idx}", limit)
    return out


def decode(text: str | None) -> tuple[str | None, dict | None]:
    """``AdminComment`` -> ``(status, document)``. status None: no jobstats text; ``short``/``none``: the two
    markers; ``ok``: a checked document. Raises ``SummaryError`` for anything else starting with ``JS1:``."""
    if not isinstance(text, str):
        return None, None
    s = text.strip()
    if not s.startswith(PREFIX):
        return None, None
    body = s[len(PREFIX):]
    if body in ("Short", "None"):
        return body.lower(), None
    if len(body) > MAX_ENCODED_CHARS:
        raise SummaryError(f"summary of {len(body)} characters is too long (> {MAX_ENCODED_CHARS})")
    try:
        raw = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SummaryError(f"not base64: {exc}") from None
    inflate = zlib.decompressobj(wbits=47)  # 32 + 15: a gzip (or zlib) header is detected
    try:
        data = inflate.decompress(raw, MAX_JSON_BYTES + 1)
    except zlib.error as exc:
        raise SummaryError(f"not gzip data: {exc}") from None
    if len(data) > MAX_JSON_BYTES or inflate.unconsumed_tail:
        raise SummaryError(f"decompresses to more than {MAX_JSON_BYTES} bytes (a zip bomb?)")
    if not inflate.eof:
        raise SummaryError("gzip stream is truncated")
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SummaryError(f"not JSON: {str(exc)[:80]}") from None
    return "ok", check(doc)


def check(doc) -> dict:
    """The document's shape and values, checked (``SummaryError`` naming the first bad path)."""
    if not isinstance(doc, dict):
        raise SummaryError("document is not a JSON object")
    nodes = doc.get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        raise SummaryError("nodes: missing or not a non-empty object")
    if len(nodes) > MAX_COUNT:
        raise SummaryError("nodes: too many")
    if "gpus" in doc and doc["gpus"] is not False:  # some epilog versions write false for a CPU job
        _number(doc["gpus"], "gpus", MAX_COUNT)
    if "total_time" in doc:
        _number(doc["total_time"], "total_time", MAX_SECONDS)
    out = {}
    for name, node in nodes.items():
        where = f"nodes.{str(name)[:64]}"
        if not isinstance(node, dict):
            raise SummaryError(f"{where}: not an object")
        rec = {"cpus": _number(node.get("cpus", 0), f"{where}.cpus", MAX_COUNT),
               "total_time": _number(node.get("total_time"), f"{where}.total_time", MAX_SECONDS),
               "used_memory": _number(node.get("used_memory"), f"{where}.used_memory", MAX_BYTES),
               "total_memory": _number(node.get("total_memory", 0), f"{where}.total_memory", MAX_BYTES)}
        util = _per_gpu(node, "gpu_utilization", where, 100.0)
        used = _per_gpu(node, "gpu_used_memory", where, MAX_BYTES)
        total = _per_gpu(node, "gpu_total_memory", where, MAX_BYTES)
        rec |= {"gpu_utilization": util, "gpu_used_memory": used, "gpu_total_memory": total}
        out[str(name)] = rec
    return {"nodes": out}


def values(doc: dict) -> dict[str, float | None]:
    """A checked document -> the job columns it gives (``COLUMNS``)."""
    nodes = doc["nodes"].values()
    utils = [u for n in nodes for u in n["gpu_utilization"].values()]
    gmem = [m for n in nodes for m in n["gpu_used_memory"].values()]
    return {
        "cpu_seconds_used": sum(n["total_time"] for n in nodes),
        "max_rss_bytes": sum(n["used_memory"] for n in nodes),
        "node_mem_peak_bytes": max(n["used_memory"] for n in nodes),
        "mean_gpu_util": sum(utils) / len(utils) / 100 if utils else None,
        "gpu_mem_used_bytes": max(gmem) if gmem else None,
        "gpus_measured": float(len(utils)),
        "gpus_idle": float(sum(u == 0 for u in utils)),
    }


def disagrees(js_cpu_s: float, sacct_cpu_s: float | None) -> bool:
    """True when the summary's CPU time and sacct's TotalCPU differ beyond the tolerance."""
    if sacct_cpu_s is None or (isinstance(sacct_cpu_s, float) and math.isnan(sacct_cpu_s)):
        return False
    gap = abs(js_cpu_s - sacct_cpu_s)
    return gap > CPU_TOLERANCE_S and gap > CPU_TOLERANCE_FRACTION * max(js_cpu_s, sacct_cpu_s)


def apply(jobs: pl.DataFrame, comments: pl.Series, lines: pl.Series, field: str = "AdminComment"
          ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Jobs (``schema.JOBS`` rows) + their AdminComment and input line, aligned -> (jobs with the trusted
    summaries applied and ``jobstats`` set, field rejects[line, field, reason, raw]).

    Only rows whose comment starts with ``JS1:`` are looked at (a Python loop over those alone)."""
    rejects = {"line": [], "field": [], "reason": [], "raw": []}
    has = comments.cast(pl.String).str.strip_chars_start().str.starts_with(PREFIX).fill_null(False)
    where, status = has.arg_true().to_list(), []
    patch: dict[str, tuple[list[int], list[float]]] = {k: ([], []) for k in COLUMNS}
    sacct_cpu = jobs["cpu_seconds_used"]
    for i in where:
        text = comments[i]
        try:
            st, doc = decode(text)
        except SummaryError as exc:
            st, doc = "rejected", None
            reason = f"jobstats summary rejected: {exc}"
        else:
            reason = None
            if doc is not None:
                got = values(doc)
                if disagrees(got["cpu_seconds_used"], sacct_cpu[i]):
                    st = "untrusted"
                    reason = (f"jobstats summary not used: its CPU time {got['cpu_seconds_used']:.0f} s disagrees"
                              f" with TotalCPU {sacct_cpu[i]:.0f} s (tolerance {CPU_TOLERANCE_S:.0f} s and"
                              f" {CPU_TOLERANCE_FRACTION:.0%})")
                else:
                    for k, v in got.items():
                        if v is not None:  # a CPU job's summary leaves sacct's GPU values alone
                            patch[k][0].append(i)
                            patch[k][1].append(v)
        status.append(st)
        if reason:
            rejects["line"].append(lines[i])
            rejects["field"].append(field)
            rejects["reason"].append(reason)
            rejects["raw"].append(text if len(text) <= 2000 else text[:2000] + "...")
    cols = []
    for k, (idx, vals) in patch.items():
        base = (jobs[k].cast(COLUMNS[k]).clone() if k in jobs.columns
                else pl.Series(k, [None] * jobs.height, COLUMNS[k]))
        cols.append(base.scatter(idx, pl.Series(vals, dtype=COLUMNS[k])) if idx else base)
    stat = pl.Series("jobstats", [None] * jobs.height, pl.String)
    out = jobs.with_columns(*cols, stat.scatter(where, pl.Series(status, dtype=pl.String)) if where else stat)
    rej = pl.DataFrame(rejects, schema={"line": pl.Int64, "field": pl.String, "reason": pl.String, "raw": pl.String})
    return out, rej
