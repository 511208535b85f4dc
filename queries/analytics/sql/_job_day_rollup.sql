-- Statement, not a fragment nor a named query (run by queries.analytics.rollup, never listed): the
-- `job_day_rollup` rows of the jobs of `jobs`, one per job and UTC day its run's samples reach, with the
-- integrals of `_job_rollup` over that day's part of the run (the caller registers an empty rollup and narrows
-- `jobs` and `samples`, as for `_job_rollup`). A window of whole days sums them over its days.
with
-- include: _jobs
-- include: _usage_all
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
        p.cluster,
        p.job_id,
        any_value(j.submit) as submit,
        p.day_s,
        sum(p.cpu_level * p.piece_s) as cpu_used_s,
        sum(p.gpu_level * p.piece_s) as gpu_used_s,
        sum(p.mem_level * p.piece_s) as mem_used_gbs,
        sum(p.piece_s) as sampled_s
    from day_pieces as p
    join stg_jobs as j on j.cluster = p.cluster and j.job_id = p.job_id
    group by p.cluster, p.job_id, p.day_s
)
select * from day_rows
order by cluster, job_id, day_s
