"""`score pope --parser lmms_eval|vlmevalkit` gives the peers' own numbers on every answer string, the empty string
included, checked against the independent ports in bench/peer_ports.py; records that never got an answer are
excluded and counted in every mode, and halluflow's default keeps its stricter rule."""

from __future__ import annotations

import json
import random
import sys
import unicodedata

import pytest
from helpers import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from halluflow.cli import main
from halluflow.metrics.pope import pope_metrics

sys.path.insert(0, str(REPO / "bench"))
from official_ports import pope_evaluate  # noqa: E402
from peer_ports import lmms_eval_pope, vlmevalkit_pope, yorn_extraction  # noqa: E402

KEYS = ("accuracy", "precision", "recall", "f1", "yes_ratio")
FIXED = [
    "",
    " ",
    "  \n",
    "\t",
    "\x1c",
    "yes\x1c",
    "\x1fno",
    "\u200b",
    "\u3000yes\u3000",
    "Yes",
    "yes",
    "YES",
    " yes ",
    "Yes.",
    "yes!",
    "(yes)",
    "No",
    "no",
    "NO",
    "no,",
    "No.",
    "no - not",
    "Unknown",
    "unknown",
    "Yes, there is a dog in the image.",
    "No, there is no dog.",
    "Yes and no.",
    "I think so",
    "Maybe",
    "3,5 yes",
    "1.yes",
    "yes.2",
    "no;yes",
    "yes/no",
    "There is no dog. Yes.",
    "nan",
]


def blank(text: str) -> bool:
    """halluflow's blank answer, written here from its definition: only whitespace, control or format characters."""
    return all(c.isspace() or unicodedata.category(c) in ("Cc", "Cf") for c in text)


def mixed_answers(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = "yesnoYESNO .,;!?-()/\t\n\x1c0123456789abc"
    out = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.55:
            out.append(rng.choice(FIXED))
        elif roll < 0.8:
            out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14))))
        else:
            words = ["yes", "no", "Yes", "No", "not", "there", "is", "a", "dog", "Yes.", "no,", "", "Unknown"]
            out.append(rng.choice([" ", ", ", ". "]).join(rng.choice(words) for _ in range(rng.randint(1, 6))))
    return out


def _files(tmp_path, answers, labels, failed=()):
    ans, lab = tmp_path / "answers.jsonl", tmp_path / "labels.jsonl"
    rows = []
    for i, a in enumerate(answers):
        row = {"question_id": i, "answer": a}
        if i in failed:
            row["status"] = "failed"
        rows.append(row)
    ans.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lab.write_text("".join(json.dumps({"question_id": i, "label": v}) + "\n" for i, v in enumerate(labels)))
    return ans, lab


def _score(capsys, ans, lab, parser):
    args = ["score", "pope", "--answers", str(ans), "--labels", str(lab), "--parser", parser]
    assert main(args + ["--max-failed-fraction", "1"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("seed", [0, 1])
def test_cli_equals_the_peers_on_2000_mixed_answers(tmp_path, capsys, seed):
    rng = random.Random(100 + seed)
    answers = mixed_answers(2400, seed)
    labels = [rng.choice(["yes", "no"]) for _ in answers]
    # 120 records whose request failed (status failed, or no answer at all): excluded and counted in every mode
    failed = set(rng.sample(range(len(answers)), 120))
    nulls = set(sorted(failed)[:40])
    answers = [None if i in nulls else a for i, a in enumerate(answers)]
    ans, lab = _files(tmp_path, answers, labels, failed - nulls)
    kept = [i for i in range(len(answers)) if i not in failed]
    seen_answers, seen_labels = [answers[i] for i in kept], [labels[i] for i in kept]
    n_blank = sum(blank(a) for a in seen_answers)
    assert len(kept) >= 2000 and n_blank > 100 and "" in seen_answers  # the empty string is among the scored

    lmms = _score(capsys, ans, lab, "lmms_eval")
    ref = lmms_eval_pope(seen_answers, seen_labels)
    assert {k: lmms[k] for k in KEYS} == ref  # exact floats
    assert (lmms["n"], lmms["n_failed"]) == (len(kept), len(failed))
    assert lmms["parser_mode"].startswith("peer: lmms-eval")

    vlm = _score(capsys, ans, lab, "vlmevalkit")
    ref = vlmevalkit_pope(seen_answers, seen_labels)
    assert {k: vlm[k] for k in KEYS} == {k: ref[k] for k in KEYS}
    # × 100 gives VLMEvalKit's printed row exactly (its Overall is F1)
    printed = {"Overall": "f1", "acc": "accuracy", "precision": "precision", "recall": "recall"}
    assert {name: vlm[key] * 100 for name, key in printed.items()} == ref["printed"]
    assert (vlm["n"], vlm["n_failed"]) == (len(kept), len(failed))
    assert vlm["n_unknown"] == ref["extracted"].count("Unknown")
    assert vlm["parser_mode"].startswith("peer: VLMEvalKit")

    # POPE's own script as a peer: every string read, "" as yes
    official = _score(capsys, ans, lab, "pope_official")
    ref = pope_evaluate([{"answer": a} for a in seen_answers], seen_labels)
    assert {k: official[k] for k in KEYS} == {k: ref[k] for k in KEYS}
    assert (official["n"], official["n_failed"]) == (len(kept), len(failed))
    assert official["parser_mode"].startswith("peer: RUCAIBox/POPE")

    # halluflow's default keeps its rule: blank answers are failures, not predictions
    own = _score(capsys, ans, lab, "pope")
    assert (own["n"], own["n_failed"]) == (len(kept) - n_blank, len(failed) + n_blank)
    assert own["parser_mode"].startswith("halluflow:")
    exact = _score(capsys, ans, lab, "exact")
    assert exact["n_failed"] == own["n_failed"] and exact["accuracy"] != lmms["accuracy"]


texts = st.text(alphabet=st.sampled_from(list("yesnoYESNO .,;!?-/\t\n\x1c\x85\u2028\u200b19")), max_size=16)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(texts, st.sampled_from(["yes", "no"])), min_size=1, max_size=30))
def test_library_equals_the_peers_on_arbitrary_text(pairs):
    answers, labels = [a for a, _ in pairs], [lab for _, lab in pairs]
    lmms = pope_metrics(answers, labels, parser="lmms_eval")
    assert {k: lmms[k] for k in KEYS} == lmms_eval_pope(answers, labels) and lmms["n_failed"] == 0
    vlm = pope_metrics(answers, labels, parser="vlmevalkit")
    ref = vlmevalkit_pope(answers, labels)
    assert {k: vlm[k] for k in KEYS} == {k: ref[k] for k in KEYS} and vlm["n_failed"] == 0


def test_hand_cases_of_the_peers():
    # lmms-eval: "" is scored (wrong, neither yes nor no): accuracy 1/3, recall ignores it, precision 1
    m = pope_metrics(["yes", "", " NO\x1c"], ["yes", "yes", "yes"], parser="lmms_eval")
    assert (m["n"], m["n_failed"], m["accuracy"], m["precision"], m["recall"]) == (3, 0, 1 / 3, 1.0, 0.5)
    # VLMEvalKit: "" and "Unknown" are Unknown, a miss in recall
    m = pope_metrics(["Yes.", "", "Unknown", "no,"], ["yes", "yes", "yes", "no"], parser="vlmevalkit")
    assert (m["n"], m["accuracy"], m["recall"], m["n_unknown"]) == (4, 0.5, 1 / 3, 2)
    assert [yorn_extraction(t) for t in ("Yes.", "", "Unknown", "no,")] == ["Yes", "Unknown", "Unknown", "No"]
    # the peers print 0 where a ratio is undefined; halluflow's own parsers print null
    assert pope_metrics(["no"], ["no"], parser="vlmevalkit")["precision"] == 0
    assert pope_metrics(["no"], ["no"], parser="exact")["precision"] is None
    # a record that never got an answer is out in every mode; every mode says so in its counts
    for parser in ("lmms_eval", "vlmevalkit", "pope"):
        m = pope_metrics(["yes", None, "no"], ["yes", "yes", "no"], parser=parser, status=["ok", "ok", "failed"])
        assert (m["n"], m["n_failed"], m["accuracy"]) == (1, 2, 1.0), parser


def test_peer_modes_refuse_a_positive_no():
    from halluflow.errors import InputError

    with pytest.raises(InputError, match="positive class is always yes"):
        pope_metrics(["yes"], ["yes"], parser="lmms_eval", positive="no")


def test_config_refuses_a_peer_parser_with_positive_no():
    from halluflow.config import validate_config
    from halluflow.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^config key 'scoring.positive': 'no' with parser vlmevalkit"):
        validate_config({"scoring": {"parser": "vlmevalkit", "positive": "no"}})
    validate_config({"scoring": {"parser": "vlmevalkit", "positive": "yes"}})  # fine
