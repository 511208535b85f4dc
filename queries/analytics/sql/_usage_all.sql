-- Fragment (not a query): the jobs _job_usage derives are all the filtered jobs, and no usage_cube cell is
-- read (a query that reads no cube, or whose jobs need more than a cell holds). Include it after _jobs and
-- before _job_usage (or _resource). Defines what _cube defines: usage_scope, cube_cells (empty), store_extent.
usage_scope as not materialized (
    -- the jobs that may meet the window, tested on the raw columns so that DuckDB skips the files of months the
    -- window does not reach instead of staging every job of the store: a superset of _job_usage's jobs_in_window
    -- (t_start < w_end; t_end > w_start, or t_start >= w_start for a zero-length run), as ingest rejects an end
    -- before its start (queries.ingest.canonical), so end >= start wherever both are known
    select * from filtered_jobs
    where ($end::timestamptz is null or start < $end::timestamptz)
      and ($start::timestamptz is null or "end" is null or "end" >= $start::timestamptz)
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
