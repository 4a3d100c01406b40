"""Detector filter of ODE (seed 002, §3.3 "quality control"; anchor: ODE's YOLO-World filter).

Keep an image only if object_a (and object_b for entity+entity scenes) is detected with confidence at least the
keep threshold (paper 0.65; ODE's code 0.2); labels detected at or above the exclusion threshold (0.6) are
recorded so they are never asked as absent; optionally equalise accepted images across distributions (seeded).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ..errors import InputError
from ..io import safe_join
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


def filter_images(images: pl.DataFrame, detections: pl.DataFrame, scenes: pl.DataFrame, *, keep_threshold: float,
                  exclusion_threshold: float, balance: bool = False, seed: int = 0,
                  root: str | Path | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(accepted, rejected) tables; `root` (results/<release>) lets missing image files be rejected by name."""
    _require(images, ("image_id", "scene_id", "path"), "image table")
    _require(detections, ("image_id", "label", "score"), "detection table")
    _require(scenes, ("scene_id", "distribution", "pair_kind", "object_a", "object_b"), "scenes table")
    scene_rows = {r["scene_id"]: r for r in scenes.iter_rows(named=True)}
    scores: dict[str, dict[str, float]] = {}
    boxes: dict[tuple[str, str], list] = {}
    has_boxes = all(c in detections.columns for c in ("x0", "y0", "x1", "y1"))
    cols = ["image_id", "label", "score"] + (["x0", "y0", "x1", "y1"] if has_boxes else [])
    for image_id, label, score, *box in detections.select(cols).iter_rows():
        per = scores.setdefault(image_id, {})
        lab = _norm(label)
        per[lab] = max(per.get(lab, 0.0), float(score))
        boxes.setdefault((image_id, lab), []).append((float(score), tuple(box) if box else None))
    accepted, rejected = [], []
    for img in progress(images.sort("image_id").iter_rows(named=True), desc="filter images", total=images.height):
        scene = scene_rows.get(img["scene_id"])
        if scene is None:
            raise InputError(f"image {img['image_id']}: scene {img['scene_id']!r} not in the scenes table")
        per = scores.get(img["image_id"], {})
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
            "count_a": count_boxes(boxes.get((img["image_id"], a), []), keep_threshold),
            "count_b": count_boxes(boxes.get((img["image_id"], b), []), keep_threshold),
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
            rejected.append({**row, "reason": "; ".join(reasons)})
        else:
            accepted.append(row)
    if balance:
        accepted, dropped = balance_distributions(accepted, seed)
        rejected.extend(dropped)
    rejected.sort(key=lambda r: r["image_id"])
    return (pl.DataFrame(accepted, schema=FILTER_SCHEMA) if accepted else pl.DataFrame(schema=FILTER_SCHEMA),
            pl.DataFrame(rejected, schema=REJECTED_SCHEMA) if rejected else pl.DataFrame(schema=REJECTED_SCHEMA))


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
