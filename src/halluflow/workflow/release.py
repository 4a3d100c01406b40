"""Rules of ODE's second half (rules/release.smk): detector filter -> queries -> the versioned release (manifest
written last) -> its label audit. The logic is in halluflow.ode.{filtering,queries,release,audit}."""

from __future__ import annotations

import logging
from pathlib import Path

import polars as pl

from ..config_types import OdeFilter, OdeQueries
from ..errors import InputError
from ..io import parquet_columns, read_json, read_parquet, write_json, write_parquet
from . import release_dir

log = logging.getLogger("halluflow.workflow.release")


def filter_images(
    images: list[str], detections: list[str], scenes: str, filter: OdeFilter, seed: int, accepted: str, rejected: str
) -> None:
    """Rule filter_images: image + detection tables of all shards and rounds -> accepted / rejected images."""
    from ..ode.filtering import filter_images as run_filter
    from ..ode.filtering import read_rounds, require_accepted

    filter = OdeFilter.from_dict(filter)
    # shards and their regeneration rounds, read pairwise (the same order in both lists)
    image_table, detection_table = read_rounds(list(images), list(detections))
    kept, dropped = run_filter(
        image_table,
        detection_table,
        read_parquet(scenes),
        keep_threshold=filter.keep_threshold,
        exclusion_threshold=filter.exclusion_threshold,
        balance=filter.balance,
        seed=seed,
        root=Path(scenes).parents[1],
    )  # results/<release>
    for image_id, reason in dropped.select("image_id", "reason").iter_rows():
        log.info("rejected %s: %s", image_id, reason)
    require_accepted(kept, dropped, filter.keep_threshold)
    write_parquet(accepted, kept)
    write_parquet(rejected, dropped)
    log.info("accepted %d, rejected %d (keep threshold %s)", kept.height, dropped.height, filter.keep_threshold)


def make_queries(
    accepted: str,
    scenes: str,
    nodes: str,
    edges: str,
    hallu: str,
    settings: OdeQueries,
    seed: int,
    queries: str,
    images: list[str] = (),
    release: str | None = None,
    spare: int = 3,
    meaning: str | None = None,
    spelling: str | None = None,
) -> None:
    """Rule make_queries: accepted images + scenes + graph -> the release's questions (`settings` = ode.queries),
    with each image's generator, read from the image tables. With the image tables given, every accepted image's
    sha256 (and the release name) goes into its query ids: a query of another release or another image never
    shares an id."""
    from ..ode.graph import read_graph
    from ..ode.queries import make_queries as make

    settings = OdeQueries.from_dict(settings)
    node_table, edge_table = read_graph(nodes, edges)
    report: dict = {}
    accepted_table = read_parquet(accepted)
    images = list(images)
    if images:
        # by path: a regenerated image keeps its id, each attempt has its own file and hash
        hashes = pl.concat(
            [read_parquet(p, columns=["path", "sha256"]) for p in images], how="vertical_relaxed"
        ).unique("path", keep="last")
        accepted_table = accepted_table.drop("sha256", strict=False).join(
            hashes, on="path", how="left", maintain_order="left"
        )
        unhashed = accepted_table.filter(pl.col("sha256").is_null())
        if unhashed.height:
            raise InputError(
                f"{accepted}: accepted image {unhashed['image_id'][0]} ({unhashed['path'][0]}) is in no image table "
                f"with a sha256 ({unhashed.height} such images)"
            )
    table = make(
        accepted_table,
        read_parquet(scenes),
        node_table,
        edge_table,
        seed=seed,
        generative_prompt=settings.generative_prompt,
        negatives_per_image=settings.negatives_per_image,
        strategies=list(settings.strategies),
        count_negatives=list(settings.count_negatives),
        counterfactual_per_image=settings.counterfactual_per_image,
        counterfactual_attributes=settings.counterfactual_attributes,
        hallu_edges=read_parquet(hallu),
        question_style=settings.question_style,
        release=release,
        spare=spare,
        report=report,
    )
    if meaning:
        # what each meaning rule removed, and the graph words the spelling table corrected or dropped
        report["spelling"] = read_json(spelling) if spelling else {"corrected": {}, "dropped": []}
        write_json(meaning, report)
    tables = [read_parquet(p, columns=["image_id", "generator"]) for p in images if "generator" in parquet_columns(p)]
    if tables:
        generator = pl.concat(tables).unique("image_id", keep="last")
        table = table.join(generator, on="image_id", how="left", maintain_order="left")
    write_parquet(queries, table)
    log.info("%d queries: %s", table.height, dict(table.group_by("query_type").len().sort("query_type").iter_rows()))


def package_release(
    manifest: str,
    accepted: str,
    rejected: str,
    queries: str,
    scenes: str,
    images: list[str],
    detections: list[str],
    config: dict,
    seed: int,
    name: str,
    parent: str | None = None,
    graph_sources: list[str] = (),
    nodes: str | None = None,
    edges: str | None = None,
    resources: list[str] = (),
    meaning: str | None = None,
) -> None:
    """Rule package_release: accepted images + scenes + queries -> release/ with manifest.json (written last);
    `parent` is the ODE lineage's parent release, `graph_sources` the files the concept graph was built from,
    `nodes`/`edges` the concept graph (the DATACARD's Standard drift from its top band), `resources` the tables
    that shaped the questions (hashed in the manifest), `meaning` make_queries' queries/meaning.json."""
    from ..ode.graph import read_graph
    from ..ode.release import package_release as package

    out = package(
        release_dir(manifest),  # results/<release>/release
        root=Path(scenes).parents[1],  # results/<release>: image paths are relative to it
        accepted=read_parquet(accepted),
        rejected=read_parquet(rejected),
        queries=read_parquet(queries),
        scenes=read_parquet(scenes),
        images=[read_parquet(p) for p in images],
        detections=[read_parquet(p) for p in detections],
        config=dict(config),
        seed=seed,
        name=name,
        parent=parent,
        graph_sources=list(graph_sources),
        graph=read_graph(nodes, edges) if nodes and edges else None,
        resources=list(resources),
        meaning=read_json(meaning) if meaning else None,  # what each meaning rule removed (make_queries)
    )
    log.info("release %s: %d files, stand-ins used: %s", name, len(out["files"]), out["stand_ins_used"])


def release_audit(release: str, summary: str, config: dict) -> None:
    """Rule release_audit: the release -> audit/{audit.json, verifiers.parquet, sample.parquet, annotate.html}
    (the folder of `summary`), with the verifiers the `audit:` section names."""
    from ..ode.audit import run_workflow

    doc = run_workflow(release_dir(release), Path(summary).parent, config)
    if doc["warning"]:
        log.warning(doc["warning"])
    log.info("audit: %d yes/no items, %s", doc["items"], doc["totals"])
