-- For one user: the jobs that wasted most CPU-, GPU- and memory-hours (per_resource rows each: waste is an
-- area, so a long wide job at 40 % ranks above a 3-minute one at 5 %; ties by lowest efficiency), leaving
-- out tiny control jobs (GPU-equivalent footprint below min_footprint_gpu_equiv_hours, where low utilisation
-- is normal) and jobs that failed / were cancelled / preempted / ran out of memory / lost their node within
-- min_run_s (the cause may not be the request). Per job: waste in resource-hours (CPU-hours, GPU-hours,
-- GiB-hours: see `unit`) and a right-sized request: from the job's own peak plus margin, and from the p95 peak of
-- the user's similar jobs (same job class and name stem: the name without trailing digits) plus margin.
-- suggested_request takes the history when at least min_similar similar jobs exist, else the job's peak; it is
-- never below the job's own peak nor above its request, so it is never below the job's mean use.
-- Memory is per node in GiB, as Slurm's --mem means it (MaxRSS is one task's, i.e. one node's, peak):
-- requested, peak and the suggestion (`--mem=NG`) are GiB per node; wasted_hours is the whole job's GiB-hours.
-- param: user varchar null  the user (required)
-- param: per_resource integer 5 >=0  rows per resource
-- param: min_footprint_gpu_equiv_hours double 0.25 >=0  smaller jobs are control jobs and left out
-- param: min_run_s double 600 >=0  failed / cancelled jobs shorter than this are left out
-- param: margin double 0.2 >=0  headroom added to an observed peak (0.2 = 20 %)
-- param: min_similar integer 3 >=0  similar jobs needed before the history-based suggestion is used
-- param: cpus_per_gpu double 16 >0  CPU cores that count as one GPU in GPU-equivalent footprints
-- param: gb_per_gpu double 128 >0  memory GB that count as one GPU in GPU-equivalent footprints
with
-- include: _jobs
-- include: _usage_all
-- include: _job_usage
required as (
    select case when $user::varchar is null then error('user_low_efficiency_jobs: the user parameter is required')
                else $user::varchar end as who
),

candidates as (
    select
        j.*,
        regexp_replace(coalesce(j.job_name, ''), '([-_.]*[0-9]+)+$', '') as name_stem
    from job_usage as j, required
    where j."user" = required.who
      and (coalesce(j.gpu_seconds_requested, 0) + coalesce(j.cpu_seconds_requested, 0) / $cpus_per_gpu::double
           + coalesce(j.mem_seconds_requested, 0) / $gb_per_gpu::double) / 3600
          >= $min_footprint_gpu_equiv_hours::double
      and not (j.state in ('FAILED', 'CANCELLED', 'PREEMPTED', 'OUT_OF_MEMORY', 'NODE_FAIL')
               and j.run_s < $min_run_s::double)
),

per_resource as (
    -- one row per (job, resource); peak and request in the resource's unit (CPUs, GPUs, GB)
    select *, 'cpu' as resource, 'CPU-hours' as unit, cpus as requested, peak_cpus as peak,
           cpu_seconds_requested as req_s, cpu_seconds_used as used_s
    from candidates
    union all
    select *, 'gpu', 'GPU-hours', gpus, peak_gpu_util * gpus, gpu_seconds_requested, gpu_seconds_used
    from candidates
    union all
    select *, 'mem', 'GiB-hours', mem_node_gb * 1e9 / 1073741824, peak_mem_node_gb * 1e9 / 1073741824,
           mem_seconds_requested * 1e9 / 1073741824, mem_seconds_used * 1e9 / 1073741824
    from candidates
),

history as (
    select
        resource,
        job_class,
        name_stem,
        count(peak) as similar_jobs,
        quantile_cont(peak, 0.95) as similar_p95_peak
    from per_resource
    group by resource, job_class, name_stem
),

ranked as (
    select
        p.*,
        p.used_s / nullif(p.req_s, 0) as efficiency,
        row_number() over (partition by p.resource
                           order by p.req_s - p.used_s desc, p.used_s / nullif(p.req_s, 0) asc, p.job_id) as rn
    from per_resource as p
    where p.req_s > 0 and p.used_s is not null
),

suggested as (
    -- a right-sized request never exceeds what was asked (this view only suggests reductions); whole
    -- CPUs / GPUs / GiB, at least 1 (a fractional GPU request stays as asked)
    select
        r.*,
        h.similar_jobs,
        h.similar_p95_peak,
        case when r.peak is not null then
            least(r.requested, greatest(1, ceil(r.peak * (1 + $margin::double)))) end as suggested_from_peak,
        case when h.similar_p95_peak is not null then
            least(r.requested, greatest(1, ceil(h.similar_p95_peak * (1 + $margin::double)))) end
            as suggested_from_history
    from ranked as r
    left join history as h
        on h.resource = r.resource and h.job_class is not distinct from r.job_class and h.name_stem = r.name_stem
    where r.rn <= $per_resource::integer
),

final as (
    select
        *,
        -- the history is used only when it covers this job's own peak: a request below it would not fit this job
        -- (and could sit below its mean use), so an outlier gets its own peak + margin
        similar_jobs >= $min_similar::integer and suggested_from_history >= least(requested, peak) as from_history,
        case when similar_jobs >= $min_similar::integer and suggested_from_history >= least(requested, peak)
             then suggested_from_history else suggested_from_peak end as suggested_request
    from suggested
)
select
    resource,
    rn as rank,
    cluster,
    job_id,
    job_name,
    job_class,
    state,
    start,
    run_s / 3600 as run_hours,
    nodes,
    requested,
    peak,
    efficiency,
    case resource when 'cpu' then peak_cpu_util when 'gpu' then peak_gpu_util else peak_mem_util end as peak_util,
    (req_s - used_s) / 3600 as wasted_hours,
    unit,
    suggested_from_peak,
    similar_jobs,
    similar_p95_peak,
    suggested_from_history,
    suggested_request,
    format('{}: asked {}, used {:.0f} % of it over the run{}; {}',
           resource,
           case resource when 'mem' then format('--mem={:g}G per node{}', round(requested, 1),
                                                case when nodes > 1 then format(' on {} nodes', nodes) else '' end)
                else format('{:g} {}', round(requested, 2), case resource when 'cpu' then 'CPUs' else 'GPUs' end) end,
           100 * efficiency,
           case when peak is null then ''
                when resource = 'mem' then format(', peak {:g}G on a node', round(peak, 1))
                else format(', peak {:g}', round(peak, 2)) end,
           case when suggested_request is null then 'no peak recorded, so no right-sized request'
                else format('{} ({})',
                            case when suggested_request >= requested
                                 then format('keep {}{:g}{}: the peak needs it',
                                             case when resource = 'mem' then '--mem=' else '' end,
                                             round(requested, 2), case when resource = 'mem' then 'G' else '' end)
                                 when resource = 'mem' then format('request --mem={:g}G', suggested_request)
                                 else format('request {:g}', suggested_request) end,
                            case when from_history
                                 then format('p95 peak of {} similar jobs + {:.0f} %', similar_jobs,
                                             100 * $margin::double)
                                 when similar_jobs >= $min_similar::integer
                                 then format('this job''s peak + {:.0f} %: its {} similar jobs peak lower',
                                             100 * $margin::double, similar_jobs)
                                 else format('this job''s peak + {:.0f} %', 100 * $margin::double) end)
           end) as suggestion
from final
order by resource, rn
