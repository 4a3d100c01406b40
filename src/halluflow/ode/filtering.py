"""Detector filter of ODE (Tu, Hu, Sang, CVPR 2025, §3.3 "quality control"; github
Iridescent-y/ODE: its YOLO-World filter).

Keep an image only if object_a (and object_b for entity+entity scenes) is detected with confidence at least the
keep threshold (paper 0.65; ODE's code 0.2); labels detected at or above the exclusion threshold (0.6) are
recorded so they are never asked as absent, and so is the vocabulary the detector was prompted with (the only
objects make_queries asks as absent); optionally equalise accepted images across distributions (seeded).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ..errors import ConfigError, InputError
from ..io import read_parquet, safe_join
from ..progress import progress
from .sampling import DISTRIBUTIONS, derived_rng

FILTER_SCHEMA = {
    "image_id": pl.String,
    "scene_id": pl.String,
    "distribution": pl.String,
    "pair_kind": pl.String,
    "path": pl.String,
    "detected": pl.List(pl.String),
    "max_score_a": pl.Float64,
    "max_score_b": pl.Float64,
    # boxes of the object at or above the keep threshold, overlapping duplicates merged: the truth of count questions
    "count_a": pl.Int64,
    "count_b": pl.Int64,
    "attempt": pl.Int64,  # generation round of the image (0 = first; synthesis.max_attempts rounds in all)
    # the labels the detector was prompted with (detection table; null for a table made before it was recorded)
    "vocabulary": pl.List(pl.String),
}
REJECTED_SCHEMA = {**FILTER_SCHEMA, "reason": pl.String}


def _require(df: pl.DataFrame, columns, what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"{what}: missing column(s) {', '.join(missing)}")


def _norm(label: str) -> str:
    return " ".join(str(label).lower().split())


def _iou(a, b) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def count_boxes(boxes: list[tuple[float, tuple]], threshold: float, iou: float = 0.5) -> int:
    """Objects counted from (score, box) pairs of one label: greedy non-maximum suppression at `iou`, since
    open-vocabulary detectors (OWLv2) return several overlapping boxes for one object."""
    kept: list[tuple] = []
    for score, box in sorted(boxes, key=lambda sb: -sb[0]):
        if score < threshold:
            break
        if box is None or all(_iou(box, k) <= iou for k in kept):
            kept.append(box)
    return len(kept)


def filter_images(
    images: pl.DataFrame,
    detections: pl.DataFrame,
    scenes: pl.DataFrame,
    *,
    keep_threshold: float,
    exclusion_threshold: float,
    balance: bool = False,
    seed: int = 0,
    root: str | Path | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(accepted, rejected) tables; `root` (results/<release>) lets missing image files be rejected by name.

    With regeneration rounds, images and detections carry an `attempt` column (absent = 0): an image is accepted
    on its first passing attempt, and every failed attempt stays in the rejected table (the audit)."""
    _require(images, ("image_id", "scene_id", "path"), "image table")
    _require(detections, ("image_id", "label", "score"), "detection table")
    _require(scenes, ("scene_id", "distribution", "pair_kind", "object_a", "object_b"), "scenes table")
    images, detections = with_attempt(images), with_attempt(detections)
    scene_rows = {r["scene_id"]: r for r in scenes.iter_rows(named=True)}
    scores: dict[tuple[str, int], dict[str, float]] = {}
    boxes: dict[tuple[str, int, str], list] = {}
    vocabulary: dict[tuple[str, int], list[str]] = {}
    if "vocabulary" in detections.columns:
        for image_id, attempt, labels in detections.select("image_id", "attempt", "vocabulary").iter_rows():
            if labels is not None:
                vocabulary.setdefault((image_id, attempt), labels)
    has_boxes = all(c in detections.columns for c in ("x0", "y0", "x1", "y1"))
    cols = ["image_id", "attempt", "label", "score"] + (["x0", "y0", "x1", "y1"] if has_boxes else [])
    # a null label is the record of an image the detector found nothing in (its vocabulary only)
    for image_id, attempt, label, score, *box in (
        detections.filter(pl.col("label").is_not_null()).select(cols).iter_rows()
    ):
        per = scores.setdefault((image_id, attempt), {})
        lab = _norm(label)
        per[lab] = max(per.get(lab, 0.0), float(score))
        boxes.setdefault((image_id, attempt, lab), []).append((float(score), tuple(box) if box else None))
    accepted, rejected = [], []
    passed: set[str] = set()
    # with regeneration rounds every rejection says which attempt failed (the audit shows it as it is)
    rounds = images.height > 0 and images["attempt"].max() > 0
    for img in progress(
        images.sort("image_id", "attempt").iter_rows(named=True), desc="filter images", total=images.height
    ):
        scene = scene_rows.get(img["scene_id"])
        if scene is None:
            raise InputError(f"image {img['image_id']}: scene {img['scene_id']!r} not in the scenes table")
        if img["image_id"] in passed:
            continue  # a later round of an image already accepted (not generated by the workflow)
        key = (img["image_id"], img["attempt"])
        per = scores.get(key, {})
        a, b = _norm(scene["object_a"]), _norm(scene["object_b"])
        row = {
            "image_id": img["image_id"],
            "scene_id": scene["scene_id"],
            "distribution": scene["distribution"],
            "pair_kind": scene["pair_kind"],
            "path": img["path"],
            "detected": sorted(lab for lab, s in per.items() if s >= exclusion_threshold),
            "max_score_a": per.get(a, 0.0),
            "max_score_b": per.get(b, 0.0),
            "count_a": count_boxes(boxes.get((*key, a), []), keep_threshold),
            "count_b": count_boxes(boxes.get((*key, b), []), keep_threshold),
            "attempt": img["attempt"],
            "vocabulary": vocabulary.get(key),
        }
        reasons = []
        if root is not None and not safe_join(root, img["path"]).is_file():
            reasons.append(f"image file {img['path']} missing")
        required = [("object_a", a, row["max_score_a"])]
        if scene["pair_kind"] == "entity_entity":
            required.append(("object_b", b, row["max_score_b"]))
        for slot, name, score in required:
            if score < keep_threshold:
                reasons.append(f"{slot} {name!r} max score {score:.3f} < keep threshold {keep_threshold}")
        if reasons:
            prefix = f"attempt {img['attempt']}: " if rounds else ""  # counted from 0, as the column
            rejected.append({**row, "reason": prefix + "; ".join(reasons)})
        else:
            accepted.append(row)
            passed.add(img["image_id"])
    if balance:
        accepted, dropped = balance_distributions(accepted, seed)
        rejected.extend(dropped)
    rejected.sort(key=lambda r: (r["image_id"], r["attempt"]))
    return (
        pl.DataFrame(accepted, schema=FILTER_SCHEMA) if accepted else pl.DataFrame(schema=FILTER_SCHEMA),
        pl.DataFrame(rejected, schema=REJECTED_SCHEMA) if rejected else pl.DataFrame(schema=REJECTED_SCHEMA),
    )


def with_attempt(df: pl.DataFrame) -> pl.DataFrame:
    """The table with an Int64 `attempt` column (0 where the table predates regeneration rounds)."""
    if "attempt" in df.columns:
        return df.with_columns(pl.col("attempt").fill_null(0).cast(pl.Int64))
    return df.with_columns(pl.lit(0, pl.Int64).alias("attempt"))


def stress_missing(prompt: str, missing: list[str]) -> str:
    """The prompt of a regenerated image: ODE's own style tag, "(clear and obvious ...)", for each object the
    detector missed, after the scene text so the objects stay in their places."""
    body, sep, tags = prompt.partition(", ")
    extra = "".join(f"(clear and obvious {m})" for m in missing)
    return f"{body}, {extra}{tags}" if sep else f"{body}, {extra}"


def read_rounds(image_paths, detection_paths) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Image and detection tables of shards and rounds, read pairwise: each detection row gets the `attempt` of
    its image (an image id recurs once per round, so the pair's own image table says which round it is)."""
    images, detections = [], []
    if len(image_paths) != len(detection_paths):
        raise InputError(f"{len(image_paths)} image tables but {len(detection_paths)} detection tables")
    for ip, dp in zip(image_paths, detection_paths):
        img = with_attempt(read_parquet(ip))  # a corrupt table is one error line naming its file
        det = read_parquet(dp)
        _require(det, ("image_id",), f"detection table {dp}")
        images.append(img)
        detections.append(_with_round(img, det))
    return (pl.concat(images, how="diagonal_relaxed"), pl.concat(detections, how="diagonal_relaxed"))


def _with_round(images: pl.DataFrame, detections: pl.DataFrame) -> pl.DataFrame:
    return detections.drop("attempt", strict=False).join(
        with_attempt(images).select("image_id", "attempt"), on="image_id", how="left", maintain_order="left"
    )


def accepted_detections(
    accepted: pl.DataFrame, images: list[pl.DataFrame], detections: list[pl.DataFrame]
) -> pl.DataFrame:
    """The detection rows (vocabulary included) of the round each accepted image was accepted on, from the image
    and detection tables of every shard and round, pairwise (the image table says which round a table is)."""
    if len(images) != len(detections):
        raise InputError(f"{len(images)} image tables but {len(detections)} detection tables")
    rounds = [_with_round(i, d) for i, d in zip(images, detections) if "image_id" in d.columns]
    if not rounds:
        return pl.DataFrame(schema={"image_id": pl.String, "attempt": pl.Int64})
    table = pl.concat(rounds, how="diagonal_relaxed")
    return table.join(with_attempt(accepted).select("image_id", "attempt"), on=["image_id", "attempt"], how="semi")


def retry_prompts(
    prompts: pl.DataFrame,
    images: pl.DataFrame,
    detections: pl.DataFrame,
    scenes: pl.DataFrame,
    *,
    attempt: int,
    seed: int,
    keep_threshold: float,
    generators: list[str] | None = None,
) -> pl.DataFrame:
    """Prompts of regeneration round `attempt` (>= 1) over every image shard: the images of the previous round that
    the detector rejected (an object below the keep threshold), each with a new seed and its original prompt (from
    make_prompts, so tags never pile up round after round) stressing the objects it missed. Balancing is not a
    rejection here: it happens once, over the final accepted images.

    Each row keeps its make_prompts shard as `source_shard` and gets the round's job as `shard` (see `pack_round`):
    a round costs jobs in proportion to its rejects, and a round without rejects is an empty table (no job)."""
    from .prompts import image_seed

    if attempt < 1:
        raise ConfigError(f"retry_prompts: attempt must be >= 1, got {attempt}")
    _require(prompts, ("image_id", "prompt", "seed", "shard"), "prompt table")
    _, rejected = filter_images(
        images, detections, scenes, keep_threshold=keep_threshold, exclusion_threshold=1.0, balance=False
    )
    objects = scenes.select("scene_id", "object_a", "object_b", "pair_kind")
    failed = rejected.join(objects, on="scene_id", how="left").select(
        "image_id",
        pl.concat_list(
            pl.when(pl.col("max_score_a") < keep_threshold).then(pl.col("object_a")),
            pl.when((pl.col("pair_kind") == "entity_entity") & (pl.col("max_score_b") < keep_threshold)).then(
                pl.col("object_b")
            ),
        )
        .list.drop_nulls()
        .alias("missing"),
    )
    out = (
        prompts.drop("attempt", "source_shard", strict=False)
        .rename({"shard": "source_shard"})
        .join(failed, on="image_id", how="inner")
        .sort("source_shard", "image_id")
    )
    jobs = pack_round(prompts, out["source_shard"].to_list(), attempt, generators)
    return out.with_columns(
        pl.Series(
            "prompt", [stress_missing(p, m) for p, m in zip(out["prompt"], out["missing"].to_list())], dtype=pl.String
        ),
        # a new seed per round: the same noise would draw the same picture again
        pl.Series("seed", [image_seed(seed, f"{i}/attempt{attempt}") for i in out["image_id"]], dtype=pl.Int64),
        pl.Series("shard", [jobs[s] for s in out["source_shard"]], dtype=pl.String),
        pl.lit(attempt, pl.Int64).alias("attempt"),
    ).drop("missing")


def pack_round(
    prompts: pl.DataFrame, rejected_shards: list[str], attempt: int, generators: list[str] | None = None
) -> dict[str, str]:
    """The job of each image shard's rejects in regeneration round `attempt`: consecutive image shards are packed
    into one job "<first shard>-a<attempt>" while it holds at most as many images as the largest first-round shard
    (so a round job fits the same GPU time) and they share a text-to-image model (`generators`: one name per image
    shard, in shard order, as the workflow assigns them). A shard's rejects are never split across jobs, so an
    image's batch neighbours are those of its own shard, however the round is packed (see `batches`)."""
    capacity = max(prompts.group_by("shard").len()["len"].max() or 1, 1)
    counts: dict[str, int] = {}
    for shard in rejected_shards:
        counts[shard] = counts.get(shard, 0) + 1
    generator = (lambda s: generators[int(s)]) if generators else (lambda s: None)
    jobs, first, size = {}, None, 0
    for shard in sorted(counts):
        if first is None or size + counts[shard] > capacity or generator(shard) != generator(first):
            first, size = shard, 0
        jobs[shard] = f"{first}-a{int(attempt)}"
        size += counts[shard]
    return jobs


def batches(rows: list[dict], batch_size: int) -> list[list[dict]]:
    """Fixed batches of a shard job's rows (in order), never mixing image shards (`source_shard`, absent in a
    first-round job): batched kernels round differently from single images, so an image's pixels and scores depend
    on its batch, and this keeps them a function of its own image shard alone, not of how a round was packed."""
    out: list[list[dict]] = []
    for row in rows:
        last = out[-1] if out else None
        if last and len(last) < batch_size and last[0].get("source_shard") == row.get("source_shard"):
            last.append(row)
        else:
            out.append([row])
    return out


def balance_distributions(accepted: list[dict], seed: int) -> tuple[list[dict], list[dict]]:
    """Within each pair kind, cap every distribution at the smallest accepted count (seeded choice, as ODE)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in accepted:
        groups.setdefault((row["pair_kind"], row["distribution"]), []).append(row)
    kept, dropped = [], []
    for kind in sorted({k for k, _ in groups}):
        present = [d for d in DISTRIBUTIONS if (kind, d) in groups]
        cap = min(len(groups[(kind, d)]) for d in present)
        for d in present:
            rows = groups[(kind, d)]
            chosen = set(derived_rng(seed, "balance", kind, d).choice(len(rows), size=cap, replace=False).tolist())
            for i, row in enumerate(rows):
                if i in chosen:
                    kept.append(row)
                else:
                    dropped.append({**row, "reason": f"balanced out: {d} {kind} capped at {cap} images"})
    kept.sort(key=lambda r: r["image_id"])
    return kept, dropped


def require_accepted(accepted: pl.DataFrame, rejected: pl.DataFrame, keep_threshold: float) -> None:
    """An empty release measures nothing: stop with the most common reason and what to change."""
    if accepted.height:
        return
    if rejected.height == 0:
        raise InputError("filter_images: no images to filter (the image tables are empty)")
    top = rejected["reason"].value_counts(sort=True).row(0)[0]
    raise InputError(
        f"filter_images: all {rejected.height} images rejected (e.g. {top}); stand-in detectors score noise, "
        f"so lower config key 'ode.filter.keep_threshold' (now {keep_threshold}) or use a real detector"
    )
