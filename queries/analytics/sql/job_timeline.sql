-- Jobs whose run interval overlaps the window, for a Gantt chart: submit, start, run_end (end, or for a RUNNING
-- job the last instant the log knows (_jobs), or start + elapsed), wait, resources and nodes. The limit_rows jobs with the largest
-- GPU (then CPU) footprint inside the window are kept, ordered by start.
-- param: limit_rows integer 5000 >=0  return at most this many jobs
with
-- include: _jobs
in_window as (
    select
        *,
        greatest(least(t_end, w_end) - greatest(t_start, w_start), 0) as in_window_s
    from filtered_jobs
    where t_start is not null
      and (least(t_end, w_end) > greatest(t_start, w_start)
           or (t_end = t_start and t_start >= w_start and t_start < w_end))
),

kept as (
    select *
    from in_window
    order by gpus * in_window_s desc, coalesce(cpus, 0) * in_window_s desc, cluster, job_id
    limit coalesce($limit_rows::bigint, 9223372036854775807)
)
select
    cluster, job_id, job_name, "user", account, team, "partition", job_class, state,
    submit, start, to_timestamp(t_end) as run_end,
    greatest(epoch_us(start) - epoch_us(submit), 0) / 1e6 as wait_s,
    t_end - t_start as run_s,
    cpus, gpus, mem_gb, nodes, node_list
from kept
order by start, cluster, job_id
