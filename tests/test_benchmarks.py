"""The Benchmark protocol (halluflow.benchmarks): one module per benchmark, found by kind, and a static set added as
one small module — RePOPE-style corrected POPE labels (Neuhaus & Hein, "RePOPE: Impact of Annotation Errors on the
POPE Benchmark") read from a user-supplied file, answered and scored through the same calls as POPE.

The expected numbers are counted by hand here (confusion counts of the corrected labels), not by halluflow's scorer.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml
from helpers import OBJECTS, write_pope_set

from halluflow.benchmarks import Benchmark, get, names
from halluflow.errors import ConfigError
from halluflow.sources import load_source
from halluflow.workflow.score import score_source

ROOT = Path(__file__).resolve().parents[1]


def test_every_module_is_a_benchmark_and_the_schema_lists_exactly_them():
    schema = yaml.safe_load((ROOT / "schemas/config.schema.yaml").read_text())
    kind = schema["properties"]["answer"]["properties"]["source"]["properties"]["kind"]
    assert list(names()) == kind["enum"] and names()[:4] == ("ode", "pope", "amber", "coco")
    for name in names():
        bench = get(name)
        assert isinstance(bench, Benchmark) and bench.name == name and bench.label and bench.scores_key
    assert [n for n in names() if get(n).yes_no] == ["pope", "amber", "repope"]
    assert [get(n).answer_suffix for n in names()] == ["jsonl", "jsonl", "json", "jsonl", "jsonl"]
    with pytest.raises(
        ConfigError, match=r"^answer.source.kind 'mme': expected one of ode, pope, amber, coco, repope$"
    ):
        get("mme")


def _repope(tmp_path: Path) -> tuple[Path, Path, dict]:
    """The POPE set of tests/helpers.py and a corrected copy: question 1's label flipped, question 4 removed."""
    pope = write_pope_set(tmp_path / "pope")
    rows = [json.loads(line) for line in (pope / "pope.jsonl").read_text().splitlines()]
    fixed = [dict(r, label="no" if r["label"] == "yes" else "yes") if r["question_id"] == 1 else r for r in rows]
    fixed = [r for r in fixed if r["question_id"] != 4]
    (tmp_path / "repope.json").write_text(json.dumps(fixed))  # a JSON array, as the RePOPE files are
    truth = {str(r["question_id"]): r["label"] for r in fixed}
    return pope, tmp_path / "repope.json", truth


def test_repope_asks_the_corrected_set_and_scores_against_its_labels(tmp_path):
    pope, repope, truth = _repope(tmp_path)
    source = {"kind": "repope", "path": str(repope), "images": str(pope / "images"), "annotations": None}
    queries, root = load_source("repope", repope, pope / "images")
    assert dict(zip(queries["query_id"], queries["truth"])) == truth and root == pope / "images"
    assert queries["target"].to_list() == [o for i, o in enumerate(OBJECTS) if i != 4]
    with pytest.raises(ConfigError, match="answer.source.images: a repope source needs"):
        load_source("repope", repope)

    # the model says yes to every question: on the corrected labels that is TP = yes-labels, FP = no-labels
    answered = [q for q in truth if q != "5"] + ["5"]
    shard = tmp_path / "000.parquet"
    statuses = ["ok"] * (len(answered) - 1) + ["failed"]  # question 5's request failed: left out, never a "no"
    pl.DataFrame(
        {"query_id": answered, "model": "m", "answer": "Yes", "status": statuses, "stand_in": False}
    ).write_parquet(shard)
    scoring = {"parser": "pope", "positive": "yes"}
    out = tmp_path / "answers.jsonl"
    with_original = {**source, "annotations": str(pope / "pope.jsonl")}
    metrics = score_source("repope", [str(shard)], with_original, out, tmp_path / "m.json", "m", scoring)
    judged = {q: t for q, t in truth.items() if q != "5"}
    yes = sum(t == "yes" for t in judged.values())
    assert metrics["source"] == "repope" and metrics["models_lock"] is None
    assert metrics["n_answers"] == len(answered) and metrics["n_requests_failed"] == 1
    assert metrics["pope"]["n"] == len(judged) and metrics["pope"]["accuracy"] == pytest.approx(yes / len(judged))
    assert metrics["pope"]["precision"] == pytest.approx(yes / len(judged)) and metrics["pope"]["recall"] == 1.0
    assert metrics["pope"]["relabelled"] == {"n_changed": 1, "n_removed": 1, "n_original": len(OBJECTS)}
    # the answers file is POPE's own format, with the file's integer ids
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["question_id"] for r in written} == {int(q) for q in answered}
    assert all(set(r) <= {"question_id", "answer", "status"} for r in written)
    assert json.loads((tmp_path / "m.json").read_text()) == metrics

    # the same answers scored as plain POPE differ exactly by the relabelled question (1: yes -> no)
    plain = score_source(
        "pope", [str(shard)], {"kind": "pope", "path": str(pope / "pope.jsonl")}, out, tmp_path / "p.json", "m", scoring
    )
    assert plain["pope"]["n"] == metrics["pope"]["n"] and "relabelled" not in plain["pope"]
    original = {
        str(r["question_id"]): r["label"] for r in map(json.loads, (pope / "pope.jsonl").read_text().splitlines())
    }
    pope_yes = sum(original[q] == "yes" for q in judged)
    assert plain["pope"]["accuracy"] == pytest.approx(pope_yes / len(judged)) and pope_yes == yes + 1


def test_a_models_lock_is_recorded_in_a_static_benchmark_metrics_file(tmp_path, monkeypatch):
    from halluflow.models.fetch import LOCK_ENV

    pope, repope, truth = _repope(tmp_path)
    lock = tmp_path / "models.lock.json"
    lock.write_text(json.dumps({"version": 1, "models": [{"repo": "a/b", "revision": "main", "commit": "c" * 40}]}))
    monkeypatch.setenv(LOCK_ENV, str(lock))
    shard = tmp_path / "000.parquet"
    pl.DataFrame({"query_id": list(truth), "model": "m", "answer": "No", "status": "ok"}).write_parquet(shard)
    source = {"kind": "repope", "path": str(repope), "annotations": None}
    metrics = score_source(
        "repope",
        [str(shard)],
        source,
        tmp_path / "a.jsonl",
        tmp_path / "m.json",
        "m",
        {"parser": "pope", "positive": "yes"},
    )
    assert metrics["models_lock"]["models"] == {"a/b": {"revision": "main", "commit": "c" * 40}}
    assert "relabelled" not in metrics["pope"]  # no original file given: nothing to compare
