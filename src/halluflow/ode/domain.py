"""Domain-specific releases (`ode.domain`): restrict the concept graph before sampling.

ODE ("open-set dynamic evaluation", Tu et al.) builds releases for a domain by sampling concept pairs from a
sub-graph. Three ways to name the domain, combined by union:

    ode.domain: {concepts: [car, bus, truck, road]}                       # a list
    ode.domain: {categories: [vehicle], category_table: coco}              # a category table (COCO supercategories
                                                                           # shipped; or a TSV concept<TAB>category)
    ode.domain: {neighbourhood_of: [car], hops: 2}                          # graph neighbourhood (co-occurrence)

Environment nodes that co-occur with a kept entity stay (a car still needs a road), unless
`keep_environments: false`. A domain that keeps fewer than two entities is refused with the key named.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from ..config_types import OdeDomain
from ..errors import ConfigError, InputError
from ..resources import resource_path

COCO_SUPERCATEGORIES = resource_path("vocab/coco_supercategories.tsv")


def derive_category_table(source: str | Path, target: str | Path) -> int:
    """resources/vocab/coco_supercategories.tsv (concept, category) from COCO's category list (name,
    supercategory columns: facts of the COCO annotation schema)."""
    from ..io import write_text

    df = pl.read_csv(source, separator="\t")
    if not {"name", "supercategory"} <= set(df.columns):
        raise InputError(f"{source}: needs 'name' and 'supercategory' columns")
    rows = sorted(zip(df["name"].to_list(), df["supercategory"].to_list()))
    write_text(target, "concept\tcategory\n" + "".join(f"{n}\t{c}\n" for n, c in rows))
    return len(rows)


def read_category_table(spec: str) -> dict[str, set[str]]:
    path = COCO_SUPERCATEGORIES if spec == "coco" else Path(spec)
    if not path.is_file():
        raise ConfigError(f"config key 'ode.domain.category_table': {path} not found")
    df = pl.read_csv(path, separator="\t")
    if not {"concept", "category"} <= set(df.columns):
        raise ConfigError(f"config key 'ode.domain.category_table': {path} needs 'concept' and 'category' columns")
    table: dict[str, set[str]] = {}
    for concept, category in df.select("concept", "category").iter_rows():
        table.setdefault(str(category), set()).add(str(concept))
    return table


def _neighbourhood(edges: pl.DataFrame, seeds: set[str], hops: int) -> set[str]:
    adjacency: dict[str, set[str]] = {}
    for s, t in edges.filter(pl.col("weight") > 0).select("source", "target").iter_rows():
        if s != t:
            adjacency.setdefault(s, set()).add(t)
            adjacency.setdefault(t, set()).add(s)
    frontier, seen = set(seeds), set(seeds)
    for _ in range(hops):
        frontier = {n for f in frontier for n in adjacency.get(f, ())} - seen
        seen |= frontier
    return seen


def domain_nodes(
    nodes: pl.DataFrame, edges: pl.DataFrame, spec: Mapping[str, Any] | OdeDomain | None
) -> set[str] | None:
    """The node names a domain keeps (None = no domain: the whole graph)."""
    if not spec:
        return None
    spec = OdeDomain.from_dict(spec)  # unknown keys and wrong types name the key; absent keys: the schema's defaults
    names = set(nodes["node"].to_list())
    keep: set[str] = set()
    for concept in spec.concepts:
        if concept not in names:
            raise ConfigError(f"config key 'ode.domain.concepts': {concept!r} is not a node of the concept graph")
        keep.add(concept)
    if spec.categories:
        table = read_category_table(spec.category_table)
        for category in spec.categories:
            if category not in table:
                raise ConfigError(
                    f"config key 'ode.domain.categories': {category!r} not in the category table "
                    f"(known: {', '.join(sorted(table))})"
                )
            keep |= table[category] & names
    if spec.neighbourhood_of:
        seeds = set(spec.neighbourhood_of)
        missing = seeds - names
        if missing:
            raise ConfigError(f"config key 'ode.domain.neighbourhood_of': {sorted(missing)} not in the concept graph")
        hops = spec.hops
        if hops < 0:
            raise ConfigError(f"config key 'ode.domain.hops': {hops} is negative")
        keep |= _neighbourhood(edges, seeds, hops)
    if spec.keep_environments and "type" in nodes.columns:
        environments = set(nodes.filter(pl.col("type") == "environment")["node"].to_list())
        linked = _neighbourhood(edges, keep - environments, 1) & environments
        keep |= linked
    entities = keep - (
        set(nodes.filter(pl.col("type") == "environment")["node"].to_list()) if "type" in nodes.columns else set()
    )
    if len(entities) < 2:
        raise ConfigError(
            f"config key 'ode.domain': keeps {len(entities)} entity concept(s); a release needs two "
            f"or more ({sorted(entities)})"
        )
    return keep


def restrict_graph(
    nodes: pl.DataFrame, edges: pl.DataFrame, spec: Mapping[str, Any] | OdeDomain | None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Nodes and edges of the domain's induced sub-graph (unchanged without a domain)."""
    keep = domain_nodes(nodes, edges, spec)
    if keep is None:
        return nodes, edges
    kept = list(keep)
    return (
        nodes.filter(pl.col("node").is_in(kept)),
        edges.filter(pl.col("source").is_in(kept) & pl.col("target").is_in(kept)),
    )
