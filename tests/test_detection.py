"""Detectors on tiny random models built offline: OWLv2 and Grounding DINO through transformers' zero-shot
detection classes, YOLO through ultralytics with no network. Scores are noise; geometry and bookkeeping are not."""

from __future__ import annotations

import sys

import polars as pl
import pytest
from PIL import Image

from halluflow.errors import BackendError, ConfigError, InputError, MissingExtraError
from halluflow.models.registry import create
from halluflow.models.standins import build_standin
from halluflow.ode.detection import DETECTION_SCHEMA, detect_shard, detector_kwargs, image_labels


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def owl(models):
    path = build_standin("owlv2", models / "tiny-owlv2", seed=0)
    return create(
        "detector",
        {"backend": "transformers", "model": str(path), "device": "cpu", "box_threshold": 0.0, "max_detections": 5},
    )


@pytest.fixture(scope="module")
def dino(models):
    path = build_standin("grounding_dino", models / "tiny-gdino", seed=0)
    return create(
        "detector",
        {"backend": "transformers", "model": str(path), "device": "cpu", "box_threshold": 0.0, "max_detections": 5},
    )


def _noise(width, height, seed):
    import numpy as np

    return Image.fromarray(np.random.default_rng(seed).integers(0, 255, (height, width, 3), dtype=np.uint8))


def _check(dets, image, labels, threshold=0.0, limit=5):
    assert len(dets) <= limit
    scores = [d.score for d in dets]
    assert scores == sorted(scores, reverse=True)
    for d in dets:
        assert d.label in labels and d.score >= threshold
        x0, y0, x1, y1 = d.box
        assert 0 <= x0 <= x1 <= image.width and 0 <= y0 <= y1 <= image.height


@pytest.mark.parametrize("which", ["owl", "dino"])
def test_boxes_are_in_image_coordinates(which, request):
    det = request.getfixturevalue(which)
    assert det.describe().stand_in is True
    images = [_noise(96, 48, 1), _noise(40, 80, 2), _noise(64, 64, 3)]
    labels = [["dog", "cat"], ["tree"], ["red car", "forest", "person"]]
    found = det.detect(images, labels)
    assert len(found) == 3 and all(found)
    for dets, im, ls in zip(found, images, labels):
        _check(dets, im, ls)


@pytest.mark.parametrize("which", ["owl", "dino"])
def test_boxes_scale_with_the_image(which, request):
    # A flat image looks the same to the model at any size (the processor resizes it), so the same boxes must
    # come back scaled by the size ratio: pixel coordinates of each original image.
    det = request.getfixturevalue(which)
    small, large = Image.new("RGB", (64, 64), (90, 140, 30)), Image.new("RGB", (128, 128), (90, 140, 30))
    a, b = det.detect([small, large], [["dog", "cat"], ["dog", "cat"]])
    assert a and [d.label for d in a] == [d.label for d in b]
    for da, db in zip(a, b):
        assert da.score == pytest.approx(db.score, abs=1e-4)
        assert [2 * v for v in da.box] == pytest.approx(list(db.box), abs=0.05)


def test_threshold_limit_empty_labels_and_determinism(owl):
    images = [_noise(64, 64, 5), _noise(64, 64, 6)]
    first = owl.detect(images, [["dog", "cat", "bird"], []])
    assert first[1] == []
    again = owl.detect(images, [["dog", "cat", "bird"], []])
    assert first == again
    strict = create(
        "detector", {"backend": "transformers", "model": owl.model_id, "box_threshold": 0.5, "max_detections": 2}
    )
    dets = strict.detect(images[:1], [["dog", "cat", "bird"]])[0]
    _check(dets, images[0], ["dog", "cat", "bird"], threshold=0.5, limit=2)


def test_owl_padded_label_lists_never_leak(owl):
    # The processor pads label lists to the longest in the batch; the image with one label gets only that label.
    found = owl.detect([_noise(64, 64, 7), _noise(64, 64, 8)], [["dog"], ["cat", "bird", "tree", "car"]])
    assert {d.label for d in found[0]} == {"dog"}


def test_owl_queries_longer_than_its_text_positions_are_cut_not_fatal(owl):
    # OWL's text tower has 16 positions; the stand-in's tokenizer spends about one token per character, so these
    # queries tokenize to 14 and 42 tokens: without truncation the batch's token rows are ragged and it fails whole.
    long = "a very long multi word phrase of many tokens here"
    labels = [["traffic light", long], ["cat"], []]
    found = owl.detect([_noise(64, 64, 9), _noise(64, 64, 10), _noise(64, 64, 11)], labels)
    assert {d.label for d in found[0]} <= {"traffic light", long} and found[0]
    assert {d.label for d in found[1]} == {"cat"} and found[2] == []


def test_prompt_template_must_hold_the_label(owl):
    with pytest.raises(ConfigError, match=r"detection.prompt_template 'a photo' must contain"):
        create("detector", {"backend": "transformers", "model": owl.model_id, "prompt_template": "a photo"})


def test_unloadable_model_names_the_key(tmp_path):
    with pytest.raises(BackendError, match=r"detection.model '.*nowhere'"):
        create("detector", {"backend": "transformers", "model": str(tmp_path / "nowhere")})


def test_image_labels_from_scenes_and_prompt_candidates():
    images = pl.DataFrame({"image_id": ["i1", "i2"], "scene_id": ["s1", "s2"]})
    scenes = pl.DataFrame({"scene_id": ["s1", "s2"], "object_a": ["dog", "cow"], "object_b": ["cat", "grass"]})
    assert image_labels(images, scenes) == {"i1": ["dog", "cat"], "i2": ["cow", "grass"]}
    prompts = pl.DataFrame({"image_id": ["i1", "i2"], "detect_labels": [["dog", "cat", "bird"], ["cow", "grass"]]})
    assert image_labels(images, scenes, prompts)["i1"] == ["dog", "cat", "bird"]
    with pytest.raises(InputError, match=r"scenes.parquet: image 'i2' refers to unknown scene_id 's2'"):
        image_labels(images, scenes.head(1), scenes_path="scenes.parquet")
    with pytest.raises(InputError, match=r"prompts.parquet: no row for image 'i2'"):
        image_labels(images, scenes, prompts.head(1), prompts_path="prompts.parquet")


def test_detect_shard_table(owl, tmp_path):
    rows = []
    for i in range(3):
        rel = f"images/000/i{i}.png"
        (tmp_path / "images/000").mkdir(parents=True, exist_ok=True)
        _noise(48, 32, i).save(tmp_path / rel)
        rows.append({"image_id": f"i{i}", "scene_id": "s", "path": rel})
    images = pl.DataFrame(rows)
    labels = {"i0": ["dog"], "i1": ["cat", "tree"], "i2": []}
    table = detect_shard(images, labels, tmp_path, owl, batch_size=2)
    assert table.schema == pl.Schema(DETECTION_SCHEMA)
    # every box row carries the vocabulary of its image; an image without boxes (no labels here) has one null row
    # with its vocabulary, so the table records what the detector was asked about for every image
    assert set(table["image_id"]) == {"i0", "i1", "i2"}
    assert set(table.filter(pl.col("image_id") == "i0")["label"]) == {"dog"}
    assert {tuple(v) for v in table.filter(pl.col("image_id") == "i1")["vocabulary"].to_list()} == {("cat", "tree")}
    empty = table.filter(pl.col("image_id") == "i2")
    assert empty.height == 1 and empty["label"].is_null().all() and empty["score"].is_null().all()
    assert empty["vocabulary"].to_list() == [[]]
    assert table["stand_in"].all() and set(table["model"]) == {owl.model_id}
    assert table.equals(detect_shard(images, labels, tmp_path, owl, batch_size=3))
    (tmp_path / "images/000/i1.png").unlink()
    with pytest.raises(InputError, match=r"i1.png: image of 'i1' not found"):
        detect_shard(images, labels, tmp_path, owl)


def test_kwargs_from_config_section():
    section = {
        "backend": "ultralytics",
        "model": "yolov8l-worldv2.pt",
        "revision": None,
        "stand_in": {},
        "batch_size": 8,
        "box_threshold": 0.1,
        "ultralytics": {"imgsz": 320, "class_map": {}},
    }
    assert detector_kwargs(section, "m.pt") == {
        "backend": "ultralytics",
        "model": "m.pt",
        "revision": None,
        "box_threshold": 0.1,
        "imgsz": 320,
        "class_map": {},
    }
    section = {**section, "backend": "transformers"}
    assert "imgsz" not in detector_kwargs(section, "m")


# ---- ultralytics, offline ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def yolo_dir(models):
    return build_standin("yolo", models / "tiny-yolo", seed=0)


def test_ultralytics_closed_vocabulary_offline(yolo_dir):
    det = create(
        "detector",
        {
            "backend": "ultralytics",
            "model": str(yolo_dir),
            "device": "cpu",
            "imgsz": 64,
            "box_threshold": 0.0,
            "max_detections": 20,
            "class_map": {"puppy": "dog", "sofa": "couch"},
        },
    )
    info = det.describe()
    assert info.stand_in is True and info.extra["open_vocabulary"] is False
    names = list(det.model.names.values())
    assert len(names) == 80 and names[0] == "person"
    image = _noise(96, 64, 4)
    labels = names + ["puppy", "sofa"]
    (dets,) = det.detect([image], [labels])
    assert dets  # threshold 0 keeps the highest-scoring boxes of a random head
    _check(dets, image, labels, limit=20)
    # only requested labels come back, through the class map
    (only,) = det.detect([image], [["puppy"]])
    assert {d.label for d in only} <= {"puppy"}


def test_ultralytics_bad_class_map_and_open_vocab_request(yolo_dir):
    with pytest.raises(ConfigError, match=r"detection.class_map: unicorn not among the model's class names"):
        create("detector", {"backend": "ultralytics", "model": str(yolo_dir), "class_map": {"x": "unicorn"}})
    with pytest.raises(ConfigError, match=r"detection.open_vocabulary: .* cannot be prompted with text"):
        create("detector", {"backend": "ultralytics", "model": str(yolo_dir), "open_vocabulary": True})


def test_yolo_world_offline_fails_with_a_clear_message(models, yolo_dir):
    pytest.importorskip("torchvision")
    try:
        import clip  # noqa: F401

        pytest.skip("the CLIP package is installed: set_classes could work here")
    except ImportError:
        pass
    path = build_standin("yolo_world", models / "tiny-yolo-world", seed=0)
    det = create("detector", {"backend": "ultralytics", "model": str(path), "device": "cpu", "imgsz": 64})
    assert det.open_vocabulary is True
    with pytest.raises(BackendError, match="set_classes failed .*CLIP text encoder"):
        det.detect([_noise(64, 64, 0)], [["dog"]])


def test_missing_ultralytics_names_the_extra(monkeypatch, yolo_dir):
    monkeypatch.setitem(sys.modules, "ultralytics", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'halluflow\[detect\]'"):
        create("detector", {"backend": "ultralytics", "model": str(yolo_dir)})
