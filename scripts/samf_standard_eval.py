# Rule samf_standard_eval: the model on the unmutated test instances.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.samf.workflow import run_standard

run_standard(
    samf=snakemake.params.samf,
    instances_path=snakemake.input.instances,
    split_path=snakemake.input.split,
    spec=snakemake.params.model,
    release_dir=snakemake.params.release_dir,
    models_cache=snakemake.params.models_cache,
    graph_dir=snakemake.params.graph_dir,
    out=snakemake.output.table,
    judges=snakemake.params.judges,
)
