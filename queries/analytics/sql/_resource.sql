-- Fragment (not a query): the resource a selection is measured in, the rule of selection_resource. Needs _jobs
-- and a scope fragment (_usage_all or _cube).
-- chosen_resource (one row): 'gpu' when the selection's jobs held GPUs inside the window or its node list
-- (cluster / partition filters) has GPUs, else 'cpu' when they held CPU cores or the node list has cores,
-- else 'gpu'; resource_source says which rule decided ('jobs', 'nodes', 'default'). A query whose resource
-- (or order_by) parameter is null takes its default from here, so the default follows the data.
resource_held as (
    -- resource-seconds the selection's jobs held inside the window (as job_usage's requested, without usage):
    -- the jobs' own (usage_scope: _usage_all or _cube) and the usage_cube cells' that hold the others
    select sum(gpu_s) as gpu_s, sum(cpu_s) as cpu_s
    from (
        select
            sum(gpus * greatest(least(t_end, w_end) - greatest(t_start, w_start), 0)) as gpu_s,
            sum(cpus * greatest(least(t_end, w_end) - greatest(t_start, w_start), 0)) as cpu_s
        from usage_scope
        where t_start is not null
        union all
        select sum(gpu_req_s), sum(cpu_req_s) from cube_cells
    )
),

resource_nodes as (
    select sum(gpus) as gpus, sum(cpus) as cpus
    from nodes
    where ($cluster::varchar is null or cluster = $cluster::varchar)
      and ($partition::varchar is null or "partition" = $partition::varchar)
),

chosen_resource as (
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
    from resource_held as h, resource_nodes as n
),
