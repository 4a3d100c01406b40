# Rule detect: each image's scene objects in one shard (the detector loads once, images go in batches).
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow import jobs

jobs.detect(
    images=snakemake.input.images,
    prompts=snakemake.input.prompts,
    scenes=snakemake.input.scenes,
    detection=snakemake.params.detection,
    model=snakemake.params.model,
    out=snakemake.output.table,
    threads=snakemake.threads,
)
