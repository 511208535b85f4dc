-- Back-test of the quota loop: per user and period (weekly by default), the raw recommended coefficient the
-- period's jobs give (the terms of user_ranking run on that period alone: each job split by its run time
-- inside the period) and the coefficient the loop would apply after stabilising it. Per step, from 1.0:
--   held when the period has fewer than min_jobs jobs or less than min_gpu_equiv_hours known footprint:
--   smoothed and applied stay as they were;
--   smoothed = alpha x raw + (1 - alpha) x previous smoothed (EWMA);
--   target = smoothed clamped to [coef_min, coef_max];
--   applied = previous applied when |target - previous| <= dead_band (hysteresis), else previous moved
--   towards target by at most max_step, clamped to [coef_min, coef_max].
-- legacy_coefficient is the legacy rank coefficient of the same period, unsmoothed, for comparison.
-- param: period_s double 604800  period length in seconds (604800 = a week)
-- param: origin timestamp 1970-01-05  periods are aligned to this instant (default: a Monday, 00:00 UTC)
-- param: alpha double 0.2 >0 <=1  EWMA weight of the newest period (1 = no smoothing; 0.2 = a memory of about 5 periods)
-- param: dead_band double 0.15 >=0  the applied coefficient ignores target moves at most this large (hysteresis)
-- param: max_step double 0.25 >=0  the applied coefficient moves at most this much per period
-- param: min_jobs integer 3 >=0  fewer jobs in a period: hold the previous coefficient
-- param: min_gpu_equiv_hours double 1 >=0  less known GPU-equivalent footprint in a period: hold the previous coefficient
-- param: use_rollup boolean true  take the sampled integrals per period from job_day_rollup for periods and a window of whole days (false: from the samples)
-- Rollup: when the periods, their origin and the window's bounds are whole UTC days (or open), a job whose
-- job_rollup row answers for it (_job_usage's jobs_rolled: the same run interval and levels) takes its
-- integrals per period from the sums of its job_day_rollup rows over the period's days inside the window, and
-- whether it is sampled and its sampled CPU peak from its job_rollup row; the samples are read only for the
-- other jobs. Exact: the day rows are the same clipped, capped integrals, cut at midnights instead of periods.
-- Cube: then also (and _scores' rates at their defaults, use_cube on) the jobs whose days lie in one period are
-- not staged: that period reads their usage_cube cells (_cube.sql, cube_wanted's period_s and origin), and only
-- the jobs whose days cross a period boundary (or a window bound, or RUNNING) are split per job below.
with recursive
-- include: _jobs
periods as (
    select
        case when $period_s::double > 0 then $period_s::double
             else error('quota_backtest: period_s must be > 0') end as period_s,
        epoch_us(coalesce($origin::timestamptz, '1970-01-05 00:00:00+00'::timestamptz)) / 1e6 as origin
),

by_days as (
    -- one row when the rollup answers per period (periods and window of whole days), else none
    select 1 as ok
    from periods as p
    where coalesce($use_rollup::boolean, false)
      and p.period_s % 86400 = 0 and p.origin % 86400 = 0
      and ($start::timestamptz is null or epoch_us($start::timestamptz) % 86400000000 = 0)
      and ($end::timestamptz is null or epoch_us($end::timestamptz) % 86400000000 = 0)
),

cube_wanted as (
    -- usage_cube answers for the jobs a period holds whole (their days in one period: the cells of one
    -- period) when the rollup answers per period (by_days) and _scores' rates and time unit are the defaults
    -- the cube's footprint maxima and legacy task scores were summed at
    select
        exists (select 1 from by_days)
            and $cpus_per_gpu::double = 16 and $gb_per_gpu::double = 128 and $legacy_time_unit_s::double = 60
            as ok,
        p.period_s,
        p.origin
    from periods as p
),
-- include: _cube
-- include: _job_usage
backtest_jobs as (
    -- the jobs whose rollup row does not answer: their samples are clipped and split here
    select cluster, job_id, lo, hi, cpus, gpus, mem_gb
    from jobs_rolled
    where not (rollup_answers and exists (select 1 from by_days))
),

rolled_flags as (
    -- the jobs whose rollup row answers: sampled or not per resource, and their sampled CPU peak (over all
    -- their samples, as multi_period_samples)
    select
        cluster,
        job_id,
        r_n_cpu > 0 as cpu_sampled,
        r_n_gpu > 0 as gpu_sampled,
        r_n_mem > 0 as mem_sampled,
        r_peak_cpus_sampled as peak_cpus
    from jobs_rolled
    where rollup_answers and exists (select 1 from by_days)
),

rolled_periods as (
    -- their integrals per period: the sums of their day rows over the period's days inside the window
    select
        d.cluster,
        d.job_id,
        floor((d.day_s - p.origin) / p.period_s)::bigint as period_k,
        sum(d.cpu_used_s) as cpu_used_s,
        sum(d.gpu_used_s) as gpu_used_s,
        sum(d.mem_used_gbs) as mem_used_gbs
    from job_day_rollup as d
    semi join rolled_flags as f on f.cluster = d.cluster and f.job_id = d.job_id
    cross join periods as p
    cross join window_bounds as w
    where d.day_s >= w.w_start and d.day_s < w.w_end
    group by d.cluster, d.job_id, floor((d.day_s - p.origin) / p.period_s)::bigint
),

backtest_samples as (
    -- _job_usage's clipped_samples for every job in the window whose rollup row does not answer per period
    select
        s.cluster,
        s.job_id,
        j.lo as job_lo,
        j.hi as job_hi,
        greatest(epoch_us(s.ts) / 1e6, j.lo) as t_from,
        least(epoch_us(s.ts) / 1e6 + s.interval_s, j.hi) as t_to,
        s.cpu_used,
        s.gpu_util,
        s.mem_bytes / 1e9 as mem_gb_used,
        -- `case` rather than least(): a null usage or a null level must give null, least() would skip it
        case when s.cpu_used <= j.cpus then s.cpu_used when s.cpu_used > j.cpus then j.cpus end as cpu_level,
        case when s.gpu_util > 1.0 then 1.0 else s.gpu_util end * j.gpus as gpu_level,
        case when s.mem_bytes / 1e9 <= j.mem_gb then s.mem_bytes / 1e9 when s.mem_bytes / 1e9 > j.mem_gb then j.mem_gb end
            as mem_level,
        greatest(least(epoch_us(s.ts) / 1e6 + s.interval_s, j.hi) - greatest(epoch_us(s.ts) / 1e6, j.lo), 0)
            as overlap_s
    from samples as s
    join backtest_jobs as j on s.cluster = j.cluster and s.job_id = j.job_id
    where s.ts is not null and s.interval_s is not null
),

sample_pieces as (
    -- every sample of the window's jobs, split by period. A piece never leaves its job's periods: a sample
    -- outside its job's clipped run keeps one piece of length 0 in the job's nearest period, so that the job
    -- still counts as sampled there. One pass: almost every sample lies inside one period and unnests a
    -- one-element list (a union of "one period" and "several" would make DuckDB materialise every sample)
    select
        s.cluster, s.job_id, s.t_from, s.t_to, s.cpu_used, s.gpu_util, s.mem_gb_used, s.cpu_level, s.gpu_level,
        s.mem_level, b.job_k_to > b.job_k_from as multi_period,
        unnest(case when b.k_to > b.k_from then range(b.k_from, b.k_to + 1) else [b.k_from] end) as period_k
    from backtest_samples as s, periods as p,
         lateral (select floor((s.job_lo - p.origin) / p.period_s)::bigint as job_k_from,
                         greatest(ceil((s.job_hi - p.origin) / p.period_s) - 1,
                                  floor((s.job_lo - p.origin) / p.period_s))::bigint as job_k_to) as bj,
         lateral (select least(greatest(floor((s.t_from - p.origin) / p.period_s)::bigint, bj.job_k_from),
                               bj.job_k_to) as k_from,
                         least(greatest((ceil((s.t_to - p.origin) / p.period_s) - 1)::bigint, bj.job_k_from),
                               bj.job_k_to) as k_to,
                         bj.job_k_from, bj.job_k_to) as b
),

sample_periods as (
    select
        s.cluster,
        s.job_id,
        s.period_k,
        any_value(s.multi_period) as multi_period,
        count(s.cpu_used) as n_cpu,
        count(s.gpu_util) as n_gpu,
        count(s.mem_gb_used) as n_mem,
        max(s.cpu_used) as peak_cpus,
        sum(s.cpu_level * greatest(least(s.t_to, p.origin + (s.period_k + 1) * p.period_s)
                                   - greatest(s.t_from, p.origin + s.period_k * p.period_s), 0)) as cpu_used_s,
        sum(s.gpu_level * greatest(least(s.t_to, p.origin + (s.period_k + 1) * p.period_s)
                                   - greatest(s.t_from, p.origin + s.period_k * p.period_s), 0)) as gpu_used_s,
        sum(s.mem_level * greatest(least(s.t_to, p.origin + (s.period_k + 1) * p.period_s)
                                   - greatest(s.t_from, p.origin + s.period_k * p.period_s), 0)) as mem_used_gbs
    from sample_pieces as s, periods as p
    group by s.cluster, s.job_id, s.period_k
),

multi_period_samples as (
    -- what job_usage knows per job (sampled at all? sampled peak), needed apart only for the few jobs that
    -- run in several periods: a job in one period has all its pieces in its one sample_periods row
    select
        cluster,
        job_id,
        sum(n_cpu) > 0 as cpu_sampled,
        sum(n_gpu) > 0 as gpu_sampled,
        sum(n_mem) > 0 as mem_sampled,
        max(peak_cpus) as peak_cpus
    from sample_periods
    where multi_period
    group by cluster, job_id
    union all
    select cluster, job_id, cpu_sampled, gpu_sampled, mem_sampled, peak_cpus from rolled_flags
),

period_usage as (
    select cluster, job_id, period_k, n_cpu, n_gpu, n_mem, peak_cpus, cpu_used_s, gpu_used_s, mem_used_gbs
    from sample_periods
    union all
    select cluster, job_id, period_k, null, null, null, null, cpu_used_s, gpu_used_s, mem_used_gbs
    from rolled_periods
),

job_periods as (
    -- one row per job and period its clipped run interval reaches into (a zero-length job: the one it is in),
    -- in one pass as in sample_pieces. From jobs_rolled (materialized, job_rates' columns and more): job_rates
    -- is not, and a second reference would stage the window's jobs a second time
    select
        j.*,
        unnest(case when b.k_to > b.k_from then range(b.k_from, b.k_to + 1) else [b.k_from] end) as period_k
    from jobs_rolled as j, periods as p,
         lateral (select floor((j.lo - p.origin) / p.period_s)::bigint as k_from,
                         (ceil((j.hi - p.origin) / p.period_s) - 1)::bigint as k_to) as b
),

job_period_usage as (
    select
        j.*,
        coalesce(js.cpu_sampled, sp.n_cpu > 0, false) as cpu_sampled,
        coalesce(js.gpu_sampled, sp.n_gpu > 0, false) as gpu_sampled,
        coalesce(js.mem_sampled, sp.n_mem > 0, false) as mem_sampled,
        coalesce(j.max_cpu_util, coalesce(js.peak_cpus, sp.peak_cpus) / nullif(j.cpus, 0)) as peak_cpu_util,
        sp.cpu_used_s,
        sp.gpu_used_s,
        sp.mem_used_gbs,
        greatest(j.lo, p.origin + j.period_k * p.period_s) as p_lo,
        least(j.hi, p.origin + (j.period_k + 1) * p.period_s) as p_hi,
        least(p.origin + (j.period_k + 1) * p.period_s, j.w_end)
            - greatest(p.origin + j.period_k * p.period_s, j.w_start) as p_span_s
    from job_periods as j
    left join period_usage as sp
        on sp.cluster = j.cluster and sp.job_id = j.job_id and sp.period_k = j.period_k
    left join multi_period_samples as js on js.cluster = j.cluster and js.job_id = j.job_id
    cross join periods as p
),

entity_jobs as (
    select
        j."user" as entity,
        j.period_k,
        j.p_span_s as span_s,
        j."user",
        j.account,
        j.team,
        j.req_cpus,
        j.cpus,
        j.peak_cpu_util,
        j.p_hi - j.p_lo as in_window_s,
        j.cpus * (j.p_hi - j.p_lo) as cpu_seconds_requested,
        j.gpus * (j.p_hi - j.p_lo) as gpu_seconds_requested,
        j.mem_gb * (j.p_hi - j.p_lo) as mem_seconds_requested,
        -- a period the samples do not reach used 0 of a sampled job; an unknown level leaves usage unknown
        case when j.cpus is null then null
             when j.cpu_sampled then coalesce(j.cpu_used_s, 0.0)
             else j.cpu_rate_totals * (j.p_hi - j.p_lo) end as cpu_seconds_used,
        case when j.gpus = 0 then 0.0
             when j.gpu_sampled then coalesce(j.gpu_used_s, 0.0)
             else j.gpu_rate_totals * (j.p_hi - j.p_lo) end as gpu_seconds_used,
        case when j.mem_gb is null then null
             when j.mem_sampled then coalesce(j.mem_used_gbs, 0.0)
             else j.mem_rate_peak * (j.p_hi - j.p_lo) end as mem_seconds_used
    from job_period_usage as j
),
entity_cells as (
    -- the cells of the jobs a period holds whole (_cube reads only those), as entity_jobs' rows of that period
    select
        c.*,
        c."user" as entity,
        k.period_k,
        least(p.origin + (k.period_k + 1) * p.period_s, w.w_end) - greatest(p.origin + k.period_k * p.period_s, w.w_start)
            as span_s
    from cube_cells as c, periods as p, window_bounds as w,
         lateral (select floor((c.day_lo_s - p.origin) / p.period_s)::bigint as period_k) as k
),
-- include: _scores
bounds as (
    select min(period_k) as k_first, max(period_k) as k_last from scores
),

grid as (
    select
        u.entity,
        r.k as period_k,
        r.k - b.k_first as step,
        s.job_count,
        s.known_gpu_equiv_hours,
        s.rec_efficiency,
        s.rec_confidence,
        s.rec_demand,
        s.rec_coefficient,
        s.legacy_coefficient,
        coalesce(s.job_count, 0) >= $min_jobs::integer
            and coalesce(s.known_gpu_equiv_hours, 0) >= $min_gpu_equiv_hours::double as enough
    from (select distinct entity from scores) as u
    cross join bounds as b
    cross join range(b.k_first, b.k_last + 1) as r(k)
    left join scores as s on s.entity = u.entity and s.period_k = r.k
),

loop(entity, step, smoothed, applied) as (
    select distinct entity, -1::bigint, 1.0::double, 1.0::double from grid
    union all
    select
        g.entity,
        g.step,
        x.smoothed,
        case when not g.enough or abs(x.target - l.applied) <= $dead_band::double then l.applied
             else greatest($coef_min::double, least($coef_max::double,
                      l.applied + greatest(-$max_step::double, least($max_step::double, x.target - l.applied))))
        end
    from loop as l
    join grid as g on g.entity = l.entity and g.step = l.step + 1,
    lateral (
        select
            case when g.enough then $alpha::double * g.rec_coefficient + (1 - $alpha::double) * l.smoothed
                 else l.smoothed end as smoothed,
            greatest($coef_min::double, least($coef_max::double,
                case when g.enough then $alpha::double * g.rec_coefficient + (1 - $alpha::double) * l.smoothed
                     else l.smoothed end)) as target
    ) as x
)
select
    g.entity as "user",
    to_timestamp(p.origin + g.period_k * p.period_s) as period_start,
    g.period_k,
    coalesce(g.job_count, 0) as job_count,
    coalesce(g.known_gpu_equiv_hours, 0.0) as known_gpu_equiv_hours,
    g.rec_efficiency,
    g.rec_confidence,
    g.rec_demand,
    g.rec_coefficient as raw_coefficient,
    not g.enough as held,
    l.smoothed as smoothed_coefficient,
    l.applied as coefficient,
    l.applied - lag(l.applied, 1, 1.0) over (partition by g.entity order by g.period_k) as coefficient_change,
    g.legacy_coefficient
from grid as g
join loop as l on l.entity = g.entity and l.step = g.step
cross join periods as p
order by g.entity, g.period_k
