-- Statement, not a fragment nor a named query (run by queries.analytics.usage_hours, never listed): the
-- `usage_hours` rows of the jobs of `jobs`. A cell is (cluster, submit month, user, account, hour or UTC day):
-- the requested, used and unknown-usage resource-seconds of CPU, GPU and memory its jobs put into that hour
-- (grain_s 3600) or day (grain_s 86400), exactly as gap_area counts them per bucket: each job's run interval
-- clipped to the cell (requested: its level; unknown: its level again when its usage of the resource is
-- unknown), each sample's interval clipped to the run and to the cell, its value capped at the level (GPU
-- utilisation at 1), and the job totals spread evenly over the run where the job has no sample of the resource.
-- The caller registers an empty `job_rollup` (every job's clipped samples come from `samples`) and narrows
-- `jobs` and `samples` to the months it refreshes. A RUNNING job whose end is the query's window's
-- (_jobs: end_from_window) and a job with an empty run are in no cell (gap_area adds nothing for the latter).
-- A RUNNING job without an end (_jobs: open_run) puts only its sampled usage into the cells (each sample clipped
-- to its run, which the samples end inside: queries.analytics.rollup re-derives a job whose samples reach past
-- its run end at each snapshot move): its requested, unknown and totals-based usage depend on its run end, which
-- moves with every snapshot, and gap_area derives them per job. So a snapshot move changes no cell. Its sampled
-- usage is in cells of their own (`open_run` true, written in files of their own): new samples of a long job
-- re-derive its user's open cells, not the cells of every job the user ran that month. The column `running` is
-- false (true marked the cells of RUNNING jobs of a table written before, see _hour_cells).
with
-- include: _jobs
-- include: _usage_all
-- include: _job_usage
hour_jobs as (
    -- no window: [lo, hi) is the whole run
    select
        j.cluster,
        j.job_id,
        date_trunc('month', j.submit) as submit_month,
        j.open_run,
        j."user",
        j.account,
        j.lo,
        j.hi,
        j.cpus,
        j.gpus,
        j.mem_gb,
        coalesce(su.n_cpu, 0) > 0 as cpu_sampled,
        coalesce(su.n_gpu, 0) > 0 as gpu_sampled,
        coalesce(su.n_mem, 0) > 0 as mem_sampled,
        j.cpu_rate_totals,
        j.gpu_rate_totals,
        j.mem_rate_peak
    from job_rates as j
    left join sample_usage as su on su.cluster = j.cluster and su.job_id = j.job_id
    where not j.end_from_window and j.hi > j.lo
),

run_pieces as (
    -- each run split at the hours: requested, unknown usage (gap_area's usage_known: a known level and samples
    -- or totals for the resource; no GPUs = 0 used, known) and used from totals (jobs without samples of it)
    select
        j.cluster, j.submit_month, j.open_run, j."user", j.account, h.k * 3600.0 as hour_s,
        j.cpus * p.piece_s as cpu_req_s,
        case when not (j.cpu_sampled or j.cpu_rate_totals is not null) then j.cpus * p.piece_s end as cpu_unknown_s,
        case when not j.cpu_sampled then j.cpu_rate_totals * p.piece_s end as cpu_used_s,
        j.gpus * p.piece_s as gpu_req_s,
        case when not (j.gpus = 0 or j.gpu_sampled or j.gpu_rate_totals is not null) then j.gpus * p.piece_s end
            as gpu_unknown_s,
        case when not j.gpu_sampled then j.gpu_rate_totals * p.piece_s end as gpu_used_s,
        j.mem_gb * p.piece_s as mem_req_gbs,
        case when not (j.mem_sampled or j.mem_rate_peak is not null) then j.mem_gb * p.piece_s end as mem_unknown_gbs,
        case when not j.mem_sampled then j.mem_rate_peak * p.piece_s end as mem_used_gbs
    from hour_jobs as j,
         unnest(range(floor(j.lo / 3600.0)::bigint, ceil(j.hi / 3600.0)::bigint)) as h(k),
         lateral (select least(j.hi, (h.k + 1) * 3600.0) - greatest(j.lo, h.k * 3600.0) as piece_s) as p
    where not j.open_run
),

sample_pieces as (
    -- used, sampled: each sample's interval clipped to the run (clipped_samples: levels capped) split at the
    -- hours; a sample outside the run (an empty interval) adds nothing
    select
        j.cluster, j.submit_month, j.open_run, j."user", j.account, h.k * 3600.0 as hour_s,
        s.cpu_level * p.piece_s as cpu_used_s,
        s.gpu_level * p.piece_s as gpu_used_s,
        s.mem_level * p.piece_s as mem_used_gbs
    from clipped_samples as s
    join hour_jobs as j on j.cluster = s.cluster and j.job_id = s.job_id,
         unnest(range(floor(s.t_from / 3600.0)::bigint, ceil(s.t_to / 3600.0)::bigint)) as h(k),
         lateral (select least(s.t_to, (h.k + 1) * 3600.0) - greatest(s.t_from, h.k * 3600.0) as piece_s) as p
    where s.t_to > s.t_from
),

pieces as (
    select cluster, submit_month, open_run, "user", account, hour_s, cpu_req_s, cpu_used_s, cpu_unknown_s, gpu_req_s,
           gpu_used_s, gpu_unknown_s, mem_req_gbs, mem_used_gbs, mem_unknown_gbs
    from run_pieces
    union all
    select cluster, submit_month, open_run, "user", account, hour_s, null, cpu_used_s, null, null, gpu_used_s, null, null,
           mem_used_gbs, null
    from sample_pieces
),

hours as materialized (
    select
        cluster, submit_month, open_run, "user", account, hour_s,
        sum(cpu_req_s) as cpu_req_s, sum(cpu_used_s) as cpu_used_s, sum(cpu_unknown_s) as cpu_unknown_s,
        sum(gpu_req_s) as gpu_req_s, sum(gpu_used_s) as gpu_used_s, sum(gpu_unknown_s) as gpu_unknown_s,
        sum(mem_req_gbs) as mem_req_gbs, sum(mem_used_gbs) as mem_used_gbs, sum(mem_unknown_gbs) as mem_unknown_gbs
    from pieces
    group by cluster, submit_month, open_run, "user", account, hour_s
)
select cluster, submit_month as submit, false as running, open_run, "user", account, 3600.0 as grain_s, hour_s as t_s,
       cpu_req_s, cpu_used_s, cpu_unknown_s, gpu_req_s, gpu_used_s, gpu_unknown_s, mem_req_gbs, mem_used_gbs,
       mem_unknown_gbs
from hours
union all
-- the same cells summed per UTC day: a query whose buckets and window are whole days reads 24x fewer rows
select cluster, submit_month, false, open_run, "user", account, 86400.0, floor(hour_s / 86400.0) * 86400.0,
       sum(cpu_req_s), sum(cpu_used_s), sum(cpu_unknown_s), sum(gpu_req_s), sum(gpu_used_s), sum(gpu_unknown_s),
       sum(mem_req_gbs), sum(mem_used_gbs), sum(mem_unknown_gbs)
from hours
group by cluster, submit_month, open_run, "user", account, floor(hour_s / 86400.0)
order by cluster, submit, open_run, "user", account, grain_s, t_s
