"""The release's own yes/no reader and the default-rule count: an answer no reader can read (another language, an
emoji, a refusal, a hedge) is unknown and excluded under the release reader, and every other parser, peers
included, says how many answers it read only by its default rule (POPE: no negation word → yes) while keeping
its peer's numbers."""

from __future__ import annotations

import json
import sys

import pytest
from helpers import REPO

from halluflow.cli import main
from halluflow.metrics.parsers import (
    PARSERS,
    parse_yes_no,
    release_reader_source,
    unreadable_kind,
    unreadable_table,
)
from halluflow.metrics.pope import pope_metrics

sys.path.insert(0, str(REPO / "bench"))
from official_ports import pope_evaluate  # noqa: E402
from peer_ports import lmms_eval_pope, vlmevalkit_pope  # noqa: E402

# The four answers the issue names: Japanese yes, a thumbs-up, a refusal, German no.
UNREADABLE = ["はい", "👍", "I'm sorry, but I can't help with that.", "Nein"]
READABLE = ["Yes", "No", "Yes", "No"]

ROBUST = {
    "YES": "yes",
    "NO.": "no",
    "No!": "no",
    "\tYes\t": "yes",
    "no\tcat": "no",
    "Yes!!!": "yes",
    "yes,": "yes",
    "Not really": "no",
    "Nope.": "no",
    "...yes": "yes",
    "Yes, there is a dog.": "yes",
    "There is no dog in the image.": "no",
    "There isn\u2019t a dog": "no",  # curly apostrophe
    "The image shows a dog": "yes",
    "YES. No.": "yes",  # the first sentence decides
    # documented unknowns: hedges, refusals, other languages, emoji, no answer at all
    "Not sure": None,
    "Maybe": None,
    "Probably yes": None,
    "Yes and no": None,
    "It is hard to tell.": None,
    "As an AI, I cannot see images.": None,
    "Non": None,
    "Нет": None,
    "いいえ": None,
    "👎": None,
    "A dog.": None,
}


@pytest.mark.parametrize("text,expected", list(ROBUST.items()))
def test_release_reader_is_robust_and_says_unknown(text, expected):
    assert parse_yes_no(text, "release") == expected


def test_unreadable_kinds_come_from_the_shared_table():
    assert [unreadable_kind(t) for t in UNREADABLE] == ["non_english", "emoji", "refusal", "non_english"]
    assert unreadable_kind("Maybe") == "hedge" and unreadable_kind("") == "failed" and unreadable_kind("Yes") is None
    table = unreadable_table()
    assert "nein" in table["foreign_no"] and "はい" in table["foreign_yes"] and "maybe" in table["hedge"]


def test_standalone_source_reads_as_the_module():
    ns: dict = {}
    exec(release_reader_source(), ns)  # stdlib only: what an exported task runs without halluflow
    texts = [*ROBUST, *UNREADABLE, *READABLE, "I cannot answer that.", "Ja", "There are two dogs"]
    assert [ns["release_yes_no"](t) for t in texts] == [parse_yes_no(t, "release") for t in texts]


def test_four_unreadable_answers_are_unknown_and_excluded_under_the_release_reader():
    answers = READABLE + UNREADABLE
    labels = ["yes", "no", "yes", "no"] + ["yes", "yes", "no", "no"]
    out = pope_metrics(answers, labels, parser="release")
    assert out["n_unknown"] == 4 and out["n"] == 4 and out["n_default_rule"] == 0
    # the four left out of every ratio: the four readable answers are all right
    assert (out["accuracy"], out["precision"], out["recall"], out["yes_ratio"]) == (1.0, 1.0, 1.0, 0.5)
    assert (out["tp"], out["fp"], out["tn"], out["fn"], out["pred_yes"]) == (2, 0, 2, 0, 2)
    assert "never read as yes" in out["parser_mode"]


# n_default_rule per parser on the four: POPE's rule reads all four as yes; the exact-match parsers leave them unknown
# and count them wrong (their default); the release reader has no default rule.
DEFAULT_RULE = {"pope": 4, "pope_official": 4, "pope_lower": 4, "lmms_eval": 4, "vlmevalkit": 4, "amber": 4}


@pytest.mark.parametrize("parser", sorted(PARSERS))
def test_every_parser_states_its_default_rule_count(parser):
    answers = READABLE + UNREADABLE
    labels = ["yes", "no", "yes", "no"] + ["yes", "yes", "no", "no"]
    out = pope_metrics(answers, labels, parser=parser)
    assert isinstance(out["n_default_rule"], int)
    if parser in DEFAULT_RULE:
        assert out["n_default_rule"] == DEFAULT_RULE[parser]
    if parser == "release":
        assert out["n_default_rule"] == 0
    if out["n_default_rule"]:
        assert sum(out["default_rule_reasons"].values()) == out["n_default_rule"]


def test_peer_numbers_unchanged_only_the_count_is_new():
    answers = READABLE + UNREADABLE + ["There isn't a dog", "NO", "Not really"]
    labels = ["yes", "no", "yes", "no"] + ["yes", "yes", "no", "no"] + ["no", "no", "no"]
    keys = ("accuracy", "precision", "recall", "f1", "yes_ratio")
    official = pope_evaluate([{"answer": a} for a in answers], labels)
    ours = pope_metrics(answers, labels, parser="pope")
    assert {k: ours[k] for k in keys} == {k: official[k] for k in keys}
    # POPE reads all four unreadable answers, "There isn't a dog", "NO" and "Not really" as yes by its default rule
    assert ours["n_default_rule"] == 7
    assert ours["default_rule_reasons"] == {"negation": 3, "non_english": 2, "emoji": 1, "refusal": 1}
    for parser, port in (("lmms_eval", lmms_eval_pope), ("vlmevalkit", vlmevalkit_pope)):
        ours, theirs = pope_metrics(answers, labels, parser=parser), port(answers, labels)
        assert {k: ours[k] for k in keys if k in theirs} == {k: theirs[k] for k in keys if k in theirs}, parser
        assert ours["n_default_rule"] == ours["n_unknown"] > 0


def test_score_pope_says_the_count_in_one_line(tmp_path, capsys):
    answers, labels = tmp_path / "a.jsonl", tmp_path / "l.jsonl"
    texts = READABLE + UNREADABLE
    truth = ["yes", "no", "yes", "no"] + ["yes", "yes", "no", "no"]
    answers.write_text("".join(json.dumps({"question_id": i, "answer": t}) + "\n" for i, t in enumerate(texts)))
    labels.write_text("".join(json.dumps({"question_id": i, "label": t}) + "\n" for i, t in enumerate(truth)))
    assert main(["score", "pope", "--answers", str(answers), "--labels", str(labels)]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["n_default_rule"] == 4 and out["accuracy"] == 0.75  # POPE's number: the four read as yes, 2 right
    (line,) = [x for x in captured.err.splitlines() if x.strip()]
    assert "4 of 8 answers read only by the pope parser's default rule" in line and "2 non english" in line
    assert main(["score", "pope", "--answers", str(answers), "--labels", str(labels), "--parser", "release"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert (out["n_unknown"], out["n"], out["accuracy"], out["n_default_rule"]) == (4, 4, 1.0, 0)
    assert captured.err.strip() == ""


def _ode_scored(parser: str):
    import polars as pl

    from halluflow.ode.scoring import score_answers

    texts = READABLE + UNREADABLE
    truth = ["yes", "no", "yes", "no"] + ["yes", "yes", "no", "no"]
    queries = pl.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(8)],
            "distribution": ["standard"] * 4 + ["fictional"] * 4,
            "pair_kind": "entity_entity",
            "task": "discriminative",
            "query_type": "existence",
            "attribute_kind": None,
            "truth": truth,
            "objects": [["dog"]] * 8,
        },
        schema_overrides={"attribute_kind": pl.String},
    )
    answers = pl.DataFrame({"query_id": [f"q{i}" for i in range(8)], "model": "m", "answer": texts, "status": "ok"})
    return score_answers(queries, answers, ["dog"], parser=parser)


def test_ode_metrics_count_the_default_rule_and_exclude_the_release_readers_unknowns():
    from halluflow.ode.scoring import ode_metrics

    pope = ode_metrics(_ode_scored("pope"), "m", parser="pope", breakdowns=("distribution",))
    assert pope["n_default_rule"] == 4 and pope["pope"]["n_default_rule"] == 4
    assert pope["default_rule_reasons"] == {"non_english": 2, "emoji": 1, "refusal": 1}
    assert pope["by_distribution"]["fictional"]["pope"]["n_default_rule"] == 4
    assert pope["by_distribution"]["standard"]["pope"]["n_default_rule"] == 0
    assert pope["pope"]["accuracy"] == 0.75  # POPE's reading: the four read as yes, two of them right
    release = ode_metrics(_ode_scored("release"), "m", parser="release", breakdowns=("distribution",))
    assert (release["n_unknown"], release["n_default_rule"], release["pope"]["n"]) == (4, 0, 4)
    assert release["pope"]["accuracy"] == 1.0 and release["amber"]["overall"]["accuracy"] == 100.0
    assert release["by_distribution"]["fictional"]["pope"]["n"] == 0  # nothing it could read there
    assert release["hallucination_rate"] == 0.0 and release["n_judged"] == 4
