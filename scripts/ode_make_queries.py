# Rule make_queries: accepted images + scenes + graph -> queries/queries.parquet.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow import jobs

jobs.make_queries(
    accepted=snakemake.input.accepted,
    scenes=snakemake.input.scenes,
    nodes=snakemake.input.nodes,
    edges=snakemake.input.edges,
    hallu=snakemake.input.hallu,
    queries=snakemake.params.queries,
    seed=snakemake.params.seed,
    out=snakemake.output.queries,
    images=list(snakemake.input.images),
    release=snakemake.params.release,
    spare=snakemake.params.spare,
)
