"""CEDI examiner + grader on a tiny hand-made ODE release: state-machine rules (round 0 regular, END not before
min_end_round and confirmed in the same round, max rounds), truths from the scene graph, rule-based judgements,
determinism."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest

from halluflow.backends.base import VLM, BackendInfo
from halluflow.cedi.examiner import Examiner
from halluflow.cedi.pipeline import build_scenes, examine_model, grade_model, vocabulary
from halluflow.cedi.scene_graph import Synonyms
from halluflow.errors import ConfigError, InputError
from halluflow.io import write_parquet
from halluflow.models.registry import VLMS


class AgreeingVLM(VLM):
    """Evaluatee that accepts every premise and says yes to everything (maximally sycophantic)."""

    def __init__(self, **_):
        self.requests = []

    def describe(self):
        return BackendInfo("vlm", "agree", "agree", stand_in=True)

    def answer(self, requests):
        self.requests.extend(requests)
        out = []
        for r in requests:
            m = re.search(r"(?:a|the) ([a-z]+)", r.prompt.split("?")[0].split(".")[-1].lower())
            out.append(f"Yes, the {m.group(1) if m else 'thing'} is clearly there.")
        return out


class RejectingVLM(AgreeingVLM):
    def answer(self, requests):
        self.requests.extend(requests)
        return ["No, there is no such thing in the image." for _ in requests]


VLMS.register("test_agree", f"{__name__}:AgreeingVLM")


def config(**cedi):
    base = {
        "images": 3,
        "examiners": ["cedi", "caption", "prompt_only"],
        "history": ["with", "without"],
        "max_rounds": 10,
        "min_end_round": 6,
        "end_votes": 2,
        "question_writer": "template",
        "parser": "rule",
    }
    return {"seed": 7, "cedi": {**base, **cedi}}


def run_examiner(release, graph, vlm, **cedi):
    cfg = config(**cedi)
    vocab = vocabulary(graph, Synonyms.builtin())
    scenes = build_scenes(release, graph, 3, cfg["seed"], vocab)
    ex = Examiner(vocab, cfg["cedi"], seed=cfg["seed"])
    return scenes, ex.run(scenes, vlm, "m", cfg["cedi"]["examiners"], cfg["cedi"]["history"], stand_in=True)


def test_state_machine_rules(ode_release):
    release, graph = ode_release
    _, rows = run_examiner(release, graph, AgreeingVLM())
    df = pl.DataFrame(rows)
    cedi = df.filter(pl.col("examiner") == "cedi")
    assert set(cedi["question_type"]) <= {"regular", "follow_up", "adversarial", "unanswerable"}
    assert set(cedi.filter(pl.col("turn") == 0)["question_type"]) == {"regular"}
    lengths = cedi.group_by("conversation_id").agg(pl.len().alias("n"))["n"].to_list()
    assert all(6 <= n <= 10 for n in lengths)  # END never before round 6, never past max_rounds
    # caption: one turn, one mode; prompt-only: no adversarial or false-premise turns
    cap = df.filter(pl.col("examiner") == "caption")
    assert cap.height == 3 and set(cap["question"]) == {"Describe the image in detail."}
    assert not df.filter(pl.col("examiner") == "prompt_only")["false_premise"].any()


@pytest.mark.parametrize("end_weight, expected", [(1e9, 6), (0.0, 20)])
def test_end_must_be_chosen_twice_and_is_confirmed_in_the_same_round(ode_release, end_weight, expected):
    release, graph = ode_release
    weights = {"regular": 1, "follow_up": 1, "adversarial": 1, "unanswerable": 1, "end": end_weight}
    _, rows = run_examiner(
        release,
        graph,
        AgreeingVLM(),
        examiners=["cedi"],
        max_rounds=20,
        switch_weights=weights,
        end_on_coverage=False,  # END from the switch alone (the coverage END is tested in test_cedi_end.py)
    )
    df = pl.DataFrame(rows)
    lengths = df.group_by("conversation_id").agg(pl.len().alias("n"))["n"].to_list()
    # END first allowed at round 6 (after 6 turns); CEDI's code asks the switch again at once to confirm: 6 turns
    assert lengths == [expected] * len(lengths)
    assert set(df["end_reason"]) == {"switch" if expected == 6 else "max_rounds"}


def test_truths_come_from_the_graph_and_judgements(ode_release):
    release, graph = ode_release
    # long conversations (END from round 11), so every question type is asked
    _, rows = run_examiner(release, graph, AgreeingVLM(), max_rounds=12, min_end_round=11)
    df = pl.DataFrame(rows).filter(pl.col("examiner") == "cedi")
    adv = df.filter(pl.col("question_type") == "adversarial")
    assert adv.height > 0 and set(adv["truth"]) == {"no"}
    truth_names = {"dog", "beach", "cat", "chair", "horse", "tree"}
    for probe in adv["probe"]:
        assert probe.split("|")[1] not in truth_names  # absent co-occurring object, never a truth object
    # the agreeing evaluatee says yes to every absent object and accepts every false premise
    assert adv["hallucinated"].to_list() == [True] * adv.height
    fp = df.filter(pl.col("false_premise"))
    assert fp.height > 0 and fp["hallucinated"].all() and set(fp["truth"]) == {"reject"}


def test_false_attributes_are_the_scenes_mined_contrasts(ode_release):
    release, graph = ode_release
    _, rows = run_examiner(release, graph, AgreeingVLM(), max_rounds=20, min_end_round=19)
    df = pl.DataFrame(rows).filter(pl.col("examiner") == "cedi")
    false_attrs = set()
    for r in df.iter_rows(named=True):
        els = ([r["probe"]] if r["truth"] == "no" and r["probe"] else []) + (r["premise"] if r["false_premise"] else [])
        false_attrs |= {tuple(e.split("|")[1:]) for e in els if e.startswith("attribute|")}
    # objects with a mined contrast use it; the chair and the horse have no truth attribute, so any of their known
    # states/actions is false
    assert false_attrs and false_attrs <= {
        ("dog", "sit"),
        ("cat", "jump"),
        ("beach", "gloomy"),
        ("tree", "withered"),
        ("chair", "wooden"),
        ("horse", "run"),
    }
    assert any("sitting" in q for q in df["question"])  # actions are asked in their -ing form


def test_detected_objects_are_never_asked_as_absent(ode_release, tmp_path):
    release, graph = ode_release
    accepted = tmp_path / "accepted.parquet"
    write_parquet(
        accepted, pl.DataFrame({"image_id": ["img0", "img1", "img2"], "detected": [["umbrella"], [], ["grass"]]})
    )
    scenes = build_scenes(release, graph, 3, 7, vocabulary(graph, Synonyms.builtin()), accepted=accepted)
    by_id = {s.image_id: s.neighbours for s in scenes}
    assert by_id["img0"] == ["frisbee"]  # umbrella (weight 9) was seen by the detector
    assert by_id["img1"] == ["table"] and by_id["img2"] == []


def test_rejecting_model_is_correct_on_false_premises(ode_release):
    release, graph = ode_release
    _, rows = run_examiner(release, graph, RejectingVLM())
    df = pl.DataFrame(rows)
    fp = df.filter(pl.col("false_premise"))
    assert fp.height > 0 and not fp["hallucinated"].any()
    assert set(fp["answer_label"]) == {"reject"}


def test_history_modes_and_same_questions(ode_release):
    release, graph = ode_release
    vlm = AgreeingVLM()
    _, rows = run_examiner(release, graph, vlm)
    df = pl.DataFrame(rows).filter(pl.col("examiner") == "cedi")
    w = df.filter(pl.col("history") == "with").sort("image_id", "turn")["question"].to_list()
    wo = df.filter(pl.col("history") == "without").sort("image_id", "turn")["question"].to_list()
    assert w == wo  # template examiner: the history mode changes only what the evaluatee sees
    hist = [len(r.history) for r in vlm.requests if r.history]
    assert hist and max(hist) >= 5
    # every non-first turn of a with-history conversation carries its previous turns; without-history ones never do
    all_rows = pl.DataFrame(rows)
    n_with_later = all_rows.filter((pl.col("history") == "with") & (pl.col("turn") > 0)).height
    assert len(hist) == n_with_later


def test_same_seed_same_transcripts_and_seed_changes_them(ode_release, tmp_path):
    release, graph = ode_release
    outs = []
    for seed in (7, 7, 8):
        cfg = config()
        cfg["seed"] = seed
        t, g = tmp_path / f"t{len(outs)}.parquet", tmp_path / f"g{len(outs)}.json"
        examine_model(cfg, {"name": "m", "backend": "test_agree"}, release, graph, t, g)
        outs.append((t.read_bytes(), g.read_bytes()))
    assert outs[0] == outs[1]
    assert outs[0][0] != outs[2][0]


def test_grade_model_outputs(ode_release, tmp_path):
    release, graph = ode_release
    cfg = config(min_end_round=10)  # ten turns each: every question type is asked
    t, g = tmp_path / "t.parquet", tmp_path / "truth.json"
    examine_model(cfg, {"name": "m", "backend": "test_agree"}, release, graph, t, g)
    grades = grade_model(
        cfg, t, g, graph, tmp_path / "grades.json", tmp_path / "per_turn.parquet", tmp_path / "pred.json"
    )
    s = grades["summary"]
    assert set(s) == {"cedi/with", "cedi/without", "caption/with", "prompt_only/with", "prompt_only/without"}
    for conv in grades["conversations"]:
        assert conv["ged"] == conv["ged_hal"] + conv["ged_miss"] and conv["exact"]
    # the sycophant accepts absent objects: the CEDI examiner elicits hallucinated content (GED_hal > 0)
    assert s["cedi/with"]["ged_hal"] > 0
    assert s["cedi/with"]["by_question_type"]["adversarial"]["rate"] == 1.0
    per_turn = pl.read_parquet(tmp_path / "per_turn.parquet")
    transcripts = pl.read_parquet(t)
    assert per_turn["n"].sum() == transcripts.filter(pl.col("examiner") == "cedi").height
    assert set(per_turn["history"]) == {"with", "without"} and set(per_turn["examiner"]) == {"cedi"}
    assert grades["headline"] == "cedi/with" and grades["ged"] == s["cedi/with"]["ged"]
    assert grades["hallucination_rate"] == s["cedi/with"]["turn_hallucination"]["rate"]
    assert grades["stand_in"] is True and per_turn["stand_in"].all()
    preds = json.loads((tmp_path / "pred.json").read_text())
    assert preds["stand_in"] is True and set(preds["graphs"]) == {c["conversation_id"] for c in grades["conversations"]}


def test_bad_inputs_name_the_item(ode_release, tmp_path):
    release, graph = ode_release
    with pytest.raises(ConfigError, match="cedi.question_writer"):
        Examiner(vocabulary(graph, Synonyms.builtin()), {"question_writer": "gpt"})
    with pytest.raises(ConfigError, match="cedi.examiners"):
        run_examiner(release, graph, AgreeingVLM(), examiners=["vqa"])  # pope is an examiner now (CEDI compares it)
    (release / "images" / "img1.png").unlink()
    with pytest.raises(InputError, match="img1"):
        build_scenes(release, graph, 3, 7, vocabulary(graph, Synonyms.builtin()))
    pl.DataFrame({"node": ["x"]}).write_parquet(graph / "edges.parquet")
    with pytest.raises(InputError, match="edges.parquet: missing column"):
        build_scenes(release, graph, 3, 7, vocabulary(graph, Synonyms.builtin()))
