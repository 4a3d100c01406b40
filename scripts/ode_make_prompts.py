"""Rule make_prompts: scenes -> prompts/prompts.parquet (one row per image, seed per image, shard round-robin)."""
from halluflow.snakemake_glue import setup

log = setup(snakemake)

import polars as pl

from halluflow.ode.graph import read_graph
from halluflow.io import write_parquet
from halluflow.ode.prompts import make_prompts
from halluflow.ode.queries import detector_candidates

cfg = snakemake.params.prompts
scenes = pl.read_parquet(snakemake.input.scenes)
nodes, edges = read_graph(snakemake.input.nodes, snakemake.input.edges)
extra = detector_candidates(scenes, nodes, edges, cfg["detect_candidates"])
prompts = make_prompts(scenes, seed=snakemake.params.seed, images_per_scene=cfg["images_per_scene"],
                       shards=snakemake.params.shards, templates=cfg["templates"], style_tags=cfg["style_tags"],
                       negative_prompt=cfg["negative_prompt"], extra_labels=extra)
write_parquet(snakemake.output.prompts, prompts)
log.info("%d prompts over %d shards", prompts.height, snakemake.params.shards)
