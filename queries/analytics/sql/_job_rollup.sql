-- Statement, not a fragment nor a named query (run by queries.analytics.rollup, never listed): one `job_rollup`
-- row per job of `jobs`, its sample figures over its whole run interval. They are _job_usage's sample_usage
-- with no window and no rollup: the caller registers an empty `job_rollup`, so every figure comes from the
-- samples, and narrows `jobs` and `samples` to the jobs it refreshes. A job that never started has a row with
-- no run interval (it takes no part in a query, and a later ingest that starts it replaces the row).
-- `days` holds the same integrals per UTC day of the run (a window of whole days sums them).
with
-- include: _jobs
-- include: _job_usage
day_pieces as (
    -- each sample's clipped interval split at UTC midnights (days are 86400 s of epoch time: UTC has no DST);
    -- a sample outside the run (an empty interval) adds nothing to any day
    select
        s.cluster,
        s.job_id,
        d.k * 86400.0 as day_s,
        s.cpu_level,
        s.gpu_level,
        s.mem_level,
        greatest(least(s.t_to, (d.k + 1) * 86400.0) - greatest(s.t_from, d.k * 86400.0), 0) as piece_s
    from clipped_samples as s,
         unnest(range(floor(s.t_from / 86400.0)::bigint, ceil(s.t_to / 86400.0)::bigint)) as d(k)
    where s.t_to > s.t_from
),

day_rows as (
    select
        cluster,
        job_id,
        list({'day_s': day_s, 'cpu_used_s': cpu_used_s, 'gpu_used_s': gpu_used_s, 'mem_used_gbs': mem_used_gbs,
              'sampled_s': sampled_s} order by day_s) as days
    from (
        select
            cluster,
            job_id,
            day_s,
            sum(cpu_level * piece_s) as cpu_used_s,
            sum(gpu_level * piece_s) as gpu_used_s,
            sum(mem_level * piece_s) as mem_used_gbs,
            sum(piece_s) as sampled_s
        from day_pieces
        group by cluster, job_id, day_s
    )
    group by cluster, job_id
),

rollup_rows as (
    select
        j.cluster,
        j.job_id,
        j.submit,
        j.t_start,
        case when j.t_start is not null then j.t_end end as t_end,
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
        su.peak_mem_gb_sampled,
        d.days
    from stg_jobs as j
    left join sample_usage as su on su.cluster = j.cluster and su.job_id = j.job_id
    left join day_rows as d on d.cluster = j.cluster and d.job_id = j.job_id
)
select * from rollup_rows
order by cluster, job_id
