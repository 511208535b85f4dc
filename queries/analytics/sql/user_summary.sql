-- For one user: which few jobs drove their score. One row per job among the top_n by wasted GPU-equivalent
-- hours (jobs with recorded usage only: none where the log records no usage), with its share of the user's
-- waste (and the running total), the recommended efficiency the user would have without that job, and the
-- user's terms repeated on every row (the recommended terms need only the user's own jobs; the legacy rank is
-- relative to other users, so it is left to user_ranking).
-- param: user varchar null  the user (required)
-- param: top_n integer 5 >=0  jobs listed
with
-- include: _jobs
-- include: _usage_all
-- include: _job_usage
required as (
    select case when $user::varchar is null then error('user_summary: the user parameter is required')
                else $user::varchar end as who
),

entity_jobs as (
    select j.*, j."user" as entity, 0 as period_k, ws.span_s
    from job_usage as j, window_span as ws, required
    where j."user" = required.who
),
-- include: _no_cube_cells
-- include: _scores
job_waste_equiv as (
    select
        cluster, job_id, job_name, job_class, state, start, in_window_s,
        known_equiv_s / 3600 as known_gpu_equiv_hours,
        used_equiv_s / 3600 as used_gpu_equiv_hours,
        (known_equiv_s - used_equiv_s) / 3600 as wasted_gpu_equiv_hours,
        gpu_seconds_used / nullif(gpu_seconds_requested, 0) as gpu_efficiency,
        cpu_seconds_used / nullif(cpu_seconds_requested, 0) as cpu_efficiency,
        mem_seconds_used / nullif(mem_seconds_requested, 0) as mem_efficiency
    from weighted_jobs
),

-- only jobs with measured usage: one whose usage the log does not record adds nothing to the score
top_jobs as (
    select
        w.*,
        row_number() over (order by w.wasted_gpu_equiv_hours desc nulls last, w.cluster, w.job_id) as rank
    from job_waste_equiv as w
    where w.known_gpu_equiv_hours > 0
)
select
    s.entity as "user",
    t.rank,
    t.cluster,
    t.job_id,
    t.job_name,
    t.job_class,
    t.state,
    t.start,
    t.in_window_s / 3600 as run_hours,
    t.gpu_efficiency,
    t.cpu_efficiency,
    t.mem_efficiency,
    t.known_gpu_equiv_hours,
    t.wasted_gpu_equiv_hours,
    t.wasted_gpu_equiv_hours / nullif(s.wasted_gpu_equiv_hours, 0) as share_of_user_waste,
    sum(t.wasted_gpu_equiv_hours) over (order by t.rank) / nullif(s.wasted_gpu_equiv_hours, 0)
        as cumulative_share_of_user_waste,
    (s.used_gpu_equiv_hours - t.used_gpu_equiv_hours)
        / nullif(s.known_gpu_equiv_hours - t.known_gpu_equiv_hours, 0) as rec_efficiency_without_job,
    s.job_count,
    s.footprint_gpu_equiv_hours,
    s.wasted_gpu_equiv_hours as user_wasted_gpu_equiv_hours,
    s.gpu_hours_wasted as user_gpu_hours_wasted,
    s.cpu_hours_wasted as user_cpu_hours_wasted,
    s.mem_tb_hours_wasted as user_mem_tb_hours_wasted,
    s.rec_efficiency,
    s.rec_confidence,
    s.rec_demand,
    s.rec_coefficient,
    s.legacy_score
from top_jobs as t
cross join scores as s
where t.rank <= $top_n::integer
order by t.rank
