-- One row per job whose run interval overlaps the window: requested, used and wasted CPU-seconds,
-- GPU-seconds and memory GB-seconds (mem_seconds_* are GB-seconds, 1 GB = 1e9 bytes), clipped to the window,
-- with efficiency = used / requested (0..1, null without usage data or without a request) and the peak-based
-- utilisation beside it. usage_source: 'samples' (integral of the sampled curve), 'totals' (job-level
-- totals / means) or null; mem_used_basis: 'samples' or 'peak' (max_rss held for the whole run: an upper bound).
-- From a jobstats summary: gpus_idle of gpus_measured GPUs never used (mean utilisation 0 %) and the
-- summary's status (jobstats); its busiest node's memory peak is already what peak_mem_util compares.
-- Ordered by job (cluster, job_id); with limit_rows, the limit_rows jobs that wasted most GPU-seconds, then
-- CPU-seconds, most first. (Sorting every job of a big store by its waste costs more than computing it; the
-- key order is nearly free because the store's files are sorted by job_id. Re-sort a full frame if needed.)
-- param: limit_rows integer null >=0  only this many jobs: those that wasted most GPU-seconds (then CPU-seconds), most first; null = all jobs, by job
with
-- include: _jobs
-- include: _usage_all
-- include: _job_usage
waste as (
    select
        cluster,
        job_id,
        job_name,
        "user",
        account,
        team,
        "partition",
        job_class,
        state,
        submit,
        start,
        to_timestamp(t_end) as run_end,
        in_window_s,
        run_s,
        cpus,
        gpus,
        mem_gb,
        cpu_seconds_requested,
        cpu_seconds_used,
        cpu_seconds_requested - cpu_seconds_used as cpu_seconds_wasted,
        cpu_seconds_used / nullif(cpu_seconds_requested, 0) as cpu_efficiency,
        gpu_seconds_requested,
        gpu_seconds_used,
        gpu_seconds_requested - gpu_seconds_used as gpu_seconds_wasted,
        gpu_seconds_used / nullif(gpu_seconds_requested, 0) as gpu_efficiency,
        mem_seconds_requested,
        mem_seconds_used,
        mem_seconds_requested - mem_seconds_used as mem_seconds_wasted,
        mem_seconds_used / nullif(mem_seconds_requested, 0) as mem_efficiency,
        usage_source,
        mem_used_basis,
        sample_coverage,
        peak_cpu_util,
        peak_gpu_util,
        peak_mem_util,
        -- per-GPU and per-node detail from a jobstats summary (null without one)
        gpus_measured,
        gpus_idle,
        jobstats
    from job_usage
)
select *
from waste
order by
    case when $limit_rows::bigint is not null then gpu_seconds_wasted end desc nulls last,
    case when $limit_rows::bigint is not null then cpu_seconds_wasted end desc nulls last,
    cluster,
    job_id
limit coalesce($limit_rows::bigint, 9223372036854775807)
