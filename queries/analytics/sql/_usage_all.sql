-- Fragment (not a query): the jobs _job_usage derives are all the filtered jobs, and no usage_cube cell is
-- read (a query that reads no cube, or whose jobs need more than a cell holds). Include it after _jobs and
-- before _job_usage (or _resource). Defines what _cube defines: usage_scope, cube_cells (empty), store_extent.
usage_scope as not materialized (
    select * from filtered_jobs
),

cube_cells as (
    select c.*, null::varchar as team from usage_cube as c where false
),

store_extent as (
    -- first start and last end of any job, whatever the filters (window_span's open bounds); not read when
    -- both bounds are set
    select min(t_start) as t_first, max(t_end) as t_last
    from stg_jobs
    where $start::timestamptz is null or $end::timestamptz is null
),
