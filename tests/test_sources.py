"""Evaluation sources: POPE label files (JSONL and JSON arrays) and AMBER queries as answer-stage tables."""

from __future__ import annotations

import json

import polars as pl
import pytest
from helpers import shared_data
from PIL import Image

from halluflow.errors import ConfigError, InputError
from halluflow.sources import amber_queries, load_source, pope_queries, resolve_images


def test_pope_coco_jsonl_and_aokvqa_array_read_alike():
    coco = pope_queries(shared_data("pope-rucaibox", "coco", "coco_pope_popular.json"))
    aok = pope_queries(shared_data("pope-rucaibox", "aokvqa", "aokvqa_pope_seem_random.json"))
    assert coco.height == 3000 and aok.height == 3000  # POPE: 500 images x 6 questions per split
    first = coco.row(0, named=True)
    assert first["query_id"] == "1" and first["image"] == "COCO_val2014_000000310196.jpg"
    assert first["target"] == "snowboard" and first["truth"] == "yes" and first["task"] == "discriminative"
    assert set(coco["truth"]) == {"yes", "no"} and coco["truth"].to_list().count("yes") == 1500
    assert aok["target"].null_count() == 0


def test_amber_queries_with_annotations():
    folder = shared_data("amber", "data")
    table = amber_queries(folder / "query" / "query_all.json", folder / "annotations.json")
    assert table.height == 15220
    by_type = dict(table.group_by("query_type").len().iter_rows())
    assert by_type["generative"] == 1004 and by_type["existence"] == 4924 and by_type["count"] == 2072
    first = table.row(0, named=True)
    assert first["task"] == "generative" and first["truth"] is None
    assert first["objects"] == ["sky", "forest", "grass", "person", "lake", "mountain", "road"]
    assert table.filter(pl.col("query_id") == "1005")["truth"][0] == "yes"


def test_bad_items_name_the_item(tmp_path):
    bad = tmp_path / "labels.jsonl"
    bad.write_text(
        json.dumps({"question_id": 1, "image": "a.jpg", "text": "Is there a dog in the image?"})
        + "\n"
        + json.dumps({"question_id": 2, "text": "no image"})
        + "\n"
    )
    with pytest.raises(InputError, match=r"item 1: missing key\(s\) image"):
        pope_queries(bad)
    with pytest.raises(ConfigError, match="answer.source.images"):
        load_source("pope", bad)
    with pytest.raises(ConfigError, match="expected one of ode, pope, amber"):
        load_source("mme", bad, tmp_path)


def test_image_folder_checks(tmp_path):
    Image.new("RGB", (4, 4)).save(tmp_path / "a.jpg")
    assert resolve_images(["a.jpg"], tmp_path) == [(tmp_path / "a.jpg").resolve()]
    with pytest.raises(
        InputError, match=r"7 image\(s\) missing under .*: m0.jpg, m1.jpg, m2.jpg, m3.jpg, m4.jpg \.\.\."
    ):
        resolve_images(["a.jpg"] + [f"m{i}.jpg" for i in range(7)], tmp_path)
    with pytest.raises(InputError, match="escapes its folder"):
        resolve_images(["/etc/passwd"], tmp_path)
