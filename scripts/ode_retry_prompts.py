"""Rule retry_prompts: the previous round's rejected images of one shard -> prompts of regeneration round <attempt>."""
from halluflow.snakemake_glue import setup

log = setup(snakemake)

import polars as pl

from halluflow.io import write_parquet
from halluflow.ode.filtering import read_rounds, retry_prompts

shard, attempt = snakemake.wildcards.shard, int(snakemake.wildcards.attempt)
images, detections = read_rounds([snakemake.input.images], [snakemake.input.detections])
prompts = retry_prompts(pl.read_parquet(snakemake.input.prompts), images, detections,
                        pl.read_parquet(snakemake.input.scenes), attempt=attempt, seed=snakemake.params.seed,
                        keep_threshold=snakemake.params.keep_threshold, shard=f"{shard}-a{attempt}")
write_parquet(snakemake.output.prompts, prompts)
log.info("shard %s attempt %d: %d of %d images to regenerate", shard, attempt, prompts.height, images.height)
