-- The job rows a replay of the window [start, end) needs (the simulator's workload, `dashboard.whatif.loader`):
-- every column of the store's jobs, unconverted. With `warm_start` and a `start` (the engine's warm start,
-- `engine.warm_start`): the jobs that started before `start` and stopped after `start - lookback_s` (pinned: running
-- at `start`, or history for the fair-share ledger), those pending at `start`, and those submitted in
-- [start, end); a job's stop is its end, else start + elapsed_s. Cold (`warm_start` false): the jobs submitted
-- in [start, end). Without `start`: every job submitted before `end` (null = all). The same rows as
-- `engine.warm_start.window_filter` (tests/whatif/test_whatif_loader.py), in the store's row order.
-- param: cluster varchar null  only this cluster
-- param: start timestamp null  window start (UTC, inclusive): the warm start, or the first submit of a cold one
-- param: end timestamp null  window end (UTC, exclusive): only jobs submitted before it
-- param: warm_start boolean true  keep the jobs running or pending at `start` and the lookback's history
-- param: lookback_s double 604800 >=0  the fair-share lookback before a warm start whose finished jobs are kept, seconds
with
scoped as (
    select * from jobs where $cluster::varchar is null or cluster = $cluster::varchar
),

stops as (
    select
        *,
        coalesce("end", start + to_microseconds(round(elapsed_s::double * 1e6)::bigint)) as replay_stop
    from scoped
),

kept as (
    select
        * exclude (replay_stop),
        case
            when $start::timestamptz is null then true
            when not $warm_start::boolean then submit >= $start::timestamptz
            else coalesce(
                (start < $start::timestamptz
                    and (replay_stop is null
                        or replay_stop > $start::timestamptz - to_microseconds(round($lookback_s::double * 1e6)::bigint)))
                or (submit < $start::timestamptz
                    and (start is null or start >= $start::timestamptz)
                    and ("end" is null or "end" > $start::timestamptz))
                or submit >= $start::timestamptz,
                false)
        end as in_window
    from stops
),

final as (
    select * exclude (in_window)
    from kept
    where in_window and ($end::timestamptz is null or submit < $end::timestamptz)
)
select * from final
