from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.samf.workflow import run_train

run_train(
    snakemake.params.samf,
    snakemake.input.instances,
    snakemake.input.split,
    snakemake.params.model,
    snakemake.wildcards.group,
    snakemake.params.release_dir,
    snakemake.params.models_cache,
    snakemake.params.graph_dir,
    snakemake.params.seed,
    snakemake.output.policy,
    snakemake.params.judges,
)
