-- Totals for a window and filters in one row: jobs, users, requested / used / wasted GPU-hours, CPU-hours and
-- memory TB-hours with efficiencies (used / requested over jobs whose usage is known), and queue waits of jobs
-- that started in the window. Jobs count by their run time inside the window.
with
-- include: _jobs
-- include: _job_usage
totals as (
    select
        count(*) as jobs,
        count(distinct "user") as users,
        count(distinct team) as teams,
        sum(in_window_s) / 3600 as run_hours,
        sum(gpu_seconds_requested) / 3600 as gpu_hours_requested,
        sum(gpu_seconds_used) / 3600 as gpu_hours_used,
        sum(gpu_seconds_requested - gpu_seconds_used) / 3600 as gpu_hours_wasted,
        sum(gpu_seconds_used) / nullif(sum(gpu_seconds_requested) filter (where gpu_seconds_used is not null), 0)
            as gpu_efficiency,
        sum(cpu_seconds_requested) / 3600 as cpu_hours_requested,
        sum(cpu_seconds_used) / 3600 as cpu_hours_used,
        sum(cpu_seconds_requested - cpu_seconds_used) / 3600 as cpu_hours_wasted,
        sum(cpu_seconds_used) / nullif(sum(cpu_seconds_requested) filter (where cpu_seconds_used is not null), 0)
            as cpu_efficiency,
        sum(mem_seconds_requested) / 3.6e6 as mem_tb_hours_requested,
        sum(mem_seconds_used) / 3.6e6 as mem_tb_hours_used,
        sum(mem_seconds_requested - mem_seconds_used) / 3.6e6 as mem_tb_hours_wasted,
        sum(mem_seconds_used) / nullif(sum(mem_seconds_requested) filter (where mem_seconds_used is not null), 0)
            as mem_efficiency,
        count(*) filter (where usage_source = 'samples') as jobs_with_samples,
        count(*) filter (where usage_source = 'totals') as jobs_with_totals,
        count(*) filter (where usage_source is null) as jobs_without_usage
    from job_usage
),

waits as (
    select
        count(*) as jobs_started,
        median(greatest(t_start - t_submit, 0)) as wait_median_s,
        quantile_cont(greatest(t_start - t_submit, 0), 0.9) as wait_p90_s
    from filtered_jobs
    where t_start is not null and t_start >= w_start and t_start < w_end
)
select t.*, w.jobs_started, w.wait_median_s, w.wait_p90_s, ws.span_s / 3600 as span_hours
from totals as t, waits as w, window_span as ws
