# Rule build_graph: annotations (or the shipped seed) -> graph/{nodes,edges}.parquet + graph.graphml.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow import jobs

jobs.build_graph(
    graph=snakemake.params.graph,
    nodes=snakemake.output.nodes,
    edges=snakemake.output.edges,
    graphml=snakemake.output.graphml,
    hallu=snakemake.output.hallu,
)
