-- Which resource a selection (window and filters) is measured in, one row: 'gpu' when the selection's jobs held
-- GPUs inside the window or its node list (cluster / partition filters) has GPUs, else 'cpu' when they held CPU
-- cores or the node list has cores (a CPU-only cluster, or the CPU partition of a mixed one), else 'gpu' (nothing
-- to measure: the product's default). Every page, query default and the report take the resource from here, so
-- occupancy, utilisation, waste, rankings, gap areas, the pyramid and fair share all speak core-hours where
-- there are no GPUs. resource_source says why: 'jobs', 'nodes' or 'default'.
with
-- include: _jobs
held as (
    -- resource-seconds the selection's jobs held inside the window (as job_usage's requested, without usage)
    select
        sum(gpus * greatest(least(t_end, w_end) - greatest(t_start, w_start), 0)) as gpu_s,
        sum(cpus * greatest(least(t_end, w_end) - greatest(t_start, w_start), 0)) as cpu_s
    from filtered_jobs
    where t_start is not null
),

node_list as (
    select sum(gpus) as gpus, sum(cpus) as cpus
    from nodes
    where ($cluster::varchar is null or cluster = $cluster::varchar)
      and ($partition::varchar is null or "partition" = $partition::varchar)
)
select
    case when coalesce(h.gpu_s, 0) > 0 or coalesce(n.gpus, 0) > 0 then 'gpu'
         when coalesce(h.cpu_s, 0) > 0 or coalesce(n.cpus, 0) > 0 then 'cpu'
         else 'gpu' end as resource,
    case when coalesce(h.gpu_s, 0) > 0 or (coalesce(n.gpus, 0) = 0 and coalesce(h.cpu_s, 0) > 0) then 'jobs'
         when coalesce(n.gpus, 0) > 0 or coalesce(n.cpus, 0) > 0 then 'nodes'
         else 'default' end as resource_source,
    coalesce(h.gpu_s, 0) / 3600 as gpu_hours_held,
    coalesce(h.cpu_s, 0) / 3600 as cpu_hours_held,
    n.gpus as node_gpus,
    n.cpus as node_cpus
from held as h, node_list as n
