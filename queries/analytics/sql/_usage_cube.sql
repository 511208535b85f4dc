-- Statement, not a fragment nor a named query (run by queries.analytics.cube, never listed): the `usage_cube`
-- rows of the jobs of `jobs`. Each job's figures are job_usage's for a window holding its whole run (no window),
-- summed per cell: cluster, submit month, user, account and the span of whole UTC days its run interval lies in.
-- The caller narrows `jobs` and `job_rollup` to the months it refreshes. Jobs that never started take no part
-- in a query; a RUNNING job without an end (_jobs: open_run) is in no cell: its run end moves with every
-- snapshot, so a cell holding it would change at every ingest (the queries derive it per job, _cube).
-- footprint_max_s and legacy_task_score_sum use _scores' default rates and time unit (16 CPUs and 128 GB per
-- GPU, 60 s): the rankings read the cube only with those.
with
-- include: _jobs
-- include: _usage_all
-- include: _job_usage
cube_jobs as (
    select
        u.*,
        date_trunc('month', u.submit) as submit_month,
        false as running,  -- the column of a cube written when RUNNING jobs had cells (see below)
        floor(u.t_start / 86400) * 86400 as day_lo_s,
        greatest(ceil(u.t_end / 86400) * 86400, floor(u.t_start / 86400) * 86400 + 86400) as day_hi_s,
        coalesce(u.gpu_seconds_requested, 0)
            + coalesce(u.cpu_seconds_requested, 0) / 16.0
            + coalesce(u.mem_seconds_requested, 0) / 128.0 as footprint_equiv_s,
        case when u.peak_cpu_util is not null and coalesce(u.req_cpus, u.cpus) is not null then
            ln(coalesce(u.req_cpus, u.cpus) * u.in_window_s / 60.0 + 50) * exp(2.5 - u.peak_cpu_util)
        end as legacy_task_score
    from job_usage as u
    where not u.open_run
)
select
    cluster,
    submit_month as submit,
    running,
    "user",
    account,
    day_lo_s,
    day_hi_s,
    count(*) as jobs,
    min(t_start) as t_start_min,
    max(t_end) as t_end_max,
    sum(in_window_s) as run_s,
    sum(cpu_seconds_requested) as cpu_req_s,
    sum(cpu_seconds_used) as cpu_used_s,
    sum(cpu_seconds_requested - cpu_seconds_used) as cpu_waste_s,
    sum(cpu_seconds_requested) filter (where cpu_seconds_used is not null) as cpu_req_known_s,
    sum(gpu_seconds_requested) as gpu_req_s,
    sum(gpu_seconds_used) as gpu_used_s,
    sum(gpu_seconds_requested - gpu_seconds_used) as gpu_waste_s,
    sum(gpu_seconds_requested) filter (where gpu_seconds_used is not null) as gpu_req_known_s,
    sum(mem_seconds_requested) as mem_req_gbs,
    sum(mem_seconds_used) as mem_used_gbs,
    sum(mem_seconds_requested - mem_seconds_used) as mem_waste_gbs,
    sum(mem_seconds_requested) filter (where mem_seconds_used is not null) as mem_req_known_gbs,
    count(*) filter (where usage_source = 'samples') as jobs_with_samples,
    count(*) filter (where usage_source = 'totals') as jobs_with_totals,
    count(*) filter (where gpus > 0) as gpu_held_jobs,
    sum(gpu_seconds_used) filter (where gpus > 0) as gpu_held_used_s,
    sum(gpu_seconds_requested) filter (where gpus > 0 and gpu_seconds_used is not null) as gpu_held_known_s,
    sum(gpu_seconds_requested) filter (where gpus > 0 and coalesce(min_runtime_s, 1) <> 0) as gpu_held_funded_s,
    sum(gpu_seconds_requested) filter (where gpus > 0 and min_runtime_s = 0) as gpu_held_unalloc_s,
    count(*) filter (where coalesce(cpus, 0) > 0) as cpu_held_jobs,
    sum(cpu_seconds_used) filter (where coalesce(cpus, 0) > 0) as cpu_held_used_s,
    sum(cpu_seconds_requested) filter (where coalesce(cpus, 0) > 0 and cpu_seconds_used is not null) as cpu_held_known_s,
    sum(cpu_seconds_requested) filter (where coalesce(cpus, 0) > 0 and coalesce(min_runtime_s, 1) <> 0) as cpu_held_funded_s,
    sum(cpu_seconds_requested) filter (where coalesce(cpus, 0) > 0 and min_runtime_s = 0) as cpu_held_unalloc_s,
    count(legacy_task_score) as legacy_jobs,
    sum(legacy_task_score) as legacy_task_score_sum,
    max(footprint_equiv_s) as footprint_max_s
from cube_jobs
group by cluster, submit_month, running, "user", account, day_lo_s, day_hi_s
order by cluster, submit_month, running, "user", account, day_lo_s, day_hi_s
