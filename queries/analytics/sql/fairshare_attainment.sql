-- Fair-share attainment per team over a window, from the logs: entitled = share x capacity GPUs x span hours,
-- demanded = GPU-hours the team's jobs held or waited for inside the span (allocated GPUs x run time +
-- requested GPUs x queued time), received = allocated GPUs x run time inside the span, and
-- attainment = received / min(entitled, demanded) (null when that is 0: engine.budgets.attainment, the one
-- formula; tests/queries/analytics/test_budgets_model.py checks this form against it). Shares come from
-- budget_shares when registered, else equal per top-level account (see _fairshare.sql); 'unbudgeted' collects
-- unmatched accounts.
-- Static shares: what a team leaves idle is not redistributed here (queries/analytics/budgets.py water-fills the tree).
-- occupancy = received / (capacity x span) is cluster-wide, repeated on every row; funded_gpu_hours is the
-- received time of jobs with a share and a non-zero minimum runtime (0 = unallocated occupancy, DOMAIN.md 6).
-- resource = 'cpu' counts CPU cores and core-hours instead of GPUs (a cluster without GPUs): the *_gpu_hours
-- columns then hold core-hours and capacity_gpus cores (the result keeps one shape: the caller knows its unit).
with
-- include: _jobs
-- the cube answers the resource the selection held (_resource) for the jobs its cells hold whole
cube_wanted as (select true as ok, null::double as period_s, null::double as origin),
-- include: _cube
-- include: _fairshare
per_account as (
    select
        account,
        count(*) filter (where received_gpu_s > 0) as jobs_running,
        count(*) filter (where waiting_gpu_s > 0) as jobs_waiting,
        sum(received_gpu_s) as received_gpu_s,
        sum(waiting_gpu_s) as waiting_gpu_s,
        sum(received_gpu_s) filter (where min_runtime_s = 0) as unallocated_gpu_s
    from job_gpu_time  -- no where clause: DuckDB would push it into the join with the one-row capacity
    group by account
),

per_team as (
    select
        acct.fs_team as team,
        sum(a.jobs_running) as jobs_running,
        sum(a.jobs_waiting) as jobs_waiting,
        sum(a.received_gpu_s) / 3600 as received_gpu_hours,
        sum(a.received_gpu_s + a.waiting_gpu_s) / 3600 as demanded_gpu_hours,
        sum(a.unallocated_gpu_s) / 3600 as unallocated_gpu_hours
    from per_account as a
    join account_team as acct on acct.account = a.account
    group by acct.fs_team
    having sum(a.received_gpu_s + a.waiting_gpu_s) > 0
),

teams as (
    select team from per_team
    union
    select team from shares
    where $account_prefix::varchar is null
       or lower(team) = lower(rtrim($account_prefix::varchar, '/'))
       or starts_with(lower(team), lower(rtrim($account_prefix::varchar, '/')) || '/')
       or starts_with(lower(rtrim($account_prefix::varchar, '/')), lower(team) || '/')
),

team_rows as (
    select
        t.team,
        coalesce(s.share, 0.0) as share,
        coalesce(s.share_source, case when t.team = 'unbudgeted' then 'unbudgeted' end) as share_source,
        c.capacity_gpus,
        c.capacity_source,
        c.span_s / 3600 as span_hours,
        coalesce(s.share, 0.0) * c.capacity_gpus * c.span_s / 3600 as entitled_gpu_hours,
        coalesce(p.demanded_gpu_hours, 0.0) as demanded_gpu_hours,
        coalesce(p.received_gpu_hours, 0.0) as received_gpu_hours,
        coalesce(p.unallocated_gpu_hours, 0.0) as unallocated_gpu_hours,
        coalesce(p.jobs_running, 0) as jobs_running,
        coalesce(p.jobs_waiting, 0) as jobs_waiting
    from teams as t
    left join shares as s on s.team = t.team
    left join per_team as p on p.team = t.team
    cross join capacity as c
)
select
    team,
    share,
    share_source,
    entitled_gpu_hours,
    demanded_gpu_hours,
    received_gpu_hours,
    received_gpu_hours / nullif(least(entitled_gpu_hours, demanded_gpu_hours), 0) as attainment,
    case when share > 0 then received_gpu_hours - unallocated_gpu_hours else 0.0 end as funded_gpu_hours,
    unallocated_gpu_hours,
    received_gpu_hours / nullif(sum(received_gpu_hours) over (), 0) as share_of_received,
    sum(received_gpu_hours) over () / nullif(capacity_gpus * span_hours, 0) as occupancy,
    jobs_running,
    jobs_waiting,
    capacity_gpus,
    capacity_source,
    span_hours
from team_rows
order by team = 'unbudgeted', team
