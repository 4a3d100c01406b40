"""ODE scoring: per-answer table and breakdowns on a hand-made release (numbers checkable by hand), rule glue."""

from __future__ import annotations

import json

import polars as pl
import pytest

from halluflow.errors import InputError
from halluflow.io import write_parquet
from halluflow.ode.scoring import ConceptMatcher, ode_metrics, run_score, score_answers

Q_SCHEMA = {
    "query_id": pl.String,
    "distribution": pl.String,
    "pair_kind": pl.String,
    "task": pl.String,
    "query_type": pl.String,
    "attribute_kind": pl.String,
    "truth": pl.String,
    "target": pl.String,
    "objects": pl.List(pl.String),
}


def _queries():
    ee, env = "entity_entity", "entity_environment"
    rows = [
        # id, distribution, pair_kind, query_type, attribute_kind, truth, target
        ("q1", "standard", ee, "existence", None, "yes", "dog"),
        ("q2", "standard", ee, "existence", None, "no", "cat"),
        ("q3", "standard", ee, "attribute", "state", "yes", "dog"),
        ("q4", "fictional", env, "existence", None, "yes", "pig"),
        ("q5", "fictional", env, "counterfactual", None, "no", "dragon"),
        ("q6", "fictional", env, "count", "count", "no", "pig"),
        ("g1", "standard", ee, "generative", None, None, None),
        ("g2", "fictional", env, "generative", None, None, None),
    ]
    objects = {"standard": ["dog", "frisbee"], "fictional": ["pig", "beach"]}
    return pl.DataFrame(
        [
            {
                "query_id": r[0],
                "distribution": r[1],
                "pair_kind": r[2],
                "task": "generative" if r[3] == "generative" else "discriminative",
                "query_type": r[3],
                "attribute_kind": r[4],
                "truth": r[5],
                "target": r[6],
                "objects": objects[r[1]],
            }
            for r in rows
        ],
        schema=Q_SCHEMA,
    )


def _answers(**override):
    answers = {
        "q1": "Yes, there is a dog.",
        "q2": "Yes.",
        "q3": "No, it is not.",
        "q4": "yes",
        "q5": "No.",
        "q6": "Maybe there are two.",
        "g1": "Two dogs play with a frisbee near a cat.",
        "g2": "A pig on the beach.",
    }
    answers.update(override)
    return pl.DataFrame(
        {
            "query_id": list(answers),
            "model": "m",
            "answer": list(answers.values()),
            "status": ["failed" if a is None else "ok" for a in answers.values()],
            "stand_in": True,
        }
    )


VOCAB = ["dog", "cat", "frisbee", "pig", "beach", "hot dog", "dragon"]


def test_concept_matcher_longest_phrase_and_plurals():
    m = ConceptMatcher(VOCAB)
    assert m.mentions("Two hot dogs, three dogs and cats.") == ["hot dog", "dog", "cat"]
    assert m.canonical("Dogs") == "dog"


def test_per_answer_table_by_hand():
    scored = score_answers(_queries(), _answers(), VOCAB)
    by = {r["query_id"]: r for r in scored.to_dicts()}
    assert [by[q]["parsed"] for q in ("q1", "q2", "q3", "q4", "q5", "q6")] == ["yes", "yes", "no", "yes", "no", "yes"]
    assert [by[q]["correct"] for q in ("q1", "q2", "q3", "q4", "q5", "q6")] == [True, False, False, True, True, False]
    assert by["g1"]["mentioned"] == ["dog", "frisbee", "cat"] and by["g1"]["hallucinated_objects"] == ["cat"]
    assert by["g1"]["hallucinated"] is True and by["g2"]["hallucinated"] is False
    assert by["g1"]["n_truth_covered"] == 2 and scored["stand_in"].all()


def test_metrics_by_hand():
    m = ode_metrics(score_answers(_queries(), _answers(), VOCAB), "m")
    # yes/no: TP q1,q4; FP q2,q6; FN q3; TN q5 → acc 3/6, P 2/4, R 2/3, yes-ratio 4/6
    assert (m["pope"]["tp"], m["pope"]["fp"], m["pope"]["fn"], m["pope"]["tn"]) == (2, 2, 1, 1)
    assert m["pope"]["accuracy"] == 0.5 and m["pope"]["precision"] == 0.5
    assert m["pope"]["recall"] == pytest.approx(2 / 3) and m["pope"]["yes_ratio"] == pytest.approx(4 / 6)
    # generative: g1 names cat (not in scene) → CHAIR_s 1/2, CHAIR_i 1/5, coverage 4/4
    assert m["generative"]["chair_s"] == 0.5 and m["generative"]["chair_i"] == 0.2
    assert m["generative"]["coverage"] == 1.0
    # hallucinated answers: q2, q3, q6, g1 of 8 judged
    assert m["hallucination_rate"] == 0.5 and m["stand_in"] is True
    std, fic = m["by_distribution"]["standard"], m["by_distribution"]["fictional"]
    assert std["hallucination_rate"] == 0.75 and fic["hallucination_rate"] == 0.25  # q2,q3,g1 / 4; q6 / 4
    assert m["by_query_type"]["counterfactual"]["pope"]["accuracy"] == 1.0
    assert m["by_attribute_kind"]["state"]["pope"]["accuracy"] == 0.0
    assert set(m["by_attribute_kind"]) == {"state", "count", "none"}
    assert m["by_distribution_query_type"]["standard/existence"]["pope"]["accuracy"] == 0.5
    assert set(m["by_pair_kind"]) == {"entity_entity", "entity_environment"}
    # ODE's own scorer = AMBER's counters ('No' positive, 0.001 denominators, percent): existence q1 q2 q4 q5 (+
    # counterfactual) → acc 3/4.001, P 1/1.001 (q5), R 1/2.001 (q2 missed), F1 with AMBER's existence epsilon
    ex = m["amber"]["existence"]
    assert (ex["accuracy"], ex["precision"], ex["recall"]) == (75.0, 99.9, 50.0)
    assert ex["f1"] == round(2 * 0.999 * 0.5 / (0.999 + 0.5 + 0.001) * 100, 1) == 66.6
    assert m["amber"]["generative"] == {"chair": 20.0, "cover": 100.0, "hal": 50.0, "n": 2}


def test_failed_and_unparsed_answers_are_not_judged():
    scored = score_answers(_queries(), _answers(q1=None, q6="dunno"), VOCAB, parser="vlmevalkit")
    m = ode_metrics(scored, "m", parser="vlmevalkit")
    assert m["n_failed"] == 1 and m["n_unknown"] == 1
    row = scored.filter(pl.col("query_id") == "q6").to_dicts()[0]
    assert row["parsed"] is None and row["correct"] is False and row["hallucinated"] is None
    # the POPE block counts the failed yes/no answer it left out (q1): one n_failed meaning everywhere
    assert m["pope"]["n"] == 5 and m["pope"]["n_unknown"] == 1 and m["pope"]["n_failed"] == 1


def test_bad_inputs_named():
    with pytest.raises(InputError, match="query_id 'zz' is not in the queries table"):
        score_answers(
            _queries(), pl.concat([_answers(), _answers().head(1).with_columns(query_id=pl.lit("zz"))]), VOCAB
        )
    with pytest.raises(InputError, match="'q1' answered more than once"):
        score_answers(_queries(), pl.concat([_answers(), _answers().head(1)]), VOCAB)
    with pytest.raises(InputError, match="answers table lacks column.*status"):
        score_answers(_queries(), _answers().drop("status"), VOCAB)
    with pytest.raises(InputError, match="scoring.breakdowns: unknown column"):
        ode_metrics(score_answers(_queries(), _answers(), VOCAB), "m", breakdowns=["colour"])


def test_run_score_writes_deterministic_files(tmp_path):
    write_parquet(tmp_path / "queries.parquet", _queries())
    write_parquet(tmp_path / "nodes.parquet", pl.DataFrame({"node": ["dog", "cat", "frisbee", "pig", "beach"]}))
    answers = _answers()
    paths = []
    for i, part in enumerate((answers.head(4), answers.tail(4))):
        paths.append(str(tmp_path / f"{i:03d}.parquet"))
        write_parquet(paths[-1], part)
    outs = []
    for run in ("a", "b"):
        m = run_score(
            paths,
            str(tmp_path / "queries.parquet"),
            str(tmp_path / "nodes.parquet"),
            str(tmp_path / run / "answers.parquet"),
            str(tmp_path / run / "m.json"),
            "m",
            {"parser": "pope"},
        )
        outs.append(((tmp_path / run / "answers.parquet").read_bytes(), (tmp_path / run / "m.json").read_bytes()))
    assert outs[0] == outs[1]
    assert json.loads(outs[0][1])["pope"]["accuracy"] == m["pope"]["accuracy"] == 0.5
    with pytest.raises(InputError, match="rows of model 'm'"):
        run_score(
            paths,
            str(tmp_path / "queries.parquet"),
            str(tmp_path / "nodes.parquet"),
            str(tmp_path / "x.parquet"),
            str(tmp_path / "x.json"),
            "other",
            {},
        )


def test_score_rule_through_snakemake(tmp_path, repo):
    """The `score` rule itself (rules/score.smk + scripts/score.py), on the answer shards of a hand-made release."""
    import shutil
    import subprocess
    import sys

    root = tmp_path / "results" / "wf-test"
    write_parquet(root / "queries" / "queries.parquet", _queries())
    write_parquet(root / "graph" / "nodes.parquet", pl.DataFrame({"node": ["dog", "cat", "frisbee", "pig", "beach"]}))
    from halluflow.config import load_config

    n_shards = load_config(repo / "config.yaml")["shards"]["answers"]  # the rule asks for every answer shard
    answers = _answers().with_row_index("i")
    for k in range(n_shards):
        part = answers.filter(pl.col("i") % n_shards == k).drop("i")
        write_parquet(root / "answers" / "m" / f"{k:03d}.parquet", part)
    shutil.copy(repo / "config.yaml", tmp_path / "config.yaml")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(repo / "Snakefile"),
            "--cores",
            "1",
            "--allowed-rules",
            "score",
            "--config",
            "release=wf-test",
            "--",
            "results/wf-test/metrics/m.json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads((root / "metrics" / "m.json").read_text())
    assert metrics["pope"]["accuracy"] == 0.5 and metrics["stand_in"] is True
    assert pl.read_parquet(root / "scores" / "m" / "answers.parquet").height == 8
    assert "scored 8 answers of m" in (tmp_path / "logs" / "wf-test" / "score" / "m.log").read_text()


def test_generative_truth_is_scene_plus_detected_objects_through_synonyms():
    """Hand-worked captions for an image of a person in a hat where the detector also confirmed grass."""
    from halluflow.ode.scoring import default_synonyms

    captions = {
        "c1": "A man wearing a hat stands on the grass.",  # man = person (CHAIR synonym), grass seen by the detector
        "c2": "Two people with hats.",  # plural synonym of person
        "c3": "A woman in a hat walks a dog under the sky.",  # no dog in the scene; the sky was never confirmed
        "c4": "A guy and a boy.",  # both persons; the hat is not mentioned
    }
    queries = pl.DataFrame(
        {
            "query_id": list(captions),
            "distribution": "standard",
            "pair_kind": "entity_entity",
            "task": "generative",
            "query_type": "generative",
            "attribute_kind": None,
            "truth": None,
            "target": None,
            "objects": [["person", "hat"]] * 4,
            "detected": [["grass", "hat", "person"]] * 4,
        },
        schema={**Q_SCHEMA, "detected": pl.List(pl.String)},
    )
    answers = pl.DataFrame(
        {"query_id": list(captions), "model": "m", "answer": list(captions.values()), "status": "ok"}
    )
    vocab = ["person", "hat", "grass", "sky", "dog", "man", "woman"]

    def judged(mode):
        scored = score_answers(queries, answers, vocab, synonyms=default_synonyms(), generative_truth=mode)
        return {
            r["query_id"]: (r["mentioned"], r["hallucinated_objects"], r["n_truth_covered"]) for r in scored.to_dicts()
        }

    detected = judged("detected")
    assert detected["c1"] == (["man", "hat", "grass"], [], 2)
    assert detected["c2"][1:] == ([], 2)
    assert detected["c3"] == (["woman", "hat", "dog", "sky"], ["dog", "sky"], 2)
    assert detected["c4"] == (["guy", "boy"], [], 1)
    scene = judged("scene")  # the strict variant: only the scene's own objects support a mention
    assert scene["c1"][1] == ["grass"] and scene["c3"][1] == ["dog", "sky"] and scene["c4"][1] == []
    # without the synonym table a man is not a person: the behaviour this replaces
    plain = score_answers(queries, answers, vocab, generative_truth="scene").filter(pl.col("query_id") == "c1")
    assert plain["hallucinated_objects"].to_list() == [["man", "grass"]]
    with pytest.raises(InputError, match="scoring.generative_truth': unknown value 'boxes'"):
        score_answers(queries, answers, vocab, generative_truth="boxes")
