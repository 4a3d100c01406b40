# Rule package_release: accepted images + scenes + queries -> release/ with manifest.json and DATACARD.md.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow import jobs

jobs.package_release(
    manifest=snakemake.output.manifest,
    accepted=snakemake.input.accepted,
    rejected=snakemake.input.rejected,
    queries=snakemake.input.queries,
    scenes=snakemake.input.scenes,
    images=list(snakemake.input.images),
    detections=list(snakemake.input.detections),
    config=snakemake.params.config,
    seed=snakemake.params.seed,
    name=snakemake.params.name,
    parent=snakemake.params.parent,
    graph_sources=list(snakemake.input.graph_sources),
    resources=list(snakemake.input.resources),
    nodes=snakemake.input.nodes,
    edges=snakemake.input.edges,
)
