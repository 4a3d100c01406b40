"""UniHall metrics (UniHall/SAMF paper, Sec. 4.1 / Appendix D): GHR cascade branches, BHR claims, SHR/GHS judge parsing
with rule fallback, risk-aware aggregation (5) by hand, and `halluflow score ghr`."""

from __future__ import annotations

import json
from typing import Sequence

import pytest

from halluflow.backends.base import LLM, BackendInfo
from halluflow.cli import main
from halluflow.samf import metrics as M


def vqa(iid="120001", risk=1, negatives=("Yellow", "Red"), **extra):
    return {
        "instance_id": iid,
        "meta_inf": {"category": "object", "subtype": "attribute", "subsubtype": "color", "risk_level": risk},
        "source_inf": {"source_dataset": "t", "source_id": iid},
        "seed_data": {
            "type": "VQA",
            "image_path": "a.png",
            "question": "What color is the car in the image?",
            "ground_truth": "Blue",
            "expected_other_answers": ["It is blue"],
            "negative_answers": list(negatives),
        },
        **extra,
    }


def yon(iid="110001", truth="Yes", risk=1):
    return {
        "instance_id": iid,
        "meta_inf": {"category": "object", "subtype": "existence", "risk_level": risk},
        "source_inf": {"source_dataset": "t", "source_id": iid},
        "seed_data": {"type": "YON", "image_path": "a.png", "question": "Is there a dog?", "ground_truth": truth},
    }


class ScriptedLLM(LLM):
    """A judge backend defined here: replies from a fixed script (the real transformers judge is slow)."""

    def __init__(self, replies: Sequence[str]):
        self.replies, self.prompts = list(replies), []

    def describe(self):
        return BackendInfo("llm", "scripted", "scripted", stand_in=True)

    def chat(self, messages):
        self.prompts.append(messages[-1]["content"])
        return self.replies.pop(0)


def test_yes_no_items_by_regex():
    s = M.GHRScorer()
    assert s.score(yon(truth="Yes"), "No, there is none.") == (1, "yon_negative")
    assert s.score(yon(truth="Yes"), "Yes.") == (0, "yon_match")
    assert s.score(yon(truth="No"), "yes") == (1, "yon_negative")
    assert s.score(yon(truth="No"), "I cannot tell.") == (None, "yon_unparsed")  # matches neither side: excluded
    # the paper's "otherwise → not hallucinated", kept as a named option
    assert M.GHRScorer(yon_unparsed="not_hallucinated").score(yon(truth="No"), "I cannot tell.") == (0, "yon_unparsed")
    with pytest.raises(M.ConfigError, match="samf.ghr.yon_unparsed"):
        M.GHRScorer(yon_unparsed="zero")
    assert M.ghr_yes_no("Well... NO, it's a cat") == "no"
    assert M.ghr_yes_no("Nobody knows") is None  # whole words only


def test_ghr_cascade_branches_in_order():
    s = M.GHRScorer()
    inst = vqa()
    assert s.score(inst, "Yellow") == (1, "neg_similarity")  # Sim(y, N) >= tau1
    assert s.score(inst, "I think the car is painted yellow.") == (1, "judge_rule")  # judge branch
    assert s.score(inst, "It is blue.") == (0, "tok_truth")  # token F1 with "It is blue" = 1 >= tau3
    assert s.score(inst, "The car is not yellow; it is blue.")[0] == 0  # a negated negative is no hallucination
    assert s.score(inst, "Bluish") == (0, "sem_truth") or s.score(inst, "Bluish")[1] == "otherwise"
    assert s.score(inst, "Hard to say from this angle.") == (0, "otherwise")
    # tau1 is a real knob: at tau1 = 1.01 the similarity branch never fires and the judge decides.
    assert M.GHRScorer(tau1=1.01).score(inst, "Yellow") == (1, "judge_rule")
    # no negatives annotated: nothing can be flagged
    assert M.GHRScorer().score(vqa(negatives=()), "Yellow") == (0, "otherwise")


def test_token_f1_and_lexical_similarity_by_hand():
    # "the car is blue" vs "it is blue": tokens (car, is, blue) vs (it, is, blue): common 2, P 2/3, R 2/3 -> F1 2/3
    assert M.token_f1("the car is blue", "it is blue") == pytest.approx(2 / 3)
    assert M.LexicalSimilarity()("Yellow", ["yellow"]) == pytest.approx(1.0)
    assert M.LexicalSimilarity()("blue", ["red"]) == 0.0


def test_llm_judge_and_fallback():
    inst = vqa()
    judge = M.LLMJudge(ScriptedLLM(["TRUE", "I am not sure about that."]))
    s = M.GHRScorer(tau1=1.01, judge=judge)
    assert s.score(inst, "Maybe blue-ish") == (1, "judge_llm")
    # An unparsable reply falls back to the rule judge (no negative mentioned -> not flagged), counted.
    assert s.score(inst, "Maybe blue-ish")[1] != "judge_llm"
    assert judge.judge.stats()["failed"] == 1
    flagged = M.GHRScorer(tau1=1.01, judge=M.LLMJudge(ScriptedLLM(["hmm"])))
    assert flagged.score(inst, "I think it is yellow.") == (1, "judge_fallback")


def test_risk_weighted_eq5_by_hand():
    # M = (1, 0, 1, 0), r = (5, 1, 2, 4): (5 + 2) / 12 = 0.583333
    assert M.risk_weighted([1, 0, 1, 0], [5, 1, 2, 4]) == pytest.approx(7 / 12)
    assert M.risk_weighted([0.5, 0.5], [1, 5]) == pytest.approx(0.5)
    rows = M.score_rows(
        [yon("110001", "Yes", 5), yon("110002", "Yes", 1), yon("110003", "No", 2), yon("110004", "No", 4)],
        {"110001": "No", "110002": "Yes", "110003": "Yes", "110004": "no"},
    )
    summary = M.summarize(rows)
    assert summary["ghr"] == pytest.approx(0.5) and summary["ghr_risk"] == pytest.approx(7 / 12)
    assert summary["per_group"]["existence_YON"]["n"] == 4


def test_bhr_claims_and_verdicts():
    inst = vqa(visual_facts=["There is a car in the image.", "There is a street in the image."])
    value, claims = M.bhr(inst, "The car is blue, and it is parked on a street. A pilot waves from the roof.")
    verdicts = [c["verdict"] for c in claims]
    # "The car is blue" entailed (truth), "it is parked on a street" entailed by V (parked/street: 1 of 2 content
    # words covered = 0.5 >= support), "A pilot waves from the roof" unsupported -> BHR = 1/3
    assert verdicts == ["Entailed", "Entailed", "Unsupported"]
    assert value == pytest.approx(1 / 3)
    value, claims = M.bhr(inst, "The car is red.")
    assert claims[0]["verdict"] == "Contradicted" and value == 1.0
    assert M.bhr(yon(truth="No"), "Yes.")[0] == 1.0 and M.bhr(yon(truth="No"), "No.")[0] == 0.0
    assert M.bhr(inst, "")[0] == 0.0  # no claims, nothing hallucinated


def test_shr_and_ghs_parse_judge_or_fall_back():
    inst = vqa()
    llm = ScriptedLLM(["0 | the car is blue\n8 | it has wings", "7", "nonsense", "no idea"])
    assert M.shr(inst, "The car is blue and has wings.", llm) == (pytest.approx(0.4), "judge")  # mean(0, 8)/10
    assert M.ghs(inst, "The car is blue and has wings.", llm) == (pytest.approx(0.7), "judge")
    # The judge failed: rule claims + verdict severities; GHS = max(h_GHR, BHR); the source says so.
    value, source = M.shr(inst, "The car is red.", llm)
    assert source == "fallback" and value == 1.0
    value, source = M.ghs(inst, "It is blue.", llm)
    assert source == "fallback" and value == 0.0
    assert "Correct answers: Blue; It is blue" in llm.prompts[0]
    # No judge configured: the rule path, labelled as such.
    assert M.ghs(inst, "It is blue.") == (0.0, "rule")


def test_ghs_reads_the_judges_score_not_its_first_digit():
    # The judge restates the scale before answering: the first digit (0) is not the score, the last number is.
    llm = ScriptedLLM(["On a scale from 0 to 10, where 0 means faithful, this response deserves 8."])
    assert M.ghs(vqa(), "The car is yellow.", llm) == (pytest.approx(0.8), "judge")
    assert M.parse_score("Score: 3. (0 = faithful, 10 = severe)") == 3.0  # the required format wins
    assert M.parse_score("I'd give it 7 out of 10") == 7.0
    assert M.parse_score("9/10") == 9.0
    assert M.parse_score("It is 42% wrong") is None and M.parse_score("no idea") is None and M.parse_score("") is None


def test_judge_scores_outside_the_scale_are_failures_never_absolute_values():
    assert M.parse_score("-3") is None  # was 3.0
    assert M.parse_score("score: -7") is None  # was 7.0
    assert M.parse_score("Score: -7 on a scale of 0 to 10") is None  # a stated score out of range is not replaced
    assert M.parse_score("\u22122") is None and M.parse_score("-8/10") is None and M.parse_score("Score: 12") is None
    assert M.parse_score("scale 0-10: 6") == 6.0 and M.parse_score("+4") == 4.0 and M.parse_score("8") == 8.0
    llm = ScriptedLLM(["Score: -7"])
    assert M.ghs(vqa(), "The car is yellow.", llm)[1] == "fallback"  # a failure: the rule path decides


UNREADABLE = ["はい", "👍", "I'm sorry, but I can't help with that.", "Nein"]


def test_four_unreadable_yes_no_answers_are_counted_and_excluded(tmp_path, capsys):
    items = [yon(f"11000{i}", truth, 1) for i, truth in enumerate(["Yes", "No", "Yes", "No", "Yes", "No"], 1)]
    (tmp_path / "u.json").write_text(json.dumps(items))
    texts = ["Yes", "Yes", *UNREADABLE]  # one right, one hallucinated, four GHR cannot read
    answers = [{"instance_id": it["instance_id"], "answer": t} for it, t in zip(items, texts)]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(a, ensure_ascii=False) for a in answers))
    base = ["score", "ghr", "--instances", str(tmp_path / "u.json"), "--answers", str(tmp_path / "a.jsonl")]
    assert main([*base, "--similarity", "trigram"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["yon_unparsed"] == 4 and out["n"] == 6 and out["ghr"] == 0.5  # over the two it could read
    assert out["per_qtype"]["YON"]["yon_unparsed"] == 4 and out["yon_unparsed_rule"] == "exclude"
    assert "4 yes/no answers have no yes/no word (left out of GHR" in captured.err
    assert main([*base, "--similarity", "trigram", "--yon-unparsed", "not_hallucinated"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["yon_unparsed"] == 4 and out["ghr"] == pytest.approx(1 / 6)  # the paper's rule: GHR 1/6, not 0.5


def test_judge_failure_is_counted_and_recorded_per_row_and_in_the_summary():
    inst = vqa()
    judge = M.as_judge(ScriptedLLM(["I cannot rate this.", "Score: 10"]))
    suite = M.MetricSuite(metrics=("ghr", "bhr", "ghs"), judge=judge)
    first = suite.score(inst, "The car is yellow.")
    second = suite.score(vqa("120002"), "The car is yellow.")
    assert (first["ghs_source"], first["ghs"]) == ("fallback", 1.0)  # max(h_GHR = 1, BHR)
    assert (second["ghs_source"], second["ghs"]) == ("judge", 1.0)
    assert judge.stats() == {"kind": "llm", "asked": 2, "failed": 1}
    assert suite.describe()["judge_failures"] == 1
    rows = M.score_rows([inst], {"120001": "The car is yellow."}, metrics=("ghr", "ghs"), llm=ScriptedLLM(["??"]))
    assert M.summarize(rows, ("ghr", "ghs"))["ghs_source"] == {"judge": 0, "fallback": 1, "rule": 0}


def test_bhr_counts_a_made_up_attribute():
    # Blue car; "purple" is stated by no truth, knowledge or visual fact. The question's words ("car") are
    # context, not evidence, so they no longer cover half of the claim.
    inst = vqa(negatives=("Yellow",))
    value, claims = M.bhr(inst, "The car is purple.")
    assert (value, claims[0]["verdict"]) == (1.0, "Unsupported")
    assert M.bhr(inst, "The car is blue.")[0] == 0.0
    # A colour the visual facts state is supported; one they do not state is made up even among covered words.
    facts = vqa(negatives=("Yellow",), visual_facts=["There is a red truck on the street."])
    assert M.bhr(facts, "A red truck is on the street.")[0] == 0.0
    assert M.bhr(facts, "A green truck is on the street.")[0] == 1.0
    # A claim that only repeats the question asserts nothing checkable.
    assert M.bhr(inst, "The color of the car.")[1][0]["verdict"] == "Unverifiable"


def test_failed_answers_are_excluded_and_counted():
    items = [yon("110001", "Yes", 5), yon("110002", "Yes", 1), yon("110003", "No", 2)]
    rows = M.score_rows(items, {"110001": None, "110002": "Yes", "110003": "   "}, metrics=("ghr", "bhr"))
    assert [r["failed"] for r in rows] == [True, False, True]
    assert rows[0]["ghr"] is None and rows[0]["ghr_stage"] == "failed"
    summary = M.summarize(rows, ("ghr", "bhr"))
    assert (summary["n"], summary["n_failed"], summary["ghr"], summary["ghr_risk"]) == (1, 2, 0.0, 0.0)


def test_cli_score_ghr(tmp_path, capsys):
    items = [yon("110001", "Yes", 5), yon("110002", "Yes", 1), vqa("120001", 2), vqa("120002", 4)]
    (tmp_path / "u.json").write_text(json.dumps(items))
    answers = [
        {"instance_id": "110001", "answer": "No."},
        {"instance_id": "110002", "answer": "Yes, there is."},
        {"instance_id": "120001", "text": "It is yellow."},
        {"instance_id": "120002", "answer": "Blue"},
    ]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(a) for a in answers))
    assert (
        main(
            [
                "score",
                "ghr",
                "--instances",
                str(tmp_path / "u.json"),
                "--answers",
                str(tmp_path / "a.jsonl"),
                "--metrics",
                "ghr,bhr",
                "--similarity",
                "trigram",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 4 and out["ghr"] == 0.5
    assert out["ghr_risk"] == pytest.approx((5 + 2) / 12)
    assert out["per_qtype"]["YON"]["ghr"] == 0.5 and "bhr" in out
    (tmp_path / "b.jsonl").write_text(json.dumps({"instance_id": "999999", "answer": "x"}))
    assert main(["score", "ghr", "--instances", str(tmp_path / "u.json"), "--answers", str(tmp_path / "b.jsonl")]) == 1
    assert "instance 999999, which is not in the instance file" in capsys.readouterr().err


def test_cli_score_ghr_writes_out_and_names_its_similarity_model(tmp_path, capsys):
    """`score ghr --out` writes the printed JSON (the README: every scorer has --out); the JSON names Sim_NLP's
    model. Yes/no items never ask Sim_NLP: MiniLM is named from --similarity, not loaded to say so."""
    (tmp_path / "u.json").write_text(json.dumps([yon("110001", "Yes", 5), yon("110002", "No", 1)]))
    answers = [{"instance_id": "110001", "answer": "No."}, {"instance_id": "110002", "answer": "No"}]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(a) for a in answers))
    base = ["score", "ghr", "--instances", str(tmp_path / "u.json"), "--answers", str(tmp_path / "a.jsonl")]
    assert main([*base, "--out", str(tmp_path / "g.json")]) == 0
    printed = capsys.readouterr().out
    assert (tmp_path / "g.json").read_text() == printed
    out = json.loads(printed)
    assert out["ghr"] == 0.5 and out["similarity"] == "minilm"
    similarity = out["judges"]["models"]["similarity"]
    assert similarity["kind"] == "embedder"
    assert (similarity["model"]["backend"], similarity["model"]["loaded"]) == ("minilm", False)
    assert out["judges"]["models"]["judge"] is None and out["judges"]["models"]["verifier"] is None  # rule paths
    assert main([*base, "--similarity", "trigram"]) == 0
    assert json.loads(capsys.readouterr().out)["judges"]["models"]["similarity"] == {"kind": "trigram", "model": None}


def test_llm_verifier_for_bhr_and_its_fallback():
    llm = ScriptedLLM(["The claim is CONTRADICTED by the reference answers.", "I don't know."])
    suite = M.MetricSuite(metrics=("ghr", "bhr"), verifier=M.LLMVerifier(llm))
    row = suite.score(vqa(negatives=("Yellow",)), "The car is blue. A pilot waves.")
    # Claim 1: the judge says Contradicted; claim 2: no verdict, so the rule verifier decides (Unsupported).
    assert row["bhr"] == 1.0 and row["bhr_source"] == "fallback"
    assert (
        "Claim: The car is blue" in llm.prompts[0]
        and "Evidence (reference answers): Blue; It is blue" in llm.prompts[0]
    )
    assert M.parse_verdict("Entailed? No: UNSUPPORTED") == "Unsupported"  # the last verdict word is the answer
