-- Totals for a window and filters in one row: jobs, users, requested / used / wasted GPU-hours, CPU-hours and
-- memory TB-hours with efficiencies (used / requested over jobs whose usage is known), and queue waits of jobs
-- that started in the window. Jobs count by their run time inside the window.
with
-- include: _jobs
cube_wanted as (select true as ok, null::double as period_s, null::double as origin),
-- include: _cube
-- include: _job_usage
usage_parts as (
    -- per job the sums totals takes (as a cell of one job), and the cube's cells the window holds whole
    select
        "user", team, 1 as jobs, in_window_s as run_s,
        gpu_seconds_requested as gpu_req_s, gpu_seconds_used as gpu_used_s,
        gpu_seconds_requested - gpu_seconds_used as gpu_waste_s,
        case when gpu_seconds_used is not null then gpu_seconds_requested end as gpu_req_known_s,
        cpu_seconds_requested as cpu_req_s, cpu_seconds_used as cpu_used_s,
        cpu_seconds_requested - cpu_seconds_used as cpu_waste_s,
        case when cpu_seconds_used is not null then cpu_seconds_requested end as cpu_req_known_s,
        mem_seconds_requested as mem_req_gbs, mem_seconds_used as mem_used_gbs,
        mem_seconds_requested - mem_seconds_used as mem_waste_gbs,
        case when mem_seconds_used is not null then mem_seconds_requested end as mem_req_known_gbs,
        case when usage_source = 'samples' then 1 else 0 end as jobs_with_samples,
        case when usage_source = 'totals' then 1 else 0 end as jobs_with_totals
    from job_usage
    union all by name
    select
        "user", team, jobs, run_s, gpu_req_s, gpu_used_s, gpu_waste_s, gpu_req_known_s,
        cpu_req_s, cpu_used_s, cpu_waste_s, cpu_req_known_s,
        mem_req_gbs, mem_used_gbs, mem_waste_gbs, mem_req_known_gbs, jobs_with_samples, jobs_with_totals
    from cube_cells
),

totals as (
    select
        coalesce(sum(jobs), 0)::bigint as jobs,
        count(distinct "user") as users,
        count(distinct team) as teams,
        sum(run_s) / 3600 as run_hours,
        sum(gpu_req_s) / 3600 as gpu_hours_requested,
        sum(gpu_used_s) / 3600 as gpu_hours_used,
        sum(gpu_waste_s) / 3600 as gpu_hours_wasted,
        sum(gpu_used_s) / nullif(sum(gpu_req_known_s), 0) as gpu_efficiency,
        sum(cpu_req_s) / 3600 as cpu_hours_requested,
        sum(cpu_used_s) / 3600 as cpu_hours_used,
        sum(cpu_waste_s) / 3600 as cpu_hours_wasted,
        sum(cpu_used_s) / nullif(sum(cpu_req_known_s), 0) as cpu_efficiency,
        sum(mem_req_gbs) / 3.6e6 as mem_tb_hours_requested,
        sum(mem_used_gbs) / 3.6e6 as mem_tb_hours_used,
        sum(mem_waste_gbs) / 3.6e6 as mem_tb_hours_wasted,
        sum(mem_used_gbs) / nullif(sum(mem_req_known_gbs), 0) as mem_efficiency,
        coalesce(sum(jobs_with_samples), 0)::bigint as jobs_with_samples,
        coalesce(sum(jobs_with_totals), 0)::bigint as jobs_with_totals,
        coalesce(sum(jobs - jobs_with_samples - jobs_with_totals), 0)::bigint as jobs_without_usage
    from usage_parts
),

waits as (
    select
        count(*) as jobs_started,
        -- one aggregate for both quantiles: the waits gathered and sorted once (median = quantile_cont 0.5)
        quantile_cont(greatest(t_start - t_submit, 0), [0.5, 0.9]) as wait_quantiles_s
    from filtered_jobs
    -- the same test on the raw column as well, which DuckDB pushes into the scan (files of other months skipped)
    where t_start is not null and t_start >= w_start and t_start < w_end
      and ($start::timestamptz is null or start >= $start::timestamptz)
      and ($end::timestamptz is null or start < $end::timestamptz)
)
select t.*, w.jobs_started, w.wait_quantiles_s[1] as wait_median_s, w.wait_quantiles_s[2] as wait_p90_s,
    ws.span_s / 3600 as span_hours
from totals as t, waits as w, window_span as ws
