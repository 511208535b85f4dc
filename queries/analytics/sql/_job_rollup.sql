-- Statement, not a fragment nor a named query (run by queries.analytics.rollup, never listed): one `job_rollup`
-- row per job of `jobs`, its sample figures over its whole run interval. They are _job_usage's sample_usage
-- with no window and no rollup: the caller registers an empty `job_rollup`, so every figure comes from the
-- samples, and narrows `jobs` and `samples` to the jobs it refreshes. A job that never started has a row with
-- no run interval (it takes no part in a query, and a later ingest that starts it replaces the row).
-- The same integrals per UTC day are `_job_day_rollup` (table job_day_rollup).
with
-- include: _jobs
-- include: _usage_all
-- include: _job_usage
rollup_rows as (
    select
        j.cluster,
        j.job_id,
        j.submit,
        j.t_start,
        case when j.t_start is not null then j.t_end end as t_end,
        j.open_run,  -- read by the caller (queries.analytics.rollup.derive), not stored
        j.cpus,
        j.gpus,
        j.mem_gb,
        coalesce(su.n_samples, 0) as n_samples,
        coalesce(su.n_cpu, 0) as n_cpu,
        coalesce(su.n_gpu, 0) as n_gpu,
        coalesce(su.n_mem, 0) as n_mem,
        su.cpu_used_s,
        su.gpu_used_s,
        su.mem_used_gbs,
        su.sampled_s,
        su.peak_cpus_sampled,
        su.peak_gpu_util_sampled,
        su.peak_mem_gb_sampled
    from stg_jobs as j
    left join sample_usage as su on su.cluster = j.cluster and su.job_id = j.job_id
)
select * from rollup_rows
order by cluster, job_id
