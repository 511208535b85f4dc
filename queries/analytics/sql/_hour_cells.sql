-- Fragment (not a query): usage_hours' cells for the window and filters (`hour_cells`), the jobs they do not
-- answer (`usage_scope`, what the query derives per job), `cube_cells` (their requested seconds, for _resource)
-- and the store's extent (`store_extent`), as _usage_all defines them. Needs _jobs and the query's parameters
-- `bucket_s` and `origin` (gap_area's); include it before _job_usage. The cells answer when use_cube is on,
-- the buckets, their origin and the window's bounds are whole hours (a bound may be open), no filter the cells
-- have no dimension for is set (partition, state, job_class) and the store has the table (`rollup --rebuild`
-- builds it for a store ingested before it). Then every job is in the cells of the hours (days, when the
-- buckets, their origin and the window's bounds are whole days) its run reaches, each inside the window or
-- outside it whole, except: a RUNNING job whose run end is the window's end (no end, no elapsed time, no
-- snapshot: _jobs' end_from_window; in no cell) is derived per job, and a RUNNING job without an end (open_run)
-- has only its sampled usage in the cells: its requested, unknown and totals-based usage (which its run end,
-- the snapshot, moves) are derived per job, and whether it has samples of a resource comes from its job_rollup
-- row's counts (`samples_in_cells`, `rollup_sampled`), so that its samples are not read. Otherwise every job is
-- derived per job.
-- param: use_cube boolean true  answer buckets of whole hours from usage_hours (false: derive every job from its samples, as a store without the table does)
cells_off as (
    -- one row when the cells must not answer, else none
    select 1 as off
    where not (coalesce($use_cube::boolean, false)
               and $bucket_s::double > 0 and $bucket_s::double % 3600 = 0
               and epoch_us(coalesce($origin::timestamptz, '1970-01-05 00:00:00+00'::timestamptz)) % 3600000000 = 0
               and $partition::varchar is null and $state::varchar is null and $job_class::varchar is null
               and ($start::timestamptz is null or epoch_us($start::timestamptz) % 3600000000 = 0)
               and ($end::timestamptz is null or epoch_us($end::timestamptz) % 3600000000 = 0))
       or not exists (select 1 from usage_hours)
       -- a table written before RUNNING jobs put only their sampled usage into it holds their whole cells
       -- (`running`): the next ingest or `rollup --rebuild` rewrites it; until then no cell answers
       or exists (select 1 from usage_hours where running is not false)
),

usage_scope as not materialized (
    -- said on the jobs' own columns so that DuckDB pushes it into the scan of `jobs`; the window test on the raw
    -- columns (a superset of _job_usage's jobs_in_window) skips the files of other months: the `exists` stops
    -- the scan only once a row reaches it. samples_in_cells: the job's sampled usage is in the cells (a RUNNING
    -- job without an end whose run end is not the window's: the query derives the rest of it per job)
    -- (both RUNNING-job branches also say `state = 'RUNNING' and "end" is null`, which their flags imply, on the
    -- raw columns: DuckDB then skips the row groups without a RUNNING job instead of staging every job)
    select *, false as samples_in_cells from filtered_jobs
    where end_from_window and state = 'RUNNING' and "end" is null
      and ($end::timestamptz is null or start < $end::timestamptz)
      and ($start::timestamptz is null or "end" is null or "end" >= $start::timestamptz)
    union all
    select *, true from filtered_jobs
    where open_run and state = 'RUNNING' and "end" is null and not end_from_window
      and not exists (select 1 from cells_off)
      and ($end::timestamptz is null or start < $end::timestamptz)
    union all
    select *, false from filtered_jobs
    where not end_from_window and exists (select 1 from cells_off)
      and ($end::timestamptz is null or start < $end::timestamptz)
      and ($start::timestamptz is null or "end" is null or "end" >= $start::timestamptz)
),

hour_cells as (
    -- the cells inside the window (the window's bounds are whole cells), under the cluster / account / user
    -- filters, with their team. Said on the cells' columns and the parameters (not by a join with
    -- window_bounds), so that DuckDB pushes them into the scan and skips the files of the
    -- other grain and of months outside the window
    select c.*, t.team
    from usage_hours as c
    left join account_teams as t on t.account = c.account
    -- the day cells when the buckets, their origin and the window's bounds are whole UTC days
    where c.grain_s = case when $bucket_s::double % 86400 = 0
                                and epoch_us(coalesce($origin::timestamptz, '1970-01-05 00:00:00+00'::timestamptz))
                                    % 86400000000 = 0
                                and ($start::timestamptz is null or epoch_us($start::timestamptz) % 86400000000 = 0)
                                and ($end::timestamptz is null or epoch_us($end::timestamptz) % 86400000000 = 0)
                           then 86400.0 else 3600.0 end
      and c.t_s >= coalesce(epoch_us($start::timestamptz) / 1e6, '-inf'::double)
      and c.t_s < coalesce(epoch_us($end::timestamptz) / 1e6, 'inf'::double)
      and ($cluster::varchar is null or c.cluster = $cluster::varchar)
      and ($account_prefix::varchar is null
           or c.account = rtrim($account_prefix::varchar, '/')
           or starts_with(c.account, rtrim($account_prefix::varchar, '/') || '/'))
      and ($user::varchar is null or c."user" = $user::varchar)
      and not exists (select 1 from cells_off)
),

cube_cells as (
    select gpu_req_s, cpu_req_s from hour_cells
),

rollup_sampled as (
    -- the counts of sampled values of the jobs whose sampled usage is in the cells (their job_rollup rows: a
    -- row's counts do not depend on the run interval it was derived for)
    select r.cluster, r.job_id, r.n_cpu, r.n_gpu, r.n_mem
    from job_rollup as r
    semi join (select cluster, job_id from usage_scope where samples_in_cells) as j
        on j.cluster = r.cluster and j.job_id = r.job_id
),

store_extent as (
    -- as _usage_all's (first start and last end of any job, whatever the filters); not read when both bounds
    -- are set
    select min(t_start) as t_first, max(t_end) as t_last
    from stg_jobs
    where $start::timestamptz is null or $end::timestamptz is null
),
