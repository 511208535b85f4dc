-- Fragment (not a query): shares, the account -> team mapping and the cluster's GPU capacity. Needs _jobs.
-- Shares: the relation budget_shares(account, share) when it has rows (registered with
-- queries.connect(store, extra={"budget_shares": frame}); rows should be disjoint tree nodes, e.g. leaves),
-- else equal shares per top-level account, split equally again at every level down to team_level among the
-- accounts the cluster's logs name. Shares are normalised to sum to 1. An account belongs to the deepest share
-- row that is it or a `/`-prefix of it (case-insensitive), else to 'unbudgeted' (share 0): never lost.
-- Capacity: capacity_gpus if given, else the nodes table's GPUs (cluster / partition filters), else the peak
-- number of GPUs allocated at once in the logs (capacity_source says which).
-- Resource: 'gpu' (GPU-time budgets), or 'cpu' for a cluster without GPUs (selection_resource says which a
-- selection has): then every amount is CPU cores / core-hours, capacity_gpus and the nodes' capacity included
-- (the columns keep their gpu names: one result shape; the caller's `resource` says which unit they hold).
-- The span: the window, an open bound replaced by the first submit / last end of the cluster's jobs.
-- param: capacity_gpus double null >0  cluster GPUs (CPU cores when resource = cpu); null = from the nodes table, else the observed peak allocated
-- param: resource varchar null  gpu | cpu: the resource shares, capacity and hours are counted in; null = the selection's (selection_resource)
-- include: _resource
fs_resource as (
    select
        case when coalesce($resource::varchar, resource) in ('gpu', 'cpu') then coalesce($resource::varchar, resource)
             else error('resource must be gpu or cpu, got ' || coalesce($resource::varchar, 'null')) end as resource
    from chosen_resource
),

cluster_jobs as not materialized (
    -- the cluster's jobs, straight from the table with only the columns the teams and the observed capacity
    -- need (not stg_jobs: a second reference would make DuckDB materialise all of it)
    select
        coalesce(account, '(none)') as account,
        epoch_us(start) / 1e6 as t_start,
        greatest(coalesce(epoch_us("end") / 1e6, epoch_us(start) / 1e6 + elapsed_s, epoch_us(start) / 1e6),
                 epoch_us(start) / 1e6) as t_end,
        case when r.resource = 'cpu' then coalesce(alloc_cpus, req_cpus, 0) else coalesce(alloc_gpus, req_gpus, 0) end
            as gpus
    from jobs, fs_resource as r
    where $cluster::varchar is null or cluster = $cluster::varchar
),

open_runs as (
    -- jobs without an end (RUNNING) end at start + elapsed_s, else at their start: a scan of their own, so that
    -- "end" is null is pushed into it and the extent's main scan reads two raw columns, not a per-job expression
    -- (an end is never before its start: ingest rejects it, so the other jobs' starts are below max("end"))
    select greatest(epoch_us(start) / 1e6 + elapsed_s, epoch_us(start) / 1e6) as t_end
    from jobs
    where "end" is null
      and ($cluster::varchar is null or cluster = $cluster::varchar)
      and ($start::timestamptz is null or $end::timestamptz is null)
),

cluster_extent as (
    -- first submit and last end (cluster_jobs' t_end: end, else start + elapsed_s, never before start) of the
    -- cluster's jobs, aggregated on the raw columns and converted once: the greatest of max(end), the open
    -- runs' ends and max(submit), so no per-job expression is needed
    select
        epoch_us(min(submit)) / 1e6 as first_submit,
        greatest(epoch_us(max("end")) / 1e6,  -- a job that never started ends at its end (greatest skips nulls)
                 (select max(t_end) from open_runs),
                 epoch_us(max(submit)) / 1e6) as last_end
    from jobs
    where ($cluster::varchar is null or cluster = $cluster::varchar)
      -- read only for an open bound (fair_span): a window with both bounds scans no job for it
      and ($start::timestamptz is null or $end::timestamptz is null)
),

fair_span as (
    select
        case when w.w_start > '-inf'::double then w.w_start else e.first_submit end as s_from,
        case when w.w_end < 'inf'::double then w.w_end else e.last_end end as s_to
    from window_bounds as w, cluster_extent as e
),

cluster_accounts as (
    select distinct account from cluster_jobs
),

org_teams as (
    select distinct t.team from cluster_accounts as a join account_teams as t on t.account = a.account
),

team_levels as (
    select
        t.team,
        r.l,
        array_to_string(list_slice(string_split(t.team, '/'), 1, r.l), '/') as prefix,
        array_to_string(list_slice(string_split(t.team, '/'), 1, r.l - 1), '/') as parent
    from org_teams as t, range(1, len(string_split(t.team, '/')) + 1) as r(l)
),

siblings as (
    select parent, count(distinct prefix) as n from team_levels group by parent
),

equal_shares as (
    select t.team as account, product(1.0 / s.n) as share
    from team_levels as t
    join siblings as s on s.parent = t.parent
    group by t.team
),

given_shares as (
    select account, share from budget_shares where account is not null and share >= 0
),

shares as (
    select account as team, share / nullif(sum(share) over (), 0) as share, share_source
    from (
        select account, share, 'budget_shares' as share_source from given_shares
        union all
        select account, share, 'equal' from equal_shares where not exists (select 1 from given_shares)
    )
),

account_team as (
    select
        a.account,
        coalesce(arg_max(s.team, (length(s.team), s.team)), 'unbudgeted') as fs_team
    from cluster_accounts as a
    left join shares as s
        on lower(a.account) = lower(s.team) or starts_with(lower(a.account), lower(s.team) || '/')
    group by a.account
),

node_capacity as (
    select
        sum(gpus) as gpus,
        sum(gpus) filter (where state is not null) as gpus_with_state,
        sum(gpus) filter (where state is not null
                          and not regexp_matches(lower(state), '^(down|drain|drng|fail|maint|unk|not_resp|no_resp|inval|reboot|power)'))
            as gpus_healthy
    from (select case when r.resource = 'cpu' then n.cpus else n.gpus end as gpus, n.state, n.cluster, n."partition"
          from nodes as n, fs_resource as r)
    where ($cluster::varchar is null or cluster = $cluster::varchar)
      and ($partition::varchar is null or "partition" = $partition::varchar)
),

allocation_events as (
    -- only built when neither capacity_gpus nor a node inventory gives the capacity
    select t, d
    from (
        select t_start as t, gpus as d from cluster_jobs where t_start is not null and gpus > 0
        union all
        select t_end, -gpus from cluster_jobs where t_start is not null and gpus > 0
    )
    where $capacity_gpus::double is null and coalesce((select gpus from node_capacity), 0) = 0
),

capacity as (
    select
        coalesce($capacity_gpus::double, nullif(nc.gpus, 0), pk.peak) as capacity_gpus,
        case when $capacity_gpus::double is not null then 'parameter'
             when coalesce(nc.gpus, 0) > 0 then 'nodes'
             when pk.peak is not null then 'observed_peak' end as capacity_source,
        nc.gpus_healthy / nullif(nc.gpus_with_state, 0) as availability,
        sp.s_from,
        sp.s_to,
        sp.s_to - sp.s_from as span_s
    from node_capacity as nc,
         fair_span as sp,
         (select max(level) as peak
          from (select sum(d) over (order by t, d rows unbounded preceding) as level from allocation_events)) as pk
),

job_gpu_time as (
    -- received: allocated GPUs x run time in the span; waiting: requested GPUs x queued time in the span
    -- (submit -> start; -> end for a job that never started; -> span end while PENDING); demanded = both.
    -- Per job, with its account: map accounts to teams after summing (a few rows, not every job)
    select
        j.*,
        case when j.t_start is null then 0.0
             else (case when r.resource = 'cpu' then coalesce(j.cpus, 0) else j.gpus end)
                  * greatest(least(j.t_end, c.s_to) - greatest(j.t_start, c.s_from), 0) end as received_gpu_s,
        (case when r.resource = 'cpu' then coalesce(j.req_cpus, j.cpus, 0) else j.gpus_asked end) * greatest(
            least(coalesce(j.t_start, epoch_us(j."end") / 1e6, case when j.state = 'PENDING' then c.s_to end), c.s_to)
            - greatest(j.t_submit, c.s_from), 0) as waiting_gpu_s
    from filtered_jobs as j
    cross join capacity as c
    cross join fs_resource as r
    -- a job that ended before the window's start neither ran nor waited in it (its wait ends at its start,
    -- before its end): said on the raw column, so that DuckDB skips the months before the window
    where $start::timestamptz is null or j."end" is null or j."end" >= $start::timestamptz
),
