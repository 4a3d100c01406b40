"""End to end: the default workflow on the offline stand-ins, in a scratch clone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import polars as pl
import pytest
import yaml
from workflow_utils import copy_run, jobs_run, run_snakemake

pytestmark = pytest.mark.slow


def _release(run) -> "Path":  # noqa: F821
    config = yaml.safe_load((run["dir"] / "config.yaml").read_text())
    return run["dir"] / "results" / config["release"] / "release"


def test_default_run_finishes_and_rerun_does_nothing(default_run):
    print(f"default workflow: {default_run['seconds']:.0f} s")
    rerun = run_snakemake(default_run["dir"], "--cores", "2")
    assert "Nothing to be done" in rerun.stdout + rerun.stderr, jobs_run(rerun)


def test_more_attempts_without_rejections_run_no_regeneration_job(default_run, tmp_path):
    # Raising synthesis.max_attempts on a finished run whose keep threshold (0.0, the demo's) rejects nothing plans
    # no regeneration round at all (no checkpoint, no GPU job) and redoes no first-round image.
    work = copy_run(default_run["dir"], tmp_path / "attempts")
    overlay = tmp_path / "attempts.yaml"
    overlay.write_text("synthesis: {max_attempts: 3}\n")
    release = yaml.safe_load((work / "config.yaml").read_text())["release"]
    target = f"results/{release}/filtered/accepted.parquet"
    dry = run_snakemake(work, "-n", "--configfile", "config.yaml", str(overlay), "--", target)
    assert "Nothing to be done" in dry.stdout + dry.stderr, jobs_run(dry)


def test_release_verify_and_tamper(default_run, tmp_path):
    release = _release(default_run)
    ok = subprocess.run(
        [sys.executable, "-m", "halluflow.cli", "release", "verify", str(release)], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    copy = tmp_path / "release"
    shutil.copytree(release, copy)
    image = sorted((copy / "images").glob("*.png"))[0]
    data = bytearray(image.read_bytes())
    data[len(data) // 2] ^= 0xFF
    image.write_bytes(bytes(data))
    bad = subprocess.run(
        [sys.executable, "-m", "halluflow.cli", "release", "verify", str(copy)], capture_output=True, text=True
    )
    assert bad.returncode != 0
    assert f"images/{image.name}" in bad.stdout + bad.stderr


def test_release_content(default_run):
    release = _release(default_run)
    scenes = pl.read_parquet(release / "scenes.parquet")
    queries = pl.read_parquet(release / "queries.parquet")
    assert set(scenes["distribution"]) == {"standard", "long_tail", "random", "fictional"}
    assert set(scenes["pair_kind"]) == {"entity_entity", "entity_environment"}
    assert (scenes.filter(pl.col("distribution") == "fictional")["cooccurrence"] == 0).all()
    edges = pl.read_parquet(default_run["dir"] / "results" / release.parent.name / "graph" / "edges.parquet")
    standard = scenes.filter(pl.col("distribution") == "standard")
    # Standard pairs are top-weighted edges: none is lighter than any unsampled edge of its pair kind would allow.
    assert standard["cooccurrence"].min() >= edges["weight"].sort(descending=True)[len(edges) // 10]
    # count questions are asked only where the scene fixes a number; the demo may have none
    assert {"generative", "existence", "attribute", "counterfactual"} <= set(queries["query_type"])
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["stand_ins_used"] is True


def test_every_default_model_is_scored(default_run, tmp_path):
    config = yaml.safe_load((default_run["dir"] / "config.yaml").read_text())
    out = default_run["dir"] / "results" / config["release"]
    for model in config["models"]:
        metrics = json.loads((out / "metrics" / f"{model['name']}.json").read_text())
        ref = _pope_from_answers(out, model["name"])
        # The workflow reads answers by the release's declared reader (unreadable answers are n_unknown, excluded):
        # every yes/no answer is either read or counted, and the task was not overridden.
        assert metrics["pope"]["n"] + metrics["pope"]["n_unknown"] == ref["n"], model["name"]
        assert not metrics["task"]["overridden"], model["name"]
        # The same raw answers read by POPE's evaluate.py rule (`score release --parser pope`) give exactly the
        # numbers of the independent recomputation below.
        shards = sorted((out / "answers" / model["name"]).glob("*.parquet"))
        answers = tmp_path / f"{model['name']}.parquet"
        pl.concat([pl.read_parquet(p) for p in shards], how="diagonal_relaxed").write_parquet(answers)
        scored = tmp_path / f"{model['name']}.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "halluflow.cli",
                "score",
                "release",
                str(answers),
                "--release",
                str(out / "release"),
                "--parser",
                "pope",
                "--out",
                str(scored),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        pope = json.loads(scored.read_text())["pope"]
        assert {k: pope.get(k) for k in ref} == pytest.approx(ref), model["name"]


def _pope_from_answers(out, model: str) -> dict:
    """POPE recomputed from the run's raw answer shards and the queries' truth, with RUCAIBox/POPE evaluate.py's
    parser (first sentence, no commas, a word 'No'/'not'/'no' → no) and its formulas; failed and empty answers
    left out."""
    answers = pl.concat(
        [pl.read_parquet(p) for p in sorted((out / "answers" / model).glob("*.parquet"))], how="diagonal_relaxed"
    ).filter(pl.col("status") == "ok")
    # A failed or empty answer is never a prediction (docs/failed-answers.md): left out before POPE's parser.
    answers = answers.filter(pl.col("answer").str.strip_chars() != "")
    queries = pl.read_parquet(out / "queries" / "queries.parquet").filter(pl.col("query_type") != "generative")
    rows = answers.join(queries.select("query_id", "truth"), on="query_id").to_dicts()
    pred = [
        "no" if {"No", "not", "no"} & set(r["answer"].split(".")[0].replace(",", "").split(" ")) else "yes"
        for r in rows
    ]
    from collections import Counter

    c = Counter(zip(pred, (r["truth"] for r in rows)))
    tp, fp, tn, fn = c["yes", "yes"], c["yes", "no"], c["no", "no"], c["no", "yes"]
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = (
        2 * precision * recall / (precision + recall)
        if precision and recall
        else 0.0
        if precision is not None and recall is not None
        else None
    )
    return {
        "n": len(rows),
        "tp": tp,
        "fp": fp,
        "tn": tn,
        "fn": fn,
        "accuracy": (tp + tn) / len(rows),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "yes_ratio": (tp + fp) / len(rows),
        "pred_yes": tp + fp,
        "pred_no": tn + fn,
        "truth_yes": tp + fn,
        "truth_no": fp + tn,
        "n_unknown": 0,
    }
