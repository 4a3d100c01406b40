# Rule build_standin_vlm: a tiny random stand-in VLM, built offline.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow import jobs

jobs.build_standin_vlm(
    build=snakemake.params.build,
    out=snakemake.output.model,
    name=snakemake.wildcards.vlm,
)
