"""Rule build_graph: annotations (or the shipped seed) -> graph/{nodes,edges}.parquet + graph.graphml."""
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.ode.graph import build_graph_from_config, hallu_graph_from_config, write_graph
from halluflow.io import write_parquet

graph = snakemake.params.graph
nodes, edges = build_graph_from_config(graph)
write_graph(nodes, edges, nodes_path=snakemake.output.nodes, edges_path=snakemake.output.edges,
            graphml_path=snakemake.output.graphml)
hallu = hallu_graph_from_config(graph)  # G_H: empty unless a source annotates hallucination-prone objects (AMBER)
write_parquet(snakemake.output.hallu, hallu)
log.info("graph from %s: %d nodes, %d edges, %d hallucination edges",
         " + ".join(src["format"] for src in [graph["source"], *graph["extra_sources"]]), nodes.height, edges.height,
         hallu.height)
