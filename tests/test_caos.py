"""CAOS scores on hand-computable embeddings (3-d vectors whose cosines are 0, 1/2, 1/√2 or 1), the oracle vote,
the release entry point and the `halluflow score caos` CLI."""

from __future__ import annotations

import json
import math
from typing import Sequence

import numpy as np
import polars as pl
import pytest

from halluflow.backends.base import VLM, BackendInfo, VLMRequest
from halluflow.caos.extract import ExtractedObject, ObjectExtractor, build_vocabulary
from halluflow.caos.scores import (
    Oracle,
    caos_summary,
    cosine_matrix,
    judge_caption,
    metrics_side_by_side,
    object_rows,
    object_statistics,
    oracle_yes_no,
    score,
    score_release_answers,
    sequential,
    vote,
)
from halluflow.cli import main
from halluflow.errors import ConfigError, InputError
from halluflow.models import registry
from halluflow.workflow.caos import caos_diagnosis, caos_score

R2 = 1 / math.sqrt(2)
# dog ⟂ cat ⟂ car; frisbee = dog + cat; person = dog + car.  cos(frisbee, dog) = 1/√2, cos(frisbee, person) = 1/2.
VECTORS = {
    "dog": [1, 0, 0],
    "cat": [0, 1, 0],
    "car": [0, 0, 1],
    "frisbee": [1, 1, 0],
    "person": [1, 0, 1],
    "hot": [0, 1, 0],
}


@pytest.fixture
def table():
    return registry.create("embedder", {"backend": "table", "vectors": VECTORS})


@pytest.fixture
def vocab():
    return build_vocabulary(extra_terms=sorted(VECTORS) + ["hot dog", "unicorn"], synonyms=False)


def objs(names, vocab):
    return [ExtractedObject(n, n, i, "given", n in vocab) for i, n in enumerate(names)]


def caption(names, truth, vocab, cid="c1"):
    return judge_caption(cid, cid, objs(names, vocab), truth, vocab)


def test_cosine_matrix_hand_values_and_zero_vectors():
    a = np.array([[1.0, 0, 0], [1, 1, 0], [0, 0, 0]])
    b = np.array([[1.0, 0, 0], [1, 0, 1]])
    m = cosine_matrix(a, b)
    assert m[0].tolist() == pytest.approx([1.0, R2])
    assert m[1].tolist() == pytest.approx([R2, 0.5])
    assert np.isnan(m[2]).all()  # a zero vector's cosine is undefined, not 0


def test_per_object_scores_by_hand(table, vocab):
    # caption: dog (real), cat (hallucinated), frisbee (hallucinated); truth {dog}; frequent: person, car, dog.
    caps = [caption(["dog", "cat", "frisbee"], ["dog"], vocab)]
    rows = object_rows(caps, ["person", "car", "dog"], {"t": table}, k=2)
    assert [r["hallucinated"] for r in rows] == [False, True, True]
    dog, cat, fris = rows
    assert dog["t_caos_t"] is None  # real objects get no CAOS score
    assert cat["t_caos_t"] == pytest.approx(0.0)
    assert cat["t_caos_x"] == pytest.approx(0.0) and cat["t_caos_x_nearest"] == "dog"
    assert fris["t_caos_t"] == pytest.approx(R2) and fris["t_caos_t_nearest"] == "dog"
    assert fris["t_caos_x"] == pytest.approx(R2)  # max over {dog, cat}: both 1/√2
    assert fris["t_caos_k"] == pytest.approx(0.5) and fris["t_caos_k_nearest"] == "person"  # top-2 = person, car
    assert fris["t_caos_k1"] == pytest.approx(0.5)
    assert fris["t_caos_k3"] == pytest.approx(R2)  # dog enters the top-3
    s = caos_summary(rows, "t", k=2)
    assert s["caos_t"] == pytest.approx(R2 / 2, abs=1e-6)
    assert s["caos_x"] == pytest.approx(R2 / 2, abs=1e-6)
    assert s["caos_k"] == pytest.approx(0.25)
    assert s["caos_t_over_x"] == pytest.approx(1.0)
    assert s["caos_x_over_k"] == pytest.approx((R2 / 2) / 0.25, abs=1e-5)
    assert s["caos_avg"] == pytest.approx((R2 / 2 + R2 / 2 + 0.25) / 3, abs=1e-6)
    assert s["caos_k_sweep"]["1"] == pytest.approx(0.25) and s["caos_k_sweep"]["3"] == pytest.approx(R2 / 2, abs=1e-6)
    assert s["n_hallucinated"] == 2 and s["n_x"] == 2


def test_caos_x_undefined_at_position_zero_is_excluded_from_mean(table, vocab):
    # cat first (hallucinated, no predecessor), then frisbee (hallucinated, X = cos(frisbee, cat) = 1/√2).
    caps = [caption(["cat", "frisbee"], ["car"], vocab)]
    rows = object_rows(caps, ["dog"], {"t": table}, k=1, ks=[1])
    assert rows[0]["t_caos_x"] is None
    s = caos_summary(rows, "t", k=1, ks=[1])
    assert s["n_hallucinated"] == 2 and s["n_x"] == 1
    assert s["caos_x"] == pytest.approx(R2, abs=1e-6)  # the mean over one defined value, not (0 + 1/√2) / 2
    assert s["caos_t"] == pytest.approx(0.0)  # both ⟂ car
    assert s["caos_t_over_x"] == pytest.approx(0.0)
    # K (top-1 = dog): cat·dog = 0, frisbee·dog = 1/√2 → mean 1/(2√2); X/K = (1/√2) / (1/(2√2)) = 2
    assert s["caos_k"] == pytest.approx(R2 / 2, abs=1e-6)
    assert s["caos_x_over_k"] == pytest.approx(2.0, abs=1e-5)


def test_multiword_object_is_mean_of_word_vectors(table, vocab):
    # "hot dog" = mean(hot, dog) = (1/2, 1/2, 0) → cos with frisbee (1, 1, 0) = 1 and with dog = 1/√2.
    caps = [caption(["frisbee", "hot dog"], ["dog"], vocab)]
    rows = object_rows(caps, ["dog"], {"t": table}, k=1, ks=[1])
    assert rows[1]["t_caos_x"] == pytest.approx(1.0)
    assert rows[1]["t_caos_t"] == pytest.approx(R2)


def test_oov_object_scores_are_undefined_not_zero(table, vocab):
    caps = [caption(["dog", "unicorn"], ["dog"], vocab)]
    rows = object_rows(caps, ["dog"], {"t": table}, k=1, ks=[1])
    assert rows[1]["hallucinated"] is True
    assert rows[1]["t_caos_t"] is None and rows[1]["t_caos_x"] is None and rows[1]["t_caos_k"] is None
    s = caos_summary(rows, "t", k=1, ks=[1])
    assert s["n_hallucinated"] == 1 and s["n_t"] == 0 and s["caos_t"] is None and s["caos_avg"] is None


def test_no_hallucination_and_empty_captions_give_nulls_not_nan(table, vocab):
    caps = [caption(["dog"], ["dog"], vocab, "a"), caption([], ["cat"], vocab, "b")]
    summary, rows = score(caps, ["dog"], {"t": table}, k=1)
    s = summary["embedders"]["t"]
    assert s["n_hallucinated"] == 0
    for key in ("caos_t", "caos_x", "caos_k", "caos_t_over_x", "caos_x_over_k", "caos_avg"):
        assert s[key] is None
    assert all(v is None for v in s["caos_k_sweep"].values())
    o = summary["objects"]
    assert o["precision"] == 1.0 and o["recall"] == 0.5 and o["objects_per_caption"] == 0.5
    assert o["chair_i"] == 0.0 and o["chair_s"] == 0.0
    json.dumps(summary, allow_nan=False)  # no NaN anywhere
    empty, _ = score([], ["dog"], {"t": table}, k=1)
    assert empty["objects"]["precision"] is None and empty["objects"]["objects_per_caption"] is None


def test_object_statistics_and_sequential_by_hand(vocab):
    caps = [
        caption(["dog", "cat", "car"], ["dog", "car", "person"], vocab, "a"),  # cat hallucinated at position 1
        caption(["cat", "dog"], ["dog"], vocab, "b"),  # cat hallucinated at position 0
    ]
    o = object_statistics(caps)
    assert o["n_objects"] == 5 and o["n_hallucinated"] == 2
    assert o["precision"] == pytest.approx(3 / 5) and o["chair_i"] == pytest.approx(2 / 5)
    assert o["recall"] == pytest.approx(3 / 4)  # dog, car of 3 + dog of 1
    assert o["chair_s"] == 1.0 and o["objects_per_caption"] == 2.5
    rows = object_rows(caps, [], {}, k=1, ks=[1])
    assert sequential(rows) == [
        {"position": 0, "n_objects": 2, "n_hallucinated": 1, "rate": 0.5},
        {"position": 1, "n_objects": 2, "n_hallucinated": 1, "rate": 0.5},
        {"position": 2, "n_objects": 1, "n_hallucinated": 0, "rate": 0.0},
    ]


def test_truth_is_canonicalised_through_synonyms():
    vocab = build_vocabulary(synonyms=True)
    cap = judge_caption(
        "c", "c", ObjectExtractor(vocab).extract("Two puppies near a man.").objects, ["dog", "people"], vocab
    )
    assert [o.name for o in cap.objects] == ["dog", "person"]
    assert cap.hallucinated == [False, False]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Yes, there is.", "yes"),
        ("no", "no"),
        ("There is no cat.", "no"),
        ("I think yes", "yes"),
        ("", None),
        ("maybe", None),
        ("Yes and no", "yes"),
    ],
)
def test_oracle_yes_no(text, expected):
    assert oracle_yes_no(text) == expected


def test_vote_rules_and_ties():
    assert vote(["yes", "yes", "no"]).present is True
    v = vote(["yes", "no"])
    assert v.tie and v.present is False  # default tie rule: absent → hallucinated
    assert vote(["yes", "no"], tie="present").present is True
    assert vote(["yes", "no", None], tie="exclude").present is None
    assert vote([None, None]).tie  # all abstain = a tie
    assert vote(["yes", "yes", "no"], rule="unanimous").present is False
    assert vote(["yes", "yes"], rule="unanimous").present is True
    assert vote(["no", "yes", "no"], rule="any").present is True
    v = vote(["yes", None, "no", "no"])
    assert (v.yes, v.no, v.abstain, v.tie, v.present) == (1, 2, 1, False, False)
    with pytest.raises(ConfigError, match="caos.oracle.vote"):
        vote(["yes"], rule="plurality")
    with pytest.raises(ConfigError, match="caos.oracle.tie"):
        vote(["yes"], tie="coin")


class ScriptedVLM(VLM):
    """A VLM backend answering from a fixed {object: answer} table, registered like any backend."""

    def __init__(self, answers: dict, name: str = "scripted"):
        self.answers, self.name, self.seen = answers, name, []

    def answer(self, requests: Sequence[VLMRequest]) -> list[str]:
        self.seen.extend(requests)
        out = []
        for r in requests:
            obj = r.prompt.removeprefix("Is there a ").removesuffix(" in the image?")
            out.append(self.answers.get(obj, "I cannot tell"))
        return out

    def describe(self) -> BackendInfo:
        return BackendInfo(role="vlm", backend="scripted", model=self.name, stand_in=True)


@pytest.fixture
def scripted_registry():
    registry.VLMS.register("scripted-test", f"{__name__}:ScriptedVLM")
    yield
    registry.VLMS._targets.pop("scripted-test", None)


def test_oracle_judges_out_of_domain_objects_with_ties(scripted_registry, vocab):
    members = [
        ("a", registry.create("vlm", {"backend": "scripted-test", "answers": {"kite": "Yes.", "zebra": "No."}})),
        ("b", registry.create("vlm", {"backend": "scripted-test", "answers": {"kite": "yes", "zebra": "Yes"}})),
    ]
    oracle = Oracle(members, rule="majority", tie="exclude")
    verdicts = oracle.judge([("q1", "images/x.png", "kite"), ("q1", "images/x.png", "zebra")])
    assert [v.present for v in verdicts] == [True, None]
    assert verdicts[1].tie and (verdicts[1].yes, verdicts[1].no) == (1, 1)
    assert members[0][1].seen[0].prompt == "Is there a kite in the image?"
    assert members[0][1].seen[0].image_path == "images/x.png"
    # kite and zebra are out of domain; the oracle decides them; dog (in domain) is judged against the truth.
    cap = judge_caption(
        "q1", "x", objs(["dog", "kite", "zebra"], vocab), ["cat"], vocab, {"kite": verdicts[0], "zebra": verdicts[1]}
    )
    assert cap.hallucinated == [True, False, None]
    assert cap.judged_by == ["truth", "oracle", "oracle"]
    stats = object_statistics([cap])
    assert stats["n_oracle_ties"] == 1 and stats["n_undecided"] == 1 and stats["precision"] == 0.5
    with pytest.raises(ConfigError, match="members"):
        Oracle([])


def _release_tables():
    queries = pl.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4"],
            "image_id": ["i1", "i1", "i2", "i3"],
            "image": ["images/i1.png", "images/i1.png", "images/i2.png", "images/i3.png"],
            "query_type": ["generative", "existence", "generative", "generative"],
            "objects": [["dog", "car"], ["dog", "car"], ["cat"], ["car"]],
        }
    )
    answers = pl.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4"],
            "model": ["m"] * 4,
            "answer": ["A dog chasing a cat and a frisbee.", "yes", "", "A car."],
            "status": ["ok", "ok", "ok", "failed"],
            "stand_in": [True] * 4,
        }
    )
    nodes = pl.DataFrame({"node": ["car", "dog", "cat", "person"], "frequency": [5, 9, 5, 1]})
    return queries, answers, nodes


def test_score_release_answers_end_to_end(table, vocab):
    queries, answers, nodes = _release_tables()
    ex = ObjectExtractor(build_vocabulary(graph_terms=nodes["node"].to_list() + ["frisbee"], synonyms=False))
    summary, objects, caps = score_release_answers(
        answers, queries, nodes, release_dir=None, extractor=ex, embedders={"t": table}, k=1, ks=[1, 2]
    )
    # q4 failed and q3's empty caption is a failed answer too (the shared rule), not a caption naming nothing
    assert summary["n_generative_queries"] == 3 and summary["n_answers_failed"] == 2
    assert summary["frequent_top"] == ["dog", "car"]  # dog 9, then car/cat tie at 5 broken by name
    assert summary["stand_in"] is True
    assert objects["object"].to_list() == ["dog", "cat", "frisbee"]
    assert objects["hallucinated"].to_list() == [False, True, True]
    assert objects["t_caos_x"].to_list()[2] == pytest.approx(R2)
    assert caps.sort("caption_id")["n_objects"].to_list() == [3]  # the empty caption is failed, not 0 objects
    assert summary["objects"]["recall"] == pytest.approx(1 / 2)  # dog of {dog, car}; q3's cat is not scored
    assert objects.schema["t_caos_k2"] == pl.Float64
    with pytest.raises(InputError, match="answers table: missing column 'status'"):
        score_release_answers(
            answers.drop("status"), queries, nodes, release_dir=None, extractor=ex, embedders={"t": table}
        )


def test_cli_score_caos(tmp_path, capsys):
    (tmp_path / "vec.tsv").write_text("".join(f"{w}\t" + "\t".join(map(str, v)) + "\n" for w, v in VECTORS.items()))
    (tmp_path / "o.jsonl").write_text(
        '{"image_id": "1", "objects": ["dog", "cat", "frisbee"]}\n{"image_id": "2", "caption": "A car and a person."}\n'
    )
    (tmp_path / "t.jsonl").write_text('{"image_id": "1", "objects": ["dog"]}\n{"image_id": "2", "truth": ["car"]}\n')
    (tmp_path / "f.txt").write_text("person\ncar\ndog\n")
    args = [
        "score",
        "caos",
        "--objects",
        str(tmp_path / "o.jsonl"),
        "--truth",
        str(tmp_path / "t.jsonl"),
        "--frequent",
        str(tmp_path / "f.txt"),
        "--embedder",
        "table",
        "--vectors",
        str(tmp_path / "vec.tsv"),
        "--k",
        "2",
        "--synonyms",
        "none",
    ]
    assert main(args) == 0
    first = capsys.readouterr().out
    out = json.loads(first)
    # hallucinated: cat (T 0, X 0, K 0), frisbee (T 1/√2, X 1/√2, K 1/2), person (T 1/√2, X 1/√2, K 1)
    assert out["n_hallucinated"] == 3
    assert out["caos_t"] == pytest.approx(2 * R2 / 3, abs=1e-6)
    assert out["caos_k"] == pytest.approx(0.5, abs=1e-6)
    assert [(r["image_id"], r["object"], r["position"]) for r in out["per_object"]] == [
        ("1", "cat", 1),
        ("1", "frisbee", 2),
        ("2", "person", 1),
    ]
    # paper Fig. 5 subsets: person is one of the top-3 frequent objects (person, car, dog) → left out here
    sub = out["subsets"]["without_top3_frequent"]
    assert sub["n_hallucinated"] == 2 and sub["caos_t"] == pytest.approx(R2 / 2, abs=1e-6)
    # with --synonyms none the vocabulary is the truth + frequent objects: cat and frisbee are out of domain
    assert out["subsets"]["out_of_domain"]["n_hallucinated"] == 2
    assert out["subsets"]["in_domain"]["n_hallucinated"] == 1 and out["subsets"]["in_domain"]["caos_k"] == 1.0
    assert main(args) == 0
    assert capsys.readouterr().out == first  # deterministic
    with pytest.raises(SystemExit):
        main(args[:-4] + ["--k", "0"])
    assert "--k: must be ≥ 1, got 0" in capsys.readouterr().err
    (tmp_path / "t.jsonl").write_text('{"image_id": "1", "objects": ["dog"]}\n')
    assert main(args) == 1
    assert "no truth for image_id '2'" in capsys.readouterr().err


def test_metrics_side_by_side_reads_the_scoring_json():
    # ODE metrics without the query-type breakdown: the overall F1, its scope said; CHAIR from the generative block.
    metrics = {
        "pope": {"f1": 0.8, "accuracy": 0.7},
        "by_distribution": {"random": {"pope": {"f1": 0.1}}},
        "generative": {"chair_s": 0.5, "chair_i": 0.25},
        "n": 3,
    }
    side = metrics_side_by_side(metrics, "metrics/m.json")
    assert (side["pope_f1"], side["chair_s"], side["chair_i"]) == (0.8, 0.5, 0.25)
    assert side["paths"] == {"pope_f1": "pope.f1", "chair_s": "generative.chair_s", "chair_i": "generative.chair_i"}
    assert side["scope"]["pope_f1"] == "every yes/no question (the metrics have no by_query_type breakdown)"
    empty = metrics_side_by_side(None)
    assert empty["pope_f1"] is None and empty["source"] is None


def test_run_workflow_writes_the_rule_outputs(tmp_path):
    from halluflow.io import write_json

    queries, answers, nodes = _release_tables()
    release = tmp_path / "release"
    release.mkdir()
    queries = queries.with_columns(
        pl.lit("standard").alias("distribution"),
        pl.lit(None, dtype=pl.String).alias("attribute_kind"),
        pl.Series("truth", [None, "yes", None, None], dtype=pl.String),
        pl.Series("target", [None, "dog", None, None], dtype=pl.String),
    )
    queries.write_parquet(release / "queries.parquet")
    answers.head(2).write_parquet(tmp_path / "000.parquet")
    answers.tail(2).write_parquet(tmp_path / "001.parquet")
    nodes.with_columns(pl.lit("entity").alias("type")).write_parquet(tmp_path / "nodes.parquet")
    write_json(tmp_path / "metrics.json", {"pope": {"f1": 0.5}, "chair": {"chair_s": 1.0, "chair_i": 0.5}})
    cfg = {
        "embedders": ["glove"],
        "k": 3,
        "k_sweep": [1, 3],
        "extractor": "vocab",
        "llm": None,
        "synonyms": True,
        "oracle": {"members": [], "vote": "majority", "tie": "absent", "question": "Is there a {obj}?"},
    }
    out = {k: str(tmp_path / "caos" / f"m.{k}") for k in ("json", "objects.parquet", "captions.parquet")}
    summary = caos_score(
        answers=[str(tmp_path / "000.parquet"), str(tmp_path / "001.parquet")],
        release=str(release / "manifest.json"),
        nodes=str(tmp_path / "nodes.parquet"),
        metrics=[str(tmp_path / "metrics.json")],
        caos=cfg,
        model="m",
        summary=out["json"],
        objects=out["objects.parquet"],
        captions=out["captions.parquet"],
    )
    saved = json.loads(open(out["json"]).read())
    assert saved == json.loads(json.dumps(summary))
    assert saved["model"] == "m" and saved["stand_in"] is True and saved["metrics"]["pope_f1"] == 0.5
    g = saved["embedders"]["glove"]
    assert g["n_hallucinated"] == 2 and g["n_x"] == 2  # "A dog chasing a cat and a frisbee." vs truth {dog, car}
    objects = pl.read_parquet(out["objects.parquet"])
    assert objects["object"].to_list() == ["dog", "cat", "frisbee"]
    assert objects["glove_caos_x_nearest"].to_list() == [None, "dog", "dog"]
    assert 0 < g["caos_t"] < 1 and 0 < g["caos_x"] < 1
    assert set(g["caos_k_sweep"]) == {"1", "3"}
    assert pl.read_parquet(out["objects.parquet"])["stand_in"].all()
    d = {k: str(tmp_path / "diag" / f"m.{k}") for k in ("parquet", "png", "distributions.parquet")}
    res = caos_diagnosis(
        answers=[str(tmp_path / "000.parquet"), str(tmp_path / "001.parquet")],
        release=str(release / "manifest.json"),
        captions=out["captions.parquet"],
        scores=[],
        diagnosis={"linkage": "average", "metric": "euclidean", "clusters": 2, "min_events": 1, "max_rows": 10},
        model="m",
        matrix=d["parquet"],
        heatmap=d["png"],
        distributions=d["distributions.parquet"],
    )
    # events: e-query q2 on dog (answered yes = correct) + generative q1 on dog and car (q3's empty caption failed)
    assert res["events"] == 3 and res["judged_from"] == "answers"
    tidy = pl.read_parquet(d["parquet"])
    rate = {(r["concept"], r["dimension"]): r["rate"] for r in tidy.to_dicts()}
    assert rate == {
        ("dog", "existence"): 0.0,
        ("dog", "generative"): 1.0,
        ("car", "generative"): 1.0,
    }


def test_run_workflow_llm_extractor_and_prior_oracle_ensemble(tmp_path):
    # Full out-of-domain path: the LLM adds "lighthouse" (not in the vocabulary); the oracle = two co-occurrence
    # prior VLMs (real backends) that both say no (the object is not in their graph) → hallucinated, no tie.

    queries, answers, nodes = _release_tables()
    release = tmp_path / "release"
    release.mkdir()
    queries.write_parquet(release / "queries.parquet")
    answers = answers.with_columns(pl.Series("answer", ["A dog by a lighthouse.", "yes", "", "A car."]))
    answers.write_parquet(tmp_path / "000.parquet")
    graph = tmp_path / "graph"
    graph.mkdir()
    nodes = pl.DataFrame(
        {
            "node": ["dog", "wall", "car"],
            "frequency": [9, 5, 2],
            "type": ["entity"] * 3,
            "states": [[], [], []],
            "actions": [[], [], []],
        }
    )
    nodes.write_parquet(graph / "nodes.parquet")
    pl.DataFrame({"source": ["dog"], "target": ["wall"], "weight": [3]}).write_parquet(graph / "edges.parquet")
    registry.LLMS.register("scripted-caos", "helpers:ScriptedLLM")
    try:
        cfg = {
            "embedders": ["glove"],
            "k": 1,
            "k_sweep": [1],
            "extractor": "llm",
            "llm": {
                "backend": "scripted-caos",
                "args": {"replies": {"lighthouse": '{"objects": ["dog", "lighthouse"]}'}},
            },
            "synonyms": False,
            "oracle": {
                "members": [],
                "vote": "majority",
                "tie": "exclude",
                "question": "Is there a {obj} in the image?",
            },
        }
        members = [{"backend": "prior", "args": {"threshold": 0.1}}, {"backend": "prior", "args": {"threshold": 0.9}}]
        out = {k: str(tmp_path / f"m.{k}") for k in ("json", "objects.parquet", "captions.parquet")}
        summary = caos_score(
            answers=[str(tmp_path / "000.parquet")],
            release=str(release / "manifest.json"),
            nodes=str(graph / "nodes.parquet"),
            metrics=[],
            caos=cfg,
            model="m",
            oracle_members=members,
            summary=out["json"],
            objects=out["objects.parquet"],
            captions=out["captions.parquet"],
        )
    finally:
        registry.LLMS._targets.pop("scripted-caos", None)
    objects = pl.read_parquet(out["objects.parquet"])
    assert objects["object"].to_list() == ["dog", "lighthouse"]
    row = objects.filter(pl.col("object") == "lighthouse").to_dicts()[0]
    assert row["extractor"] == "vocab+llm" and row["in_domain"] is False and row["judged_by"] == "oracle"
    assert (row["oracle_yes"], row["oracle_no"], row["oracle_tie"], row["hallucinated"]) == (0, 2, False, True)
    assert summary["objects"]["n_oracle_judged"] == 1 and summary["objects"]["n_oracle_ties"] == 0
    # Each member is named with its backend, model id, revision and stand_in, not only by name.
    assert (summary["oracle"]["vote"], summary["oracle"]["tie"]) == ("majority", "exclude")
    assert [(m["name"], m["role"], m["backend"]) for m in summary["oracle"]["members"]] == [
        ("oracle-0", "vlm", "prior"),
        ("oracle-1", "vlm", "prior"),
    ]
    assert all({"model", "revision", "stand_in"} <= set(m) for m in summary["oracle"]["members"])
    assert summary["extraction"]["llm_status"] == {"not_used": 0, "ok": 1, "unparsed": 0}  # the empty one failed
    g = summary["embedders"]["glove"]
    assert g["n_hallucinated"] == 1 and g["caos_x"] == g["caos_t"]  # lighthouse's only predecessor is dog, the truth
