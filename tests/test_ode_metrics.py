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


@pytest.mark.slow  # runs the score rule through Snakemake
def test_score_rule_through_snakemake(tmp_path, repo):
    """The `score` rule itself (rules/score.smk, halluflow.workflow.score), on the answer shards of a hand-made release."""
    import shutil
    import subprocess
    import sys

    root = tmp_path / "results" / "wf-test"
    write_parquet(root / "queries" / "queries.parquet", _queries())
    # the release's manifest: the task it declares (its reader reads the answers)
    from halluflow.ode.task import task_definition

    (root / "release").mkdir(parents=True)
    (root / "release" / "manifest.json").write_text(json.dumps({"files": {}, "task": task_definition()}))
    write_parquet(root / "graph" / "nodes.parquet", pl.DataFrame({"node": ["dog", "cat", "frisbee", "pig", "beach"]}))
    # Cog's graph (G_H, the default scoring.cog_graph): g1's dog lists cat, which its caption names
    edges = {"source": pl.String, "target": pl.String, "weight": pl.Int64}
    write_parquet(
        root / "graph" / "hallu_edges.parquet",
        pl.DataFrame({"source": ["dog"], "target": ["cat"], "weight": [3]}, schema=edges),
    )
    write_parquet(root / "graph" / "edges.parquet", pl.DataFrame(schema=edges))
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
    # read by the release's declared reader (scoring.parser null): q6's hedge "Maybe there are two." is unknown and
    # left out (POPE's rule read it as yes: accuracy 0.5)
    assert metrics["pope"]["accuracy"] == 0.6 and metrics["n_unknown"] == 1 and metrics["stand_in"] is True
    assert metrics["parser"] == "release" and metrics["task"]["overridden"] is False
    assert metrics["amber"]["generative"]["cog"] == round(1 / 1.001 * 100, 1)  # g2's pig lists nothing
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


def _attribute_counterfactual_release():
    """An image of a camera and a toothbrush: object and attribute counterfactuals beside ordinary questions."""
    ee = "entity_entity"
    rows = [
        # id, query_type, attribute_kind, truth, answer
        ("e1", "existence", None, "yes", "Yes."),  # Is there a camera?
        ("e2", "existence", None, "no", "No."),  # Is there a person?
        ("c1", "counterfactual", None, "no", "Yes."),  # Is there a dragon? (object counterfactual)
        ("c2", "counterfactual", "state", "no", "No."),  # Is the camera narrow? (attribute counterfactual)
        ("a1", "attribute", "state", "yes", "Yes."),  # Is the camera black?
        ("a2", "attribute", "action", "no", "Yes."),  # Is the toothbrush flying?
        ("n1", "count", "count", "no", "No."),  # Are there two cameras?
    ]
    queries = pl.DataFrame(
        [
            {
                "query_id": r[0],
                "distribution": "fictional",
                "pair_kind": ee,
                "task": "discriminative",
                "query_type": r[1],
                "attribute_kind": r[2],
                "truth": r[3],
                "target": "camera",
                "objects": ["camera", "toothbrush"],
            }
            for r in rows
        ],
        schema=Q_SCHEMA,
    )
    answers = pl.DataFrame(
        {"query_id": [r[0] for r in rows], "model": "m", "answer": [r[4] for r in rows], "status": "ok"}
    )
    return queries, answers


def test_attribute_counterfactuals_are_attribute_questions_in_the_amber_block():
    queries, answers = _attribute_counterfactual_release()
    m = ode_metrics(score_answers(queries, answers, ["camera", "toothbrush"]), "m")
    amber = m["amber"]
    # existence = e1, e2, c1 (c2 asks about an attribute: state, not existence, as it was counted before)
    assert amber["existence"]["n"] == 3 and amber["state"]["n"] == 2 and amber["action"]["n"] == 1
    assert amber["number"]["n"] == 1 and amber["attribute"]["n"] == 4 and amber["overall"]["n"] == 7
    # existence by hand: correct e1 e2 → 2 / 3.001; No answered e2 (right) → P 1 / 1.001; truth No e2 c1 → R 1 / 2.001
    assert (amber["existence"]["accuracy"], amber["existence"]["precision"], amber["existence"]["recall"]) == (
        66.6,
        99.9,
        50.0,
    )
    # state: c2 (No, right) and a1 (Yes, right) → accuracy 2 / 2.001 = 99.95 → 100.0 (AMBER's rounding)
    assert amber["state"]["accuracy"] == round(2 / 2.001 * 100, 1)
    # the same block per query kind and per distribution × pair kind
    assert m["by_query_type"]["counterfactual"]["amber"]["existence"]["n"] == 1
    assert m["by_query_type"]["counterfactual"]["amber"]["state"]["n"] == 1
    assert m["by_distribution_pair_kind"]["fictional/entity_entity"]["amber"] == amber


def _cog_release():
    """Two captions; the scene of g1 is a dog with a frisbee and the detector also saw grass."""
    queries = (
        _queries()
        .filter(pl.col("query_type") == "generative")
        .with_columns(pl.Series("detected", [["grass"], []], dtype=pl.List(pl.String)))
    )
    hallu = pl.DataFrame(
        {
            "source": ["dog", "frisbee", "dog", "dog", "frisbee", "dog", "pig"],
            "target": ["cat", "dog", "grass", "person", "ball", "man", "mud"],
            "weight": [10, 9, 7, 8, 6, 5, 3],
        }
    )
    return queries, _answers().filter(pl.col("query_id").is_in(["g1", "g2"])), hallu


def test_cog_from_the_hallucination_graph_by_hand():
    from halluflow.ode.scoring import default_synonyms, prone_neighbours

    queries, answers, hallu = _cog_release()
    vocab = [*VOCAB, "person", "ball", "mud", "grass"]
    scored = score_answers(queries, answers, vocab, synonyms=default_synonyms(), prone=prone_neighbours(hallu))
    by = {r["query_id"]: r for r in scored.to_dicts()}
    # g1 (dog, frisbee): cat 10, frisbee→dog is a truth object, person 8, grass 7 was detected, ball 6, man 5 is a
    # person (one synonym class, listed once); g2 (pig, beach): mud 3
    assert by["g1"]["hallu_prone"] == ["cat", "person", "ball"] and by["g1"]["n_hallu_prone_mentioned"] == 1
    assert by["g2"]["hallu_prone"] == ["mud"] and by["g2"]["n_hallu_prone_mentioned"] == 0
    m = ode_metrics(scored, "m")
    # 1 named (cat) of 4 listed; AMBER's counter: 1 / (0.001 + 3 + 1) = 24.99 % → 25.0
    assert m["generative"]["cog"] == 0.25 and m["generative"]["n_hallu_prone"] == 4
    assert m["amber"]["generative"]["cog"] == 25.0
    assert m["by_distribution"]["fictional"]["generative"]["cog"] == 0.0
    two = score_answers(
        queries, answers, vocab, synonyms=default_synonyms(), prone=prone_neighbours(hallu), cog_objects=2
    )
    assert two.filter(pl.col("query_id") == "g1")["hallu_prone"].to_list() == [["cat", "person"]]
    # no graph given: no Cog anywhere (never a 0 that was not measured)
    plain = ode_metrics(score_answers(queries, answers, vocab), "m")
    assert "cog" not in plain["generative"] and "cog" not in plain["amber"]["generative"]
    # a graph without the scene's objects: Cog is undefined (null), its counts 0
    empty = ode_metrics(score_answers(queries, answers, vocab, prone={}), "m")
    assert empty["generative"]["cog"] is None and empty["amber"]["generative"]["cog"] is None


def test_run_score_reads_the_cog_graph_the_config_names(tmp_path):
    queries, answers, hallu = _cog_release()
    write_parquet(tmp_path / "queries.parquet", queries)
    write_parquet(tmp_path / "nodes.parquet", pl.DataFrame({"node": VOCAB}))
    write_parquet(tmp_path / "hallu.parquet", hallu)
    # co-occurrence edges are read both ways: beach–sand names sand for g2
    edges = pl.DataFrame({"source": ["cat", "sand"], "target": ["dog", "beach"], "weight": [4, 2]})
    write_parquet(tmp_path / "edges.parquet", edges)
    write_parquet(tmp_path / "a.parquet", answers)

    def run(**scoring):
        return run_score(
            [str(tmp_path / "a.parquet")],
            str(tmp_path / "queries.parquet"),
            str(tmp_path / "nodes.parquet"),
            str(tmp_path / "s.parquet"),
            str(tmp_path / "m.json"),
            "m",
            scoring,
            hallu_path=str(tmp_path / "hallu.parquet"),
            edges_path=str(tmp_path / "edges.parquet"),
        )

    assert run()["generative"]["n_hallu_prone"] == 4
    co = run(cog_graph="cooccurrence")["generative"]
    assert (co["cog"], co["n_hallu_prone"], co["n_hallu_prone_mentioned"]) == (0.5, 2, 1)  # cat named, sand not
    with pytest.raises(InputError, match="'scoring.cog_graph': unknown value 'coco'"):
        run(cog_graph="coco")


def test_every_cog_and_group_amber_number_is_catalogued():
    from halluflow.metrics.catalogue import entry_for_path
    from halluflow.ode.scoring import default_synonyms, prone_neighbours

    queries, answers, hallu = _cog_release()
    scored = score_answers(
        queries, answers, [*VOCAB, "person", "ball", "mud"], synonyms=default_synonyms(), prone=prone_neighbours(hallu)
    )
    doc = ode_metrics(scored, "m")

    def leaves(node, prefix=""):
        if isinstance(node, dict):
            for k, v in node.items():
                yield from leaves(v, f"{prefix}.{k}" if prefix else k)
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            yield prefix

    paths = list(leaves(doc))
    assert "by_distribution_pair_kind.standard/entity_entity.amber.generative.cog" in paths
    assert "by_distribution_pair_kind.standard/entity_entity.generative.n_hallu_prone" in paths
    assert [p for p in paths if entry_for_path(p) is None] == []
