-- Per-account GPU-seconds received and demanded inside a window: the inputs of budget attainment.
-- received = allocated GPUs x running time clipped to the window (a RUNNING job with no end runs until the last
-- instant its cluster's log knows: store_snapshot, else start + elapsed, else $end; never into the future);
-- waiting = requested GPUs x queued time clipped to the window (queued = submit until start; until end for a
-- job that never started; while PENDING until the snapshot, else $end); demanded = received + waiting.
-- queries/analytics/budgets.py maps accounts onto the budget tree and does the water-filling.
-- resource = 'cpu' (a budget in core-hours: a cluster without GPUs) counts allocated / requested CPU cores
-- instead of GPUs; the *_gpu_s columns then hold core-seconds.
-- param: start timestamp null  window start (UTC, inclusive); null = first submit in the store
-- param: end timestamp null  window end (UTC, exclusive); null = latest submit/start/end in the store
-- param: cluster varchar null  only this cluster; null = every cluster
-- param: resource varchar gpu  gpu | cpu: the resource the budget is counted in
with bounds as (
    select
        coalesce(cast($start as timestamptz), min(submit)) as w_start,
        coalesce(cast($end as timestamptz), greatest(max(submit), max(start), max("end"))) as w_end
    from jobs
),
snapshots as (
    select cluster, max(snapshot) as snapshot from store_snapshot group by cluster
),
spans as (
    -- greatest/least skip nulls in DuckDB, so a missing bound must null the whole span explicitly
    select
        coalesce(j.account, '') as account,
        case when cast($resource as varchar) = 'cpu' then coalesce(j.alloc_cpus, j.req_cpus, 0)
             when cast($resource as varchar) = 'gpu' then coalesce(j.alloc_gpus, j.req_gpus, 0)
             else error('resource must be gpu or cpu, got ' || coalesce(cast($resource as varchar), 'null'))
        end as run_gpus,
        case when cast($resource as varchar) = 'cpu' then coalesce(j.req_cpus, j.alloc_cpus, 0)
             else coalesce(j.req_gpus, j.alloc_gpus, 0) end as ask_gpus,
        j.start as run_from,
        coalesce(
            j."end",
            case when j.state = 'RUNNING' then coalesce(
                sn.snapshot,
                j.start + to_microseconds(cast(round(j.elapsed_s * 1e6) as bigint)),
                b.w_end) end,
            j.start + to_microseconds(cast(round(coalesce(j.elapsed_s, 0) * 1e6) as bigint))
        ) as run_to,
        j.submit as wait_from,
        coalesce(j.start, j."end", case when j.state = 'PENDING' then coalesce(sn.snapshot, b.w_end) end) as wait_to,
        b.w_start,
        b.w_end
    from jobs as j
    cross join bounds as b
    left join snapshots as sn on sn.cluster = j.cluster
    where cast($cluster as varchar) is null or j.cluster = cast($cluster as varchar)
),
clipped as (
    select
        account,
        run_gpus,
        ask_gpus,
        case when run_from is not null and run_to is not null then greatest(run_from, w_start) end as run_from,
        case when run_from is not null and run_to is not null then least(run_to, w_end) end as run_to,
        case when wait_from is not null and wait_to is not null then greatest(wait_from, w_start) end as wait_from,
        case when wait_from is not null and wait_to is not null then least(wait_to, w_end) end as wait_to
    from spans
),
seconds as (
    select
        account,
        run_gpus * greatest(coalesce(date_diff('microsecond', run_from, run_to), 0), 0) / 1e6 as received_gpu_s,
        ask_gpus * greatest(coalesce(date_diff('microsecond', wait_from, wait_to), 0), 0) / 1e6 as waiting_gpu_s,
        coalesce(date_diff('microsecond', run_from, run_to), 0) > 0 as ran,
        coalesce(date_diff('microsecond', wait_from, wait_to), 0) > 0 as waited
    from clipped
)
select
    account,
    count(*) filter (where ran) as running_jobs,
    count(*) filter (where waited) as waiting_jobs,
    sum(received_gpu_s) as received_gpu_s,
    sum(waiting_gpu_s) as waiting_gpu_s,
    sum(received_gpu_s + waiting_gpu_s) as demanded_gpu_s
from seconds
where ran or waited
group by account
order by account
