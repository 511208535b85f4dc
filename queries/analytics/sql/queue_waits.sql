-- Queue waits (start - submit, seconds) per job class and team, with per-class and overall rows
-- (job_class / team = '(all)'). A job counts in the window by its start time (when its wait ended), unlike
-- the usage queries; jobs submitted in the window that never started are counted beside (their wait is
-- censored, so it is not in the quantiles). Quantiles are linear interpolation (quantile_cont).
with
-- include: _jobs
started as (
    select
        coalesce(job_class, '(none)') as job_class,
        team,
        greatest(epoch_us(start) - epoch_us(submit), 0) / 1e6 as wait_s  -- integer microseconds: exact
    from filtered_jobs
    where t_start is not null and t_start >= w_start and t_start < w_end
),

never_started as (
    select coalesce(job_class, '(none)') as job_class, team, count(*) as n
    from filtered_jobs
    where t_start is null and t_submit >= w_start and t_submit < w_end
    group by grouping sets ((coalesce(job_class, '(none)'), team), (coalesce(job_class, '(none)')), ())
),

waits as (
    select
        job_class,
        team,
        grouping(job_class) as g_class,
        grouping(team) as g_team,
        count(*) as jobs_started,
        -- one aggregate for the three quantiles: DuckDB then gathers and sorts the waits once, not three times
        -- (median = quantile_cont 0.5 on numbers)
        quantile_cont(wait_s, [0.5, 0.9, 0.99]) as wait_quantiles_s,
        avg(wait_s) as wait_mean_s,
        max(wait_s) as wait_max_s,
        count(*) filter (where wait_s = 0) / count(*) as share_started_immediately
    from started
    group by grouping sets ((job_class, team), (job_class), ())
)
select
    case when w.g_class = 1 then '(all)' else w.job_class end as job_class,
    case when w.g_team = 1 then '(all)' else w.team end as team,
    w.jobs_started,
    coalesce(n.n, 0) as jobs_never_started,
    w.wait_quantiles_s[1] as wait_median_s,
    w.wait_quantiles_s[2] as wait_p90_s,
    w.wait_quantiles_s[3] as wait_p99_s,
    w.wait_mean_s,
    w.wait_max_s,
    w.share_started_immediately
from waits as w
left join never_started as n
    on n.job_class is not distinct from (case when w.g_class = 1 then null else w.job_class end)
   and n.team is not distinct from (case when w.g_team = 1 then null else w.team end)
order by w.g_class, w.job_class, w.g_team, w.team
