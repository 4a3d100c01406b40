"""CEDI on annotation scene graphs instead of an ODE release (`cedi.source`): a generated Visual Genome-format
scene_graphs.json and a COCO instances file, each with placeholder images; truth graphs merge instances by name,
absent objects come from the file's own co-occurrence, and the grades say which source and GED settings ran."""

from __future__ import annotations

import json

import pytest
from helpers import write_vg
from PIL import Image

from halluflow.backends.base import BackendInfo
from halluflow.cedi.pipeline import examine_model, grade_model
from halluflow.errors import ConfigError, InputError


class ScriptedVLM:
    """Says yes to every yes/no question and otherwise names a dog: hallucinates wherever there is no dog."""

    def describe(self):
        return BackendInfo("vlm", "scripted", "scripted", stand_in=True)

    def answer(self, requests):
        return [
            "Yes, there is a dog."
            if r.prompt.rstrip().endswith("?") and r.prompt.split()[-1] != "detail."
            else "A dog."
            for r in requests
        ]


def run_source(tmp_path, cedi):
    cfg = {
        "seed": 1,
        "cedi": {"images": 3, "examiners": ["cedi"], "history": ["with"], "max_rounds": 7, "min_end_round": 6, **cedi},
    }
    out = tmp_path / "out"
    n = examine_model(cfg, {"name": "m"}, None, None, out / "t.parquet", out / "truth.json", vlm=ScriptedVLM())
    grades = grade_model(
        cfg, out / "t.parquet", out / "truth.json", None, out / "g.json", out / "p.parquet", out / "pred.json"
    )
    return n, grades, json.loads((out / "truth.json").read_text())


def test_visual_genome_source(tmp_path):
    sg_file, images = write_vg(tmp_path / "vg")
    n, grades, truth = run_source(
        tmp_path,
        {"source": "visual_genome", "scene_graphs": str(sg_file), "images_dir": str(images), "ged_normalizer": 150},
    )
    assert truth["source"] == "visual_genome" and sorted(truth["graphs"]) == ["101", "102", "103"]
    g101 = truth["graphs"]["101"]
    assert sorted(o["name"] for o in g101["objects"]) == ["horse", "man", "tree"]  # two trees: one node
    # absent objects come from co-occurrence in the file: the man of 101 also appears with a dog and a frisbee
    assert set(g101["neighbours"]) == {"dog", "frisbee", "fence"}
    # END once the graph is covered (from round 6), else the cap of 7 turns
    ends = {c["end_reason"] for c in grades["conversations"]}
    assert n == sum(c["turns"] for c in grades["conversations"]) and ends <= {"coverage", "max_rounds"}
    assert all(c["turns"] == (6 if c["end_reason"] == "coverage" else 7) for c in grades["conversations"])
    assert grades["settings"]["source"] == "visual_genome"
    assert grades["ged_normalized"] == pytest.approx(grades["ged"] / 150, abs=1e-6)
    assert grades["summary"]["cedi/with"]["exact_fraction"] == 1.0
    # the scripted evaluatee claims a dog (absent in 101 and 103) and accepts every premise: mostly object errors,
    # plus the false relation premises it accepted; the categories add up to the hallucinated turns
    errors = grades["error_types"]
    assert errors["counts"]["object"] > errors["counts"]["relation"] >= 1
    assert errors["n_hallucinated"] == grades["summary"]["cedi/with"]["turn_hallucination"]["n_hallucinated"]
    switch = grades["fallbacks"]["switch"]
    assert (switch["configured"], switch["used"], switch["fell_back"]) == ("random", {"random": n - 3}, 0)
    # choices the examiner could not honour (no absent object left) are counted by what was chosen
    assert switch["unhonoured"] == sum(switch["unhonoured_choices"].values())
    assert set(switch["unhonoured_choices"]) <= {"adversarial", "unanswerable"}
    assert grades["settings"]["ged_instances"] == "merge"  # VG truth repeats instances


def test_coco_source_and_bad_settings(tmp_path):
    images = tmp_path / "val2017"
    images.mkdir()
    coco = {
        "images": [{"id": 7, "file_name": "000000000007.jpg"}, {"id": 8, "file_name": "000000000008.jpg"}],
        "categories": [{"id": 1, "name": "person"}, {"id": 18, "name": "dog"}],
        "annotations": [{"id": i, "image_id": 7, "category_id": 1} for i in range(3)]
        + [{"id": 9, "image_id": 8, "category_id": 18}, {"id": 10, "image_id": 8, "category_id": 1}],
    }
    for img in coco["images"]:
        Image.new("RGB", (8, 8)).save(images / img["file_name"])
    (tmp_path / "instances.json").write_text(json.dumps(coco))
    coco_cfg = {"source": "coco", "scene_graphs": str(tmp_path / "instances.json"), "images_dir": str(images)}
    _, grades, truth = run_source(tmp_path, coco_cfg)
    assert [o["name"] for o in truth["graphs"]["7"]["objects"]] == ["person"]  # three persons, one node
    assert truth["graphs"]["7"]["neighbours"] == ["dog"]
    # COCO truth repeats instances: the pipeline merges them for GED and says why; names go through WordNet or VG
    assert grades["settings"]["ged_instances"] == "merge"
    assert grades["settings"]["ged_instances_rule"] == "auto: coco truth repeats instances"
    assert grades["settings"]["name_synonyms"] in {"wordnet", "visual_genome", "none"}
    with pytest.raises(ConfigError, match="cedi.ged_instances"):
        run_source(tmp_path / "w", {**coco_cfg, "ged_instances": "both"})
    with pytest.raises(ConfigError, match="cedi.images_dir"):
        run_source(tmp_path / "x", {"source": "coco", "scene_graphs": str(tmp_path / "instances.json")})
    with pytest.raises(ConfigError, match="cedi.source"):
        run_source(tmp_path / "y", {"source": "gqa"})
    (images / "000000000008.jpg").unlink()
    with pytest.raises(InputError, match="000000000008.jpg"):
        run_source(tmp_path / "z", {**coco_cfg, "images": 2})


def test_cedi_on_annotations_is_planned_without_an_ode_release(repo):
    from halluflow.config import load_config
    from halluflow.plan import stage_plan

    config = load_config(repo / "config.yaml")
    config["answer"]["source"] = {"kind": "pope", "path": "labels.json", "images": "val2014", "annotations": None}
    assert stage_plan(config)["cedi"] is not None  # ODE source: needs this config's release
    config["cedi"].update(source="visual_genome", scene_graphs="sg.json", images_dir="VG_100K")
    assert stage_plan(config)["cedi"] is None
