-- Which GPUs of which node are allocated at instant `at`, and to whom: one row per (node, job) for jobs
-- running at `at` (start <= at < end), their Slurm hostlist (`gpu-[001-003,005],cpu-07`, several bracket
-- groups allowed) expanded to host names, a job's GPUs and CPUs split evenly over its hosts; nodes of the
-- inventory with nothing running appear once with a null job. For a node-layout heatmap.
-- param: at timestamp null  the instant (UTC); null = the latest job start in the store
with recursive
-- include: _jobs
instant as (
    select coalesce(epoch_us($at::timestamptz) / 1e6, (select max(t_start) from stg_jobs)) as t_at
),

running as (
    select j.*
    from filtered_jobs as j, instant as i
    where j.t_start <= i.t_at and j.t_end > i.t_at
),

tokens as (
    select r.cluster, r.job_id, t.token
    from running as r,
         unnest(regexp_extract_all(coalesce(r.node_list, ''), '(?:[^,\[\]]|\[[^\]]*\])+')) as t(token)
),

expanded(cluster, job_id, done, rest) as (
    select cluster, job_id, '', token from tokens
    union all
    select
        e.cluster,
        e.job_id,
        e.done || regexp_extract(e.rest, '^([^\[]*)\[', 1) || v.value,
        regexp_replace(e.rest, '^[^\[]*\[[^\]]*\]', '')
    from expanded as e,
         unnest(string_split(regexp_extract(e.rest, '^[^\[]*\[([^\]]*)\]', 1), ',')) as p(part),
         unnest(case when p.part like '%-%' then
                    list_transform(
                        generate_series(split_part(p.part, '-', 1)::bigint, split_part(p.part, '-', 2)::bigint),
                        lambda x: lpad(x::varchar, greatest(length(x::varchar), length(split_part(p.part, '-', 1)))::integer, '0'))
                else [p.part] end) as v(value)
    where e.rest like '%[%'
),

hosts as (
    select distinct cluster, job_id, done || rest as node
    from expanded
    where rest not like '%[%'
),

job_hosts as (
    select
        h.cluster, h.node, r.job_id, r."user", r.account, r.team, r.job_class, r.state,
        r.gpus / count(*) over (partition by h.cluster, h.job_id) as gpus_on_node,
        r.cpus / count(*) over (partition by h.cluster, h.job_id) as cpus_on_node,
        to_timestamp(r.t_start) as start,
        to_timestamp(r.t_end) as run_end
    from hosts as h
    join running as r on r.cluster = h.cluster and r.job_id = h.job_id
),

inventory as (
    select cluster, node, "partition", gpus, cpus, state as node_state
    from nodes
    where ($cluster::varchar is null or cluster = $cluster::varchar)
      and ($partition::varchar is null or "partition" = $partition::varchar)
)
select
    coalesce(jh.cluster, inv.cluster) as cluster,
    coalesce(jh.node, inv.node) as node,
    inv."partition",
    inv.gpus as node_gpus,
    inv.cpus as node_cpus,
    inv.node_state,
    jh.job_id,
    jh."user",
    jh.account,
    jh.team,
    jh.job_class,
    jh.state,
    jh.start,
    jh.run_end,
    jh.gpus_on_node,
    jh.cpus_on_node,
    sum(coalesce(jh.gpus_on_node, 0)) over (partition by coalesce(jh.cluster, inv.cluster), coalesce(jh.node, inv.node))
        as node_allocated_gpus,
    (select to_timestamp(t_at) from instant) as at
from job_hosts as jh
full outer join inventory as inv on inv.cluster = jh.cluster and inv.node = jh.node
order by cluster, node, jh.job_id
