-- The four-level metric pyramid of DOMAIN.md section 6 over a window, cluster-wide ('(all)') and per team:
-- availability = healthy GPUs / GPUs with a known node state (the node export's snapshot; null when states
-- are unknown); occupancy = allocated GPU-hours / available GPU-hours (capacity x span x availability, or
-- capacity x span without states); impact = funded GPU-hours / allocated (funded: a job of a team with a share
-- and a minimum runtime that is not 0; min_runtime_s = 0 is unallocated occupancy); utilisation = used /
-- allocated GPU-hours over jobs whose GPU usage is known (samples or mean_gpu_util). A team row's occupancy
-- is its part of the cluster's. Capacity and shares as in fairshare_attainment.
-- resource = 'cpu' (a cluster or partition without GPUs, see selection_resource) measures every level in CPU
-- cores and core-hours instead: the *_gpu_* columns then hold core-hours (one result shape for both).
with
-- include: _jobs
cube_wanted as (select true as ok, null::double as period_s, null::double as origin),
-- include: _cube
-- include: _job_usage
-- include: _fairshare
resource_usage as (
    -- the chosen resource's held and used seconds per job (GPU-seconds, or core-seconds for resource = cpu)
    select
        u.account,
        u.min_runtime_s,
        case when r.resource = 'cpu' then coalesce(u.cpus, 0) else u.gpus end as level,
        case when r.resource = 'cpu' then u.cpu_seconds_requested else u.gpu_seconds_requested end as held_s,
        case when r.resource = 'cpu' then u.cpu_seconds_used else u.gpu_seconds_used end as used_s
    from job_usage as u, fs_resource as r
),

usage_rows as (
    select
        coalesce(acct.fs_team, 'unbudgeted') as team,
        u.held_s as allocated_gpu_s,
        u.used_s as used_gpu_s,
        case when u.used_s is not null then u.held_s end as known_gpu_s,
        case when coalesce(s.share, 0) > 0 and coalesce(u.min_runtime_s, 1) <> 0 then u.held_s
             else 0.0 end as funded_gpu_s,
        case when u.min_runtime_s = 0 then u.held_s else 0.0 end as unallocated_gpu_s
    from resource_usage as u
    left join account_team as acct on acct.account = u.account
    left join shares as s on s.team = acct.fs_team
    where u.level > 0
    union all
    -- the usage_cube cells the window holds whole: the same sums over their jobs that hold the resource
    select
        coalesce(acct.fs_team, 'unbudgeted'),
        case when r.resource = 'cpu' then c.cpu_req_s else c.gpu_req_s end,
        case when r.resource = 'cpu' then c.cpu_held_used_s else c.gpu_held_used_s end,
        case when r.resource = 'cpu' then c.cpu_held_known_s else c.gpu_held_known_s end,
        case when coalesce(s.share, 0) > 0
             then coalesce(case when r.resource = 'cpu' then c.cpu_held_funded_s else c.gpu_held_funded_s end, 0.0)
             else 0.0 end,
        coalesce(case when r.resource = 'cpu' then c.cpu_held_unalloc_s else c.gpu_held_unalloc_s end, 0.0)
    from cube_cells as c
    cross join fs_resource as r
    left join account_team as acct on acct.account = c.account
    left join shares as s on s.team = acct.fs_team
    where (case when r.resource = 'cpu' then c.cpu_held_jobs else c.gpu_held_jobs end) > 0
),

grouped as (
    select
        coalesce(team, '(all)') as team,
        sum(allocated_gpu_s) / 3600 as allocated_gpu_hours,
        sum(funded_gpu_s) / 3600 as funded_gpu_hours,
        sum(unallocated_gpu_s) / 3600 as unallocated_gpu_hours,
        sum(used_gpu_s) / 3600 as used_gpu_hours,
        sum(known_gpu_s) / 3600 as known_gpu_hours
    from usage_rows
    group by grouping sets ((), (team))
),

with_all as (
    -- the cluster row exists even when nothing ran
    select * from grouped
    union all
    select '(all)', 0.0, 0.0, 0.0, null, null where not exists (select 1 from grouped where team = '(all)')
)
select
    g.team,
    c.capacity_gpus,
    c.capacity_source,
    c.span_s / 3600 as span_hours,
    c.capacity_gpus * c.span_s / 3600 as capacity_gpu_hours,
    c.availability,
    c.capacity_gpus * c.span_s / 3600 * coalesce(c.availability, 1.0) as available_gpu_hours,
    g.allocated_gpu_hours,
    g.allocated_gpu_hours / nullif(c.capacity_gpus * c.span_s / 3600 * coalesce(c.availability, 1.0), 0)
        as occupancy,
    g.funded_gpu_hours,
    g.funded_gpu_hours / nullif(g.allocated_gpu_hours, 0) as impact,
    g.unallocated_gpu_hours / nullif(g.allocated_gpu_hours, 0) as unallocated_share,
    g.used_gpu_hours,
    g.known_gpu_hours,
    g.used_gpu_hours / nullif(g.known_gpu_hours, 0) as utilisation
from with_all as g
cross join capacity as c
order by g.team <> '(all)', g.team
