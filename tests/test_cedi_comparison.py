"""CEDI's examiners x graders comparison: the POPE and LLM prompt-only examiners, the LLM-written adversarial and
false-premise questions (validated against the truth graph, templates as the fallback that says so), CHAIR and the
VALOR-style grader on transcripts, premise rejection, the paper's radar normalisation and the paper section.
Numbers are worked by hand in the comments."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest

from halluflow.backends.base import LLM, VLM, BackendInfo
from halluflow.cedi.comparison import (
    chair_on_answers,
    match_items,
    radius,
    valor_on_conversations,
    valor_scores,
)
from halluflow.cedi.examiner import Examiner, Scene
from halluflow.cedi.grader import premise_rejection
from halluflow.cedi.parser import TruthView, Vocabulary
from halluflow.cedi.pipeline import examine_model, grade_model
from halluflow.cedi.scene_graph import SceneGraph, Synonyms
from halluflow.errors import ConfigError
from halluflow.metrics.catalogue import CATALOGUE
from halluflow.models.registry import VLMS
from halluflow.report.cedi_comparison import write_section

TRUTH = SceneGraph.from_dict(
    {
        "objects": [
            {"id": "a", "name": "dog", "attributes": ["brown"]},
            {"id": "b", "name": "park", "attributes": []},
        ],
        "relations": [{"subject": "a", "predicate": "in", "object": "b"}],
    }
)


def vocab() -> Vocabulary:
    v = Vocabulary(synonyms=Synonyms.builtin())
    v.add_graph(TRUTH)
    for name in ("cat", "frisbee", "person", "car", "tree"):
        v.add(name)
    v.add("dog", ["black"])
    return v


def scene() -> Scene:
    return Scene("img", None, None, TRUTH, neighbours=["frisbee", "cat"], popular=["person", "dog", "car"])


class SayYesVLM(VLM):
    """Says yes to everything and names what the question named (a sycophant)."""

    def __init__(self, **_):
        pass

    def describe(self):
        return BackendInfo("vlm", "yes", "yes", stand_in=True)

    def answer(self, requests):
        out = []
        for r in requests:
            m = re.search(r"\b(?:a|an|the) ([a-z]+)", r.prompt.lower())
            out.append(f"Yes, the {m.group(1) if m else 'thing'} is there." if m else "Yes.")
        return out


VLMS.register("test_cedi_cmp_yes", f"{__name__}:SayYesVLM")


class WriterLLM(LLM):
    """Scripted examiner LLM: an absent-object question, a two-step false premise, prompt-only questions."""

    def __init__(self, adversarial=None, unanswerable=None):
        self.adversarial = adversarial or {"object": "Cat", "question": "For my story, is there a cat by the dog?"}
        self.unanswerable = unanswerable or {
            "premise": [{"object": "dog"}, {"subject": "frisbee", "predicate": "next to", "object": "dog"}],
            "question": "What colour is the frisbee next to the dog?",
        }
        self.seen: list[str] = []

    def describe(self):
        return BackendInfo("llm", "scripted", "scripted", stand_in=True)

    def chat(self, messages):
        system = messages[0]["content"]
        self.seen.append(system)
        if "NOT in the image but would" in system:
            return json.dumps(self.adversarial)
        if "FALSE premise" in system:
            return json.dumps(self.unanswerable)
        if "You know nothing about the photo" in system:
            return json.dumps({"question": "Is my dog happy out there?"})
        return "no idea"


def _run(examiners, llm=None, **cfg):
    settings = {"max_rounds": 6, "min_end_round": 6, "prompt_only_rounds": 2, "pope_objects": 2, **cfg}
    ex = Examiner(vocab(), settings, llm=llm, seed=0)
    return ex.run([scene()], SayYesVLM(), "m", examiners, ["with"])


def test_pope_examiner_asks_existence_with_three_negative_strategies():
    rows = _run(["pope"])
    # 2 truth objects (yes) + 2 random + 2 popular (person, car: dog is in the image) + 2 adversarial (frisbee, cat)
    kinds = sorted(r["question_type"] for r in rows)
    assert kinds == ["pope_adversarial"] * 2 + ["pope_popular"] * 2 + ["pope_random"] * 2 + ["pope_yes"] * 2
    by = {r["question_type"]: [] for r in rows}
    for r in rows:
        by[r["question_type"]].append(r["probe"].split("|")[1])
        assert re.fullmatch(r"Is there an? [a-z]+ in the image\?", r["question"])
        assert r["truth"] == ("yes" if r["question_type"] == "pope_yes" else "no") and r["history"] == "without"
    assert sorted(by["pope_yes"]) == ["dog", "park"]
    assert sorted(by["pope_popular"]) == ["car", "person"]  # the asked order is shuffled
    assert sorted(by["pope_adversarial"]) == ["cat", "frisbee"]
    assert not {"dog", "park"} & set(by["pope_random"])
    # the sycophant says yes to all: the 6 "no" questions are hallucinations, the 2 "yes" ones are right
    assert sum(bool(r["hallucinated"]) for r in rows) == 6


def test_llm_writes_adversarial_and_false_premise_questions_from_the_scene_graph():
    llm = WriterLLM()
    rows = _run(
        ["cedi"],
        llm=llm,
        question_writer="llm",
        switch_weights={"regular": 0, "follow_up": 0, "adversarial": 1, "unanswerable": 1, "end": 0},
        max_rounds=10,  # enough seeded draws for both types
        min_end_round=10,
    )
    adv = [r for r in rows if r["question_type"] == "adversarial"]
    fp = [r for r in rows if r["question_type"] == "unanswerable"]
    assert adv and fp
    first = adv[0]  # the LLM's absent object, asked as written; truth "no"
    assert first["question_source"] == "llm_generated" and first["probe"] == "object|cat" and first["truth"] == "no"
    # the two-step premise: the false element (the frisbee is not there) is the hinge, the true one follows
    assert fp[0]["question_source"] == "llm_generated"
    assert fp[0]["premise"] == ["relation|frisbee|next to|dog", "object|dog"] and fp[0]["false_premise"]
    assert fp[0]["hallucinated"] is True  # the sycophant answers as if the frisbee were there
    # the scene graph was in the request
    assert any("NOT in the image" in s for s in llm.seen)


@pytest.mark.parametrize(
    "kind, reply",
    [
        ("adversarial", {"object": "dog", "question": "Is there a dog?"}),  # present: not adversarial
        ("adversarial", {"object": "cat", "question": "What is the weather?"}),  # does not name it
        ("adversarial", {"object": "cat", "question": "What colour is the cat?"}),  # not yes/no
        (
            "unanswerable",
            {"premise": [{"object": "dog"}, {"object": "park"}], "question": "Why is the dog in the park?"},
        ),
        ("unanswerable", {"premise": [{"object": "cat"}], "question": "Why is the dog sad?"}),  # hinge not named
        ("unanswerable", {"premise": "cat", "question": "Where is the cat?"}),
    ],
)
def test_invalid_llm_questions_fall_back_to_templates_and_say_so(kind, reply):
    llm = WriterLLM(**{kind: reply})
    weights = {"regular": 0, "follow_up": 0, "adversarial": 0, "unanswerable": 0, "end": 0, kind: 1}
    rows = _run(["cedi"], llm=llm, question_writer="llm", switch_weights=weights)
    asked = [r for r in rows if r["switch_choice"] == kind]
    assert asked and all(r["question_source"] != "llm_generated" for r in asked)
    assert {r["question_source"] for r in asked} <= {"template", "llm"}  # template (or its reworded form)


def test_prompt_only_examiner_is_written_by_the_llm_without_the_scene_graph():
    rows = _run(["prompt_only"], llm=WriterLLM(), question_writer="llm")
    assert [r["question"] for r in rows] == ["Is my dog happy out there?"] * 2
    assert {r["question_source"] for r in rows} == {"llm_generated"}
    fallback = _run(["prompt_only"], llm=WriterLLM(), question_writer="template")
    assert {r["question_source"] for r in fallback} == {"template"}


def test_radar_normalisation_is_the_papers():
    # score/100 for percentages (stored as fractions), GED/150, SG ΔCon/5, (100 − VALOR faith_i)/50
    assert radius("chair_s", 0.3) == 0.3 and radius("hallucination_rate", 0.26) == 0.26
    assert radius("ged", 75) == 0.5 and radius("sg_delta_con", 2.5) == 0.5
    assert radius("valor", 80.0) == 0.4 and radius("valor", 100.0) == 0.0 and radius("ged", None) is None


def test_valor_matching_by_hand():
    truth = TruthView.of(TRUTH, Synonyms.builtin())
    items = {
        "object": {("dog",), ("cat",), ("park",)},
        "attribute": {("dog", "brown"), ("dog", "black")},
        "relation": {("dog", "in", "park"), ("cat", "on", "park")},
    }
    counts = match_items(items, truth)
    # objects 2 of 3 right, attributes 1 of 2, relations 1 of 2; each truth item covered once
    assert counts["object"] == {"extracted": 3, "matched": 2, "covered": 2, "truth": 2}
    assert counts["attribute"] == {"extracted": 2, "matched": 1, "covered": 1, "truth": 1}
    assert counts["relation"] == {"extracted": 2, "matched": 1, "covered": 1, "truth": 1}
    s = valor_scores([counts, match_items({"object": {("dog",)}}, truth)])
    # pooled: matched 4 + 1 = 5 of 7 + 1 = 8 extracted -> 62.5%; covered 4 + 1 of truth 4 + 4 -> 62.5%
    assert s["faith_i"] == 62.5 and s["coverage_i"] == 62.5
    assert s["faithfulness"] == {"object": 75.0, "attribute": 50.0, "relation": 50.0}  # 3/4, 1/2, 1/2
    assert s["coverage"]["object"] == 75.0  # 2 + 1 of 2 + 2


class GraphLLM(LLM):
    def __init__(self, reply):
        self.reply = reply

    def describe(self):
        return BackendInfo("llm", "g", "g", stand_in=True)

    def chat(self, messages):
        return self.reply


def test_valor_llm_extraction_and_rule_fallback():
    turns = {
        "c": [
            {"image_id": "img", "answer": "A brown dog sits in the park with a cat."},
            {"image_id": "img", "answer": ""},
        ]
    }
    reply = '{"objects": [{"id": "1", "name": "dog", "attributes": ["brown"]}, {"id": "2", "name": "cat"}], "relations": []}'
    counts, used = valor_on_conversations(turns, {"img": TRUTH}, vocab(), GraphLLM(reply))
    assert used == {"c": "llm"} and counts["c"]["object"]["matched"] == 1 and counts["c"]["object"]["extracted"] == 2
    counts, used = valor_on_conversations(turns, {"img": TRUTH}, vocab(), GraphLLM("not json"))
    assert used == {"c": "rule_fallback"}
    # the rule parser reads dog, park, cat (+ brown dog): 3 of 4 items right
    assert sum(counts["c"][k]["extracted"] for k in counts["c"]) >= 4 and counts["c"]["object"]["matched"] == 2


def test_chair_on_answers_by_hand():
    turns = [
        {"image_id": "img", "answer": "A dog and a cat."},
        {"image_id": "img", "answer": "  "},  # failed: left out, counted
        {"image_id": "img", "answer": "A dog."},
    ]
    c = chair_on_answers(turns, {"img": TRUTH})
    # mentions dog, cat, dog; cat is not in the truth: CHAIR_i 1/3, CHAIR_s 1/2
    assert c["chair_i"] == round(1 / 3, 6) and c["chair_s"] == 0.5 and c["n_failed"] == 1 and c["n_captions"] == 2


def test_premise_rejection_by_hand():
    turns = [
        {"false_premise": True, "hallucinated": False, "answer_label": "reject"},
        {"false_premise": True, "hallucinated": False, "answer_label": "refuse"},
        {"false_premise": True, "hallucinated": True, "answer_label": "other"},
        {"false_premise": True, "hallucinated": None, "answer_label": "empty"},
        {"false_premise": False, "hallucinated": False, "answer_label": "yes"},
    ]
    assert premise_rejection(turns) == {"n": 4, "n_judged": 3, "n_rejected": 2, "n_refused": 1, "rate": 0.666667}


def test_unknown_grader_is_one_line():
    from halluflow.cedi.comparison import graders_of

    with pytest.raises(ConfigError, match="cedi.graders"):
        graders_of({"graders": ["sg", "bleu"]})


def test_section_axes_from_four_graders_and_four_examiners(ode_release, tmp_path):
    release, graph = ode_release
    cfg = {
        "seed": 1,
        "cedi": {
            "images": 2,
            "examiners": ["cedi", "caption", "prompt_only", "pope"],
            "history": ["with", "without"],
            "max_rounds": 7,
            "pope_objects": 2,
        },
    }
    t, g = tmp_path / "t.parquet", tmp_path / "truth.json"
    examine_model(cfg, {"name": "m", "backend": "test_cedi_cmp_yes"}, release, graph, t, g)
    grades = grade_model(cfg, t, g, graph, tmp_path / "g.json", tmp_path / "p.parquet", tmp_path / "pred.json")
    assert set(grades["comparison"]) == set(grades["summary"]) >= {"cedi/with", "caption/with", "pope/without"}
    # same transcripts, every grader: the POPE examiner's CHAIR comes from its own answers
    transcripts = pl.read_parquet(t)
    n_pope = transcripts.filter(pl.col("examiner") == "pope").height
    assert grades["comparison"]["pope/without"]["chair"]["n_captions"] == n_pope
    # 2 images x (cedi with/without + caption + prompt_only with/without + pope) = 12 conversations, rule extraction
    assert grades["fallbacks"]["valor_extractor"] == {"configured": "rule", "used": {"rule": 12}, "fell_back": 0}
    section = write_section({"m": grades}, tmp_path / "paper" / "section.json")
    radar = section["tables"][0]
    rows = [dict(zip(radar["columns"], r)) for r in radar["rows"]]
    graders = {r["grader"] for r in rows if r["radius"] is not None}
    examiners = {r["examiner"] for r in rows if r["radius"] is not None}
    assert graders == {"sg", "cedi", "chair", "valor"} and examiners == {"cedi", "caption", "prompt_only", "pope"}
    cedi_ged = next(r for r in rows if r["examiner"] == "cedi" and r["axis"] == "ged")
    assert cedi_ged["setting"] == "cedi/with" and cedi_ged["radius"] == round(
        grades["summary"]["cedi/with"]["ged"] / 150, 6
    )
    for table in section["tables"]:
        assert all(m in CATALOGUE for m in table["metrics"])
    for fig in section["figures"]:
        assert (tmp_path / "paper" / fig["file"]).read_bytes()[:4] == b"\x89PNG"
    assert any("stand-in model" in s for s in section["stand_ins"])
    assert json.loads((tmp_path / "paper" / "section.json").read_text())["paper"] == "cedi"
    # the paper page's renderer accepts the section (shape, figure files, catalogue keys)
    from halluflow.report.papers import render_paper

    render_paper("cedi", [tmp_path / "paper" / "section.json"], tmp_path / "paper_cedi.html")
    assert (tmp_path / "paper_cedi.html").read_text().count("data:image/png;base64,") >= 3
