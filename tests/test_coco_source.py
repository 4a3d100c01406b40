"""A COCO-format source (image folder + instances_*.json): one caption request per image, truth = the image's
annotated categories. Through the workflow no ODE stage runs, rule score reports CHAIR, and CAOS runs on the
captions with the same numbers as `halluflow score caos` on the same captions and truth.

The model under test is a real HTTP client (backend openai) talking to a local chat server that answers each image
with a fixed caption, so every CHAIR / CAOS count below is checked by hand; the images are placeholders.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from chat_server import ChatServer
from workflow_utils import ODE_AND_METHOD_RULES, copy_workflow, jobs_run, run_snakemake

from halluflow.config import validate_config
from halluflow.errors import ConfigError, InputError
from halluflow.plan import stage_plan
from halluflow.sources import coco_queries, load_source

# A COCO source runs CAOS on the captions; nothing else that reads an ODE release.
ODE_RULES = ODE_AND_METHOD_RULES - {"caos_score"}

# COCO ids as in instances_val2014.json: person 1, car 3, dog 18, umbrella 28.
CATEGORIES = [
    {"id": 1, "name": "person"},
    {"id": 3, "name": "car"},
    {"id": 18, "name": "dog"},
    {"id": 28, "name": "umbrella"},
]
IMAGES = [
    {"id": 42, "file_name": "COCO_val2014_000000000042.png"},
    {"id": 7, "file_name": "dir/seven.png"},
    {"id": 100, "file_name": "COCO_val2014_000000000100.png"},
]
ANNOTATIONS = [
    {"id": 1, "image_id": 42, "category_id": 18},
    {"id": 2, "image_id": 42, "category_id": 1},
    {"id": 3, "image_id": 42, "category_id": 18},
    {"id": 4, "image_id": 7, "category_id": 3},
]
TRUTH = {"42": ["dog", "person"], "7": ["car"], "100": []}  # one name per category; 100 has no annotation
CAPTIONS = {
    "42": "A dog and a man sitting next to a cat on a bench.",  # dog, person (man) true; cat, bench hallucinated
    "7": "A red car parked beside a truck.",  # car true; truck hallucinated
    "100": "A clear blue sky.",  # no object
}


def _coco(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """(instances json, image folder, base64 of each image's bytes -> image id)."""
    from PIL import Image

    folder = tmp_path / "val2014"
    by_bytes = {}
    for i, img in enumerate(IMAGES):
        path = folder / img["file_name"]
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (16, 16), (60 * i, 90, 160)).save(path)
        by_bytes[base64.b64encode(path.read_bytes()).decode("ascii")] = str(img["id"])
    instances = tmp_path / "instances_val2014.json"
    instances.write_text(json.dumps({"images": IMAGES, "annotations": ANNOTATIONS, "categories": CATEGORIES}))
    return instances, folder, by_bytes


class CaptionServer(ChatServer):
    """Answers with the caption written for the image the request carries (found by its bytes)."""

    def __init__(self, by_bytes: dict[str, str]):
        super().__init__(prior=None)
        self.by_bytes = by_bytes

    def answer(self, body: dict) -> str:
        parts = body["messages"][-1]["content"]
        url = next(p["image_url"]["url"] for p in parts if p.get("type") == "image_url")
        return CAPTIONS[self.by_bytes[url.split(",", 1)[1]]]


def test_coco_queries_one_caption_request_per_image(tmp_path):
    instances, _, _ = _coco(tmp_path)
    table = coco_queries(instances)
    assert table["query_id"].to_list() == ["7", "42", "100"]
    assert dict(zip(table["image_id"], table["objects"].to_list())) == TRUTH
    assert set(table["question"]) == {"Describe this image."} and set(table["task"]) == {"generative"}
    assert table.filter(table["image_id"] == "7")["image"].item() == "dir/seven.png"
    assert coco_queries(instances, prompt="What is in the picture?")["question"][0] == "What is in the picture?"


def test_coco_limit_is_a_seeded_draw(tmp_path):
    instances, folder, _ = _coco(tmp_path)
    first = coco_queries(instances, limit=2, seed=3)["query_id"].to_list()
    assert len(first) == 2 and first == coco_queries(instances, limit=2, seed=3)["query_id"].to_list()
    drawn = {tuple(coco_queries(instances, limit=2, seed=s)["query_id"].to_list()) for s in range(20)}
    assert len(drawn) > 1  # the seed chooses the images
    assert coco_queries(instances, limit=10)["query_id"].to_list() == ["7", "42", "100"]
    table, root = load_source("coco", folder, annotations=instances, limit=1)
    assert table.height == 1 and root == folder


def test_coco_bad_files_say_which(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"images": [{"id": 1}], "annotations": [], "categories": []}))
    with pytest.raises(InputError, match=r"bad.json: images\[0\] needs 'id' and 'file_name'"):
        coco_queries(bad)
    bad.write_text(
        json.dumps(
            {
                "images": [{"id": 1, "file_name": "a.png"}],
                "categories": CATEGORIES,
                "annotations": [{"image_id": 2, "category_id": 1}],
            }
        )
    )
    with pytest.raises(InputError, match="image_id '2', which is not in 'images'"):
        coco_queries(bad)
    bad.write_text(json.dumps({"annotations": [], "categories": []}))
    with pytest.raises(InputError, match="lacks an 'images' list"):
        coco_queries(bad)
    with pytest.raises(ConfigError, match="answer.source.annotations"):
        load_source("coco", tmp_path)


def _config(repo: Path, **source) -> dict:
    config = yaml.safe_load((repo / "config.yaml").read_text())
    config["answer"]["source"] = {"kind": "coco", **source}
    return config


def test_coco_config_plans_caos_without_ode(repo):
    config = validate_config(_config(repo, path="val2014", annotations="instances_val2014.json", limit=5))
    plan = stage_plan(config)
    assert plan["caos"] is None and plan["answer"] is None and plan["score"] is None
    assert plan["ode"] == "answer.source is coco val2014"
    for stage in ("diagnosis", "cedi", "samf", "report"):
        assert "answer.source" in plan[stage], (stage, plan[stage])  # each says why (needs the ODE release)
    with pytest.raises(ConfigError, match="'answer.source.annotations': required for a coco source"):
        validate_config(_config(repo, path="val2014"))
    with pytest.raises(ConfigError, match="'caos.frequent': 'graph' needs"):
        validate_config(
            {
                **_config(repo, path="val2014", annotations="i.json"),
                "caos": {**yaml.safe_load((repo / "config.yaml").read_text())["caos"], "frequent": "graph"},
            }
        )
    with pytest.raises(ConfigError, match="answer.source.limit"):
        validate_config(_config(repo, path="val2014", annotations="i.json", limit=0))


def _cli(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "halluflow.cli", *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.slow  # runs Snakemake: answers over HTTP, CAOS and CHAIR on the COCO source
def test_caos_and_chair_on_a_coco_source_through_the_workflow(tmp_path):
    instances, folder, by_bytes = _coco(tmp_path)
    work = copy_workflow(tmp_path / "wf")
    with CaptionServer(by_bytes) as server:
        override = {
            "release": "coco-test",
            "shards": {"images": 1, "answers": 1},
            "models": [
                {
                    "name": "captioner",
                    "backend": "openai",
                    "stand_in": False,
                    "args": {
                        "base_url": server.base_url,
                        "model": "scripted",
                        "api_key_env": None,
                        "timeout_s": 5,
                        "max_retries": 1,
                        "concurrency": 1,
                    },
                }
            ],
            "answer": {"source": {"kind": "coco", "path": str(folder), "annotations": str(instances)}},
            # glove alone keeps the test short; without the open vocabulary the extractor is the CLI's
            "caos": {"embedders": ["glove"], "open_vocabulary": False},
        }
        (work / "coco.yaml").write_text(yaml.safe_dump(override))
        proc = run_snakemake(work, "--cores", "1", "--configfile", "config.yaml", "coco.yaml", timeout=600)
    ran = jobs_run(proc)
    assert ran.get("answer") == 1 and ran.get("score") == 1 and ran.get("caos_score") == 1, ran
    assert not set(ran) & ODE_RULES, ran
    log = proc.stdout + proc.stderr
    for stage in ("diagnosis", "cedi", "samf", "report"):
        assert f"stage {stage} not planned: " in log, stage
    assert "stage caos not planned" not in log

    out = work / "results" / "coco-test"
    captions = out / "scores" / "captioner" / "answers.jsonl"
    assert {r["image_id"]: r["caption"] for r in map(json.loads, captions.read_text().splitlines())} == CAPTIONS
    metrics = json.loads((out / "metrics" / "captioner.json").read_text())
    assert metrics["source"] == "coco" and metrics["n_answers"] == 3 and metrics["n_failed"] == 0
    # 6 mentions (dog, person, cat, bench, car, truck), 3 hallucinated, in 2 of 3 captions
    assert metrics["chair"] == {
        "chair_s": 2 / 3,
        "chair_i": 0.5,
        "n_captions": 3,
        "n_mentions": 6,
        "n_hallucinated_mentions": 3,
        "n_hallucinated_captions": 2,
        "n_failed": 0,
    }

    caos = json.loads((out / "caos" / "captioner.json").read_text())
    assert caos["n_generative_queries"] == 3 and caos["objects"]["n_captions"] == 3
    assert caos["objects"]["n_objects"] == 6 and caos["objects"]["n_hallucinated"] == 3
    assert caos["metrics"]["chair_i"] == 0.5  # the score stage's CHAIR shown beside CAOS
    glove = caos["embedders"]["glove"]
    assert glove["n_hallucinated"] == 3 and glove["caos_t"] is not None and glove["caos_k"] is not None

    truth = tmp_path / "truth.jsonl"
    truth.write_text("".join(json.dumps({"image_id": k, "objects": v}) + "\n" for k, v in TRUTH.items()))
    cli = _cli(
        "score", "caos", "--objects", str(captions), "--truth", str(truth), "--embedder", "glove", "--no-per-object"
    )
    assert {k: v for k, v in cli.items() if k not in ("objects", "sequential", "embedder", "n_failed")} == glove
    assert cli["n_failed"] == caos["n_answers_failed"] == 0  # one failed-answer count, named per document
    assert cli["objects"] == caos["objects"] and cli["sequential"] == caos["sequential"]
    assert _cli("score", "chair", "--captions", str(captions), "--truth", str(truth)) == metrics["chair"]


@pytest.mark.slow  # runs Snakemake with the stand-in VLM (build + answers, about a minute on one core)
def test_standin_vlm_captions_coco_images(tmp_path, repo):
    # The transformers path: the processor reads each COCO image from the folder; truth still from the instances.
    instances, folder, _ = _coco(tmp_path)
    work = copy_workflow(tmp_path / "wf")
    standin = next(m for m in yaml.safe_load((repo / "config.yaml").read_text())["models"] if m.get("build"))
    override = {
        "release": "coco-vlm",
        "shards": {"images": 1, "answers": 1},
        "models": [standin],
        "answer": {
            "source": {"kind": "coco", "path": str(folder), "annotations": str(instances), "limit": 2},
            "max_new_tokens": {"discriminative": 4, "generative": 8},
        },
        "caos": {"embedders": ["glove"]},
    }
    (work / "coco.yaml").write_text(yaml.safe_dump(override))
    proc = run_snakemake(work, "--cores", "1", "--configfile", "config.yaml", "coco.yaml", timeout=900)
    ran = jobs_run(proc)
    assert ran.get("caos_score") == 1 and not set(ran) & ODE_RULES, ran
    out = work / "results" / "coco-vlm"
    metrics = json.loads((out / "metrics" / f"{standin['name']}.json").read_text())
    assert metrics["n_answers"] == 2 and metrics["n_failed"] == 0 and metrics["stand_in"] is True
    assert metrics["chair"]["n_captions"] == 2
    caos = json.loads((out / "caos" / f"{standin['name']}.json").read_text())
    assert caos["n_generative_queries"] == 2 and caos["objects"]["n_captions"] == 2 and caos["stand_in"] is True
