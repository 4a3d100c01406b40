# Rule samf_instances: UniHall instances (from the ODE release or a UniHall file) + the pilot/test split.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.samf.workflow import make_instances

make_instances(
    samf=snakemake.params.samf,
    release_dir=snakemake.params.release_dir,
    release=snakemake.params.release,
    seed=snakemake.params.seed,
    out_instances=snakemake.output.instances,
    out_split=snakemake.output.split,
)
