# Rule retry_prompts: the previous round's rejected images of one shard -> prompts of regeneration round <attempt>.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow import jobs

jobs.retry_prompts(
    prompts=snakemake.input.prompts,
    images=snakemake.input.images,
    detections=snakemake.input.detections,
    scenes=snakemake.input.scenes,
    shard=snakemake.wildcards.shard,
    attempt=int(snakemake.wildcards.attempt),
    keep_threshold=snakemake.params.keep_threshold,
    seed=snakemake.params.seed,
    out=snakemake.output.prompts,
)
