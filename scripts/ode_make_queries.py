"""Rule make_queries: accepted images + scenes + graph -> queries/queries.parquet."""
from halluflow.snakemake_glue import setup

log = setup(snakemake)

import polars as pl

from halluflow.ode.graph import read_graph
from halluflow.io import write_parquet
from halluflow.ode.queries import make_queries

cfg = snakemake.params.queries
nodes, edges = read_graph(snakemake.input.nodes, snakemake.input.edges)
hallu = pl.read_parquet(snakemake.input.hallu)
queries = make_queries(pl.read_parquet(snakemake.input.accepted), pl.read_parquet(snakemake.input.scenes), nodes,
                       edges, seed=snakemake.params.seed, generative_prompt=cfg["generative_prompt"],
                       negatives_per_image=cfg["negatives_per_image"], strategies=cfg["strategies"],
                       count_negatives=cfg["count_negatives"], counterfactual_per_image=cfg["counterfactual_per_image"],
                       counterfactual_attributes=cfg["counterfactual_attributes"], hallu_edges=hallu)
write_parquet(snakemake.output.queries, queries)
log.info("%d queries: %s", queries.height, dict(queries.group_by("query_type").len().sort("query_type").iter_rows()))
