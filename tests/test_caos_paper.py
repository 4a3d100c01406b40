"""CAOS as its paper means it: the MSCOCO training-frequency list for CAOS_K, POPE-F1 over existence questions,
negation-aware extraction, out-of-domain objects (open vocabulary) and the loud no-oracle warning."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
from helpers import shared_data

from halluflow.caos.extract import (
    COCO_FREQUENCY,
    OPEN_VOCABULARY,
    ObjectExtractor,
    build_vocabulary,
    derive_coco_frequency,
    derive_open_vocabulary,
    read_frequency,
)
from halluflow.caos.scores import judge_caption, metrics_side_by_side, ood_warning, score_release_answers
from halluflow.cli import main
from halluflow.errors import InputError


@pytest.fixture(scope="module")
def extractor():
    return ObjectExtractor(build_vocabulary(graph_terms=["dog", "frisbee", "grass", "sky"], open_vocabulary=True))


@pytest.mark.parametrize(
    "caption, present, absent",
    [
        ("There is no dog.", [], ["dog"]),
        ("There's no cat on the sofa.", ["couch"], ["cat"]),
        ("A man without a hat throws a frisbee.", ["person", "frisbee"], ["hat"]),
        ("A dog, but no cats or birds, under a lamp.", ["dog", "lamp"], ["bird", "cat"]),
        ("There isn't any dog in the grass.", ["grass"], ["dog"]),
        # A negated verb says nothing about the object after the preposition.
        ("The dog is not sleeping on the couch.", ["dog", "couch"], []),
        ("No people are visible, only a dog.", ["dog"], ["person"]),
    ],
)
def test_negation_is_read_as_a_reader_would(extractor, caption, present, absent):
    e = extractor.extract(caption)
    assert [o.name for o in e.objects] == present
    assert e.negated == sorted(absent)


def test_chair_reading_keeps_negated_mentions():
    ex = ObjectExtractor(build_vocabulary(graph_terms=["dog"]), negation="ignore")
    assert [o.name for o in ex.extract("There is no dog.").objects] == ["dog"]


def test_open_vocabulary_finds_out_of_domain_objects(extractor):
    objs = extractor.extract("A man in a red shirt throws a frisbee near a lighthouse.").objects
    assert [(o.name, o.in_domain) for o in objs] == [
        ("person", True),
        ("shirt", False),
        ("frisbee", True),
        ("lighthouse", False),
    ]


def test_no_oracle_warning_and_exclude_policy(extractor):
    objs = extractor.extract("A dog next to a lighthouse.").objects
    vocab = extractor.vocabulary
    counted = judge_caption("c", "i", objs, ["dog"], vocab)
    assert counted.hallucinated == [False, True]
    warning = ood_warning([counted], oracle_ran=False, policy="hallucinated")
    assert warning.startswith(
        "1 out-of-domain object mention(s) were judged WITHOUT an oracle: counted as hallucinated"
    )
    excluded = judge_caption("c", "i", objs, ["dog"], vocab, ood_without_oracle="exclude")
    assert excluded.hallucinated == [False, None] and excluded.judged_by == ["truth", "none"]
    assert ood_warning([counted], oracle_ran=True, policy="hallucinated") is None


def test_release_summary_carries_the_warning(extractor, caplog):
    queries = pl.DataFrame(
        {"query_id": ["q1"], "image_id": ["i1"], "query_type": ["generative"], "objects": [["dog", "grass"]]}
    )
    answers = pl.DataFrame(
        {
            "query_id": ["q1"],
            "answer": ["A dog on the grass beside a lighthouse, no cat."],
            "status": ["ok"],
            "stand_in": [False],
        }
    )
    nodes = pl.DataFrame({"node": ["dog", "grass"], "frequency": [3, 2]})

    class Unit:  # every phrase the same direction: cosines are 1.0 wherever defined
        def embed(self, texts):
            import numpy as np

            return np.ones((len(texts), 2))

        def describe(self):
            from halluflow.backends.base import BackendInfo

            return BackendInfo(role="embedder", backend="unit", model="unit")

    summary, objects, _ = score_release_answers(
        answers,
        queries,
        nodes,
        release_dir=None,
        extractor=extractor,
        embedders={"unit": Unit()},
        frequent=read_frequency(COCO_FREQUENCY),
    )
    assert objects["object"].to_list() == ["dog", "grass", "lighthouse"]
    assert summary["warnings"] and "WITHOUT an oracle" in summary["warnings"][0]
    assert "WITHOUT an oracle" in caplog.text
    assert summary["extraction"]["negated_mentions_left_out"] == 1
    assert summary["frequent_top"][:3] == ["person", "chair", "car"]


def test_coco_frequency_list_is_shipped_and_ordered():
    top = read_frequency(COCO_FREQUENCY)
    assert len(top) == 80 and top[:3] == ["person", "chair", "car"]


def test_caos_k_with_the_coco_list_by_hand(tmp_path, capsys):
    # Hand vectors: person (1,0), chair (0,1), car (1,1); the hallucinated "cat" is (3,4).
    # CAOS_K(k=3) = max(cos(cat, person), cos(cat, chair), cos(cat, car)) = max(0.6, 0.8, 7/(5*sqrt 2)) = 0.98995.
    # CAOS_T = cos(cat, dog (0,1)) = 0.8. CAOS_K(k=1) = cos(cat, person) = 0.6.
    vectors = tmp_path / "v.tsv"
    rows = {"person": (1, 0), "chair": (0, 1), "car": (1, 1), "cat": (3, 4), "dog": (0, 1)}
    vectors.write_text("".join(f"{w}\t{a}\t{b}\n" for w, (a, b) in rows.items()))
    (tmp_path / "o.jsonl").write_text(json.dumps({"image_id": "1", "objects": ["dog", "cat"]}) + "\n")
    (tmp_path / "t.jsonl").write_text(json.dumps({"image_id": "1", "objects": ["dog"]}) + "\n")
    args = [
        "score",
        "caos",
        "--objects",
        str(tmp_path / "o.jsonl"),
        "--truth",
        str(tmp_path / "t.jsonl"),
        "--embedder",
        "table",
        "--vectors",
        str(vectors),
        "--k",
        "3",
    ]
    assert main(args) == 0  # --frequent defaults to the shipped MSCOCO list
    out = json.loads(capsys.readouterr().out)
    assert out["caos_k"] == pytest.approx(7 / (5 * math.sqrt(2)), abs=1e-4)
    assert out["caos_t"] == pytest.approx(0.8, abs=1e-4)
    assert out["caos_k_sweep"]["1"] == pytest.approx(0.6, abs=1e-4)


def test_pope_f1_is_read_from_existence_questions():
    metrics = {
        "pope": {"f1": 0.5},
        "by_query_type": {"existence": {"pope": {"f1": 0.9}}, "attribute": {"pope": {"f1": 0.1}}},
        "generative": {"chair_s": 0.3, "chair_i": 0.2},
    }
    out = metrics_side_by_side(metrics, "m.json")
    assert out["pope_f1"] == 0.9 and out["paths"]["pope_f1"] == "by_query_type.existence.pope.f1"
    assert out["chair_s"] == 0.3


def _scored(rows):
    base = {"failed": False, "stand_in": False, "attribute_kind": None, "n_mentions": 0, "n_hallucinated": 0}
    base.update(n_truth=0, n_truth_covered=0)
    cols = ("distribution", "query_type", "truth", "parsed")
    return pl.DataFrame(
        [{**base, **dict(zip(cols, r)), "correct": r[2] == r[3], "hallucinated": r[2] != r[3]} for r in rows]
    )


def test_pope_f1_pools_every_existence_question_not_one_slice():
    """The failing example: the real ODE metrics JSON holds existence F1 for all existence questions
    (by_query_type.existence) and per distribution (by_distribution_query_type.fictional/existence, ...). Ranking
    paths by the words they name tied the two, and the alphabet picked the fictional slice (F1 1.0). POPE-F1 is
    over all 8 existence answers: TP 3, FP 1, FN 1 -> 2*3 / (2*3 + 1 + 1) = 0.75."""
    from halluflow.ode.scoring import ode_metrics

    rows = [("fictional", "existence", t, t) for t in ("yes", "yes", "no", "no")]  # all right
    rows += [("standard", "existence", t, p) for t, p in (("yes", "no"), ("yes", "yes"), ("no", "yes"), ("no", "no"))]
    rows += [("standard", "attribute", "yes", "no"), ("standard", "attribute", "no", "yes")]  # not existence
    metrics = ode_metrics(_scored(rows), "m", breakdowns=("distribution", "query_type"))
    assert metrics["by_distribution_query_type"]["fictional/existence"]["pope"]["f1"] == 1.0  # the old pick
    assert metrics["pope"]["f1"] == pytest.approx(0.6)  # every yes/no question: not POPE-F1 either
    out = metrics_side_by_side(metrics, "metrics/m.json")
    assert out["pope_f1"] == 0.75 and out["paths"]["pope_f1"] == "by_query_type.existence.pope.f1"
    assert out["scope"]["pope_f1"] == "every existence question (all distributions)"


def test_pope_f1_scope_is_said_and_never_borrowed_from_other_questions():
    # An ODE release without existence questions has no POPE-F1: null, never the attribute F1.
    no_existence = {"pope": {"f1": 0.4}, "by_query_type": {"attribute": {"pope": {"f1": 0.4}}}}
    out = metrics_side_by_side(no_existence, "m.json")
    assert out["pope_f1"] is None and "pope_f1" not in out["paths"]
    assert out["scope"]["pope_f1"] == "no existence questions in these metrics"
    # A POPE source's F1 is over existence questions only; the scope says so.
    pope = metrics_side_by_side({"source": "pope", "pope": {"f1": 0.8}}, "m.json")
    assert (pope["pope_f1"], pope["paths"]["pope_f1"]) == (0.8, "pope.f1")
    assert pope["scope"]["pope_f1"] == "every POPE question (all ask about existence)"
    # A COCO source's CHAIR block; a value that is not a number is one line naming the file and the path.
    coco = metrics_side_by_side({"source": "coco", "chair": {"chair_s": 0.5, "chair_i": 0.25}}, "m.json")
    assert (coco["chair_s"], coco["chair_i"], coco["paths"]["chair_i"]) == (0.5, 0.25, "chair.chair_i")
    with pytest.raises(InputError, match=r"^m.json: by_query_type.existence.pope.f1: expected a number"):
        metrics_side_by_side({"by_query_type": {"existence": {"pope": {"f1": "high"}}}}, "m.json")


def test_shipped_resources_rederive_byte_exact(tmp_path):
    counts = shared_data("ml-gcn-coco-cooccurrence", "coco_train2014_categories.tsv")
    assert derive_coco_frequency(counts, tmp_path / "f.tsv") == 80
    assert (tmp_path / "f.tsv").read_bytes() == COCO_FREQUENCY.read_bytes()
    vocab = shared_data("visual-genome-bottom-up-vocab", "objects_vocab.txt")
    derive_open_vocabulary(vocab, tmp_path / "o.tsv")
    assert (tmp_path / "o.tsv").read_bytes() == OPEN_VOCABULARY.read_bytes()


def test_no_oracle_warning_reaches_the_report(tmp_path):
    from halluflow.report.summary import build_summary

    root = tmp_path / "results" / "r"
    (root / "caos").mkdir(parents=True)
    (root / "metrics").mkdir()
    (root / "metrics" / "m.json").write_text(json.dumps({"model": "m", "pope": {"f1": 0.5}}))
    doc = {
        "embedders": {"glove": {"caos_t": 0.4, "caos_x": 0.3, "caos_k": 0.2}},
        "warnings": ["3 out-of-domain object mention(s) were judged WITHOUT an oracle: counted as hallucinated"],
    }
    (root / "caos" / "m.json").write_text(json.dumps(doc))
    html = build_summary(root, tmp_path / "s.html").read_text()
    assert 'class="warn">CAOS, m: 3 out-of-domain object mention(s) were judged WITHOUT an oracle' in html
