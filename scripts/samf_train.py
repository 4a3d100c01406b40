# Rule samf_train: one controller of samf.controllers learns the mutation policy of one (subtype x question type) group.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.samf.workflow import run_train

run_train(
    samf=snakemake.params.samf,
    instances_path=snakemake.input.instances,
    split_path=snakemake.input.split,
    spec=snakemake.params.model,
    group=snakemake.wildcards.group,
    release_dir=snakemake.params.release_dir,
    models_cache=snakemake.params.models_cache,
    graph_dir=snakemake.params.graph_dir,
    seed=snakemake.params.seed,
    out=snakemake.output.policy,
    judges=snakemake.params.judges,
    controller=snakemake.wildcards.controller,
)
