-- Distinct values the filters offer, long format: one row per (field, value) with its job count. Fields:
-- cluster, partition, account (every subtree prefix of every account: `a`, `a/b`, `a/b/c`), team (at
-- team_level), state, job_class, qos, gpu_type, user.
-- param: cluster varchar null  only this cluster
-- param: team_level integer 1 >=1  teams are the first N `/`-separated components of the account
with
scoped as (
    select * from jobs where $cluster::varchar is null or cluster = $cluster::varchar
),

account_prefixes as (
    select
        array_to_string(list_slice(string_split(account, '/'), 1, r.l), '/') as value,
        sum(n)::bigint as jobs
    from (select account, count(*) as n from scoped where account is not null group by account) as a,
         range(1, len(string_split(a.account, '/')) + 1) as r(l)
    group by 1
),

options as (
    select 'cluster' as field, cluster as value, count(*) as jobs from scoped group by cluster
    union all
    select 'partition', "partition", count(*) from scoped group by "partition"
    union all
    select 'account', value, jobs from account_prefixes
    union all
    select 'team', array_to_string(list_slice(string_split(account, '/'), 1, greatest(coalesce($team_level::integer, 1), 1)), '/'),
           count(*)
    from scoped where account is not null group by 2
    union all
    select 'state', state, count(*) from scoped group by state
    union all
    select 'job_class', job_class, count(*) from scoped group by job_class
    union all
    select 'qos', qos, count(*) from scoped group by qos
    union all
    select 'gpu_type', gpu_type, count(*) from scoped group by gpu_type
    union all
    select 'user', "user", count(*) from scoped group by "user"
)
select field, value, jobs
from options
where value is not null
order by field, value
