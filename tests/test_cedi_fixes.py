"""CEDI defects found by a new user, each as a test built from its failing example: the rule parser's negation scope
("No, the dog is black." on a brown dog), the context's relevant objects steering regular questions, a switch choice
that cannot be honoured, END as CEDI's code counts it, which judge produced each headline number (and the LLM's
per-turn judgement under `parser: llm`), error type "other", and WordNet synonyms in GED (sofa vs couch)."""

from __future__ import annotations

import pytest

from halluflow.cedi.parser import TruthView, Vocabulary, delta_con, judge_turn, turn_claims
from halluflow.cedi.scene_graph import SceneGraph


@pytest.fixture
def vocab():
    v = Vocabulary()
    v.add("dog", ["brown", "black"], kind="state")
    v.add("cat", ["sleep"], kind="action")
    v.add("park")
    return v


def brown_dog() -> SceneGraph:
    return SceneGraph.from_dict(
        {
            "objects": [
                {"id": "a", "name": "dog", "attributes": ["brown"]},
                {"id": "b", "name": "park", "attributes": []},
            ],
            "relations": [{"subject": "a", "predicate": "in", "object": "b"}],
        }
    )


@pytest.mark.parametrize("opener", ["No, ", "No. ", "No! ", "No - ", "No; ", "No \u2014 "])
def test_an_opening_no_answers_the_question_and_negates_nothing(vocab, opener):
    truth = TruthView.of(brown_dog(), vocab.synonyms)
    answer = f"{opener}the dog is black."
    # "Is the dog brown?": the answer denies brown AND asserts a black dog (the dog is brown: a hallucination)
    tc = turn_claims(answer, ["object|dog"], "attribute|dog|brown", vocab)
    assert ("object|dog", True) in tc.claims and ("attribute|dog|black", True) in tc.claims
    assert ("object|dog", False) not in tc.claims and ("attribute|dog|black", False) not in tc.claims
    assert judge_turn(tc, "yes", False, truth, vocab) == (True, "attribute")
    # no false ΔCon flip: the dog asserted in one turn stays asserted after the opening "No"
    first = turn_claims("There is a dog in the park.", [], None, vocab).claims
    assert delta_con([first, tc.claims]) == 0
    assert delta_con([first, turn_claims(answer, [], None, vocab).claims]) == 0


def test_negation_still_scopes_within_its_sentence(vocab):
    from halluflow.cedi.parser import extract

    assert ("object|cat", False) in extract("There is no cat, dog or park.", vocab)
    assert ("object|dog", False) in extract("There is no cat, dog or park.", vocab)  # a list keeps the negation
    got = extract("There is no cat. The dog is black.", vocab)
    assert ("object|cat", False) in got and ("object|dog", True) in got and ("attribute|dog|black", True) in got
    assert ("object|dog", False) in extract("No dog is here.", vocab)  # "No" with content is a negation
