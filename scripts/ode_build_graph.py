"""Rule build_graph: annotations (or the shipped seed) -> graph/{nodes,edges}.parquet + graph.graphml."""
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.graph import build_graph_from_config, write_graph

graph = snakemake.params.graph
nodes, edges = build_graph_from_config(graph)
write_graph(nodes, edges, nodes_path=snakemake.output.nodes, edges_path=snakemake.output.edges,
            graphml_path=snakemake.output.graphml)
log.info("graph from %s: %d nodes, %d edges",
         " + ".join(src["format"] for src in [graph["source"], *graph["extra_sources"]]), nodes.height, edges.height)
