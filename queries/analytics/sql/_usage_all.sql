-- Fragment (not a query): the jobs _job_usage derives are all the filtered jobs (a query that reads no
-- usage_cube). Include it after _jobs and before _job_usage.
usage_scope as not materialized (
    select * from filtered_jobs
),
