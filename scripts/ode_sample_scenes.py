# Rule sample_scenes: graph -> scenes/scenes.parquet (4 distributions x 2 pair kinds, seeded).
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow import jobs

jobs.sample_scenes(
    nodes=snakemake.input.nodes,
    edges=snakemake.input.edges,
    sampling=snakemake.params.sampling,
    seed=snakemake.params.seed,
    out=snakemake.output.scenes,
    domain=snakemake.params.domain,
    lineage=snakemake.params.lineage,
)
