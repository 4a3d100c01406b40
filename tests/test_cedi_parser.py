"""CEDI rule parser (claims, negation, premise rejection), SG ΔCon, predicted graphs, LLM paths with validation and
template fallback, and truth graphs from Visual Genome / COCO annotations."""

from __future__ import annotations

import json

import pytest
from helpers import shared_data

from halluflow.backends.base import LLM, BackendInfo
from halluflow.cedi.examiner import GENERATED_TYPES, Examiner, Scene
from halluflow.cedi.parser import (
    TruthView,
    Vocabulary,
    answer_label,
    delta_con,
    extract,
    judge_turn,
    llm_parse,
    predicted_graph,
    turn_claims,
)
from halluflow.cedi.scene_graph import (
    SceneGraph,
    Synonyms,
    coco_scene_graphs,
    ode_scene_graph,
    visual_genome_scene_graph,
)
from halluflow.errors import InputError


@pytest.fixture
def vocab():
    v = Vocabulary()
    v.add("dog", ["brown", "black"], kind="state")
    v.add("dog", ["run", "sit"], kind="action")
    v.add("cat", ["sleep"], kind="action")
    for n in ("park", "frisbee", "traffic light", "light"):
        v.add(n)
    return v


@pytest.mark.parametrize(
    "text, yes_no, label",
    [
        ("Yes.", True, "yes"),
        ("No, it is not.", True, "no"),
        ("There is no cat in the image.", False, "reject"),
        ("I don't see any frisbee.", True, "reject"),
        ("The dog is brown.", False, "other"),
        ("The dog is not brown", True, "no"),
        ("", True, "empty"),
        ("It is sitting.", True, "yes"),
        ("There is a dog.", True, "other"),
        (
            "I see nothing I can name.",
            False,
            "reject",
        ),  # affirms nothing about the asked object; its mentions are parsed instead
        ("protect prehistoric populous shampoo", True, "other"),  # stand-in noise is not a "yes" (unlike POPE's rule)
        ("There's no cat on the desk.", False, "reject"),
        ("There’s no cat.", False, "reject"),
        ("I cannot determine that.", False, "refuse"),
        ("I'm not sure what you mean.", True, "refuse"),
    ],
)
def test_answer_label(text, yes_no, label):
    assert answer_label(text, yes_no) == label


def test_extract_objects_attributes_relations_negation(vocab):
    got = extract("A brown dog is running in the park. There is no frisbee, but a traffic light.", vocab)
    assert ("object|dog", True) in got and ("attribute|dog|brown", True) in got
    assert ("attribute|dog|run", True) in got
    assert ("relation|dog|in|park", True) in got
    assert ("object|frisbee", False) in got
    assert ("object|traffic light", True) in got and ("object|light", True) not in got  # longest match wins
    vocab.add("can")
    assert extract("I can see nothing I can name.", vocab) == []  # the modal verb is not the object
    assert extract("There is a can on the table.", vocab)[0] == ("object|can", True)


def test_premise_accepted_unless_rejected(vocab):
    premise = ["object|cat", "relation|cat|next to|dog"]
    accepted = turn_claims("It is black.", premise, None, vocab)
    assert ("object|cat", True) in accepted.claims and ("relation|cat|next to|dog", True) in accepted.claims
    rejected = turn_claims("There is no cat in this picture.", premise, None, vocab)
    assert rejected.claims[0] == ("object|cat", False)
    assert all(not pos for el, pos in rejected.claims if el == "object|cat")


def test_judge_turn(vocab):
    truth = TruthView.of(
        ode_scene_graph(
            {
                "scene_id": "s",
                "pair_kind": "entity_environment",
                "object_a": "dog",
                "object_b": "park",
                "attribute_a": "run",
            }
        ),
        vocab.synonyms,
    )
    fp = ["attribute|dog|sit"]  # "Why is the dog sitting?" (it runs)
    # accepting the premise by reasoning about it is hallucinated reasoning (the paper's "other"); restating it is
    # a wrong attribute
    assert judge_turn(turn_claims("Because it is tired.", fp, None, vocab), None, True, truth, vocab) == (
        True,
        "other",
    )
    assert judge_turn(
        turn_claims("The dog is sitting because it is tired.", fp, None, vocab), None, True, truth, vocab
    ) == (True, "attribute")
    assert judge_turn(turn_claims("It is sitting.", fp, None, vocab), None, True, truth, vocab) == (True, "attribute")
    assert judge_turn(
        turn_claims("The dog is not sitting, there is no such thing.", fp, None, vocab), None, True, truth, vocab
    ) == (False, None)
    # yes to an absent object; open answer naming an absent object; attribute from the object's own vocabulary
    assert judge_turn(turn_claims("Yes.", [], "object|cat", vocab), "no", False, truth, vocab) == (True, "object")
    assert judge_turn(turn_claims("A dog and a cat.", [], None, vocab), None, False, truth, vocab) == (True, "object")
    assert judge_turn(turn_claims("The dog is sitting.", [], None, vocab), None, False, truth, vocab) == (
        True,
        "attribute",
    )
    assert judge_turn(turn_claims("The dog is running in the park.", [], None, vocab), None, False, truth, vocab) == (
        False,
        None,
    )
    assert judge_turn(turn_claims("", [], "object|cat", vocab), "no", False, truth, vocab) == (None, None)
    assert judge_turn(turn_claims("prehistoric shampoo", [], "object|cat", vocab), "no", False, truth, vocab) == (
        None,
        None,
    )
    assert judge_turn(turn_claims("Yes, I see one.", [], "object|cat", vocab), "no", False, truth, vocab) == (
        True,
        "object",
    )
    assert judge_turn(turn_claims("No.", [], "object|cat", vocab), "no", False, truth, vocab) == (False, None)


def test_false_premise_rejections_refusals_and_noise(vocab):
    """The demo's unanswerable rate 1.0: correct rejections and refusals counted as hallucinations, noise judged."""
    truth = TruthView.of(
        ode_scene_graph(
            {
                "scene_id": "s",
                "pair_kind": "entity_environment",
                "object_a": "dog",
                "object_b": "park",
                "attribute_a": "run",
            }
        ),
        vocab.synonyms,
    )
    fp = ["object|cat", "relation|cat|next to|dog"]  # "What color is the cat next to the dog?" (no cat)

    def judge(answer):
        tc = turn_claims(answer, fp, None, vocab)
        return tc.label, judge_turn(tc, None, True, truth, vocab), tc.claims

    assert judge("There's no cat next to the dog.")[:2] == ("reject", (False, None))
    label, verdict, claims = judge("I cannot determine that.")
    assert (label, verdict, claims) == ("refuse", (False, None), [])  # nothing asserted: no cat in the prediction
    label, verdict, claims = judge("protect prehistoric populous shampoo")
    assert (label, verdict, claims) == ("unparseable", (None, None), [])  # counted, excluded from the rate
    assert judge("The cat is black.")[1] == (True, "object")  # accepting the premise is the hallucination
    assert judge("It is black.")[1] == (True, "object")
    # the rates: 2 correct, 1 hallucinated, 1 unparseable → 1/3, not the 4/4 the old rules gave
    from halluflow.cedi.grader import _rate

    turns = [
        {"hallucinated": judge(a)[1][0], "answer_label": judge(a)[0]}
        for a in (
            "There's no cat next to the dog.",
            "I cannot determine that.",
            "protect prehistoric populous shampoo",
            "The cat is black.",
        )
    ]
    r = _rate(turns)
    assert (r["n"], r["n_judged"], r["n_hallucinated"], r["n_unparseable"], r["n_refused"]) == (4, 3, 1, 1, 1)
    assert r["rate"] == round(1 / 3, 6)


def test_delta_con_and_predicted_graph_policies():
    turns = [
        [("object|cat", True), ("attribute|cat|black", True)],
        [("object|cat", False)],  # retracted: one polarity change
        [("object|dog", True)],
        [("attribute|cat|black", True), ("object|dog", True)],  # repeated: no change
    ]
    assert delta_con(turns) == 1
    assert delta_con([[("object|cat", True), ("object|cat", False)]]) == 0  # ambiguous within a turn: skipped
    any_g = predicted_graph(turns, "any")
    assert sorted(o.name for o in any_g.objects) == ["cat", "dog"]
    assert [o.attributes for o in any_g.objects if o.name == "cat"] == [("black",)]
    last_g = predicted_graph(turns, "last")
    # "last": object|cat ends denied, but the last claim on attribute|cat|black is positive and implies the cat
    assert sorted(o.name for o in last_g.objects) == ["cat", "dog"]
    assert sorted(o.name for o in predicted_graph(turns[:3], "last").objects) == ["cat", "dog"]
    assert [o.name for o in predicted_graph([[("object|cat", True)], [("object|cat", False)]], "last").objects] == []
    with pytest.raises(InputError, match="claim_policy"):
        predicted_graph(turns, "first")


def test_visual_genome_and_coco_truth_graphs():
    vg = visual_genome_scene_graph(
        {
            "image_id": 1,
            "objects": [
                {"object_id": 10, "names": ["man"], "attributes": ["tall"]},
                {"object_id": 11, "names": ["horse"]},
            ],
            "relationships": [
                {"subject_id": 10, "predicate": "riding", "object_id": 11},
                {"subject": {"object_id": 11}, "predicate": "ON", "object": {"object_id": 99}},
            ],
        }
    )
    assert [o.name for o in vg.objects] == ["man", "horse"] and len(vg.relations) == 1
    with pytest.raises(InputError, match=r"objects\[0\]"):
        visual_genome_scene_graph({"objects": [{"names": ["x"]}]})
    coco = coco_scene_graphs(
        {
            "images": [{"id": 1}, {"id": 2}],
            "annotations": [{"id": 5, "image_id": 1, "category_id": 18}, {"id": 6, "image_id": 1, "category_id": 18}],
            "categories": [{"id": 18, "name": "dog"}],
        }
    )
    assert [o.name for o in coco["1"].objects] == ["dog", "dog"] and coco["2"].objects == []
    with pytest.raises(InputError, match=r"annotations\[0\].category_id"):
        coco_scene_graphs({"images": [{"id": 1}], "annotations": [{"image_id": 1, "category_id": 3}], "categories": []})


def test_visual_genome_vocab_synonyms_make_names_match():
    objects = shared_data("visual-genome-bottom-up-vocab", "objects_vocab.txt")
    relations = shared_data("visual-genome-bottom-up-vocab", "relations_vocab.txt")
    syn = Synonyms.from_vocab_files(objects, relations)
    assert syn.predicate("sitting on") == "on" and syn.predicate("inside") == "in"
    from halluflow.cedi.ged import scene_graph_ged

    a = SceneGraph.from_dict(
        {
            "objects": [{"id": 1, "name": "table", "attributes": []}, {"id": 2, "name": "cup", "attributes": []}],
            "relations": [{"subject": 2, "predicate": "on", "object": 1}],
        }
    )
    b = SceneGraph.from_dict(
        {
            "objects": [{"id": 1, "name": "tables", "attributes": []}, {"id": 2, "name": "cup", "attributes": []}],
            "relations": [{"subject": 2, "predicate": "sitting on", "object": 1}],
        }
    )
    assert scene_graph_ged(a, b, synonyms=syn).ged == 0


class ScriptedLLM(LLM):
    """A deterministic external chat model: valid JSON for every examiner/parser request."""

    def describe(self):
        return BackendInfo("llm", "scripted", "scripted", stand_in=True)

    def chat(self, messages):
        system, user = messages[0]["content"], messages[-1]["content"]
        if "setting of a conversation" in system:
            return 'Sure! {"background": "I walk dogs for a living.", "user_goal": "Find my dog.", "relevant_objects": ["dog", "unicorn"]}'
        if "Choose the next question type" in system:
            allowed = user.rsplit("Allowed: ", 1)[1].split(", ")
            return json.dumps({"next": "end" if "end" in allowed else allowed[-1]})
        if "rewrite" in system:
            q = user.rsplit("Question: ", 1)[1]
            return json.dumps({"question": "Hey, quick one: " + q})
        return '```json\n{"objects": [{"id": "o1", "name": "dog", "attributes": ["brown"]}], "relations": []}\n```'


class GarbageLLM(ScriptedLLM):
    def chat(self, messages):
        return "I am not sure what you mean {not json"


def _scene():
    truth = ode_scene_graph(
        {
            "scene_id": "s",
            "pair_kind": "entity_environment",
            "object_a": "dog",
            "object_b": "park",
            "attribute_a": "run",
        }
    )
    return Scene("img", None, None, truth, neighbours=["frisbee", "cat"])


class EchoVLM:
    def describe(self):
        return BackendInfo("vlm", "echo", "echo", stand_in=True)

    def answer(self, requests):
        return ["I see a dog." for _ in requests]


def test_llm_examiner_used_when_valid_and_validated(vocab):
    ex = Examiner(
        vocab,
        {"question_writer": "llm", "switch": "llm", "max_rounds": 9, "min_end_round": 6},
        llm=ScriptedLLM(),
        seed=1,
    )
    rows = ex.run([_scene()], EchoVLM(), "m", ["cedi"], ["with"])
    assert rows[0]["context_goal"] == "Find my dog."
    assert rows[0]["context_objects"] == ["dog"]  # "unicorn" is not in the scene: dropped
    # the templates the LLM rewords say so; its own adversarial / false-premise questions do not validate here (this
    # LLM only rewrites), so those stay templates, unreworded, and say so (tests/test_cedi_comparison.py: valid ones)
    assert rows[0]["question_source"] == "llm" and rows[0]["question"].startswith("Hey, quick one")
    for r in rows:
        assert r["question_source"] == ("template" if r["switch_choice"] in GENERATED_TYPES else "llm")
        assert r["question"].startswith("Hey, quick one") == (r["question_source"] == "llm")
    assert len(rows) == 6  # the LLM switch says END whenever allowed: at round 6, and again to confirm → 6 turns
    assert [r["switch_source"] for r in rows] == [None] + ["llm"] * 5  # round 0 is regular by rule
    # the writer alone: the next type is drawn at random (the offline stand-in for the paper's LLM switch)
    writer_only = Examiner(vocab, {"question_writer": "llm", "max_rounds": 9}, llm=ScriptedLLM(), seed=1)
    w_rows = writer_only.run([_scene()], EchoVLM(), "m", ["cedi"], ["with"])
    assert {r["switch_source"] for r in w_rows[1:]} == {"random"}


class LastAnswerSwitchLLM(ScriptedLLM):
    """Chooses the next type from the evaluatee's LAST answer, as the paper's switch does."""

    def chat(self, messages):
        user = messages[-1]["content"]
        if "Choose the next question type" in messages[0]["content"]:
            last = user.split("\nAllowed: ")[0].rsplit("A: ", 1)[-1]
            allowed = user.rsplit("Allowed: ", 1)[1].split(", ")
            want = "follow_up" if "frisbee" in last else "adversarial"
            return json.dumps({"next": want if want in allowed else allowed[0]})
        return super().chat(messages)


class FrisbeeVLM(EchoVLM):
    def answer(self, requests):
        return ["Yes, a frisbee." if "frisbee" in r.prompt else "No." for r in requests]


def test_llm_switch_reads_the_answer_and_fallbacks_are_counted(vocab):
    from halluflow.cedi.grader import grade_transcripts

    ex = Examiner(vocab, {"switch": "llm", "max_rounds": 5, "min_end_round": 5}, llm=LastAnswerSwitchLLM(), seed=0)
    rows = ex.run([_scene()], FrisbeeVLM(), "m", ["cedi"], ["with"])
    types = [r["question_type"] for r in rows]
    # "No." → adversarial (the first absent neighbour, frisbee) → "Yes, a frisbee." → follow_up on it
    assert types[1] == "adversarial" and "frisbee" in rows[1]["question"]
    assert types[2] == "follow_up"
    # a switch that never parses falls back to the random draw, and the grades say so
    garbage = Examiner(vocab, {"switch": "llm", "max_rounds": 4, "min_end_round": 4}, llm=GarbageLLM(), seed=0)
    g_rows = garbage.run([_scene()], EchoVLM(), "m", ["cedi"], ["with"])
    truth = {"img": _scene().truth}
    grades, _, _ = grade_transcripts(g_rows, truth, vocab, {"switch": "llm", "parser": "llm"}, llm=GarbageLLM())
    fb = grades["fallbacks"]
    assert fb["switch"] == {
        "configured": "llm",
        "used": {"random": 3},
        "fell_back": 3,
        "unhonoured": 0,
        "unhonoured_choices": {},
    }
    assert fb["parser"]["configured"] == "llm" and fb["parser"]["used"] == {"rule_fallback": 1}
    assert fb["parser"]["fell_back"] == 1 and grades["settings"]["parser_used"] == {"rule_fallback": 1}


def test_llm_examiner_falls_back_to_templates(vocab):
    garbage = Examiner(vocab, {"question_writer": "llm", "max_rounds": 8}, llm=GarbageLLM(), seed=1)
    template = Examiner(vocab, {"question_writer": "template", "max_rounds": 8}, seed=1)
    g_rows = garbage.run([_scene()], EchoVLM(), "m", ["cedi"], ["with"])
    t_rows = template.run([_scene()], EchoVLM(), "m", ["cedi"], ["with"])
    assert [r["question"] for r in g_rows] == [r["question"] for r in t_rows]
    assert {r["question_source"] for r in g_rows} == {"template"}


def test_llm_parser_validates(vocab):
    g = llm_parse(ScriptedLLM(), [("What is there?", "A brown dog.")])
    assert g is not None and g.objects[0].attributes == ("brown",)
    assert llm_parse(GarbageLLM(), [("q", "a")]) is None
