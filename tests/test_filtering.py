"""Detector filter: keep / exclusion thresholds on hand-made detections, reasons, seeded balancing."""

from __future__ import annotations

import polars as pl
import pytest

from halluflow.errors import InputError
from halluflow.ode.filtering import filter_images

SCENES = pl.DataFrame(
    {
        "scene_id": ["ee", "ev", "ee2", "lt"],
        "distribution": ["standard", "standard", "standard", "long_tail"],
        "pair_kind": ["entity_entity", "entity_environment", "entity_entity", "entity_entity"],
        "object_a": ["dog", "dog", "cat", "cup"],
        "object_b": ["frisbee", "grass", "bed", "tie"],
    }
)
IMAGES = pl.DataFrame(
    {
        "image_id": ["ee-i00", "ev-i00", "ee2-i00", "lt-i00"],
        "scene_id": ["ee", "ev", "ee2", "lt"],
        "path": ["images/000/ee-i00.png", "images/000/ev-i00.png", "images/001/ee2-i00.png", "images/001/lt-i00.png"],
    }
)
DETS = pl.DataFrame(
    {
        "image_id": ["ee-i00", "ee-i00", "ee-i00", "ee-i00", "ev-i00", "ee2-i00", "ee2-i00", "lt-i00", "lt-i00"],
        "label": ["dog", "Frisbee", "dog", "ball", "dog", "cat", "bed", "cup", "tie"],
        "score": [0.70, 0.66, 0.30, 0.61, 0.65, 0.90, 0.10, 0.8, 0.8],
    }
)


def run(**kw):
    args = {"keep_threshold": 0.65, "exclusion_threshold": 0.6, **kw}
    return filter_images(IMAGES, DETS, SCENES, **args)


def test_paper_threshold_keeps_both_objects_for_entity_pairs_only_a_for_environment():
    acc, rej = run()
    assert acc["image_id"].to_list() == ["ee-i00", "ev-i00", "lt-i00"]
    ee = acc.row(0, named=True)
    assert ee["max_score_a"] == 0.70 and ee["max_score_b"] == 0.66  # max over boxes, labels case-folded
    assert ee["detected"] == ["ball", "dog", "frisbee"]  # >= 0.6: "ball" may not be asked as absent
    ev = acc.row(1, named=True)
    assert ev["max_score_b"] == 0.0  # grass never detected: environment is not required
    assert rej.to_dicts()[0]["reason"] == "object_b 'bed' max score 0.100 < keep threshold 0.65"


def test_anchor_threshold_and_exclusion_are_options():
    acc, rej = run(keep_threshold=0.2, exclusion_threshold=0.95)
    assert acc.height == 3 and rej.height == 1  # bed 0.10 still < 0.2
    assert acc.filter(pl.col("image_id") == "ee-i00")["detected"].to_list() == [[]]
    acc, rej = run(keep_threshold=0.0)
    assert acc.height == 4 and rej.height == 0


def test_missing_image_file_is_rejected_by_name(tmp_path):
    for p in IMAGES["path"].to_list()[:3]:
        (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / p).write_bytes(b"png")
    acc, rej = run(keep_threshold=0.0, root=tmp_path)
    assert rej.to_dicts()[0]["image_id"] == "lt-i00"
    assert rej.to_dicts()[0]["reason"] == "image file images/001/lt-i00.png missing"


def test_balancing_caps_each_distribution_at_the_smallest():
    acc, rej = run(keep_threshold=0.0, balance=True, seed=1)
    # entity_entity: standard 2 (ee, ee2), long_tail 1 (lt) -> standard capped at 1
    ee = acc.filter(pl.col("pair_kind") == "entity_entity")
    assert sorted(ee["distribution"].to_list()) == ["long_tail", "standard"]
    assert rej.height == 1 and rej["reason"][0] == "balanced out: standard entity_entity capped at 1 images"
    again, _ = run(keep_threshold=0.0, balance=True, seed=1)
    assert again.equals(acc)


def test_bad_tables_name_what_is_wrong():
    with pytest.raises(InputError, match="detection table: missing column"):
        filter_images(IMAGES, DETS.drop("score"), SCENES, keep_threshold=0.5, exclusion_threshold=0.6)
    with pytest.raises(InputError, match="scene 'ee' not in the scenes table"):
        filter_images(
            IMAGES, DETS, SCENES.filter(pl.col("scene_id") != "ee"), keep_threshold=0.5, exclusion_threshold=0.6
        )


def test_all_rejected_stops_with_the_key_to_change():
    from halluflow.ode.filtering import require_accepted

    acc, rej = run(keep_threshold=0.99)
    assert acc.height == 0 and rej.height == 4
    with pytest.raises(InputError, match=r"all 4 images rejected .*'ode.filter.keep_threshold' \(now 0.99\)"):
        require_accepted(acc, rej, 0.99)
    require_accepted(*run(), 0.65)  # something accepted: fine


def test_schema_default_is_the_papers_threshold_and_demo_keeps_images(repo):
    from halluflow.config import load_config, validate_config

    assert validate_config({})["ode"]["filter"]["keep_threshold"] == 0.65
    assert load_config(repo / "config.yaml")["ode"]["filter"]["keep_threshold"] == 0.0  # stand-in detector = noise


def test_count_boxes_merges_overlapping_boxes_above_the_threshold():
    from halluflow.ode.filtering import count_boxes

    dog1, dog1_again, dog2 = (0, 0, 10, 10), (1, 1, 10, 10), (20, 0, 30, 10)  # IoU(dog1, dog1_again) = 0.81
    assert count_boxes([(0.9, dog1), (0.8, dog1_again), (0.7, dog2), (0.3, (40, 0, 50, 10))], 0.65) == 2
    assert count_boxes([(0.9, dog1), (0.8, dog1_again)], 0.95) == 0
    assert count_boxes([(0.9, None), (0.7, None)], 0.5) == 2  # no boxes recorded: every label hit counts


def test_the_detector_vocabulary_goes_through_and_a_box_less_image_is_a_null_row():
    vocab = {"ee-i00": ["dog", "frisbee", "ball", "person"], "ev-i00": ["dog", "grass", "cat"]}
    dets = DETS.filter(pl.col("image_id") != "ev-i00").with_columns(
        pl.col("image_id").replace_strict(vocab, default=None, return_dtype=pl.List(pl.String)).alias("vocabulary")
    )
    # ev-i00: the detector was asked about dog, grass, cat and found nothing (one null row keeps its vocabulary)
    nothing = pl.DataFrame(
        {"image_id": ["ev-i00"], "label": [None], "score": [None], "vocabulary": [vocab["ev-i00"]]},
        schema={"image_id": pl.String, "label": pl.String, "score": pl.Float64, "vocabulary": pl.List(pl.String)},
    )
    acc, rej = filter_images(IMAGES, pl.concat([dets, nothing]), SCENES, keep_threshold=0.0, exclusion_threshold=0.6)
    rows = {r["image_id"]: r for r in acc.iter_rows(named=True)}
    assert rows["ee-i00"]["vocabulary"] == vocab["ee-i00"] and rows["ee-i00"]["detected"] == ["ball", "dog", "frisbee"]
    assert rows["ev-i00"]["vocabulary"] == vocab["ev-i00"]
    assert rows["ev-i00"]["detected"] == [] and rows["ev-i00"]["max_score_a"] == 0.0
    assert rows["lt-i00"]["vocabulary"] is None  # no vocabulary recorded for it
    # with the paper threshold the box-less image is rejected for its missing object, never for the null row
    _, rej = filter_images(IMAGES, pl.concat([dets, nothing]), SCENES, keep_threshold=0.65, exclusion_threshold=0.6)
    assert "object_a 'dog' max score 0.000" in rej.filter(pl.col("image_id") == "ev-i00")["reason"][0]
