-- Per-user waste ranking over a window and filters: absolute wasted GPU-hours, CPU-hours and memory
-- TB-hours (1 TB = 1e12 bytes) with efficiency, job count and footprint beside them, plus both scores of
-- DOMAIN.md section 3: the legacy score (legacy_*) and the recommended one split into its terms
-- (rec_efficiency, rec_confidence, rec_demand -> rec_coefficient). Jobs count by their run time inside the window.
-- param: order_by varchar null  sort by wasted gpu | cpu | mem | equiv (GPU-equivalent) hours, or legacy | recommended (best first); null = the selection's resource (gpu, or cpu without GPUs)
-- param: limit_rows integer null >=0  return at most this many rows (null = all)
with
-- include: _jobs
cube_wanted as (
    -- the cube's footprint maxima and legacy task scores are at _scores' default rates and time unit
    select $cpus_per_gpu::double = 16 and $gb_per_gpu::double = 128 and $legacy_time_unit_s::double = 60 as ok,
        null::double as period_s,
        null::double as origin
),
-- include: _cube
-- include: _job_usage
-- include: _resource
entity_jobs as (
    select j.*, j."user" as entity, 0 as period_k, ws.span_s
    from job_usage as j, window_span as ws
),

entity_cells as (
    select c.*, c."user" as entity, 0 as period_k, ws.span_s
    from cube_cells as c, window_span as ws
),
-- include: _scores
ranked as (
    select
        s.*,
        rank() over (order by s.gpu_hours_wasted desc nulls last) as rank_gpu_wasted,
        rank() over (order by s.cpu_hours_wasted desc nulls last) as rank_cpu_wasted,
        rank() over (order by s.mem_tb_hours_wasted desc nulls last) as rank_mem_wasted,
        rank() over (order by s.wasted_gpu_equiv_hours desc nulls last) as rank_equiv_wasted
    from scores as s
)
select
    entity as "user",
    main_account,
    main_team,
    job_count,
    run_hours,
    gpu_hours_requested, gpu_hours_used, gpu_hours_wasted, gpu_efficiency,
    cpu_hours_requested, cpu_hours_used, cpu_hours_wasted, cpu_efficiency,
    mem_tb_hours_requested, mem_tb_hours_used, mem_tb_hours_wasted, mem_efficiency,
    footprint_gpu_equiv_hours, known_gpu_equiv_hours, used_gpu_equiv_hours, wasted_gpu_equiv_hours,
    rank_gpu_wasted, rank_cpu_wasted, rank_mem_wasted, rank_equiv_wasted,
    legacy_jobs, legacy_task_score_avg, legacy_score, legacy_rank, legacy_coefficient,
    rec_efficiency, rec_efficiency_factor, rec_confidence, rec_demand, rec_demand_cap, rec_coefficient,
    span_s
from ranked
order by
    case coalesce($order_by::varchar, (select resource from chosen_resource))
        when 'gpu' then rank_gpu_wasted when 'cpu' then rank_cpu_wasted when 'mem' then rank_mem_wasted
        when 'equiv' then rank_equiv_wasted when 'legacy' then legacy_rank
        when 'recommended' then rank() over (order by rec_coefficient desc)
        else error('order_by must be gpu, cpu, mem, equiv, legacy or recommended, got ' || coalesce($order_by::varchar, 'null'))
    end nulls last,
    entity
limit coalesce($limit_rows::bigint, 9223372036854775807)
