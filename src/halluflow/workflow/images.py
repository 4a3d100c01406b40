"""Rules of ODE's model stages (rules/images.smk): synthesize each image shard, detect its scene objects, and plan
the regeneration rounds from the previous round's rejects (Tu et al., ODE, CVPR 2025, section 3.2). The models load
once per job; the logic is in halluflow.ode.{synthesis,detection,filtering}."""

from __future__ import annotations

import logging
from pathlib import Path

import polars as pl

from ..io import read_parquet, write_parquet

log = logging.getLogger("halluflow.workflow.images")


def round_name(shard: str, attempt: str | int | None = None) -> str:
    """The table name of a generation round's job: the image shard itself, then "<shard>-a<attempt>"."""
    return f"{shard}-a{int(attempt)}" if attempt else shard


def _start_line(job: str, items: int, batch_size: int, kwargs: dict) -> str:
    """`synthesize shard 003: 120 images in 30 batches of 4, model M (backend diffusers, revision R)`."""
    batches = -(-items // max(1, int(batch_size)))
    return (
        f"{job}: {items} images in {batches} batches of {batch_size}, model {kwargs.get('model')} "
        f"(backend {kwargs.get('backend')}, revision {kwargs.get('revision') or 'default branch'})"
    )


def synthesize(
    prompts: str, shard: str, synthesis: dict, model: str, table: str, threads: int = 1, attempt: str | None = None
) -> None:
    """Rules synthesize / synthesize_retry: one image shard (or its regeneration round `attempt`); the model loads
    once, images are generated in fixed batches."""
    from ..devices import set_threads
    from ..models.registry import create
    from ..ode.synthesis import read_prompts, synthesize_shard, synthesizer_kwargs

    set_threads(threads)
    shard = round_name(shard, attempt)
    root = Path(table).parent.parent  # results/<release>: image paths are relative to it
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
    images = synthesize_shard(rows, root, shard, synthesizer, synthesis["batch_size"])
    # Which of the release's text-to-image models made each image (metrics break down by it).
    write_parquet(table, images.with_columns(pl.lit(synthesis.get("name", model)).alias("generator")))


def detect(images: str, prompts: str, scenes: str, detection: dict, model: str, table: str, threads: int = 1) -> None:
    """Rules detect / detect_retry: each image's scene objects in one shard; the detector loads once, images go in
    batches."""
    from ..devices import set_threads
    from ..models.registry import create
    from ..ode.detection import detect_shard, detector_kwargs, image_labels

    set_threads(threads)
    root = Path(images).parent.parent  # image paths are relative to results/<release>
    image_table, prompt_table = read_parquet(images), read_parquet(prompts)
    labels = image_labels(image_table, read_parquet(scenes), prompt_table, scenes_path=scenes, prompts_path=prompts)
    kwargs = detector_kwargs(detection, model)
    log.info(
        "%s; %.1f labels per image",
        _start_line(f"detect shard {Path(table).stem}", image_table.height, detection["batch_size"], kwargs),
        sum(map(len, labels.values())) / max(len(labels), 1),
    )
    detector = create("detector", kwargs)
    log.info("detector: %s", detector.describe().as_dict())
    # a regeneration round's plan names each image's own shard: batches never mix shards
    sources = None
    if "source_shard" in prompt_table.columns:
        sources = dict(prompt_table.select("image_id", "source_shard").iter_rows())
    write_parquet(table, detect_shard(image_table, labels, root, detector, detection["batch_size"], sources))


def retry_prompts(
    prompts: str,
    images: list[str],
    detections: list[str],
    scenes: str,
    attempt: str | int,
    keep_threshold: float,
    seed: int,
    plan: str,
    generators: list[str] | None = None,
) -> None:
    """Checkpoint retry_prompts: the previous round's rejected images of every shard -> the plan of round
    `attempt` (its prompts, each with the round job that regenerates it; no rows = the round has no job)."""
    from ..ode.filtering import read_rounds
    from ..ode.filtering import retry_prompts as retry

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
    write_parquet(plan, table)
    log.info(
        "attempt %s: %d of %d images of the previous round to regenerate, in %d job(s) %s",
        attempt,
        table.height,
        image_table.height,
        table["shard"].n_unique(),
        dict(table.group_by("shard").len().sort("shard").iter_rows()),
    )
