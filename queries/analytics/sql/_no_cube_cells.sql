-- Fragment (not a query): no usage_cube cells (_scores' entity_cells, for a query whose jobs are all in
-- entity_jobs: periods, splits, one user's jobs). Typed as _cube's cube_cells.
entity_cells as (
    select
        null::varchar as entity, 0 as period_k, null::double as span_s, null::varchar as account,
        null::varchar as team, null::varchar as "user", 0::bigint as jobs, null::double as run_s,
        null::double as cpu_req_s, null::double as cpu_used_s, null::double as cpu_waste_s,
        null::double as cpu_req_known_s, null::double as gpu_req_s, null::double as gpu_used_s,
        null::double as gpu_waste_s, null::double as gpu_req_known_s, null::double as mem_req_gbs,
        null::double as mem_used_gbs, null::double as mem_waste_gbs, null::double as mem_req_known_gbs,
        null::double as footprint_max_s, 0::bigint as legacy_jobs, null::double as legacy_task_score_sum
    where false
),
