"""Slurm ``sacct`` text dumps -> canonical jobs (``schema.JOBS``), one job per allocation with its steps rolled up.

Input: ``sacct --parsable2`` or ``--parsable`` (trailing delimiter) with any ``--delimiter`` (``|``, ``☃``,
tab, ...), with or without a header, optionally ``.gz`` (a truncated one fails naming its first incomplete
line). Field names are case-insensitive; ``%width`` suffixes are ignored. Blank lines and lines starting with
``#`` are not data rows. sacct's fixed-width (non-parsable) output is refused with a hint.

Options (``parse(path, fields=, delimiter=, tz=)``, unknown options ignored):
- ``fields``: comma list of column names as given to ``sacct --format``, for a file without header
  (``--noheader``). A header in the file wins over it. Neither -> ``IngestError`` naming line 1.
- ``delimiter``: default detected - from the header (the separator between field names), else the first of
  ``| ☃ TAB ; ,`` (then any other punctuation) that splits the first data line into exactly the given fields.
- ``tz``: IANA zone sacct printed its times in (the local time of the host it ran on); default UTC (``quotaloop
  ingest --timezone`` passes its zone, by default the machine's). Submit/Start/End become UTC instants. A time
  the clocks skip (spring forward) is read with the offset before the gap, i.e. shifted forward by it; one they
  repeat (fall back) takes the earlier instant, except that Start and End take the readings whose difference
  matches the row's Elapsed (``sacct_values.settle_folds``). See ``common.timestamp_expr``.

Rows: an *allocation row* (JobID without a dot: ``123``, ``123_4``, ``123_[1-5]``, ``123+0``) carries the
request; a *step row* (``123.batch``, ``.extern``, ``.0``, ``.interactive``) carries usage. Per job:
- ``cpu_seconds_used``: TotalCPU (or UserCPU + SystemCPU) of the allocation row or the sum over its steps,
  whichever is larger - equal once a job ended, but sacct fills the allocation row only at the end. A job that
  ran a while with no step rows and a zero total (``sacct -X`` reports zero usage) gets null: unknown.
- ``max_rss_bytes``, ``max_gpu_util``, ``gpu_mem_used_bytes``: max over its rows (MaxRSS, else TRESUsageInMax
  ``mem=``; ``gres/gpuutil``; ``gres/gpumem``); ``mean_gpu_util``: Elapsed-weighted mean of TRESUsageInAve
  ``gres/gpuutil`` (percent /100; above 100 % - Slurm sums a task's GPUs - divided by the job's GPU count);
  ``max_cpu_util``: max over rows of CPU time / (Elapsed x CPUs) - the busiest step's mean, a lower bound of
  the true peak (sacct has no time series), capped at 1.
- Requests: ``req_cpus`` ReqCPUS > ReqTRES cpu > AllocCPUS/NCPUS (old dumps have no request column);
  ``req_gpus``/``gpu_type`` ReqTRES > ReqGRES > AllocTRES > AllocGRES; ``req_mem_bytes`` ReqMem (bare number =
  MB for the whole job, Slurm >= 21.08; ``Mn`` per node x nodes; ``Mc`` per CPU x req_cpus) > ReqTRES mem >
  AllocTRES mem; ``ReqMem`` 0 (``--mem=0``: "all of the node") is not a size and falls through to the TRES.
- ``alloc_*`` only for jobs that started; ``nodes`` NNodes > AllocNodes > ReqNodes > TRES ``node=``;
  ``elapsed_s`` Elapsed > ElapsedRaw > end - start > 0 (never started): Slurm's own run time wins, so a job across
  a DST change keeps its true length whatever zone the file was read in; ``time_limit_s`` Timelimit (UNLIMITED ->
  null) > TimelimitRaw minutes; ``min_runtime_s`` from Comment ``min_runtime_s=N`` (null when N is no duration:
  inf, NaN, negative, > 100 years); job_class via
  ``common.job_class_expr``; ``array_job_id`` ``123`` for ``123_4`` and for the pending record ``123_[1-5]``
  (kept as one PENDING job); a ``Cluster`` column (``sacct -L``) keys jobs by (cluster, JobID).
- ``AdminComment``: a jobstats summary (``JS1:...``) of the allocation row is decoded and, when trusted,
  overrides the CPU, memory and GPU usage above with its per-node / per-GPU values (``jobstats`` module); a
  malformed or untrusted one is a field reject (``Parsed.field_rejects``), the row stays accepted.

Rejects (line = 1-based physical line of the file, field, reason, raw text): wrong number of fields,
non-UTF-8 bytes, malformed JobID, unknown state, unparseable timestamp/duration/number/memory/TRES, negative
or absurd counts (> 1e6 CPUs/GPUs/nodes, > 1 EiB), end before start; a step row is checked on the fields it
contributes, and is rejected when its allocation row is missing or rejected. Duplicate rows of one JobID:
the last valid one wins, all count as accepted. ``rows_read`` = data rows = accepted + rejected.

This module reads and checks the rows (``textio`` splits the text, ``sacct_values`` parses the fields and
holds the checks); ``sacct_rollup`` matches steps to jobs and computes the per-job values above.
"""
from __future__ import annotations

import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import polars as pl

from .pipeline import IngestError, Parsed
from . import common as c
from . import jobstats
from . import sacct_rollup as R
from . import sacct_values as V
from . import textio

# Every field sacct --helpformat lists (lower case): used to recognise a header line.
KNOWN_FIELDS = set("""account admincomment alloccpus allocgres allocnodes alloctres associd avecpu avecpufreq
avediskread avediskwrite avepages averss avevmsize blockid cluster comment constraints consumedenergy
consumedenergyraw container cputime cputimeraw dbindex derivedexitcode elapsed elapsedraw eligible end exclusive
exitcode extra failednode flags gid group jobid jobidraw jobname layout licenses maxdiskread maxdiskreadnode
maxdiskreadtask maxdiskwrite maxdiskwritenode maxdiskwritetask maxpages maxpagesnode maxpagestask maxrss
maxrssnode maxrsstask maxvmsize maxvmsizenode maxvmsizetask mcslabel mincpu mincpunode mincputask ncpus nnodes
nodelist ntasks oversubscribe partition planned plannedcpu plannedcpuraw priority qos qosraw qosreq reason
reqcpufreq reqcpufreqgov reqcpufreqmax reqcpufreqmin reqcpus reqgres reqmem reqnodes reqtres reservation
reservationid reserved reservedcpu restarts start state stdout stderr stdin submit submitline suspended
systemcomment systemcpu timelimit timelimitraw totalcpu tresusageinave tresusageinmax tresusageinmaxnode
tresusageinmaxtask tresusageinmin tresusageinminnode tresusageinmintask tresusageintot tresusageoutave
tresusageoutmax tresusageoutmaxnode tresusageoutmaxtask tresusageoutmin tresusageoutminnode tresusageoutmintask
tresusageouttot uid user usercpu wckey wckeyid workdir""".split())


def _is_header(names: list[str]) -> bool:
    """A line of field names: JobID (or JobIDRaw) among mostly known sacct fields (a truncated last name or a
    field of a newer Slurm is tolerated)."""
    return bool({"jobid", "jobidraw"} & set(names)) and sum(n in KNOWN_FIELDS for n in names) >= 0.6 * len(names)


def sniff(head: bytes, name: str) -> bool:
    """A sacct header (JobID among known field names), or a headerless line with a job id and a Slurm state."""
    first = textio.first_content_line(head)
    if first is None or first[1].lstrip().startswith(("{", "[")):
        return False
    text = first[1]
    names = [t.lower() for t in re.findall(r"[A-Za-z][A-Za-z0-9_]*", text)]
    if _is_header(names):
        return True
    for d in ("|", "☃"):
        parts = [p.strip() for p in text.split(d)]
        if len(parts) >= 5 and any(re.match(V.JOBID_RE, p) for p in parts) and any(
                c.normalise_state(p) and re.match(r"^[A-Z_]+", p) for p in parts):
            return True
    return False


def _layout(path, line_no: int, text: str, terminated: bool, fields, delimiter):
    """-> (column names, delimiter, trailing delimiter?, header line number or None)."""
    names = [t.lower() for t in re.findall(r"[A-Za-z][A-Za-z0-9_]*", text)]
    if _is_header(names):
        seps = Counter(s for s in re.split(r"[A-Za-z0-9_%]+", text) if s)
        delim = delimiter or (seps.most_common(1)[0][0] if seps else "|")
        if not delim.strip() and not delimiter:
            raise IngestError(path, "fixed-width sacct output is not supported; re-run sacct with --parsable2",
                              line=line_no)
        if not terminated:
            raise IngestError(path, "header line is not terminated: the file is truncated", line=line_no)
        parts = text.split(delim)
        trailing = len(parts) > 1 and parts[-1] == ""
        names = [p.strip().lstrip("\ufeff").split("%")[0] for p in (parts[:-1] if trailing else parts)]
        return names, delim, trailing, line_no
    if not fields:
        raise IngestError(path, "no header line and no field list: pass --fields as given to sacct --format",
                          line=line_no)
    cols = [f.strip().split("%")[0] for f in (fields.split(",") if isinstance(fields, str) else fields) if f.strip()]
    if delimiter is None:
        punct = [ch for ch in dict.fromkeys(text) if not ch.isalnum() and ch not in " -:._/=[]()+&"]
        for cand in ["|", "☃", "\t", ";", ","] + punct:
            if text.count(cand) in (len(cols) - 1, len(cols)):
                delimiter = cand
                break
        else:
            raise IngestError(path, f"no delimiter splits the line into the {len(cols)} given fields; "
                                    "pass --delimiter", line=line_no)
    parts = text.split(delimiter)
    return cols, delimiter, len(parts) == len(cols) + 1 and parts[-1] == "", None


TEXT = ["jobname", "user", "account", "partition", "qos", "exitcode", "nodelist", "cluster", "admincomment"]
STEP_VALUES = ["_elapsed", "_totalcpu", "_usercpu", "_systemcpu", "_maxrss", "_umem", "_util_ave", "_util_max",
               "_gmem", "_alloccpus", "_ncpus", "_alloctres_cpu"]


def _evaluate(df: pl.DataFrame, is_step: pl.Series, tz, has: set[str], lines: textio.Lines, delim: str,
              n_fields: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Parse and check every data row of ``df``.

    -> (valid allocation rows: ``_line``, ``_aord``, ``jobid``, text fields and parsed ``_<value>`` columns;
        valid step rows: ``_line``, ``_aord``, ``jobid``, ``cluster``, ``STEP_VALUES``;
        rejects[line, field, reason, raw, _jobid (allocation rows only)]).

    The fields every row contributes are parsed on the whole frame, those only allocation rows have on
    theirs (in a second thread): the step rows' text is never copied, only their parsed values are. A cheap
    pass marks the rows that may be bad; only those are checked exactly (``_exact``, from their text).
    """
    shared_raw = V.shared_fields(has)
    alloc_raw = ["_line"] + [k for k in V.USED if k not in shared_raw]
    with ThreadPoolExecutor(max_workers=1) as pool:
        only = pool.submit(lambda: V.parse_values(df.select(alloc_raw).filter(~is_step).rechunk(), "alloc-only",
                                                  tz, has))
        full = V.parse_values(df, "shared", tz, has)
        only = only.result()
    chk = V.checks("alloc", has)
    maybe = full.lazy().select(pl.any_horizontal([m.fill_null(False) for *_, m, _, _, sh in chk if sh])
                               ).collect().to_series()
    shared = [k for k in full.columns if k.startswith("_") and k not in df.columns] + [
        k for k in ("_aord", "_fields_ok", "jobid", "cluster") if k not in only.columns]
    alloc = V.settle_folds(only.hstack(full.select(shared).filter(~is_step).rechunk().get_columns()), tz)
    maybe_alloc = alloc.lazy().select(pl.any_horizontal([m.fill_null(False) for *_, m, _, _, sh in chk if not sh])
                                      ).collect().to_series()
    suspects = pl.concat([full["_line"].filter(maybe), alloc["_line"].filter(maybe_alloc)]).unique()
    rejects = _exact(df.filter(pl.col("_line").is_in(suspects.implode())), tz, has, lines, delim, n_fields)
    keep = ["_line", "_aord", "jobid"] + TEXT + [k for k in alloc.columns if k.startswith("_") and not k.endswith(
        "_bad") and k not in ("_line", "_aord", "_fields_ok")]
    steps = full.select(["_line", "_aord", "jobid", "cluster"] + [k for k in STEP_VALUES if k in full.columns]
                        ).filter(is_step).rechunk()
    steps = steps.with_columns(pl.lit(None, pl.Float64).alias(k) for k in STEP_VALUES if k not in full.columns)
    alloc = alloc.select(keep)
    if rejects.height:
        good = ~pl.col("_line").is_in(rejects["line"].implode())
        alloc, steps = alloc.filter(good), steps.filter(good)
    return alloc, steps, rejects


def _exact(df: pl.DataFrame, tz, has: set[str], lines: textio.Lines, delim: str, n_fields: int) -> pl.DataFrame:
    """The rows of ``df`` (raw text, both kinds) that fail a check: rejects[line, field, reason, raw, _jobid].
    The first failing check names the reason."""
    out = []
    step = df.select(pl.col("jobid").str.contains(".", literal=True).fill_null(False)).to_series()
    for rows, part in (("alloc", df.filter(~step)), ("step", df.filter(step))):
        chk = V.checks(rows, has)
        done = V.parse_values(part.rechunk(), "alloc" if rows == "alloc" else "shared", tz, has)
        done = V.settle_folds(done, tz) if rows == "alloc" else done
        bad_rows = done.filter(pl.any_horizontal([b.fill_null(False) for _, b, *_ in chk]))
        code = pl.lit(0)
        for i in range(len(chk), 0, -1):
            code = pl.when(chk[i - 1][1].fill_null(False)).then(pl.lit(i)).otherwise(code)
        bad_rows = bad_rows.with_columns(code.alias("_code"), lines.text(bad_rows["_line"]).alias("_raw"))
        field, reason = pl.lit(None, pl.String), pl.lit(None, pl.String)
        for i, (shown, _, _, text, value, _) in enumerate(chk, 1):
            if i == 1:  # the field count is only known from the raw line
                msg = pl.format(f"expected {n_fields} fields, found {{}}",
                                pl.col("_raw").str.count_matches(delim, literal=True) + 1)
            else:
                msg = pl.format(f"{text} '{{}}'", pl.col(value).cast(pl.String).fill_null("")) if value else pl.lit(
                    text)
            field = pl.when(pl.col("_code") == i).then(pl.lit(shown, pl.String)).otherwise(field)
            reason = pl.when(pl.col("_code") == i).then(msg).otherwise(reason)
        out.append(bad_rows.select(pl.col("_line").alias("line"), field.alias("field"), reason.alias("reason"),
                                   pl.col("_raw").alias("raw"),
                                   (pl.col("jobid") if rows == "alloc" else pl.lit(None, pl.String)).alias("_jobid")))
    return pl.concat(out)


def parse(path, *, fields=None, delimiter=None, tz=None, **_) -> Parsed:
    head, whole = textio.read_head(path)
    first = textio.first_content_line(head)
    if (first is None or not first[2]) and not whole:  # the first line is longer than the head
        head, whole = textio.read_bytes(path), True
        first = textio.first_content_line(head)
    if first is None:
        raise IngestError(path, "empty file: no header and no data line", line=1)
    names, delim, trailing, header_line = _layout(path, *first, fields, delimiter)
    n_cols = len(names) + trailing
    index: dict[str, int] = {}
    for i, n in enumerate(names):
        index.setdefault(n.lower(), i)
    if "jobid" not in index and "jobidraw" in index:
        index["jobid"] = index["jobidraw"]
    for need in ("jobid", "state"):
        if need not in index:
            raise IngestError(path, "required column missing", line=header_line or first[0], field=V.SHOWN[need])
    has = set(index)

    # fields parsed once per distinct value are read as Categorical: the reader codes them as it splits, so
    # neither the alloc/step split nor the distinct lookup moves or hashes their text again
    codes = {index[k]: pl.Categorical for k in V.CODED if k in index}
    try:
        frame, lines, bad_utf8 = textio.read_delimited(head if whole else path, delim, n_cols, codes)
    except (pl.exceptions.PolarsError, ValueError) as exc:
        raise IngestError(path, f"cannot split into fields: {str(exc).splitlines()[0]}") from exc
    del head
    ok = pl.col("_fields_ok") & (pl.col(f"f{n_cols - 1}").is_null() if trailing else pl.lit(True))
    df = frame.select(pl.col("_line"), ok.alias("_fields_ok"), *[pl.col(f"f{index[k]}").alias(k) for k in V.USED
                                                                  if k in index])
    # the columns the file lacks, as nulls cut like the others (a frame whose columns disagree on chunk
    # boundaries is rechunked whole by every later operation)
    none = c.align_chunks(pl.repeat(None, df.height, dtype=pl.String, eager=True), df["_line"])
    df = df.with_columns(none.alias(k) for k in V.USED if k not in index).select("_line", "_fields_ok", *V.USED)
    is_data = ~frame["_blank"] & ~frame["f0"].cast(pl.String).fill_null("").str.starts_with("#")
    if header_line:
        is_data &= frame["_line"] != header_line
    n_data = int(is_data.sum())
    del frame
    if header_line == 1 and n_data == df.height - 1:  # the usual dump: a header, then only data lines
        df = df.slice(1)
    elif n_data != df.height:
        df = df.filter(is_data)
    is_step = df.select(pl.col("jobid").str.contains(".", literal=True).fill_null(False)).to_series()
    # ordinal of the nearest allocation row at or above each row: a step's likely parent, since sacct lists
    # the steps right after their job (checked below, with a lookup by key where it does not hold)
    df = df.with_columns(c.align_chunks((~is_step).cast(pl.Int64).cum_sum() - 1, df["jobid"]).alias("_aord"))
    n_alloc_rows = df.height - int(is_step.sum())
    alloc_ok, step_ok, rejected = _evaluate(df, is_step, tz, has, lines, delim, len(names))
    del df

    # a multi-cluster dump (sacct -L) repeats job ids across clusters: key = cluster + id
    prefix = [pl.col("cluster").fill_null("")] if "cluster" in has else []
    key = pl.concat_str(prefix + [pl.col("jobid")], separator="\x1f") if prefix else pl.col("jobid")
    parent = pl.col("jobid").str.slice(0, pl.col("jobid").str.find(".", literal=True))
    pkey = pl.concat_str(prefix + [parent], separator="\x1f") if prefix else parent
    jobs = R.last_distinct(alloc_ok.with_columns(key.alias("_key")), "_key")
    jobs = jobs.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("_jidx"))
    steps = step_ok.with_columns(key.alias("_key"), pkey.alias("_pkey"))
    steps = steps.with_columns(c.align_chunks(R.parent_rows(jobs, steps, n_alloc_rows),
                                               steps["_line"]).alias("_jidx"))
    orphan = steps["_jidx"].is_null()
    orphans = steps.filter(orphan)
    orphans = orphans.select(
        pl.col("_line").alias("line"), pl.lit("JobID").alias("field"),
        pl.when(parent.is_in(rejected["_jobid"].implode()))
        .then(pl.format("parent allocation row {} was rejected", parent))
        .otherwise(pl.format("parent allocation row {} is missing", parent)).alias("reason"),
        lines.text(orphans["_line"]).alias("raw"))
    if orphans.height:
        steps = steps.filter(~orphan)

    out = R.rollup(jobs, R.last_distinct(steps, "_key"), "totalcpu" in has, "maxrss" in has)
    # jobstats summaries in AdminComment (rollup keeps the allocation rows' order)
    out, field_rejects = jobstats.apply(out, jobs["admincomment"], jobs["_line"])
    utf8 = pl.DataFrame(bad_utf8, schema={"line": pl.Int64, "raw": pl.String}, orient="row")
    rejects = pl.concat([
        utf8.select("line", pl.lit(None, pl.String).alias("field"), pl.lit("line is not valid UTF-8").alias("reason"),
                    "raw"),
        rejected.drop("_jobid"), orphans]).sort("line")
    clusters = jobs["cluster"].drop_nulls().unique()
    return Parsed(rows_read=n_data + len(bad_utf8), rows_accepted=alloc_ok.height + steps.height,
                  jobs=out, rejects=rejects, cluster=clusters[0] if clusters.len() == 1 else None,
                  time_zone=tz or "UTC", field_rejects=field_rejects)
