# Rule filter_images: image + detection tables of all shards -> filtered/{accepted,rejected}.parquet.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow import jobs

jobs.filter_images(
    images=list(snakemake.input.images),
    detections=list(snakemake.input.detections),
    scenes=snakemake.input.scenes,
    filter=snakemake.params.filter,
    seed=snakemake.params.seed,
    accepted=snakemake.output.accepted,
    rejected=snakemake.output.rejected,
)
