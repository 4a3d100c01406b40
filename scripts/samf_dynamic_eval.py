# Rule samf_dynamic_eval: Table 11's Dynamic setting (one random policy per instance, no controller), once per model.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.samf.workflow import run_dynamic

run_dynamic(
    samf=snakemake.params.samf,
    instances_path=snakemake.input.instances,
    split_path=snakemake.input.split,
    spec=snakemake.params.model,
    release_dir=snakemake.params.release_dir,
    models_cache=snakemake.params.models_cache,
    graph_dir=snakemake.params.graph_dir,
    seed=snakemake.params.seed,
    out_dir=snakemake.output.images,  # the random policies' images are written under it
    out=snakemake.output.table,
    judges=snakemake.params.judges,
)
