-- Fragment (not a query): usage_cube's cells for the window and filters (`cube_cells`), the jobs they do not
-- answer (`usage_scope`, what _job_usage derives per job) and the store's extent (`store_extent`), as
-- _usage_all defines them. Needs _jobs and a CTE `cube_wanted` (one row: a boolean column
-- `ok`: whether the query's own parameters allow the cube, e.g. _scores' default weights); include it before
-- _job_usage. `cube_wanted` also has the columns `period_s` and `origin` (seconds; null for a query without
-- periods): with the periods a query splits each job by (quota_backtest's), a cell is read only when its days
-- lie in one period, and a job whose days reach across a period boundary is in usage_scope.
-- The cube answers when use_cube is on, the window's bounds are UTC midnights or open, no filter the cube has
-- no dimension for is set (partition, state, job_class) and the store has a cube (`rollup
-- --rebuild` builds it for a store ingested before it): then a cell whose days [day_lo_s, day_hi_s) lie inside
-- the window gives the sums of its jobs' whole-run figures, exactly what job_usage gives for them, and those
-- jobs are left out of usage_scope. Everything else (a job the window cuts, a RUNNING job without an end,
-- every job when the cube does not answer) is in usage_scope and derived per job as before.
-- The jobs that always need the per-job path are selected by conditions on the jobs' own columns and the
-- parameters only, so that DuckDB folds them and pushes them into the scan of `jobs`; the others are read
-- only when the cube does not answer (a join with an empty relation is skipped).
-- param: use_cube boolean true  answer the jobs a window of whole days holds whole from usage_cube (false: derive every job, as a store without a cube does)
cube_off as (
    -- one row when the cube must not answer, else none
    select 1 as off
    where not (coalesce($use_cube::boolean, false)
               and (select ok from cube_wanted)
               and $partition::varchar is null and $state::varchar is null and $job_class::varchar is null
               and ($start::timestamptz is null or epoch_us($start::timestamptz) % 86400000000 = 0)
               and ($end::timestamptz is null or epoch_us($end::timestamptz) % 86400000000 = 0))
       or not exists (select 1 from usage_cube)
       -- a cube written before RUNNING jobs were kept out of it holds their cells (partition `running`, or
       -- `running` null before that): the next ingest or `rollup --rebuild` rewrites it; until then no cell answers
       or exists (select 1 from usage_cube where running is not false)
),

cube_grid as (
    -- the query's periods, when it has any (no row otherwise: then nothing below reads a job for them)
    select period_s, origin from cube_wanted where period_s is not null and origin is not null
),

usage_scope as not materialized (
    -- jobs no cell can answer: a RUNNING job without an end (its run end moves with every snapshot: no cell
    -- holds it), said on the raw columns as well, so that DuckDB skips the row groups without a RUNNING job
    -- (their `end` has no null) instead of staging every job
    select *
    from filtered_jobs
    where open_run and state = 'RUNNING' and "end" is null
      and ($end::timestamptz is null or start < $end::timestamptz)
    union all
    -- and a job the window's start or end cuts (the days of its run reach across that bound; an open window
    -- cuts none). A job that starts after the window, or ended a day before it, is neither cut nor in the
    -- window (said on the raw columns so that DuckDB skips those files: the rest of the test needs every
    -- job's run end)
    select *
    from filtered_jobs
    where not open_run
      and ($end::timestamptz is null or start < $end::timestamptz)
      and ($start::timestamptz is null or "end" is null or "end" > $start::timestamptz - interval 1 day)
      and (($start::timestamptz is not null
            and floor(t_start / 86400) * 86400 < w_start
            and greatest(ceil(t_end / 86400) * 86400, floor(t_start / 86400) * 86400 + 86400) > w_start)
       or ($end::timestamptz is not null
           and floor(t_start / 86400) * 86400 < w_end
           and greatest(ceil(t_end / 86400) * 86400, floor(t_start / 86400) * 86400 + 86400) > w_end))
    union all
    -- and a job whose days reach across a boundary of the query's periods (none without them), unless the
    -- branch above holds it: a period reads the cells it holds whole
    select j.*
    from filtered_jobs as j, cube_grid as g
    where not j.open_run
      and ($end::timestamptz is null or j.start < $end::timestamptz)
      and ($start::timestamptz is null or j."end" is null or j."end" >= $start::timestamptz)
      and floor((floor(j.t_start / 86400) * 86400 - g.origin) / g.period_s)
          <> floor((greatest(ceil(j.t_end / 86400) * 86400, floor(j.t_start / 86400) * 86400 + 86400) - 86400
                    - g.origin) / g.period_s)
      and (($start::timestamptz is not null
            and floor(j.t_start / 86400) * 86400 < j.w_start
            and greatest(ceil(j.t_end / 86400) * 86400, floor(j.t_start / 86400) * 86400 + 86400) > j.w_start)
       or ($end::timestamptz is not null
           and floor(j.t_start / 86400) * 86400 < j.w_end
           and greatest(ceil(j.t_end / 86400) * 86400, floor(j.t_start / 86400) * 86400 + 86400) > j.w_end))
          is not true
      and not exists (select 1 from cube_off)
    union all
    -- every other job, when the cube does not answer. The window test on the raw columns (a superset of
    -- _job_usage's jobs_in_window) lets DuckDB skip the files of other months: the `exists` below stops the
    -- scan only once a row reaches it, and without this every file before the window's would be read first
    select *
    from filtered_jobs
    where ($end::timestamptz is null or start < $end::timestamptz)
      and ($start::timestamptz is null or "end" is null or "end" >= $start::timestamptz)
      and (($end::timestamptz is null or start < $end::timestamptz)
           and ($start::timestamptz is null or "end" is null or "end" > $start::timestamptz - interval 1 day)
           and (open_run
           or ($start::timestamptz is not null
               and floor(t_start / 86400) * 86400 < w_start
               and greatest(ceil(t_end / 86400) * 86400, floor(t_start / 86400) * 86400 + 86400) > w_start)
           or ($end::timestamptz is not null
               and floor(t_start / 86400) * 86400 < w_end
               and greatest(ceil(t_end / 86400) * 86400, floor(t_start / 86400) * 86400 + 86400) > w_end)))
          is not true
      and exists (select 1 from cube_off)
),

cube_cells as (
    -- the cells the window holds whole, under the query's cluster / account / user filters, with their team
    select c.*, t.team
    from usage_cube as c
    cross join window_bounds as w
    -- a left join, not a subquery: a correlated one would keep DuckDB from pushing the window into the scan
    left join cube_grid as g on true
    left join account_teams as t on t.account = c.account
    where c.day_lo_s >= w.w_start and c.day_hi_s <= w.w_end
      and ($cluster::varchar is null or c.cluster = $cluster::varchar)
      and ($account_prefix::varchar is null
           or c.account = rtrim($account_prefix::varchar, '/')
           or starts_with(c.account, rtrim($account_prefix::varchar, '/') || '/'))
      and ($user::varchar is null or c."user" = $user::varchar)
      -- with periods, only a cell whose days lie in one of them (the others' jobs are in usage_scope)
      and (g.period_s is null
           or floor((c.day_lo_s - g.origin) / g.period_s) = floor((c.day_hi_s - 86400 - g.origin) / g.period_s))
      and not exists (select 1 from cube_off)
),

store_extent as (
    -- as _usage_all's, from the cells' first starts and last ends (every cell, whatever the filters) and the
    -- jobs no cell holds; from the jobs when the cube does not answer
    select min(t_first) as t_first, max(t_last) as t_last
    from (
        select min(t_start_min) as t_first, max(t_end_max) as t_last
        from usage_cube
        where ($start::timestamptz is null or $end::timestamptz is null) and not exists (select 1 from cube_off)
        union all
        select min(t_start), max(t_end)
        from stg_jobs
        -- open_run said on the raw columns as well: DuckDB then skips the row groups without a RUNNING job
        where ($start::timestamptz is null or $end::timestamptz is null) and open_run
          and state = 'RUNNING' and "end" is null
        union all
        select min(t_start), max(t_end)
        from stg_jobs
        where ($start::timestamptz is null or $end::timestamptz is null) and not open_run
          and exists (select 1 from cube_off)
    )
),
