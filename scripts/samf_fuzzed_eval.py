from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

from halluflow.samf.workflow import run_fuzzed

run_fuzzed(
    snakemake.params.samf,
    snakemake.input.instances,
    snakemake.input.split,
    snakemake.input.trained,
    snakemake.params.model,
    snakemake.params.release_dir,
    snakemake.params.models_cache,
    snakemake.params.graph_dir,
    snakemake.params.seed,
    Path(snakemake.output.images).parent,
    snakemake.output.policies,
    snakemake.output.table,
    snakemake.output.instances,
    snakemake.output.dynamic,
    snakemake.params.judges,
)
