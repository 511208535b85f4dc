-- Fragment (not a query): per-job requested / used / wasted resource-seconds inside the window. Needs _jobs and
-- a CTE `usage_scope`: the filtered jobs it derives (_usage_all: all of them; _cube: those usage_cube does not
-- answer).
-- A job is in the window when its run interval [t_start, t_end) overlaps [w_start, w_end) (a zero-length
-- job when its start lies inside). Every amount is clipped to [lo, hi) = the run interval intersected with the window.
-- requested(r) = level x (hi - lo) with level = allocated where recorded, else requested.
-- used(r): the integral of the sampled curve where the job has samples with a value for r (each sample's
-- value holds over [ts, ts + interval_s), clipped to [lo, hi)); else from job totals spread evenly over the
-- run (cpu_seconds_used; mean_gpu_util x gpus; for memory the whole job's peak max_rss_gb: an upper bound,
-- mem_used_basis says 'peak'). Memory peaks (peak_mem_node_gb, peak_mem_util) are per node, compared with the
-- per-node request mem_node_gb, as Slurm's MaxRSS and --mem mean them. Usage is capped at the request at every instant (used = integral of min(u, r)), so waste
-- = integral of max(r - u, 0) and efficiency stays in 0..1: overuse at one moment never hides waste at another.
-- A job whose level of r is unknown (no CPU count, no memory request: SWF logs often lack one) has used(r)
-- null, not its uncapped usage: the cap is unknown, and a used amount without its requested one would push
-- efficiencies above 1 in every sum (used known implies requested known).
-- Rollup: a job whose whole run lies inside the window takes its sample figures (counts, capped integrals,
-- sampled peaks) from its `job_rollup` row (kept by ingest, queries.analytics.rollup) instead of its samples,
-- when that row was derived for the same run interval and the same levels (a RUNNING job's run grows with its
-- cluster's snapshot: its row has no run end when its samples all end by it, and then answers for any run end
-- at or after its samples' end; a row that does not match is ignored). Those are exactly the figures sample_usage
-- derives for such a job: clipping to [lo, hi) = [t_start, t_end) is the rollup's clipping, and counts and
-- peaks never depended on the window. A job the window cuts takes them from the row as well when both window
-- bounds are UTC midnights (or open): its integrals are then the sums of its per-day integrals (`job_day_rollup`)
-- over the window's days. Every other job (cut by a window that is not whole days, no row, a stale row) is
-- derived from its samples as before; a store without a rollup is answered entirely from samples.
jobs_in_window as not materialized (
    -- not materialized (see stg_jobs); jobs are keyed by (cluster, job_id), unique in the store. (A dense
    -- row_number() key would need this materialised and numbered by one thread: dearer than string keys.)
    select
        *,
        greatest(t_start, w_start) as lo,
        least(t_end, w_end) as hi,
        greatest(least(t_end, w_end) - greatest(t_start, w_start), 0) as in_window_s,
        t_end - t_start as run_s
    from usage_scope
    where t_start is not null
      and (least(t_end, w_end) > greatest(t_start, w_start)
           or (t_end = t_start and t_start >= w_start and t_start < w_end))
),

job_rates as (
    -- the constant rates a job's totals imply over its run, capped at the request (`case` keeps a null
    -- usage or a null level null: DuckDB's least() would ignore it)
    select
        *,
        case when cpus is null then null
             when run_s = 0 then cpu_seconds_total * 0  -- a zero-length run: known usage, 0 seconds of it
             when cpu_seconds_total / run_s > cpus then cpus
             else cpu_seconds_total / run_s end as cpu_rate_totals,
        case when mean_gpu_util > 1.0 then 1.0 else mean_gpu_util end * gpus as gpu_rate_totals,
        case when max_rss_gb <= mem_gb then max_rss_gb when max_rss_gb > mem_gb then mem_gb end as mem_rate_peak
    from jobs_in_window
),

jobs_rolled as materialized (
    -- every job in the window with its rollup row's figures (r_*) and whether that row answers for it (see
    -- above: same run interval and levels, and the window holds the whole run or is whole days). The one join
    -- with job_rollup: materialized (DuckDB keeps only the columns the query reads), so that job_usage and the
    -- samples fallback both read it; a `not materialized` match CTE referenced three times cost three scans of
    -- jobs and job_rollup and three hash joins, more than the samples join the rollup replaces
    select
        j.*,
        coalesce(
            r.t_start = j.t_start
            -- a row without a run end is an open run's whose samples all end by its run end: its figures hold
            -- for any run end at or after them, so the snapshot may move past it without a rewrite
            and (r.t_end = j.t_end
                 or (r.t_end is null and j.open_run and coalesce(r.samples_end_s, j.t_start) <= j.t_end))
            and r.cpus is not distinct from j.cpus and r.gpus is not distinct from j.gpus
            and r.mem_gb is not distinct from j.mem_gb
            and (j.w_start <= j.t_start and j.t_end <= j.w_end
                 or ((j.w_start = '-inf'::double or j.w_start % 86400 = 0)
                     and (j.w_end = 'inf'::double or j.w_end % 86400 = 0))),
            false) as rollup_answers,
        r.n_samples as r_n_samples, r.n_cpu as r_n_cpu, r.n_gpu as r_n_gpu, r.n_mem as r_n_mem,
        r.cpu_used_s as r_cpu_used_s, r.gpu_used_s as r_gpu_used_s, r.mem_used_gbs as r_mem_used_gbs,
        r.sampled_s as r_sampled_s, r.peak_cpus_sampled as r_peak_cpus_sampled,
        r.peak_gpu_util_sampled as r_peak_gpu_util_sampled, r.peak_mem_gb_sampled as r_peak_mem_gb_sampled
    from job_rates as j
    -- rows without a run interval can never answer; saying so also makes DuckDB estimate the rollup side
    -- smaller than the jobs side and build its hash table on it (numbers) rather than on the jobs (strings)
    -- (and only when some job is in the window: with usage_cube answering, often none is; and only rows whose
    -- run meets the window, said on the row's own columns so that DuckDB skips the files of other months)
    left join (select * from job_rollup
               where t_start is not null
                 and (t_end is null  -- an open run's row (above)
                      or (t_start <= t_end and t_end >= coalesce(epoch_us($start::timestamptz) / 1e6, '-inf'::double)))
                 and t_start < coalesce(epoch_us($end::timestamptz) / 1e6, 'inf'::double)
                 and exists (select 1 from jobs_in_window)) as r
        -- t_start as a key too: a row for another run interval never answers (rollup_answers), and DuckDB
        -- pushes the range of the jobs' starts into the scan of job_rollup, skipping the months no such job
        -- started in (the open runs and the jobs a window's bounds cut start in a few days of the year)
        on r.cluster = j.cluster and r.job_id = j.job_id and r.t_start = j.t_start
),

jobs_from_samples as (
    -- the jobs their rollup row does not answer for (no row, a stale row, a window cutting a day): derived from
    -- their samples. Usually empty, and DuckDB then never scans the samples
    select cluster, job_id, lo, hi, cpus, gpus, mem_gb from jobs_rolled where not rollup_answers
),

clipped_samples as (
    -- every sample of every job in the window the rollup does not answer for, clipped to [lo, hi) and capped
    -- at the request
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
    join jobs_from_samples as j on s.cluster = j.cluster and s.job_id = j.job_id
    where s.ts is not null and s.interval_s is not null
),

sample_usage as (
    -- per job: counts of sampled values, the integrals of the clipped capped curves, and sampled peaks
    -- (peaks over all the job's samples, inside the window or not: a peak describes the job)
    select
        cluster,
        job_id,
        count(*) as n_samples,
        count(cpu_used) as n_cpu,
        count(gpu_util) as n_gpu,
        count(mem_gb_used) as n_mem,
        sum(cpu_level * overlap_s) as cpu_used_s,
        sum(gpu_level * overlap_s) as gpu_used_s,
        sum(mem_level * overlap_s) as mem_used_gbs,
        sum(overlap_s) as sampled_s,
        max(cpu_used) as peak_cpus_sampled,
        max(gpu_util) as peak_gpu_util_sampled,
        max(mem_gb_used) as peak_mem_gb_sampled
    from clipped_samples
    group by cluster, job_id
),

day_usage as (
    -- per job, its per-day integrals summed over the window's days: what a job the window cuts takes when the
    -- window is whole days (job_usage uses it for those jobs only). Empty for a window with no finite bound
    -- (it cuts no job) or a bound inside a day (its cut jobs are derived from their samples), so that DuckDB
    -- reads no day row then
    select
        d.cluster,
        d.job_id,
        sum(d.cpu_used_s) as cpu_used_s,
        sum(d.gpu_used_s) as gpu_used_s,
        sum(d.mem_used_gbs) as mem_used_gbs,
        sum(d.sampled_s) as sampled_s
    from job_day_rollup as d
    cross join window_bounds as w
    -- only the jobs that take it (a semi-join before the sums: a month's window holds about a million day rows
    -- of jobs it holds whole, and a few thousand of the jobs it cuts)
    semi join (select cluster, job_id from jobs_rolled
               where rollup_answers and not (w_start <= t_start and t_end <= w_end)) as cut
        on cut.cluster = d.cluster and cut.job_id = d.job_id
    where d.day_s >= w.w_start and d.day_s < w.w_end
      and (w.w_start > '-inf'::double or w.w_end < 'inf'::double)
      and (w.w_start = '-inf'::double or w.w_start % 86400 = 0)
      and (w.w_end = 'inf'::double or w.w_end % 86400 = 0)
    group by d.cluster, d.job_id
),

job_usage as (
    select
        j.* exclude (rollup_answers, r_n_samples, r_n_cpu, r_n_gpu, r_n_mem, r_cpu_used_s, r_gpu_used_s,
                     r_mem_used_gbs, r_sampled_s, r_peak_cpus_sampled, r_peak_gpu_util_sampled, r_peak_mem_gb_sampled),
        coalesce(su.n_cpu, 0) > 0 as cpu_sampled,
        coalesce(su.n_gpu, 0) > 0 as gpu_sampled,
        coalesce(su.n_mem, 0) > 0 as mem_sampled,
        j.cpus * j.in_window_s as cpu_seconds_requested,
        j.gpus * j.in_window_s as gpu_seconds_requested,
        j.mem_gb * j.in_window_s as mem_seconds_requested,
        case when su.n_cpu > 0 then su.cpu_used_s else j.cpu_rate_totals * j.in_window_s end as cpu_seconds_used,
        case when j.gpus = 0 then 0.0  -- a job without GPUs used none of them: known, not missing
             when su.n_gpu > 0 then su.gpu_used_s else j.gpu_rate_totals * j.in_window_s end as gpu_seconds_used,
        case when su.n_mem > 0 then su.mem_used_gbs else j.mem_rate_peak * j.in_window_s end as mem_seconds_used,
        case when su.n_samples > 0 then 'samples'
             when j.cpu_seconds_total is not null or j.mean_gpu_util is not null or j.max_rss_gb is not null
                 then 'totals' end as usage_source,
        case when su.n_mem > 0 then 'samples' when j.max_rss_gb is not null then 'peak' end as mem_used_basis,
        su.sampled_s / nullif(j.in_window_s, 0) as sample_coverage,
        coalesce(j.max_cpu_util, su.peak_cpus_sampled / nullif(j.cpus, 0)) as peak_cpu_util,
        coalesce(j.max_gpu_util, su.peak_gpu_util_sampled) as peak_gpu_util,
        -- memory peaks are per node, like Slurm's MaxRSS and --mem (see _jobs: max_rss_node_gb); a sample holds
        -- the whole job's memory, spread evenly over its nodes. greatest() skips a null and keeps the peak at
        -- least the sampled one, so peak_mem_util >= the mean memory efficiency whatever the source.
        greatest(j.max_rss_node_gb, su.peak_mem_gb_sampled / greatest(coalesce(j.nodes, 1), 1))
            / nullif(j.mem_node_gb, 0) as peak_mem_util,
        coalesce(j.max_cpu_util * j.cpus, su.peak_cpus_sampled) as peak_cpus,
        greatest(j.max_rss_node_gb, su.peak_mem_gb_sampled / greatest(coalesce(j.nodes, 1), 1)) as peak_mem_node_gb
    from jobs_rolled as j
    left join sample_usage as su0 on su0.cluster = j.cluster and su0.job_id = j.job_id
    left join day_usage as du on du.cluster = j.cluster and du.job_id = j.job_id
    -- counts null unless the job has samples (sample_usage has no row for a job without samples); the whole
    -- run's integrals only when the window holds the whole run (a job the window cuts sums its days: day_usage)
    cross join lateral (
        select
            case when j.rollup_answers and j.r_n_samples > 0 then j.r_n_samples end as n_samples,
            case when j.rollup_answers and j.r_n_samples > 0 then j.r_n_cpu end as n_cpu,
            case when j.rollup_answers and j.r_n_samples > 0 then j.r_n_gpu end as n_gpu,
            case when j.rollup_answers and j.r_n_samples > 0 then j.r_n_mem end as n_mem,
            j.rollup_answers and not (j.w_start <= j.t_start and j.t_end <= j.w_end) as by_day,
            case when j.rollup_answers and j.w_start <= j.t_start and j.t_end <= j.w_end then j.r_cpu_used_s end as cpu_used_s,
            case when j.rollup_answers and j.w_start <= j.t_start and j.t_end <= j.w_end then j.r_gpu_used_s end as gpu_used_s,
            case when j.rollup_answers and j.w_start <= j.t_start and j.t_end <= j.w_end then j.r_mem_used_gbs end as mem_used_gbs,
            case when j.rollup_answers and j.w_start <= j.t_start and j.t_end <= j.w_end then j.r_sampled_s end as sampled_s,
            case when j.rollup_answers then j.r_peak_cpus_sampled end as peak_cpus_sampled,
            case when j.rollup_answers then j.r_peak_gpu_util_sampled end as peak_gpu_util_sampled,
            case when j.rollup_answers then j.r_peak_mem_gb_sampled end as peak_mem_gb_sampled
    ) as rm
    -- a job has figures from its samples (su0) or from its rollup row (rm, du), never both. A sum over the
    -- window's days is 0, not null, when the samples exist but none reaches into the window, as the sum over
    -- the samples is: null only when no sample has a value with a known level
    cross join lateral (
        select
            coalesce(su0.n_samples, rm.n_samples) as n_samples,
            coalesce(su0.n_cpu, rm.n_cpu) as n_cpu,
            coalesce(su0.n_gpu, rm.n_gpu) as n_gpu,
            coalesce(su0.n_mem, rm.n_mem) as n_mem,
            coalesce(su0.cpu_used_s, rm.cpu_used_s,
                     case when rm.by_day and rm.n_cpu > 0 and j.cpus is not null then coalesce(du.cpu_used_s, 0.0) end) as cpu_used_s,
            coalesce(su0.gpu_used_s, rm.gpu_used_s,
                     case when rm.by_day and rm.n_gpu > 0 then coalesce(du.gpu_used_s, 0.0) end) as gpu_used_s,
            coalesce(su0.mem_used_gbs, rm.mem_used_gbs,
                     case when rm.by_day and rm.n_mem > 0 and j.mem_gb is not null then coalesce(du.mem_used_gbs, 0.0) end) as mem_used_gbs,
            coalesce(su0.sampled_s, rm.sampled_s,
                     case when rm.by_day and rm.n_samples > 0 then coalesce(du.sampled_s, 0.0) end) as sampled_s,
            coalesce(su0.peak_cpus_sampled, rm.peak_cpus_sampled) as peak_cpus_sampled,
            coalesce(su0.peak_gpu_util_sampled, rm.peak_gpu_util_sampled) as peak_gpu_util_sampled,
            coalesce(su0.peak_mem_gb_sampled, rm.peak_mem_gb_sampled) as peak_mem_gb_sampled
    ) as su
),

window_span as (
    -- the window's length in seconds; an open bound is replaced by the store's extent (first start, last
    -- end of any job, whatever the filters) so that every query sees the same span
    select
        case when w.w_end < 'inf'::double then w.w_end else e.t_last end
        - case when w.w_start > '-inf'::double then w.w_start else e.t_first end as span_s
    from window_bounds as w, store_extent as e
),
