-- Gaming check, per user: what splitting the user's largest job (by GPU-equivalent footprint) into split_n
-- equal pieces one after the other would do to both scores, everybody else unchanged. The pieces keep the
-- job's request, usage and peak; each runs 1/split_n of the time. The recommended terms are sums, so they
-- cannot move. The legacy score can move either way: job_count grows and each piece scores lower than the
-- whole job, but the average task score moves towards the pieces' score, which may lie above the user's other
-- tasks (on the sample at 4 pieces it falls for 57 of 150 users and rises for 93; the rank improves for 23
-- and worsens for 37). legacy_improves says for whom it falls: the vulnerability of DOMAIN.md section 3, shown
-- per user rather than hidden.
-- param: split_n integer 4 >=1  pieces the largest job is split into
with
-- include: _jobs
-- include: _usage_all
-- include: _job_usage
job_size as (
    -- each job's GPU-equivalent footprint, the ordering key for "largest"
    select
        "user",
        cluster,
        job_id,
        gpu_seconds_requested + coalesce(cpu_seconds_requested, 0) / $cpus_per_gpu::double
            + coalesce(mem_seconds_requested, 0) / $gb_per_gpu::double as footprint
    from job_usage
),

largest as (
    -- both halves of the job key from one row: the same ordering key (ties: by name)
    select
        "user",
        arg_max(cluster, (footprint, cluster, job_id)) as cluster,
        arg_max(job_id, (footprint, cluster, job_id)) as job_id
    from job_size
    group by "user"
),

pieces as (
    select
        j.*,
        unnest(range(greatest($split_n::integer, 1))) as piece
    from job_usage as j
    join largest as l on l.cluster = j.cluster and l.job_id = j.job_id
),

entity_jobs as (
    -- period_k 0: the history as it is; period_k 1: every user's largest job split (each user's split is
    -- scored against the others' unsplit history below, so the users' splits do not interact)
    select j.*, j."user" as entity, 0 as period_k, ws.span_s
    from job_usage as j, window_span as ws
    union all by name
    select j.*, j."user" as entity, 1 as period_k, ws.span_s
    from job_usage as j, window_span as ws
    where not exists (select 1 from largest as l where l.cluster = j.cluster and l.job_id = j.job_id)
    union all by name
    select
        p.* exclude (piece) replace (
            p.in_window_s / greatest($split_n::integer, 1) as in_window_s,
            p.cpu_seconds_requested / greatest($split_n::integer, 1) as cpu_seconds_requested,
            p.cpu_seconds_used / greatest($split_n::integer, 1) as cpu_seconds_used,
            p.gpu_seconds_requested / greatest($split_n::integer, 1) as gpu_seconds_requested,
            p.gpu_seconds_used / greatest($split_n::integer, 1) as gpu_seconds_used,
            p.mem_seconds_requested / greatest($split_n::integer, 1) as mem_seconds_requested,
            p.mem_seconds_used / greatest($split_n::integer, 1) as mem_seconds_used),
        p."user" as entity,
        1 as period_k,
        ws.span_s
    from pieces as p, window_span as ws
),
-- include: _no_cube_cells
-- include: _scores
unsplit as (select * from scores where period_k = 0),

split as (select * from scores where period_k = 1),

compared as (
    select
        u.entity as "user",
        l.cluster,
        l.job_id,
        u.legacy_score as legacy_score_before,
        s.legacy_score as legacy_score_after,
        u.legacy_rank as legacy_rank_before,
        -- the split user's new score among everybody else's unsplit scores
        1 + (select count(*) from unsplit as o
             where o.entity <> u.entity and o.legacy_score < s.legacy_score) as legacy_rank_after,
        (select count(legacy_score) from unsplit) as legacy_n,
        u.legacy_coefficient as legacy_coefficient_before,
        u.rec_efficiency as rec_efficiency_before,
        s.rec_efficiency as rec_efficiency_after,
        u.rec_coefficient as rec_coefficient_before,
        s.rec_coefficient as rec_coefficient_after,
        u.job_count as job_count_before,
        s.job_count as job_count_after
    from unsplit as u
    join split as s on s.entity = u.entity
    join largest as l on l."user" = u.entity
)
select
    c."user",
    j.cluster,
    j.job_id as split_job_id,
    greatest($split_n::integer, 1) as split_n,
    c.job_count_before,
    c.job_count_after,
    c.legacy_score_before,
    c.legacy_score_after,
    c.legacy_rank_before,
    case when c.legacy_score_after is not null then c.legacy_rank_after end as legacy_rank_after,
    c.legacy_coefficient_before,
    case when c.legacy_score_after is not null then
        $legacy_coef_best::double * pow($legacy_coef_worst::double / $legacy_coef_best::double,
            coalesce((c.legacy_rank_after - 1) / nullif(c.legacy_n - 1, 0), 0.0))
    end as legacy_coefficient_after,
    c.rec_efficiency_before,
    c.rec_efficiency_after,
    c.rec_coefficient_before,
    c.rec_coefficient_after,
    c.legacy_score_after < c.legacy_score_before as legacy_improves,
    c.rec_coefficient_after > c.rec_coefficient_before + 1e-9 as recommended_improves
from compared as c
join job_usage as j on j.cluster = c.cluster and j.job_id = c.job_id
order by c.legacy_score_before - c.legacy_score_after desc nulls last, c."user"
