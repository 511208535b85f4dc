-- The clusters a replay may choose (`dashboard.whatif.loader`): per cluster of the store's jobs (null = jobs
-- without one), its job count and first and last submit; the default replay window ends just after the last.
with
per_cluster as (
    select cluster, count(*)::bigint as jobs, min(submit) as first_submit, max(submit) as last_submit
    from jobs
    group by cluster
),

final as (
    select * from per_cluster order by cluster nulls last
)
select * from final
