"""One failed-answer rule (halluflow.metrics.parsers.is_failed / failed_mask) in every scorer and stage: the same
answers are failed in `score pope`, `score ghr`, `score chair`, `score amber`, `score caos`, ODE scoring and the
POPE/AMBER sources; one n_failed meaning; the limit refuses NaN, in the CLI and in the config."""

from __future__ import annotations

import json
import unicodedata

import polars as pl
import pytest

from halluflow.cli import main
from halluflow.errors import ConfigError, InputError
from halluflow.metrics.parsers import PARSERS, PEER_PARSERS, failed_mask, is_blank, is_failed, parse_yes_no

# Blank under halluflow's rule; each is a failure in every scorer (the control-only "\x1c" was "yes" in POPE)
BLANK = ["", " ", "\t\n", "\x1c", "\x1f\x1e", "\x00", "\u200b", "\ufeff", "\u3000", "\x85", " \u2028 "]
GIVEN = ["yes", "No.", "\x1cyes", "a\u200b", "-", "0"]


def _blank(text: str) -> bool:
    # the rule as docs/failed-answers.md words it, written here from the text, not from the code
    return all(c.isspace() or unicodedata.category(c) in ("Cc", "Cf") for c in text)


def test_scalar_and_vectorised_rule_agree_on_every_character():
    chars = [chr(c) for c in range(0x3100)] + [chr(c) for c in range(0xE0000, 0xE0082)] + ["\U0001d173", "\U000110bd"]
    texts = chars + [c + c for c in chars[:300]] + [" " + c for c in chars] + BLANK + GIVEN
    scalar = [is_failed(t) for t in texts]
    assert scalar == failed_mask(pl.Series(texts)).to_list()
    assert scalar == failed_mask(pl.Series(texts).cast(pl.Categorical)).to_list()
    assert scalar == [_blank(t) for t in texts]  # Python 3.11's Unicode: what the constant was written from
    assert all(is_blank(chr(c)) for c in range(0x110000) if chr(c).isspace())  # every str.strip() character


def test_status_and_missing_answers_are_failed_in_every_mode():
    for parser in PARSERS:
        assert is_failed("yes", "failed", parser) and is_failed(None, None, parser) and is_failed(1, None, parser)
        assert not is_failed("yes", "ok", parser)
        assert parse_yes_no("\x1c", parser) is None or parser in PEER_PARSERS  # POPE's script: "\x1c" is yes
    # blank answers: failed under halluflow's own parsers only; the peers see them
    assert is_failed("", parser="pope") and not is_failed("", parser="lmms_eval")
    assert failed_mask(pl.Series(["", None, "x"]), parser="vlmevalkit").to_list() == [False, True, False]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _cli(capsys, *args) -> dict:
    assert main([*args, "--max-failed-fraction", "1"]) == 0
    return json.loads(capsys.readouterr().out)


def test_pope_and_ghr_fail_the_same_answers(tmp_path, capsys):
    answers = BLANK + GIVEN
    labels = _write(tmp_path / "l.jsonl", [{"question_id": i, "label": "yes"} for i in range(len(answers))])
    pope = _write(tmp_path / "a.jsonl", [{"question_id": i, "answer": a} for i, a in enumerate(answers)])
    m = _cli(capsys, "score", "pope", "--answers", pope, "--labels", labels)
    assert (m["n_failed"], m["n"]) == (len(BLANK), len(GIVEN))

    instances = [
        {
            "instance_id": f"11{i:04d}",
            "meta_inf": {"category": "object", "subtype": "existence", "risk_level": 1},
            "source_inf": {"source_dataset": "test", "source_id": str(i)},
            "seed_data": {"type": "YON", "image_path": "0.png", "question": "Is there a dog?", "ground_truth": "Yes"},
        }
        for i in range(len(answers))
    ]
    (tmp_path / "u.json").write_text(json.dumps(instances))
    ghr = _write(tmp_path / "g.jsonl", [{"instance_id": f"11{i:04d}", "answer": a} for i, a in enumerate(answers)])
    g = _cli(
        capsys, "score", "ghr", "--instances", str(tmp_path / "u.json"), "--answers", ghr, "--similarity", "trigram"
    )
    assert (g["n_failed"], g["n"], g["n_missing"]) == (len(BLANK), len(GIVEN), 0)

    # an instance with no answer line is reported and counts against the limit
    _write(tmp_path / "g.jsonl", [{"instance_id": "110000", "answer": "Yes"}])
    args = ["score", "ghr", "--instances", str(tmp_path / "u.json"), "--answers", ghr, "--similarity", "trigram"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"0 of {len(answers)} answers failed or are empty and {len(answers) - 1} are" in err
    assert _cli(capsys, *args)["n_missing"] == len(answers) - 1


def _amber_dir(tmp_path):
    d = tmp_path / "amber"
    d.mkdir()
    ann = [{"id": 1, "type": "generative", "truth": ["dog"], "hallu": ["cat"]}] + [
        {"id": i, "type": "discriminative-hallucination", "truth": "no" if i % 2 else "yes"} for i in range(2, 8)
    ]
    (d / "annotations.json").write_text(json.dumps(ann))
    (d / "relation.json").write_text(json.dumps({"dog": [], "cat": []}))
    (d / "safe_words.txt").write_text("")
    return d


def test_amber_honours_status_failed(tmp_path, capsys):
    d = _amber_dir(tmp_path)
    rows = [{"id": 1, "response": "A dog."}] + [{"id": i, "response": "No" if i % 2 else "Yes"} for i in range(2, 8)]
    rows[2] = {**rows[2], "status": "failed"}  # a right answer whose request is recorded as failed
    rows[3] = {**rows[3], "response": "\x1c"}
    (tmp_path / "r.json").write_text(json.dumps(rows))
    m = _cli(capsys, "score", "amber", "--responses", str(tmp_path / "r.json"), "--annotations", str(d))
    assert m["n_failed"] == 2 and m["existence"]["n"] == 4 and m["existence"]["accuracy"] == 100.0
    assert main(["score", "amber", "--responses", str(tmp_path / "r.json"), "--annotations", str(d)]) == 1
    assert "2 of 7 answers failed or are empty" in capsys.readouterr().err


def test_chair_and_caos_honour_the_rule(tmp_path, capsys):
    captions = [{"image_id": "1", "caption": "A dog and a cat."}, {"image_id": "2", "caption": "\x1c"}]
    captions.append({"image_id": "3", "caption": "A cat.", "status": "failed"})
    truth = _write(tmp_path / "t.jsonl", [{"image_id": str(i), "objects": ["dog"]} for i in (1, 2, 3)])
    caps = _write(tmp_path / "c.jsonl", captions)
    m = _cli(capsys, "score", "chair", "--captions", caps, "--truth", truth)
    assert (m["n_failed"], m["n_captions"], m["chair_s"]) == (2, 1, 1.0)

    vectors = tmp_path / "v.tsv"
    vectors.write_text("dog\t1\t0\ncat\t0.6\t0.8\n")
    frequent = tmp_path / "f.txt"
    frequent.write_text("dog\ncat\n")
    args = ["score", "caos", "--objects", caps, "--truth", truth, "--frequent", str(frequent)]
    args += ["--embedder", "table", "--vectors", str(vectors), "--k", "1"]
    c = _cli(capsys, *args)
    assert c["n_failed"] == 2 and c["objects"]["n_captions"] == 1 and c["n_hallucinated"] == 1
    assert main(args) == 1 and "2 of 3 answers failed or are empty" in capsys.readouterr().err


def _yes_no_queries(truth: list[str]) -> pl.DataFrame:
    """Three existence questions of one image in the release's queries layout (what scoring and export read)."""
    n = len(truth)
    return pl.DataFrame(
        {
            "query_id": [f"q{i + 1}" for i in range(n)],
            "image_id": ["i1"] * n,
            "question": ["Is there a dog?"] * n,
            "distribution": ["standard"] * n,
            "pair_kind": ["entity+entity"] * n,
            "task": ["discriminative"] * n,
            "query_type": ["existence"] * n,
            "attribute_kind": [None] * n,
            "truth": truth,
            "objects": [["dog"]] * n,
        }
    )


def test_ode_scoring_counts_failed_answers_in_every_block():
    from halluflow.ode.scoring import ode_metrics, score_answers

    queries = _yes_no_queries(["yes", "no", "yes"])
    answers = pl.DataFrame(
        {"query_id": ["q1", "q2", "q3"], "model": ["m"] * 3, "answer": ["Yes", "\x1c", ""], "status": ["ok"] * 3}
    )
    m = ode_metrics(score_answers(queries, answers, ["dog"]), "m")
    assert m["n_failed"] == m["pope"]["n_failed"] == 2 and m["pope"]["n"] == 1
    assert m["parser_mode"].startswith("halluflow:")
    peer = ode_metrics(score_answers(queries, answers, ["dog"], parser="lmms_eval"), "m", parser="lmms_eval")
    assert peer["n_failed"] == 0 and peer["pope"]["n"] == 3 and peer["parser_mode"].startswith("peer: lmms-eval")


def test_pope_source_has_one_n_failed(tmp_path):
    """The POPE source's metrics: `n_failed` (top level and pope.n_failed) = every answer the rule left out;
    `n_requests_failed` = those whose request failed. The written answer file carries the failures, so the CLI
    on it gives the same numbers."""
    from halluflow.metrics.pope import score_files
    from halluflow.workflow.score import score_source

    labels = _write(tmp_path / "l.jsonl", [{"question_id": i, "label": "yes" if i % 2 else "no"} for i in range(6)])
    shard = tmp_path / "000.parquet"
    pl.DataFrame(
        {
            "query_id": [str(i) for i in range(6)],
            "model": ["m"] * 6,
            "answer": ["No", "Yes", "  ", "Yes", None, "Yes"],
            "status": ["ok", "ok", "ok", "ok", "failed", "failed"],
        }
    ).write_parquet(shard)
    out = tmp_path / "answers.jsonl"

    def scored(parser: str) -> dict:
        source = {"kind": "pope", "path": labels}
        return score_source(
            "pope", [str(shard)], source, out, tmp_path / "m.json", "m", {"parser": parser, "positive": "yes"}
        )

    metrics = scored("pope")
    assert (metrics["n_answers"], metrics["n_failed"], metrics["n_requests_failed"]) == (6, 3, 2)
    assert metrics["pope"]["n_failed"] == 3 and metrics["pope"]["n"] == 3 and metrics["pope"]["accuracy"] == 1.0
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r.get("status", "ok") for r in written] == ["ok"] * 4 + ["failed"] * 2
    assert score_files(out, labels, max_failed_fraction=1) == metrics["pope"]
    # under a peer parser the blank answer is scored (wrong), the failed requests are still out
    peer = scored("lmms_eval")
    assert (peer["n_failed"], peer["n_requests_failed"], peer["pope"]["n"]) == (2, 2, 4)


def test_amber_source_writes_failures_with_their_status(tmp_path):
    from halluflow.workflow.score import score_source

    d = _amber_dir(tmp_path)
    shard = tmp_path / "000.parquet"
    pl.DataFrame(
        {
            "query_id": ["1", "2", "3"],
            "model": ["m"] * 3,
            "answer": ["A dog.", "No", "No"],
            "status": ["ok", "ok", "failed"],
        }
    ).write_parquet(shard)
    out = tmp_path / "responses.json"
    source = {"kind": "amber", "path": None, "annotations": str(d / "annotations.json")}
    metrics = score_source("amber", [str(shard)], source, out, tmp_path / "m.json", "m", {})
    assert json.loads(out.read_text())[2] == {"id": 3, "response": "No", "status": "failed"}
    assert metrics["n_failed"] == metrics["amber"]["n_failed"] == metrics["n_requests_failed"] == 1


def test_the_limit_refuses_nan(tmp_path, capsys):
    from halluflow.config import validate_config
    from halluflow.metrics.parsers import check_failed

    with pytest.raises(ConfigError, match=r"^config key 'answer.max_failed_fraction': \.nan is not a number"):
        validate_config({"answer": {"max_failed_fraction": float("nan")}})
    with pytest.raises(InputError, match="--max-failed-fraction nan: expected a number between 0 and 1"):
        check_failed(5, 10, float("nan"), "score pope")
    labels = _write(tmp_path / "l.jsonl", [{"question_id": 0, "label": "yes"}])
    answers = _write(tmp_path / "a.jsonl", [{"question_id": 0, "answer": ""}])
    argv = ["score", "pope", "--answers", answers, "--labels", labels, "--max-failed-fraction", "nan"]
    with pytest.raises(SystemExit):
        main(argv)
    assert "max-failed-fraction" in capsys.readouterr().err


@pytest.mark.parametrize("reader", ["release", "pope_lower"])
def test_exported_task_parser_is_the_named_variant(reader):
    """The lmms-eval task `release export` writes must run without halluflow, so it carries its own copy of the
    release task's reader: it reads every answer as the shared module's named variant does (a blank answer is
    failed first, as halluflow's failed-answer rule says)."""
    from halluflow.ode.export import lmms_eval_utils
    from halluflow.ode.task import task_definition

    space: dict = {}
    source = lmms_eval_utils([], task_definition(None, reader))
    exec(compile(source, "utils.py", "exec"), space)  # noqa: S102 - our own generated file
    texts = ["Yes", "No, it is not.", "NO.", "Not really", "yes, no", "There is no dog", "maybe", "None", "no,"]
    texts += ["I see\tno dog", "not.", "No", "yes. no", "Nein", "はい", "I cannot tell.", "YES!!", "  no  "]
    for text in texts:
        assert space["read_answer"](text) == parse_yes_no(text, reader), text
    assert space["read_answer"](" ") == space["read_answer"]("") == "failed"


def test_cedi_labels_a_blank_answer_empty():
    from halluflow.cedi.parser import answer_label

    for text in BLANK + [None]:
        assert answer_label(text, True) == answer_label(text, False) == "empty", repr(text)
    assert answer_label("Yes, it is.", True) == "yes" and answer_label("\x1cyes", True) == "yes"


def test_exports_and_compare_apply_the_rule():
    from pathlib import Path

    from halluflow.metrics.uncertainty import model_intervals
    from halluflow.ode.export import dpo_records

    queries = _yes_no_queries(["no"] * 3)
    # "\u200b" survives str.strip(): it used to make a preference pair with an invisible "rejected" answer
    answers = pl.DataFrame(
        {
            "query_id": ["q1", "q2", "q3"],
            "answer": ["Yes", "\u200b", "Yes"],
            "status": ["ok", "ok", "failed"],
            "parsed": ["yes"] * 3,
        }
    )
    assert [r["id"] for r in dpo_records(Path("."), queries, answers)] == ["q1"]
    table = answers.with_columns(model=pl.lit("m"), truth=pl.lit("no"), hallucinated=pl.lit(True))
    out = model_intervals(table, n_resamples=20)
    assert (out["n_failed"], out["accuracy"]["n"]) == (2, 1)


def test_backends_record_a_blank_reply_as_failed():
    from halluflow.backends.base import Result, finish_result

    for text in BLANK:
        done = finish_result(Result(text=text))
        assert done.text is None and done.error is not None, repr(text)
    assert finish_result(Result(text=" Yes\n")).text == "Yes"
