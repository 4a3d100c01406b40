# Rule synthesize: one image shard (the model loads once, images are generated in fixed batches).
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow import jobs

jobs.synthesize(
    prompts=snakemake.input.prompts,
    shard=snakemake.wildcards.shard,
    synthesis=snakemake.params.synthesis,
    model=snakemake.params.model,
    out=snakemake.output.table,
    threads=snakemake.threads,
)
