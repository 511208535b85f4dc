-- Fragment (not a query): jobs staged and filtered; a query includes it right after its `with`.
-- stg_jobs only renames and casts: times become float epoch seconds (t_*), the run interval is
-- [t_start, t_end) with t_end = end, or start + elapsed_s; a RUNNING job without an end runs until the last
-- instant its cluster's log knows (store_snapshot, recorded at ingest; else start + elapsed_s, which sacct
-- prints for a running job as its run time until the export; else, nothing known, the window end): never
-- into the future, so a window ending after the export counts no run time that did not happen.
-- The window [w_start, w_end) is carried as columns (-inf/+inf when a bound is null).
-- filtered_jobs applies the common attribute filters (not the window: each query decides how a job counts).
-- param: start timestamp null  window start (UTC, inclusive); a job counts by the overlap of its run interval with [start, end), clipped
-- param: end timestamp null  window end (UTC, exclusive)
-- param: cluster varchar null  only this cluster
-- param: partition varchar null  only this partition
-- param: account_prefix varchar null  only this account subtree: the account itself and every account below it (`prefix/...`)
-- param: state varchar null  only jobs in this normalised state (COMPLETED, FAILED, CANCELLED, ...)
-- param: job_class varchar null  only this job class (debug, interactive, training, eval, dataprep, batch)
-- param: user varchar null  only this user
-- param: team_level integer 1 >=1  a job's team is the first N `/`-separated components of its account (1 = top level)
window_bounds as (
    select
        coalesce(epoch_us($start::timestamptz) / 1e6, '-inf'::double) as w_start,
        coalesce(epoch_us($end::timestamptz) / 1e6, 'inf'::double) as w_end
),

account_teams as (
    -- a team per distinct account, not per job row: string splitting is the dear part of staging. The
    -- accounts come out of one list so that DuckDB estimates this relation at a handful of rows and builds
    -- the join below on it (a `select distinct` is estimated at the size of the table, and the join would
    -- then hash all jobs instead)
    select
        account,
        array_to_string(list_slice(string_split(account, '/'), 1, greatest(coalesce($team_level::integer, 1), 1)), '/')
            as team
    from (select unnest(list(distinct coalesce(account, '(none)'))) as account from jobs)
),

cluster_snapshots as (
    select cluster, max(epoch_us(snapshot) / 1e6) as t_snapshot
    from store_snapshot
    group by cluster
),

stg_jobs as not materialized (
    -- not materialized: every reference scans only the columns it needs (a narrow one for the samples join,
    -- a wide one for the output) instead of DuckDB materialising every column of every job once
    select
        jobs.cluster,
        jobs.job_id,
        jobs.job_name,
        jobs."user",
        coalesce(jobs.account, '(none)') as account,
        t.team,
        "partition",
        qos,
        job_class,
        state,
        submit,
        start,
        "end",
        node_list,
        nodes,
        min_runtime_s,
        epoch_us(submit) / 1e6 as t_submit,
        epoch_us(start) / 1e6 as t_start,
        greatest(
            coalesce(
                epoch_us("end") / 1e6,
                case when state = 'RUNNING' then coalesce(snap.t_snapshot, epoch_us(start) / 1e6 + elapsed_s,
                                                          epoch_us($end::timestamptz) / 1e6) end,
                epoch_us(start) / 1e6 + elapsed_s,
                epoch_us(start) / 1e6
            ),
            epoch_us(start) / 1e6
        ) as t_end,
        -- a RUNNING job whose run end is the window's end (no end, no snapshot, no elapsed time): its usage
        -- depends on the query's window, so usage_cube holds no cell for it
        coalesce(state = 'RUNNING' and "end" is null and elapsed_s is null and snap.t_snapshot is null, false)
            as end_from_window,
        -- a RUNNING job without an end: its run end moves with every snapshot, so no usage_cube cell holds it
        -- and usage_hours holds only its sampled usage (queries derive the rest per job)
        coalesce(state = 'RUNNING' and "end" is null, false) as open_run,
        coalesce(epoch_us($start::timestamptz) / 1e6, '-inf'::double) as w_start,
        coalesce(epoch_us($end::timestamptz) / 1e6, 'inf'::double) as w_end,
        req_cpus,
        coalesce(alloc_cpus, req_cpus) as cpus,
        coalesce(alloc_gpus, req_gpus, 0) as gpus,
        coalesce(req_gpus, alloc_gpus, 0) as gpus_asked,
        coalesce(alloc_mem_bytes, req_mem_bytes) / 1e9 as mem_gb,
        cpu_seconds_used as cpu_seconds_total,
        -- MaxRSS / TRESUsageInMax mem (sacct, sacct-json) are one task's peak: on a multi-node job one node's
        -- share (one task per node assumed), while --mem is per node. A trusted jobstats summary (jobstats =
        -- 'ok') gives the busiest node's peak (node_mem_peak_bytes) and the sum of the nodes' peaks in
        -- max_rss_bytes; other sources record the whole job's peak. Both are kept: max_rss_node_gb per node
        -- (compared with the per-node request mem_node_gb) and max_rss_gb for the whole job (for Slurm's MaxRSS
        -- an upper bound: every node at the largest task's peak).
        case when node_mem_peak_bytes is not null then node_mem_peak_bytes / 1e9
             when jobs.source in ('sacct', 'sacct-json') and coalesce(jobstats, '') <> 'ok' then max_rss_bytes / 1e9
             else max_rss_bytes / 1e9 / greatest(coalesce(nodes, 1), 1) end as max_rss_node_gb,
        case when jobs.source in ('sacct', 'sacct-json') and coalesce(jobstats, '') <> 'ok'
                  and node_mem_peak_bytes is null
             then max_rss_bytes / 1e9 * greatest(coalesce(nodes, 1), 1)
             else max_rss_bytes / 1e9 end as max_rss_gb,
        coalesce(alloc_mem_bytes, req_mem_bytes) / 1e9 / greatest(coalesce(nodes, 1), 1) as mem_node_gb,
        mean_gpu_util,
        max_gpu_util,
        max_cpu_util,
        gpus_measured,
        gpus_idle,
        jobstats
    from jobs
    left join account_teams as t on t.account = coalesce(jobs.account, '(none)')
    left join cluster_snapshots as snap on snap.cluster = jobs.cluster
),

filtered_jobs as (
    select *
    from stg_jobs
    where ($cluster::varchar is null or cluster = $cluster::varchar)
      and ($partition::varchar is null or "partition" = $partition::varchar)
      and ($account_prefix::varchar is null
           or account = rtrim($account_prefix::varchar, '/')
           or starts_with(account, rtrim($account_prefix::varchar, '/') || '/'))
      and ($state::varchar is null or state = $state::varchar)
      and ($job_class::varchar is null or job_class = $job_class::varchar)
      and ($user::varchar is null or "user" = $user::varchar)
),
