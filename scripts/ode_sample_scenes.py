"""Rule sample_scenes: graph -> scenes/scenes.parquet (4 distributions x 2 pair kinds, seeded)."""
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.ode.graph import read_graph
from halluflow.io import write_parquet
from halluflow.ode.sampling import sample_scenes

nodes, edges = read_graph(snakemake.input.nodes, snakemake.input.edges)
cfg = snakemake.params.sampling
scenes = sample_scenes(nodes, edges, cfg["sizes"], snakemake.params.seed, cfg["variants"],
                       tuple(cfg["attribute_kinds"]))
write_parquet(snakemake.output.scenes, scenes)
log.info("%d scenes: %s", scenes.height, dict(scenes.group_by("distribution").len().sort("distribution").iter_rows()))
