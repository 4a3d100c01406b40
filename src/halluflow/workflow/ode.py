"""Rules of ODE's first half (rules/ode.smk): concept graph -> scenes -> prompts (Tu et al., "ODE: Open-Set
Evaluation of Hallucinations in Multimodal Large Language Models", CVPR 2025). The logic is in halluflow.ode; each
function reads its rule's inputs, calls it and writes the rule's outputs through halluflow.io."""

from __future__ import annotations

import logging

import polars as pl

from ..config_types import OdeDomain, OdeGraph, OdePrompts, OdeQueries, OdeSampling
from ..io import read_parquet, write_parquet

log = logging.getLogger("halluflow.workflow.ode")


def build_graph(graph: OdeGraph, nodes: str, edges: str, graphml: str, hallu: str, spelling: str | None = None) -> None:
    """Rule build_graph: annotations (or the shipped seed) -> graph/{nodes,edges}.parquet + graph.graphml + G_H, and
    `spelling` (graph/spelling.json): the misspelt words resources/vocab/spelling.tsv corrected or dropped."""
    from ..io import write_json
    from ..ode.graph import build_graph_from_config, hallu_graph_from_config, write_graph

    graph = OdeGraph.from_dict(graph)
    applied: dict = {}
    node_table, edge_table = build_graph_from_config(graph, applied=applied)
    if spelling:
        write_json(
            spelling,
            {
                "corrected": {w: r for w, r in sorted(applied.items()) if r},
                "dropped": sorted(w for w, r in applied.items() if not r),
            },
        )
    write_graph(node_table, edge_table, nodes_path=nodes, edges_path=edges, graphml_path=graphml)
    hallu_table = hallu_graph_from_config(graph)  # empty unless a source annotates hallucination-prone objects
    write_parquet(hallu, hallu_table)
    log.info(
        "graph from %s: %d nodes, %d edges, %d hallucination edges",
        " + ".join(src.format for src in [graph.source, *graph.extra_sources]),
        node_table.height,
        edge_table.height,
        hallu_table.height,
    )


def sample_scenes(
    nodes: str,
    edges: str,
    sampling: OdeSampling,
    seed: int,
    scenes: str,
    domain: OdeDomain | None = None,
    lineage: dict | None = None,
) -> None:
    """Rule sample_scenes: graph (restricted to `ode.domain`) -> scenes (4 distributions x 2 pair kinds, seeded),
    leaving out the concept pairs of the parent release's lineage (`ode.lineage`)."""
    from ..ode.domain import restrict_graph
    from ..ode.graph import read_graph
    from ..ode.lineage import ancestor_pairs
    from ..ode.sampling import sample_scenes as sample

    sampling = OdeSampling.from_dict(sampling)
    node_table, edge_table = restrict_graph(*read_graph(nodes, edges), domain)
    exclude = None
    # a plain mapping: library callers name the parent by a path object too
    if lineage and lineage.get("parent") and lineage.get("exclude_ancestor_pairs", True):
        exclude = {frozenset(p.split("|")) for p in ancestor_pairs(lineage["parent"])}
        log.info("lineage: %d concept pairs used by %s and its ancestors are left out", len(exclude), lineage["parent"])
    table = sample(
        node_table,
        edge_table,
        sampling.sizes.to_dict(),
        seed,
        sampling.variants,
        tuple(sampling.attribute_kinds),
        standard_band=sampling.standard_band,
        random_pool=sampling.random_pool,
        clean_attributes=sampling.attribute_words == "cleaned",
        exclude=exclude,
    )
    write_parquet(scenes, table)
    log.info("%d scenes: %s", table.height, dict(table.group_by("distribution").len().sort("distribution").iter_rows()))


def make_prompts(
    scenes: str,
    nodes: str,
    edges: str,
    settings: OdePrompts,
    shards: int,
    seed: int,
    prompts: str,
    hallu: str | None = None,
    queries: OdeQueries | None = None,
) -> None:
    """Rule make_prompts: scenes -> one prompt per image (`settings` = ode.prompts), seed per image, shard
    round-robin; `detect_labels` = each image's detector vocabulary: its objects and every "no" candidate its
    questions may name (decided here, from the seed, the graph and `ode.queries`, before any image exists)."""
    from ..ode.graph import read_graph
    from ..ode.prompts import make_prompts as make
    from ..ode.queries import image_vocabularies

    settings, queries = OdePrompts.from_dict(settings), OdeQueries.from_dict(queries or {})
    scene_table = read_parquet(scenes)
    node_table, edge_table = read_graph(nodes, edges)
    table = make(
        scene_table,
        seed=seed,
        images_per_scene=settings.images_per_scene,
        shards=shards,
        templates=settings.templates.to_dict(),
        style_tags=settings.style_tags.to_dict(),
        negative_prompt=settings.negative_prompt.to_dict(),
    )
    vocabulary = image_vocabularies(
        table.select("image_id", "scene_id"),
        scene_table,
        node_table,
        edge_table,
        seed=seed,
        negatives_per_image=queries.negatives_per_image,
        strategies=list(queries.strategies),
        counterfactual_per_image=queries.counterfactual_per_image,
        hallu_edges=read_parquet(hallu) if hallu else None,
        question_style=queries.question_style,
        spare=settings.detect_candidates,
    )
    table = table.with_columns(
        pl.Series("detect_labels", [vocabulary[i] for i in table["image_id"]], dtype=pl.List(pl.String))
    )
    write_parquet(prompts, table)
    log.info(
        "%d prompts over %d shards; detector vocabulary %.1f labels per image",
        table.height,
        shards,
        table["detect_labels"].list.len().mean() or 0,
    )
