-- What the log says each job held on its nodes (`dashboard.whatif.loader.infer_nodes`: a node layout for a store
-- without a node list): every job that started and names its nodes, with its stop (its end, else start +
-- elapsed_s, else still running: null) and what it held in the whole job (allocated, else requested), for the
-- loader to split over the nodes of its hostlist. Ordered by cluster, start and job_id.
-- param: cluster varchar null  only this cluster
with
scoped as (
    select * from jobs where $cluster::varchar is null or cluster = $cluster::varchar
),

held as (
    select
        cluster,
        job_id,
        node_list,
        start,
        coalesce("end", start + to_microseconds(round(elapsed_s::double * 1e6)::bigint)) as stop,
        coalesce(alloc_gpus, req_gpus, 0)::double as gpus,
        coalesce(alloc_cpus, req_cpus, 0)::double as cpus,
        coalesce(alloc_mem_bytes, req_mem_bytes)::double as mem_bytes
    from scoped
    where start is not null and node_list is not null and trim(node_list) <> ''
        and lower(trim(node_list)) not in ('none assigned', '(null)', 'none')
),

final as (
    select * from held order by cluster nulls last, start, job_id
)
select * from final
