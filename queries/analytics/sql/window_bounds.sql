-- The store's time span and size: first submit, first start, last end (or last start for jobs without one),
-- job and sample counts, per cluster and overall (cluster = '(all)').
-- param: cluster varchar null  only this cluster
with
job_bounds as (
    select
        coalesce(cluster, '(none)') as cluster,
        count(*) as jobs,
        min(submit) as first_submit,
        min(start) as first_start,
        greatest(max("end"), max(start)) as last_end
    from jobs
    where $cluster::varchar is null or cluster = $cluster::varchar
    group by coalesce(cluster, '(none)')
),

sample_bounds as (
    select coalesce(cluster, '(none)') as cluster, count(*) as samples, min(ts) as first_sample, max(ts) as last_sample
    from samples
    where $cluster::varchar is null or cluster = $cluster::varchar
    group by coalesce(cluster, '(none)')
),

per_cluster as (
    select
        coalesce(j.cluster, s.cluster) as cluster,
        coalesce(j.jobs, 0) as jobs,
        coalesce(s.samples, 0) as samples,
        j.first_submit, j.first_start, j.last_end, s.first_sample, s.last_sample
    from job_bounds as j
    full outer join sample_bounds as s on s.cluster = j.cluster
)
select * from per_cluster
union all
select '(all)', coalesce(sum(jobs), 0)::bigint, coalesce(sum(samples), 0)::bigint, min(first_submit), min(first_start), max(last_end),
       min(first_sample), max(last_sample)
from per_cluster
order by cluster = '(all)' desc, cluster
