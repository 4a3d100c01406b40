"""CEDI conversations that end as the paper's examiner ends them, and LLM failures that do not end the job.

- The examiner chooses END once the conversation has covered the truth scene graph (objects, their attributes,
  related pairs: asked about or stated in an answer) from min_end_round, or when nothing is left to ask; max_rounds
  is a cap, reported (end_reason per conversation, ended_by / n_max_rounds per setting).
- An examiner or grader LLM that raises (a 503) on every second call: each failed request is a recorded failure
  with its reason on the turn, the conversation goes on with the template / random / rule fallback, counted in
  grades.json (fallbacks.llm_failures, summary n_failed_turns)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from halluflow.backends.base import LLM, VLM, BackendInfo
from halluflow.cedi.examiner import Examiner, Scene, coverage_goal, covered_by
from halluflow.cedi.grader import grade_transcripts
from halluflow.cedi.parser import TruthView, Vocabulary, safe_chat_batch
from halluflow.cedi.pipeline import build_scenes, examine_model, grade_model, vocabulary
from halluflow.cedi.scene_graph import SceneGraph, Synonyms
from halluflow.errors import BackendError, ConfigError
from halluflow.models import registry

# the default config's CEDI settings (config.yaml): the demo's conversation lengths
DEMO = {"max_rounds": 8, "min_end_round": 6, "end_votes": 2, "switch": "random", "question_writer": "template"}


def room() -> Scene:
    truth = SceneGraph.from_dict(
        {
            "objects": [
                {"id": "s", "name": "sofa", "attributes": ["grey"]},
                {"id": "d", "name": "dog", "attributes": ["brown"]},
                {"id": "l", "name": "lamp", "attributes": []},
            ],
            "relations": [{"subject": "d", "predicate": "on", "object": "s"}],
        }
    )
    return Scene("room", None, None, truth, neighbours=["cat", "table", "rug"])


class SaysYes(VLM):
    def describe(self):
        return BackendInfo("vlm", "yes", "yes", stand_in=True)

    def answer(self, requests):
        return ["Yes." for _ in requests]


def test_coverage_keys_of_a_scene_graph():
    view = TruthView.of(room().truth, Synonyms.builtin())
    goal = coverage_goal(view)
    assert set(goal) == {
        "object|sofa",
        "object|dog",
        "object|lamp",
        "attribute|sofa|grey",
        "attribute|dog|brown",
        "pair|dog|sofa",
    }
    assert covered_by("attribute|dog|brown", view) == {"object|dog", "attribute|dog|brown"}
    assert covered_by("attribute|dog|black", view) == {"object|dog"}  # a false attribute covers only the object
    assert covered_by("relation|dog|on|sofa", view) == {"object|dog", "object|sofa", "pair|dog|sofa"}
    assert covered_by("relation|dog|under|sofa", view) == {"object|dog", "object|sofa"}  # a wrong predicate
    assert covered_by("object|cat", view) == set()


def test_the_demo_conversations_end_by_end_before_max_rounds(ode_release):
    release, graph = ode_release
    vocab = vocabulary(graph, Synonyms.builtin())
    scenes = build_scenes(release, graph, 3, 0, vocab)
    rows = Examiner(vocab, DEMO, seed=0).run(scenes, SaysYes(), "m", ["cedi", "caption", "pope"], ["with", "without"])
    df = pl.DataFrame(rows)
    cedi = df.filter(pl.col("examiner") == "cedi")
    per = cedi.group_by("conversation_id").agg(
        pl.len().alias("n"), pl.col("end_reason").n_unique().alias("reasons"), pl.col("end_reason").first()
    )
    assert per["reasons"].to_list() == [1] * per.height  # the same end_reason on every turn of a conversation
    ended = per.filter(pl.col("end_reason") == "coverage")
    assert ended.height >= 1 and (ended["n"] < DEMO["max_rounds"]).all() and (ended["n"] >= 6).all()
    # a coverage END: the last turn has covered the whole truth graph
    last = cedi.sort("turn").group_by("conversation_id").agg(pl.col("coverage").last(), pl.col("end_reason").first())
    assert (last.filter(pl.col("end_reason") == "coverage")["coverage"] == 1.0).all()
    assert set(df.filter(pl.col("examiner") != "cedi")["end_reason"]) == {"fixed"}  # the baselines' fixed length

    truths = {s.image_id: s.truth for s in scenes}
    grades, _, _ = grade_transcripts(rows, truths, vocab, {"parser": "rule"})
    s = grades["summary"]["cedi/with"]
    assert sum(s["ended_by"].values()) == s["conversations"] == 3
    assert s["n_max_rounds"] == s["ended_by"].get("max_rounds", 0)
    assert {c["end_reason"] for c in grades["conversations"]} <= {
        "coverage",
        "exhausted",
        "switch",
        "max_rounds",
        "fixed",
    }


def test_max_rounds_is_a_cap_and_reported(ode_release):
    release, graph = ode_release
    vocab = vocabulary(graph, Synonyms.builtin())
    scenes = build_scenes(release, graph, 2, 0, vocab)
    settings = {**DEMO, "max_rounds": 3, "min_end_round": 3, "switch_weights": {"end": 0.0}}
    rows = Examiner(vocab, settings, seed=0).run(scenes, SaysYes(), "m", ["cedi"], ["with"])
    assert {r["end_reason"] for r in rows} == {"max_rounds"} and len(rows) == 2 * 3
    grades, _, _ = grade_transcripts(rows, {s.image_id: s.truth for s in scenes}, vocab, {"parser": "rule"})
    assert grades["summary"]["cedi/with"]["n_max_rounds"] == 2
    assert grades["summary"]["cedi/with"]["ended_by"] == {"max_rounds": 2}


def test_nothing_left_to_ask_ends_before_min_end_round():
    """One object, no attribute to contradict, no absent object: once it is covered nothing new can be asked."""
    truth = SceneGraph.from_dict({"objects": [{"id": "a", "name": "lamp", "attributes": []}], "relations": []})
    rows = Examiner(Vocabulary(), {**DEMO, "max_rounds": 8}, seed=0).run(
        [Scene("one", None, None, truth)], SaysYes(), "m", ["cedi"], ["with"]
    )
    assert len(rows) == 1 and rows[0]["end_reason"] == "exhausted" and rows[0]["coverage"] == 1.0


class FlakyLLM(LLM):
    """Raises like a server answering 503 on every second call; otherwise a valid examiner / judge / parser reply."""

    def __init__(self, error: type[Exception] = BackendError, **_):
        self.calls, self.error = 0, error

    def describe(self):
        return BackendInfo("llm", "flaky", "flaky", stand_in=True)

    def chat(self, messages):
        system, user = messages[0]["content"], messages[-1]["content"]
        if "setting of a conversation" in system:
            return json.dumps({"background": "I sell sofas.", "user_goal": "Describe it.", "relevant_objects": []})
        if "Choose the next question type" in system:
            return json.dumps({"next": user.rsplit("Allowed: ", 1)[1].split(", ")[0]})
        if "grade one turn" in system:
            return json.dumps({"hallucinated": False, "type": None, "claims": []})
        if "scene graph" in system.lower() and "objects" in system:
            return json.dumps({"objects": [{"id": "d", "name": "dog", "attributes": []}], "relations": []})
        return json.dumps({"question": "Is there anything else?"})

    def chat_batch(self, batch):
        self.calls += 1
        if self.calls % 2 == 0:
            raise self.error("503 Service Unavailable: the server is overloaded")
        return [self.chat(m) for m in batch]


@pytest.mark.parametrize("error", [BackendError, ConnectionError, TimeoutError])
def test_an_llm_that_raises_on_every_second_call_gives_counted_failed_turns(error):
    scene = room()
    vocab = Vocabulary()
    vocab.add_graph(scene.truth)
    llm = FlakyLLM(error)
    settings = {**DEMO, "switch": "llm", "question_writer": "llm", "parser": "llm"}
    rows = Examiner(vocab, settings, llm=llm, seed=0).run([scene], SaysYes(), "m", ["cedi", "prompt_only"], ["with"])
    assert llm.calls >= 6  # the run went on past every failure
    failed = [r for r in rows if r["llm_failures"]]
    # each round asks the switch, then the writer: one of the two calls failed, the other one answered
    assert failed and any(r["switch_source"] == "llm" for r in rows)
    assert all(
        "503 Service Unavailable" in f and f.split(":")[0] in ("context", "switch", "question_writer")
        for r in failed
        for f in r["llm_failures"]
    )
    # the conversation went on with the fallbacks (the random switch, the templates)
    switched = [r for r in failed if any(f.startswith("switch:") for f in r["llm_failures"])]
    assert all(r["switch_source"] == "random" for r in switched)
    grader_llm = FlakyLLM(error)  # call 1: the judge (answers), call 2: the parser (raises)
    grades, _, _ = grade_transcripts(rows, {"room": scene.truth}, vocab, settings, llm=grader_llm)
    fails = grades["fallbacks"]["llm_failures"]
    assert fails["n_failed_turns"] == len(failed)
    assert fails["n_failed_parses"] == 2 and fails["n_failed_judge_turns"] == 0
    assert sum(s["n_failed_turns"] for s in grades["summary"].values()) == len(failed)
    assert grades["fallbacks"]["parser"]["fell_back"] == 2  # the rule parser's graph stands in, counted
    assert all(c["parser"] == "rule_fallback" and "503" in c["parser_failure"] for c in grades["conversations"])
    assert sum(fails["reasons"].values()) >= len(failed) + 2


def test_the_pipeline_finishes_with_a_flaky_llm_backend(ode_release, tmp_path):
    """Through the workflow's functions and the model layer (Model.llm, as the rules build it)."""
    release, graph = ode_release
    registry.LLMS.register("flaky-cedi-test", f"{__name__}:FlakyLLM")
    cfg = {
        "seed": 0,
        "cedi": {
            **DEMO,
            "images": 2,
            "examiners": ["cedi"],
            "history": ["with"],
            "switch": "llm",
            "question_writer": "llm",
            "parser": "llm",
            "llm": {"backend": "flaky-cedi-test"},
        },
    }
    t, g = tmp_path / "t.parquet", tmp_path / "truth.json"
    n = examine_model(cfg, {"name": "m"}, release, graph, t, g, vlm=SaysYes())
    df = pl.read_parquet(t)
    assert n == df.height > 0
    n_failed = df.filter(pl.col("llm_failures").list.len() > 0).height
    assert n_failed > 0
    grades = grade_model(cfg, t, g, graph, tmp_path / "g.json", tmp_path / "p.parquet", tmp_path / "pred.json")
    assert grades["fallbacks"]["llm_failures"]["n_failed_turns"] == grades["summary"]["cedi/with"]["n_failed_turns"]
    assert grades["summary"]["cedi/with"]["n_failed_turns"] == n_failed


def test_a_configuration_error_still_stops_the_job():
    class Misconfigured(LLM):
        def describe(self):
            return BackendInfo("llm", "x", "x")

        def chat(self, messages):
            raise ConfigError("config key 'cedi.llm.model': not found")

    with pytest.raises(ConfigError):
        safe_chat_batch(Misconfigured(), [[{"role": "user", "content": "hi"}]])
