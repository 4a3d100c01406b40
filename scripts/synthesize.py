# Rule synthesize: one image shard (the model loads once, images are generated in fixed batches).
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow import jobs

jobs.synthesize(
    prompts=snakemake.input.prompts,
    # rule synthesize_retry writes the shard's regeneration round "<shard>-a<attempt>"
    shard=jobs.round_name(snakemake.wildcards.shard, getattr(snakemake.wildcards, "attempt", None)),
    synthesis=snakemake.params.synthesis,
    model=snakemake.params.model,
    out=snakemake.output.table,
    threads=snakemake.threads,
)
