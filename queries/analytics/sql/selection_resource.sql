-- Which resource a selection (window and filters) is measured in, one row: 'gpu' when the selection's jobs held
-- GPUs inside the window or its node list (cluster / partition filters) has GPUs, else 'cpu' when they held CPU
-- cores or the node list has cores (a CPU-only cluster, or the CPU partition of a mixed one), else 'gpu' (nothing
-- to measure: the product's default). Every page, query default and the report take the resource from here, so
-- occupancy, utilisation, waste, rankings, gap areas, the pyramid and fair share all speak core-hours where
-- there are no GPUs. resource_source says why: 'jobs', 'nodes' or 'default'. The rule is the _resource fragment.
with
-- include: _jobs
-- the cube answers the resource the selection held (_resource) for the jobs its cells hold whole
cube_wanted as (select true as ok, null::double as period_s, null::double as origin),
-- include: _cube
-- include: _resource
chosen as (
    select * from chosen_resource
)
select resource, resource_source, gpu_hours_held, cpu_hours_held, node_gpus, node_cpus
from chosen
