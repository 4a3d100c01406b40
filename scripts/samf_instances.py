from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.samf.workflow import make_instances

make_instances(
    snakemake.params.samf,
    snakemake.params.release_dir,
    snakemake.params.release,
    snakemake.params.seed,
    snakemake.output.instances,
    snakemake.output.split,
)
