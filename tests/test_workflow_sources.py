"""POPE and AMBER files as workflow sources: every model answers them, no ODE stage is planned, and the workflow's
scores are exactly what `halluflow score pope|amber` reports on the same answers.

Users bring the COCO / AMBER images; here they are placeholder pictures named as the label files reference them.
Each source runs once on hand-written files (always) and once on the peer data's real label files (when present).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import SHARED_DATA
from workflow_utils import ODE_AND_METHOD_RULES, REPO, copy_workflow, jobs_run, run_snakemake

N_QUESTIONS = 8  # enough for both yes and no truths; small enough for the stand-in VLM on one CPU


def _placeholder_images(folder: Path, names) -> None:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(sorted(set(names))):
        Image.new("RGB", (32, 32), (40 * i % 255, 90, 160)).save(folder / name)


def _pope_labels(tmp_path: Path, real: bool) -> Path:
    if real:
        path = SHARED_DATA / "pope-rucaibox" / "coco" / "coco_pope_popular.json"
        if not path.exists():
            pytest.skip(f"peer data {path} not present")
        rows = [json.loads(line) for line in path.read_text().splitlines()[:N_QUESTIONS]]
    else:
        objects = ["dog", "frisbee", "car", "umbrella"]
        rows = [
            {
                "question_id": i + 1,
                "image": f"COCO_val2014_{i // 4:012d}.jpg",
                "text": f"Is there a {objects[i % 4]} in the image?",
                "label": "yes" if i % 2 == 0 else "no",
            }
            for i in range(N_QUESTIONS)
        ]
    out = tmp_path / "labels.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def _amber_files(tmp_path: Path, real: bool) -> tuple[Path, Path]:
    """(query file, annotations.json); the annotations folder also holds relation.json and safe_words.txt."""
    if real:
        data = SHARED_DATA / "amber" / "data"
        if not data.exists():
            pytest.skip(f"peer data {data} not present")
        queries = json.loads((data / "query" / "query_all.json").read_text())
        # Two generative queries and the discriminative ones of the same images' first ids.
        chosen = queries[:2] + [q for q in queries if q["id"] > 1004][: N_QUESTIONS - 2]
        annotations = data / "annotations.json"
    else:
        ann_dir = tmp_path / "amber"
        ann_dir.mkdir()
        notes = [
            {"id": 1, "type": "generative", "truth": ["dog", "grass"], "hallu": ["cat"]},
            {"id": 2, "type": "generative", "truth": ["car"], "hallu": ["bus", "person"]},
            {"id": 3, "type": "discriminative-hallucination", "truth": "no"},
            {"id": 4, "type": "discriminative-hallucination", "truth": "yes"},
            {"id": 5, "type": "discriminative-attribute-state", "truth": "yes"},
            {"id": 6, "type": "discriminative-relation", "truth": "no"},
        ]
        (ann_dir / "annotations.json").write_text(json.dumps(notes))
        words = ["dog", "grass", "cat", "car", "bus", "person"]
        (ann_dir / "relation.json").write_text(json.dumps({w: [] for w in words}))
        (ann_dir / "safe_words.txt").write_text("thing\n")
        texts = [
            "Describe this image.",
            "Describe this image.",
            "Is there a cat in this image?",
            "Is there a dog in this image?",
            "Is the dog running in this image?",
            "Is the car on the dog in this image?",
        ]
        chosen = [{"id": i + 1, "image": f"AMBER_{1 + i % 2}.jpg", "query": t} for i, t in enumerate(texts)]
        annotations = ann_dir / "annotations.json"
    out = tmp_path / "query.json"
    out.write_text(json.dumps(chosen))
    return out, annotations


def _standin(repo: Path) -> dict:
    config = yaml.safe_load((repo / "config.yaml").read_text())
    return next(m for m in config["models"] if m.get("build"))


@pytest.fixture(scope="module")
def built_models(tmp_path_factory):
    """A scratch clone whose resources/models holds the stand-in VLM, built once and shared by the runs below."""
    home = copy_workflow(tmp_path_factory.mktemp("models-home"))
    run_snakemake(home, "--cores", "1", f"resources/models/{_standin(REPO)['name']}")
    return home


def _setup(tmp_path: Path, repo: Path, kind: str, real: bool, models=None, share=None) -> tuple[Path, dict]:
    work = copy_workflow(tmp_path / "wf", share_models_from=share)
    if kind == "pope":
        labels = _pope_labels(tmp_path, real)
        source = {"kind": "pope", "path": str(labels), "images": str(tmp_path / "images")}
        images = [json.loads(line)["image"] for line in labels.read_text().splitlines()]
    else:
        queries, annotations = _amber_files(tmp_path, real)
        source = {
            "kind": "amber",
            "path": str(queries),
            "images": str(tmp_path / "images"),
            "annotations": str(annotations),
        }
        images = [q["image"] for q in json.loads(queries.read_text())]
    _placeholder_images(tmp_path / "images", images)
    override = {
        "release": f"{kind}-test",
        "shards": {"images": 1, "answers": 1},
        "answer": {"source": source},
        "models": models if models is not None else [_standin(repo)],
    }
    (work / "source.yaml").write_text(yaml.safe_dump(override))
    return work, override


def _cli_scores(kind: str, answers: Path, source: dict) -> dict:
    if kind == "pope":
        args = ["score", "pope", "--answers", str(answers), "--labels", source["path"]]
    else:
        args = ["score", "amber", "--responses", str(answers), "--annotations", str(Path(source["annotations"]).parent)]
    done = subprocess.run([sys.executable, "-m", "halluflow.cli", *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("kind", ["pope", "amber"])
def test_source_plans_no_ode_stage(tmp_path, repo, kind):
    # The demo's three models: the stand-in VLM, the blind LLM (its converted folder) and the prior (which reads
    # the concept graph, so build_graph is its input; nothing else of ODE).
    models = yaml.safe_load((repo / "config.yaml").read_text())["models"]
    work, _ = _setup(tmp_path, repo, kind, real=False, models=models)
    proc = run_snakemake(work, "-n", "--configfile", "config.yaml", "source.yaml")
    planned = jobs_run(proc)
    assert planned.get("answer") == len(models) and planned.get("score") == len(models), planned
    assert set(planned) & ODE_AND_METHOD_RULES <= {"build_graph"}, planned
    log = proc.stdout + proc.stderr
    for stage in ("caos", "cedi", "samf", "report"):
        assert f"stage {stage} not planned: " in log, stage


@pytest.mark.slow  # builds the stand-in VLM and runs answer + score through Snakemake
@pytest.mark.parametrize("real", [False, True], ids=["generated", "peer-data"])
@pytest.mark.parametrize("kind", ["pope", "amber"])
def test_source_scores_equal_the_cli(tmp_path, repo, built_models, kind, real):
    work, override = _setup(tmp_path, repo, kind, real, share=built_models)
    proc = run_snakemake(work, "--cores", "1", "--configfile", "config.yaml", "source.yaml", timeout=900)
    ran = jobs_run(proc)
    assert not set(ran) & ODE_AND_METHOD_RULES, ran
    name = override["models"][0]["name"]
    out = work / "results" / override["release"]
    metrics = json.loads((out / "metrics" / f"{name}.json").read_text())
    answers = out / "scores" / name / ("answers.jsonl" if kind == "pope" else "answers.json")
    assert metrics["n_answers"] == len(
        json.loads(Path(override["answer"]["source"]["path"]).read_text())
        if kind == "amber"
        else Path(override["answer"]["source"]["path"]).read_text().splitlines()
    )
    assert metrics["n_failed"] == 0 and metrics["stand_in"] is True
    assert metrics[kind] == _cli_scores(kind, answers, override["answer"]["source"])
