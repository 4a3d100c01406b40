# Rule samf_fuzzed_eval: one controller's trained policies on the instances.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

from halluflow.samf.workflow import run_fuzzed

run_fuzzed(
    samf=snakemake.params.samf,
    instances_path=snakemake.input.instances,
    split_path=snakemake.input.split,
    trained=snakemake.input.trained,
    spec=snakemake.params.model,
    release_dir=snakemake.params.release_dir,
    models_cache=snakemake.params.models_cache,
    graph_dir=snakemake.params.graph_dir,
    seed=snakemake.params.seed,
    out_dir=Path(snakemake.output.images).parent,  # the controller's fuzz folder; fuzzed/ is written inside it
    out_policies=snakemake.output.policies,
    out_fuzzed=snakemake.output.table,
    out_instances=snakemake.output.instances,
    judges=snakemake.params.judges,
    controller=snakemake.wildcards.controller,
)
