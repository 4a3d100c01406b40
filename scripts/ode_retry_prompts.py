# Checkpoint retry_prompts: the previous round's rejected images of every shard -> the plan of regeneration round
# <attempt> (its prompts, each with the round job that regenerates it).
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow import jobs

jobs.retry_prompts(
    prompts=snakemake.input.prompts,
    images=list(snakemake.input.images),
    detections=list(snakemake.input.detections),
    scenes=snakemake.input.scenes,
    attempt=int(snakemake.wildcards.attempt),
    keep_threshold=snakemake.params.keep_threshold,
    seed=snakemake.params.seed,
    generators=snakemake.params.generators,
    out=snakemake.output.prompts,
)
