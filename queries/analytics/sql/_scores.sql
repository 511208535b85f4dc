-- Fragment (not a query): waste totals and both scores per (period_k, entity). Needs a CTE `entity_jobs`:
-- job_usage rows plus `entity` (user or team), `period_k` (0 when there are no periods) and `span_s` (the
-- length of the period or window, equal on all rows of one period); and a CTE `entity_cells`: usage_cube
-- cells (_cube's cube_cells) with the same three columns, for jobs entity_jobs does not hold (_no_cube_cells
-- when there are none). A cell's sums add up as its jobs' rows would; its footprint maximum and legacy score
-- sum are the cube's, at the default rates and time unit (_cube's cube_wanted checks them).
-- Legacy score (DOMAIN.md section 3, as it ran): task = ln(cpu_request x running_time + 50) x
-- exp(2.5 - max_cpu_util), running_time = in-window run time / legacy_time_unit_s; score = avg(task) /
-- ln(job_count / 10 + 1) over jobs with a peak CPU utilisation; rank 1 = lowest score; coefficient =
-- best x (worst / best) ^ ((rank - 1) / (n - 1)).
-- Recommended score, three terms over GPU-equivalent resource-seconds (1 GPU = cpus_per_gpu CPUs =
-- gb_per_gpu GB), sums only, so splitting a job into N pieces changes none of them:
--   efficiency E = used / requested over the footprint whose usage is known (absolute, not a rank);
--   confidence c = F / (F + confidence_hours), F = that known footprint in hours;
--   demand D = used GPU-equivalents per second of span_s / base_quota_gpus.
--   factor f(E) = coef_min x (coef_max / coef_min) ^ clamp((E - eff_floor) / (eff_ceil - eff_floor), 0, 1);
--   coefficient = min(f(E) ^ c, max(1, demand_headroom x D)); 1 when E is unknown. Always in [coef_min, coef_max].
-- param: cpus_per_gpu double 16 >0  CPU cores that count as one GPU in GPU-equivalent footprints
-- param: gb_per_gpu double 128 >0  memory GB that count as one GPU in GPU-equivalent footprints
-- param: legacy_time_unit_s double 60 >0  unit of running_time in the legacy task score, seconds (60 = minutes)
-- param: legacy_coef_best double 3 >0  legacy coefficient of the best-ranked (lowest score) entity
-- param: legacy_coef_worst double 0.25 >0  legacy coefficient of the worst-ranked entity
-- param: eff_floor double 0.1 >=0 <=1  efficiency at or below which the efficiency factor is coef_min
-- param: eff_ceil double 0.9 >=0 <=1  efficiency at or above which the efficiency factor is coef_max
-- param: coef_min double 0.25 >0  lower bound of the recommended coefficient
-- param: coef_max double 3 >0  upper bound of the recommended coefficient
-- param: confidence_hours double 10 >0  known GPU-equivalent footprint (hours) at which confidence is 0.5
-- param: base_quota_gpus double 8 >0  the base quota (GPU-equivalents) a coefficient multiplies, for the demand term
-- param: demand_headroom double 2 >0  a coefficient above 1 is capped at demand_headroom x demand
weighted_jobs as (
    select
        *,
        coalesce(gpu_seconds_requested, 0)
            + coalesce(cpu_seconds_requested, 0) / $cpus_per_gpu::double
            + coalesce(mem_seconds_requested, 0) / $gb_per_gpu::double as footprint_equiv_s,
        case when gpu_seconds_used is not null then gpu_seconds_requested else 0 end
            + case when cpu_seconds_used is not null then cpu_seconds_requested else 0 end / $cpus_per_gpu::double
            + coalesce(case when mem_seconds_used is not null then mem_seconds_requested end, 0) / $gb_per_gpu::double
            as known_equiv_s,
        coalesce(gpu_seconds_used, 0)
            + coalesce(cpu_seconds_used, 0) / $cpus_per_gpu::double
            + coalesce(mem_seconds_used, 0) / $gb_per_gpu::double as used_equiv_s,
        case when peak_cpu_util is not null and coalesce(req_cpus, cpus) is not null then
            ln(coalesce(req_cpus, cpus) * in_window_s / $legacy_time_unit_s::double + 50)
                * exp(2.5 - peak_cpu_util)
        end as legacy_task_score
    from entity_jobs
),

job_parts as (
    -- per job, the sums entity_totals takes (as a cell of one job)
    select
        period_k, entity, span_s, account, team, "user",
        1 as jobs,
        in_window_s as run_s,
        cpu_seconds_requested as cpu_req_s,
        cpu_seconds_used as cpu_used_s,
        cpu_seconds_requested - cpu_seconds_used as cpu_waste_s,
        case when cpu_seconds_used is not null then cpu_seconds_requested end as cpu_req_known_s,
        gpu_seconds_requested as gpu_req_s,
        gpu_seconds_used as gpu_used_s,
        gpu_seconds_requested - gpu_seconds_used as gpu_waste_s,
        case when gpu_seconds_used is not null then gpu_seconds_requested end as gpu_req_known_s,
        mem_seconds_requested as mem_req_gbs,
        mem_seconds_used as mem_used_gbs,
        mem_seconds_requested - mem_seconds_used as mem_waste_gbs,
        case when mem_seconds_used is not null then mem_seconds_requested end as mem_req_known_gbs,
        footprint_equiv_s,
        footprint_equiv_s as footprint_max_s,
        known_equiv_s,
        used_equiv_s,
        known_equiv_s - used_equiv_s as waste_equiv_s,
        case when legacy_task_score is not null then 1 else 0 end as legacy_jobs,
        legacy_task_score as legacy_task_score_sum
    from weighted_jobs
),

entity_parts as (
    select * from job_parts
    union all by name
    -- per cell: its sums, weighted as weighted_jobs weighs a job's (the known / used / wasted parts per
    -- resource are each a sum over the cell's jobs, so the weighted sums are the sums of the jobs' weighted ones)
    select
        period_k, entity, span_s, account, team, "user", jobs, run_s,
        cpu_req_s, cpu_used_s, cpu_waste_s, cpu_req_known_s,
        gpu_req_s, gpu_used_s, gpu_waste_s, gpu_req_known_s,
        mem_req_gbs, mem_used_gbs, mem_waste_gbs, mem_req_known_gbs,
        coalesce(gpu_req_s, 0) + coalesce(cpu_req_s, 0) / $cpus_per_gpu::double
            + coalesce(mem_req_gbs, 0) / $gb_per_gpu::double as footprint_equiv_s,
        footprint_max_s,
        coalesce(gpu_req_known_s, 0) + coalesce(cpu_req_known_s, 0) / $cpus_per_gpu::double
            + coalesce(mem_req_known_gbs, 0) / $gb_per_gpu::double as known_equiv_s,
        coalesce(gpu_used_s, 0) + coalesce(cpu_used_s, 0) / $cpus_per_gpu::double
            + coalesce(mem_used_gbs, 0) / $gb_per_gpu::double as used_equiv_s,
        coalesce(gpu_waste_s, 0) + coalesce(cpu_waste_s, 0) / $cpus_per_gpu::double
            + coalesce(mem_waste_gbs, 0) / $gb_per_gpu::double as waste_equiv_s,
        legacy_jobs,
        legacy_task_score_sum
    from entity_cells
),

entity_totals as (
    -- used and wasted are null (unknown), not 0, where the entity held the resource but no job of it records that usage:
    -- jobs without the resource (waste 0, trivially known) must not make an unknown waste read as none
    select
        period_k,
        entity,
        any_value(span_s) as span_s,
        arg_max(account, (footprint_max_s, account)) as main_account,  -- ties broken by name: deterministic
        arg_max(team, (footprint_max_s, team)) as main_team,
        sum(jobs)::bigint as job_count,
        count(distinct "user") as user_count,
        sum(run_s) / 3600 as run_hours,
        sum(cpu_req_s) / 3600 as cpu_hours_requested,
        case when coalesce(sum(cpu_req_known_s), 0) > 0 or coalesce(sum(cpu_req_s), 0) = 0 then sum(cpu_used_s) end / 3600 as cpu_hours_used,
        case when coalesce(sum(cpu_req_known_s), 0) > 0 or coalesce(sum(cpu_req_s), 0) = 0 then sum(cpu_waste_s) end / 3600 as cpu_hours_wasted,
        sum(cpu_used_s) / nullif(sum(cpu_req_known_s), 0) as cpu_efficiency,
        sum(gpu_req_s) / 3600 as gpu_hours_requested,
        case when coalesce(sum(gpu_req_known_s), 0) > 0 or coalesce(sum(gpu_req_s), 0) = 0 then sum(gpu_used_s) end / 3600 as gpu_hours_used,
        case when coalesce(sum(gpu_req_known_s), 0) > 0 or coalesce(sum(gpu_req_s), 0) = 0 then sum(gpu_waste_s) end / 3600 as gpu_hours_wasted,
        sum(gpu_used_s) / nullif(sum(gpu_req_known_s), 0) as gpu_efficiency,
        sum(mem_req_gbs) / 3.6e6 as mem_tb_hours_requested,
        case when coalesce(sum(mem_req_known_gbs), 0) > 0 or coalesce(sum(mem_req_gbs), 0) = 0 then sum(mem_used_gbs) end / 3.6e6 as mem_tb_hours_used,
        case when coalesce(sum(mem_req_known_gbs), 0) > 0 or coalesce(sum(mem_req_gbs), 0) = 0 then sum(mem_waste_gbs) end / 3.6e6 as mem_tb_hours_wasted,
        sum(mem_used_gbs) / nullif(sum(mem_req_known_gbs), 0) as mem_efficiency,
        sum(footprint_equiv_s) / 3600 as footprint_gpu_equiv_hours,
        sum(known_equiv_s) / 3600 as known_gpu_equiv_hours,
        sum(used_equiv_s) / 3600 as used_gpu_equiv_hours,
        sum(waste_equiv_s) / 3600 as wasted_gpu_equiv_hours,
        sum(used_equiv_s) / nullif(sum(known_equiv_s), 0) as rec_efficiency,
        sum(known_equiv_s) / (sum(known_equiv_s) + $confidence_hours::double * 3600) as rec_confidence,
        sum(used_equiv_s) / nullif(any_value(span_s), 0) / $base_quota_gpus::double as rec_demand,
        sum(legacy_jobs)::bigint as legacy_jobs,
        sum(legacy_task_score_sum) / nullif(sum(legacy_jobs), 0) as legacy_task_score_avg,
        sum(legacy_task_score_sum) / nullif(sum(legacy_jobs), 0) / ln(sum(legacy_jobs) / 10 + 1) as legacy_score
    from entity_parts
    group by period_k, entity
),

score_terms as (
    select
        t.*,
        case when t.rec_efficiency is not null then
            $coef_min::double * pow($coef_max::double / $coef_min::double,
                greatest(0.0, least(1.0, (t.rec_efficiency - $eff_floor::double)
                                         / ($eff_ceil::double - $eff_floor::double))))
        end as rec_efficiency_factor,
        greatest(1.0, $demand_headroom::double * coalesce(t.rec_demand, 0.0)) as rec_demand_cap
    from entity_totals as t
),

scores as (
    select
        t.*,
        case when t.rec_efficiency_factor is null then 1.0
             else least(pow(t.rec_efficiency_factor, coalesce(t.rec_confidence, 0.0)), t.rec_demand_cap)
        end as rec_coefficient,
        case when t.legacy_score is not null then
            rank() over (partition by t.period_k order by t.legacy_score asc nulls last) end as legacy_rank,
        case when t.legacy_score is not null then
            $legacy_coef_best::double * pow($legacy_coef_worst::double / $legacy_coef_best::double,
                coalesce((rank() over (partition by t.period_k order by t.legacy_score asc nulls last) - 1)
                         / nullif(count(t.legacy_score) over (partition by t.period_k) - 1, 0), 0.0))
        end as legacy_coefficient
    from score_terms as t
),
