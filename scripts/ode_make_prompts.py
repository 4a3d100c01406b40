# Rule make_prompts: scenes -> prompts/prompts.parquet (one row per image, seed per image, shard round-robin,
# the detector vocabulary of each image).
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow import jobs

jobs.make_prompts(
    scenes=snakemake.input.scenes,
    nodes=snakemake.input.nodes,
    edges=snakemake.input.edges,
    hallu=snakemake.input.hallu,
    prompts=snakemake.params.prompts,
    queries=snakemake.params.queries,
    shards=snakemake.params.shards,
    seed=snakemake.params.seed,
    out=snakemake.output.prompts,
)
