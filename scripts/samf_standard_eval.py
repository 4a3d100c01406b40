from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.samf.workflow import run_standard

run_standard(
    snakemake.params.samf,
    snakemake.input.instances,
    snakemake.input.split,
    snakemake.params.model,
    snakemake.params.release_dir,
    snakemake.params.models_cache,
    snakemake.params.graph_dir,
    snakemake.output.table,
    snakemake.params.judges,
)
