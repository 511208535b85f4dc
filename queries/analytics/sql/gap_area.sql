-- Requested and used curves of one resource per time bucket, cluster-wide or per team / user / account:
-- the request-vs-usage gap area. Exact for piecewise-constant curves: every job's clipped run interval (the
-- requested curve) and every sample's clipped interval (the used curve; job totals spread evenly where a job
-- has no samples for the resource) is split across the buckets it overlaps by overlap length, so summed
-- over buckets the columns equal job_waste's totals for the same window and filters.
-- A job whose usage of the resource is unknown (no samples, no totals) holds its resources in
-- requested_seconds and also in unknown_usage_seconds; it is in neither used_seconds nor wasted_seconds:
--   wasted_seconds = requested_seconds - unknown_usage_seconds - used_seconds
-- (job_waste leaves such a job's waste null and its sums skip it; summed over buckets the two agree).
-- A stacked chart: used + wasted + unknown usage = requested.
-- Cells: when the buckets, their origin and the window's bounds are whole hours (or open) and no partition /
-- state / job_class filter is set, the store's usage_hours cells (the same per-hour sums, kept at ingest:
-- queries.analytics.usage_hours) answer every job whose run end does not depend on the window; only the others
-- (a RUNNING job with no end, no elapsed time, no snapshot) are split here, and the requested, unknown and
-- totals-based usage of a RUNNING job without an end (the cells hold its sampled usage: _hour_cells). Equal up
-- to the order of a sum.
-- Units: resource-seconds per bucket (CPU-seconds, GPU-seconds, memory GB-seconds); *_level = seconds /
-- covered_s = the mean number of CPUs / GPUs / GB held or used in the part of the bucket inside the window.
-- param: resource varchar null  cpu | gpu | mem; null = the selection's own (selection_resource: core-hours without GPUs)
-- param: bucket_s double 3600  bucket length in seconds (60 = minutes ... 86400 = days)
-- param: group_by varchar none  none | team | user | account
-- param: origin timestamp 1970-01-05  buckets are aligned to this instant (default: a Monday, 00:00 UTC)
with
-- include: _jobs
-- include: _hour_cells
-- include: _job_usage
-- include: _resource
settings as (
    select
        case when coalesce($resource::varchar, r.resource) in ('cpu', 'gpu', 'mem')
             then coalesce($resource::varchar, r.resource)
             else error('gap_area: resource must be cpu, gpu or mem, got ' || coalesce($resource::varchar, 'null')) end
            as resource,
        case when $group_by::varchar in ('none', 'team', 'user', 'account') then $group_by::varchar
             else error('gap_area: group_by must be none, team, user or account, got '
                        || coalesce($group_by::varchar, 'null')) end as group_by,
        case when $bucket_s::double > 0 then $bucket_s::double
             else error('gap_area: bucket_s must be > 0') end as bucket_s,
        epoch_us(coalesce($origin::timestamptz, '1970-01-05 00:00:00+00'::timestamptz)) / 1e6 as origin
    from chosen_resource as r  -- the selection's resource when none is asked for
),

resource_samples as not materialized (
    -- the resource's sampled value: CPUs, GPU utilisation 0..1 or GB. Not materialized: each reference joins
    -- the samples with the jobs derived per job, and DuckDB skips the samples when those are none
    select
        s.cluster,
        s.job_id,
        epoch_us(s.ts) / 1e6 as t_sample,
        s.interval_s,
        case st.resource when 'cpu' then s.cpu_used when 'gpu' then s.gpu_util else s.mem_bytes / 1e9 end as value
    from samples as s, settings as st
    where s.ts is not null and s.interval_s is not null
),

sampled_jobs as (
    -- jobs with at least one sampled value of the resource: their used curve comes from the samples. Only the
    -- jobs derived per job whose sampled usage is not in the cells (none, usually, when the cells answer: DuckDB
    -- then skips the samples); for the others their job_rollup row's counts say it, or, for a job without a
    -- row (a store whose rollup is missing or hidden), its samples
    select distinct s.cluster, s.job_id
    from resource_samples as s
    semi join (select j.cluster, j.job_id from job_rates as j
               where not j.samples_in_cells
                  or not exists (select 1 from rollup_sampled as r
                                 where r.cluster = j.cluster and r.job_id = j.job_id)) as j
        on j.cluster = s.cluster and j.job_id = s.job_id
    where s.value is not null
    union all
    select r.cluster, r.job_id
    from rollup_sampled as r, settings as st
    where case st.resource when 'cpu' then r.n_cpu when 'gpu' then r.n_gpu else r.n_mem end > 0
),

gap_levels as (
    -- per job: the resource's requested level, its level from job totals, and whether samples exist
    select
        r.*,
        case st.resource when 'cpu' then r.cpus when 'gpu' then r.gpus else r.mem_gb end as req_level,
        case st.resource when 'cpu' then r.cpu_rate_totals when 'gpu' then r.gpu_rate_totals
             else r.mem_rate_peak end as totals_level,
        exists (select 1 from sampled_jobs as sj where sj.cluster = r.cluster and sj.job_id = r.job_id)
            as sampled
    from job_rates as r, settings as st
),

gap_jobs as materialized (
    -- one level, one group key and where its usage comes from per job: a narrow build side for the join
    -- with the samples. Usage is known as in job_usage: no GPUs = 0 GPUs used; else samples or totals, and
    -- only with a known level (usage is capped at it)
    select
        j.cluster,
        j.job_id,
        j.lo,
        j.hi,
        case st.group_by when 'team' then j.team when 'user' then j."user" when 'account' then j.account
             else '(all)' end as group_key,
        j.req_level,
        j.totals_level,
        j.sampled,
        j.samples_in_cells,
        j.req_level is not null
            and ((st.resource = 'gpu' and j.req_level = 0) or j.sampled or j.totals_level is not null) as usage_known
    from gap_levels as j, settings as st
),

segments as (
    -- requested: the job's level over its clipped run interval (and again as unknown when its usage is)
    select group_key, lo as t_from, hi as t_to, req_level,
           case when usage_known then 0.0 else req_level end as unknown_level, 0.0 as used_level
    from gap_jobs
    union all
    -- used, sampled: each sample's interval clipped to the job's, its value capped at the request
    select
        j.group_key,
        greatest(s.t_sample, j.lo),
        least(s.t_sample + s.interval_s, j.hi),
        0.0,
        0.0,
        case when st.resource = 'gpu' then case when s.value > 1.0 then 1.0 else s.value end * j.req_level
             when s.value <= j.req_level then s.value when s.value > j.req_level then j.req_level end
    from resource_samples as s
    join gap_jobs as j on s.cluster = j.cluster and s.job_id = j.job_id
    cross join settings as st
    where s.value is not null and not j.samples_in_cells  -- else in the cells (hour_cells)
    union all
    -- used, from totals: jobs without samples for this resource, at their constant rate
    select group_key, lo, hi, 0.0, 0.0, totals_level
    from gap_jobs
    where not sampled and totals_level is not null
),

bucketed as (
    select
        group_key,
        t_from,
        t_to,
        coalesce(req_level, 0.0) as req_level,
        coalesce(unknown_level, 0.0) as unknown_level,
        coalesce(used_level, 0.0) as used_level,
        floor((t_from - st.origin) / st.bucket_s)::bigint as k_from,
        -- the last bucket the interval reaches into (an interval ending on a boundary stops before it)
        (ceil((t_to - st.origin) / st.bucket_s) - 1)::bigint as k_to,
        st.origin,
        st.bucket_s
    from segments, settings as st
    where t_to > t_from and (req_level is not null or used_level is not null)
),

contributions as (
    -- area_k = level_entering_k x bucket_s + e_k, level_entering_k = sum of d over earlier buckets.
    -- An interval inside one bucket adds its area to e; a longer one adds its head in k_from, switches its
    -- level on for the buckets after k_from (d = +v) and off after k_to (d = -v), minus the tail it misses.
    select group_key, k_from as k,
           req_level * (t_to - t_from) as e_req, 0.0 as d_req,
           unknown_level * (t_to - t_from) as e_unknown, 0.0 as d_unknown,
           used_level * (t_to - t_from) as e_used, 0.0 as d_used
    from bucketed where k_from >= k_to
    union all
    select group_key, k_from,
           req_level * (origin + (k_from + 1) * bucket_s - t_from), req_level,
           unknown_level * (origin + (k_from + 1) * bucket_s - t_from), unknown_level,
           used_level * (origin + (k_from + 1) * bucket_s - t_from), used_level
    from bucketed where k_from < k_to
    union all
    select group_key, k_to,
           -req_level * (origin + (k_to + 1) * bucket_s - t_to), -req_level,
           -unknown_level * (origin + (k_to + 1) * bucket_s - t_to), -unknown_level,
           -used_level * (origin + (k_to + 1) * bucket_s - t_to), -used_level
    from bucketed where k_from < k_to
    union all
    -- the cells of usage_hours inside the window (none unless they answer): each lies in one bucket
    select
        case st.group_by when 'team' then c.team when 'user' then c."user" when 'account' then c.account
             else '(all)' end,
        floor((c.t_s - st.origin) / st.bucket_s)::bigint,
        coalesce(case st.resource when 'cpu' then c.cpu_req_s when 'gpu' then c.gpu_req_s else c.mem_req_gbs end,
                 0.0), 0.0,
        coalesce(case st.resource when 'cpu' then c.cpu_unknown_s when 'gpu' then c.gpu_unknown_s
                      else c.mem_unknown_gbs end, 0.0), 0.0,
        coalesce(case st.resource when 'cpu' then c.cpu_used_s when 'gpu' then c.gpu_used_s else c.mem_used_gbs end,
                 0.0), 0.0
    from hour_cells as c, settings as st
),

per_bucket as (
    select group_key, k, sum(e_req) as e_req, sum(d_req) as d_req, sum(e_unknown) as e_unknown,
           sum(d_unknown) as d_unknown, sum(e_used) as e_used, sum(d_used) as d_used
    from contributions
    group by group_key, k
),

span as (
    select
        case when min(w_start) > '-inf'::double then floor((min(w_start) - any_value(st.origin)) / any_value(st.bucket_s))
             else (select min(k) from per_bucket) end::bigint as k_first,
        case when max(w_end) < 'inf'::double then ceil((max(w_end) - any_value(st.origin)) / any_value(st.bucket_s)) - 1
             else (select max(k) from per_bucket) end::bigint as k_last
    from window_bounds, settings as st
),

grid as (
    select g.group_key, r.k
    from (select distinct group_key from per_bucket) as g,
         span,
         range(span.k_first, span.k_last + 1) as r(k)
),

levels as (
    select
        grid.group_key,
        grid.k,
        coalesce(sum(p.d_req) over w, 0.0) as level_req,
        coalesce(sum(p.d_unknown) over w, 0.0) as level_unknown,
        coalesce(sum(p.d_used) over w, 0.0) as level_used,
        coalesce(p.e_req, 0.0) as e_req,
        coalesce(p.e_unknown, 0.0) as e_unknown,
        coalesce(p.e_used, 0.0) as e_used
    from grid
    left join per_bucket as p on p.group_key = grid.group_key and p.k = grid.k
    window w as (partition by grid.group_key order by grid.k rows between unbounded preceding and 1 preceding)
),

areas as (
    select
        l.group_key,
        to_timestamp(st.origin + l.k * st.bucket_s) as bucket_start,
        st.bucket_s,
        least(st.origin + (l.k + 1) * st.bucket_s, w.w_end) - greatest(st.origin + l.k * st.bucket_s, w.w_start)
            as covered_s,
        st.resource,
        l.level_req * st.bucket_s + l.e_req as requested_seconds,
        l.level_unknown * st.bucket_s + l.e_unknown as unknown_usage_seconds,
        l.level_used * st.bucket_s + l.e_used as used_seconds
    from levels as l, settings as st, window_bounds as w
)
select
    group_key,
    bucket_start,
    bucket_s,
    covered_s,
    resource,
    requested_seconds,
    used_seconds,
    requested_seconds - unknown_usage_seconds - used_seconds as wasted_seconds,
    unknown_usage_seconds,
    requested_seconds / nullif(covered_s, 0) as requested_level,
    used_seconds / nullif(covered_s, 0) as used_level,
    unknown_usage_seconds / nullif(covered_s, 0) as unknown_usage_level
from areas
order by group_key, bucket_start
