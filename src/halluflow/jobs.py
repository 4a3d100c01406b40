"""One function per workflow rule whose job is more than a single library call: the ODE data stages, synthesis,
detection, the stand-in VLM build and the report files. Each `scripts/<rule>.py` is one keyword call into this
module, so what a job does can be run and tested without Snakemake, and the Snakefile stays free of logic.

Paths are strings from the rule's input/output; every table is read and written through halluflow.io (atomic
writes; an unreadable table is one error line naming its file, in the job's log).
"""

from __future__ import annotations

import logging
from pathlib import Path

import polars as pl

from .errors import InputError
from .io import parquet_columns, read_parquet, write_parquet

log = logging.getLogger("halluflow.jobs")


def build_graph(graph: dict, nodes: str, edges: str, graphml: str, hallu: str) -> None:
    """Rule build_graph: annotations (or the shipped seed) -> graph/{nodes,edges}.parquet + graph.graphml + G_H."""
    from .ode.graph import build_graph_from_config, hallu_graph_from_config, write_graph

    node_table, edge_table = build_graph_from_config(graph)
    write_graph(node_table, edge_table, nodes_path=nodes, edges_path=edges, graphml_path=graphml)
    hallu_table = hallu_graph_from_config(graph)  # empty unless a source annotates hallucination-prone objects
    write_parquet(hallu, hallu_table)
    log.info(
        "graph from %s: %d nodes, %d edges, %d hallucination edges",
        " + ".join(src["format"] for src in [graph["source"], *graph["extra_sources"]]),
        node_table.height,
        edge_table.height,
        hallu_table.height,
    )


def sample_scenes(
    nodes: str, edges: str, sampling: dict, seed: int, out: str, domain: dict | None = None, lineage: dict | None = None
) -> None:
    """Rule sample_scenes: graph (restricted to `ode.domain`) -> scenes (4 distributions x 2 pair kinds, seeded),
    leaving out the concept pairs of the parent release's lineage (`ode.lineage`)."""
    from .ode.domain import restrict_graph
    from .ode.graph import read_graph
    from .ode.lineage import ancestor_pairs
    from .ode.sampling import sample_scenes as sample

    node_table, edge_table = restrict_graph(*read_graph(nodes, edges), domain)
    exclude = None
    if lineage and lineage.get("parent") and lineage.get("exclude_ancestor_pairs", True):
        exclude = {frozenset(p.split("|")) for p in ancestor_pairs(lineage["parent"])}
        log.info("lineage: %d concept pairs used by %s and its ancestors are left out", len(exclude), lineage["parent"])
    scenes = sample(
        node_table,
        edge_table,
        sampling["sizes"],
        seed,
        sampling["variants"],
        tuple(sampling["attribute_kinds"]),
        standard_band=sampling["standard_band"],
        random_pool=sampling["random_pool"],
        clean_attributes=sampling["attribute_words"] == "cleaned",
        exclude=exclude,
    )
    write_parquet(out, scenes)
    log.info(
        "%d scenes: %s", scenes.height, dict(scenes.group_by("distribution").len().sort("distribution").iter_rows())
    )


def make_prompts(
    scenes: str,
    nodes: str,
    edges: str,
    prompts: dict,
    shards: int,
    seed: int,
    out: str,
    hallu: str | None = None,
    queries: dict | None = None,
) -> None:
    """Rule make_prompts: scenes -> one prompt per image, seed per image, shard round-robin; `detect_labels` =
    each image's detector vocabulary: its objects and every "no" candidate its questions may name (decided here,
    from the seed, the graph and `ode.queries`, before any image exists)."""
    from .ode.graph import read_graph
    from .ode.prompts import make_prompts as make
    from .ode.queries import image_vocabularies

    scene_table = read_parquet(scenes)
    node_table, edge_table = read_graph(nodes, edges)
    table = make(
        scene_table,
        seed=seed,
        images_per_scene=prompts["images_per_scene"],
        shards=shards,
        templates=prompts["templates"],
        style_tags=prompts["style_tags"],
        negative_prompt=prompts["negative_prompt"],
    )
    queries = queries or {}
    vocabulary = image_vocabularies(
        table.select("image_id", "scene_id"),
        scene_table,
        node_table,
        edge_table,
        seed=seed,
        negatives_per_image=queries.get("negatives_per_image", 2),
        strategies=queries.get("strategies", ["graph_neighbour"]),
        counterfactual_per_image=queries.get("counterfactual_per_image", 1),
        hallu_edges=read_parquet(hallu) if hallu else None,
        question_style=queries.get("question_style", "grammatical"),
        spare=prompts["detect_candidates"],
    )
    table = table.with_columns(
        pl.Series("detect_labels", [vocabulary[i] for i in table["image_id"]], dtype=pl.List(pl.String))
    )
    write_parquet(out, table)
    log.info(
        "%d prompts over %d shards; detector vocabulary %.1f labels per image",
        table.height,
        shards,
        table["detect_labels"].list.len().mean() or 0,
    )


def _start_line(job: str, items: int, batch_size: int, kwargs: dict) -> str:
    """`synthesize shard 003: 120 images in 30 batches of 4, model M (backend diffusers, revision R)`."""
    batches = -(-items // max(1, int(batch_size)))
    return (
        f"{job}: {items} images in {batches} batches of {batch_size}, model {kwargs.get('model')} "
        f"(backend {kwargs.get('backend')}, revision {kwargs.get('revision') or 'default branch'})"
    )


def synthesize(prompts: str, shard: str, synthesis: dict, model: str, out: str, threads: int = 1) -> None:
    """Rule synthesize: one image shard; the model loads once, images are generated in fixed batches."""
    from .devices import set_threads
    from .models.registry import create
    from .ode.synthesis import read_prompts, synthesize_shard, synthesizer_kwargs

    set_threads(threads)
    root = Path(out).parent.parent  # results/<release>: image paths are relative to it
    rows = read_prompts(prompts, shard=shard)
    kwargs = synthesizer_kwargs(synthesis, model)
    sidecar = root / "images" / f"{shard}.resume.jsonl"  # synthesize_shard's resume record of finished batches
    recorded = sum(1 for line in sidecar.open(encoding="utf-8") if line.strip()) if sidecar.exists() else 0
    # The job's first line says what it will do, before the model loads (a cluster log names the job at once).
    log.info(
        "%s; %d steps at %dx%d; %d images recorded by an earlier attempt (reused when their batch matches)",
        _start_line(f"synthesize shard {shard}", rows.height, synthesis["batch_size"], kwargs),
        synthesis["steps"],
        synthesis["height"],
        synthesis["width"],
        recorded,
    )
    synthesizer = create("synthesizer", kwargs)
    log.info("synthesizer: %s", synthesizer.describe().as_dict())
    table = synthesize_shard(rows, root, shard, synthesizer, synthesis["batch_size"])
    # Which of the release's text-to-image models made each image (metrics break down by it).
    write_parquet(out, table.with_columns(pl.lit(synthesis.get("name", model)).alias("generator")))


def detect(images: str, prompts: str, scenes: str, detection: dict, model: str, out: str, threads: int = 1) -> None:
    """Rule detect: each image's scene objects in one shard; the detector loads once, images go in batches."""
    from .devices import set_threads
    from .models.registry import create
    from .ode.detection import detect_shard, detector_kwargs, image_labels

    set_threads(threads)
    root = Path(images).parent.parent  # image paths are relative to results/<release>
    image_table, prompt_table = read_parquet(images), read_parquet(prompts)
    labels = image_labels(image_table, read_parquet(scenes), prompt_table, scenes_path=scenes, prompts_path=prompts)
    kwargs = detector_kwargs(detection, model)
    log.info(
        "%s; %.1f labels per image",
        _start_line(f"detect shard {Path(out).stem}", image_table.height, detection["batch_size"], kwargs),
        sum(map(len, labels.values())) / max(len(labels), 1),
    )
    detector = create("detector", kwargs)
    log.info("detector: %s", detector.describe().as_dict())
    # a regeneration round's plan names each image's own shard: batches never mix shards
    sources = None
    if "source_shard" in prompt_table.columns:
        sources = dict(prompt_table.select("image_id", "source_shard").iter_rows())
    write_parquet(out, detect_shard(image_table, labels, root, detector, detection["batch_size"], sources))


def filter_images(
    images: list[str], detections: list[str], scenes: str, filter: dict, seed: int, accepted: str, rejected: str
) -> None:
    """Rule filter_images: image + detection tables of all shards and rounds -> accepted / rejected images."""
    from .ode.filtering import filter_images as run_filter
    from .ode.filtering import read_rounds, require_accepted

    # shards and their regeneration rounds, read pairwise (the same order in both lists)
    image_table, detection_table = read_rounds(images, detections)
    kept, dropped = run_filter(
        image_table,
        detection_table,
        read_parquet(scenes),
        keep_threshold=filter["keep_threshold"],
        exclusion_threshold=filter["exclusion_threshold"],
        balance=filter["balance"],
        seed=seed,
        root=Path(scenes).parents[1],
    )  # results/<release>
    for image_id, reason in dropped.select("image_id", "reason").iter_rows():
        log.info("rejected %s: %s", image_id, reason)
    require_accepted(kept, dropped, filter["keep_threshold"])
    write_parquet(accepted, kept)
    write_parquet(rejected, dropped)
    log.info("accepted %d, rejected %d (keep threshold %s)", kept.height, dropped.height, filter["keep_threshold"])


def round_name(shard: str, attempt: str | int | None = None) -> str:
    """The table name of a generation round's job: the image shard itself, then "<shard>-a<attempt>"."""
    return f"{shard}-a{int(attempt)}" if attempt else shard


def retry_prompts(
    prompts: str,
    images: list[str],
    detections: list[str],
    scenes: str,
    attempt: int,
    keep_threshold: float,
    seed: int,
    out: str,
    generators: list[str] | None = None,
) -> None:
    """Checkpoint retry_prompts: the previous round's rejected images of every shard -> the plan of round
    `attempt` (its prompts, each with the round job that regenerates it; no rows = the round has no job)."""
    from .ode.filtering import read_rounds
    from .ode.filtering import retry_prompts as retry

    if images:
        image_table, detection_table = read_rounds(images, detections)
    else:  # the previous round had no job (asked for explicitly): nothing to regenerate
        image_table = pl.DataFrame(schema={"image_id": pl.String, "scene_id": pl.String, "path": pl.String})
        detection_table = pl.DataFrame(schema={"image_id": pl.String, "label": pl.String, "score": pl.Float64})
    table = retry(
        read_parquet(prompts),
        image_table,
        detection_table,
        read_parquet(scenes),
        attempt=int(attempt),
        seed=seed,
        keep_threshold=keep_threshold,
        generators=generators,
    )
    write_parquet(out, table)
    log.info(
        "attempt %s: %d of %d images of the previous round to regenerate, in %d job(s) %s",
        attempt,
        table.height,
        image_table.height,
        table["shard"].n_unique(),
        dict(table.group_by("shard").len().sort("shard").iter_rows()),
    )


def make_queries(
    accepted: str,
    scenes: str,
    nodes: str,
    edges: str,
    hallu: str,
    queries: dict,
    seed: int,
    out: str,
    images: list[str] = (),
    release: str | None = None,
    spare: int = 3,
) -> None:
    """Rule make_queries: accepted images + scenes + graph -> the release's questions (with each image's
    generator, read from the image tables). With the image tables given, every accepted image's sha256 (and the
    release name) goes into its query ids: a query of another release or another image never shares an id."""
    from .ode.graph import read_graph
    from .ode.queries import make_queries as make

    node_table, edge_table = read_graph(nodes, edges)
    accepted_table = read_parquet(accepted)
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
        generative_prompt=queries["generative_prompt"],
        negatives_per_image=queries["negatives_per_image"],
        strategies=queries["strategies"],
        count_negatives=queries["count_negatives"],
        counterfactual_per_image=queries["counterfactual_per_image"],
        counterfactual_attributes=queries["counterfactual_attributes"],
        hallu_edges=read_parquet(hallu),
        question_style=queries["question_style"],
        release=release,
        spare=spare,
    )
    tables = [read_parquet(p, columns=["image_id", "generator"]) for p in images if "generator" in parquet_columns(p)]
    if tables:
        generator = pl.concat(tables).unique("image_id", keep="last")
        table = table.join(generator, on="image_id", how="left", maintain_order="left")
    write_parquet(out, table)
    log.info("%d queries: %s", table.height, dict(table.group_by("query_type").len().sort("query_type").iter_rows()))


def build_standin_vlm(build: dict, out: str, name: str) -> None:
    """Rule build_standin_vlm: a tiny random VLM with the shared stand-in machinery."""
    from .backends.transformers_vlm import build_tiny_smolvlm
    from .models.standins import build_standin, builder_kinds, register_builder

    if "smolvlm" not in builder_kinds():
        register_builder("smolvlm", build_tiny_smolvlm)
    path = build_standin(build["builder"], out, seed=build["seed"], **build["args"])
    log.info("built stand-in VLM %r (%s) into %s", name, build["builder"], path)


def report_files(outputs: dict[str, str], options: dict) -> None:
    """Rules report_release_audit / report_models: each named output, `<figure>` PNG or `<table>_table` TSV."""
    from .report.summary import ReportOptions, write_figure_files, write_table_files

    tables = {key[: -len("_table")]: path for key, path in outputs.items() if key.endswith("_table")}
    figures = {key: path for key, path in outputs.items() if not key.endswith("_table")}
    root = Path(next(iter(outputs.values()))).parents[1]  # the results folder is the parent of report/
    write_table_files(root, tables)
    write_figure_files(root, figures, ReportOptions(**options))
    log.info("wrote %d tables and %d figures under %s/report", len(tables), len(figures), root)


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
) -> dict:
    """Rule package_release: accepted images + scenes + queries -> release/ with manifest.json (written last);
    `parent` is the ODE lineage's parent release, `graph_sources` the files the concept graph was built from,
    `nodes`/`edges` the concept graph (the DATACARD's Standard drift from its top band), `resources` the tables
    that shaped the questions (hashed in the manifest)."""
    from .ode.graph import read_graph
    from .ode.release import package_release as package

    out = package(
        Path(manifest).parent,  # results/<release>/release
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
    )
    log.info("release %s: %d files, stand-ins used: %s", name, len(out["files"]), out["stand_ins_used"])
    return out
