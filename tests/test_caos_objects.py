"""CAOS objects as the paper means them: words about the image itself (picture, photo, image, scene, view,
background, shot...) are not objects; extracted and truth objects are compared by CHAIR synonym class (woman =
person); the CAOS page says how out-of-domain objects were judged, from the run's own settings."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from halluflow.backends.base import BackendInfo
from halluflow.caos.extract import (
    META_WORDS,
    OPEN_VOCABULARY,
    ObjectExtractor,
    build_vocabulary,
    read_open_vocabulary,
)
from halluflow.caos.scores import judge_caption, metrics_side_by_side, object_statistics, score_release_answers
from halluflow.errors import InputError
from halluflow.report.paper_sections import caos_sections


def test_the_open_vocabulary_holds_no_meta_word():
    assert {"picture", "photo", "image", "scene", "view", "background", "shot"} <= META_WORDS
    names = {n for pair in read_open_vocabulary(OPEN_VOCABULARY) for n in pair}
    assert not names & META_WORDS
    assert "picture frame" in names  # an object whose name contains a meta-word stays


def test_meta_words_are_not_objects_and_are_counted():
    extractor = ObjectExtractor(build_vocabulary(graph_terms=["dog", "frisbee"], open_vocabulary=True))
    e = extractor.extract("The picture shows a dog with a frisbee in the background; a close up shot of a photo.")
    assert e.names == ["dog", "frisbee"]
    assert sorted(e.meta) == ["background", "close up", "photo", "picture", "shot"]
    framed = extractor.extract("A picture frame on the wall of the scene.")
    assert "picture frame" in framed.names and framed.meta == ["scene"]
    # keep: the reading before (Visual Genome's picture, background... were out-of-domain objects)
    kept = ObjectExtractor(build_vocabulary(graph_terms=["dog"], open_vocabulary=True), meta_words="keep")
    objs = kept.extract("The picture shows a dog in the background.").objects
    assert [(o.name, o.in_domain) for o in objs] == [("picture", False), ("dog", True), ("background", False)]
    with pytest.raises(InputError, match="meta_words 'drop'"):
        ObjectExtractor(build_vocabulary(), meta_words="drop")


class ScriptedLLM:
    def __init__(self, reply):
        self.reply = reply

    def chat_batch(self, conversations):
        return [self.reply for _ in conversations]


def test_meta_words_named_by_the_llm_extractor_are_left_out_too():
    vocab = build_vocabulary(graph_terms=["dog"])
    e = ObjectExtractor(vocab, ScriptedLLM('{"objects": ["image", "dog", "lighthouse"]}')).extract(
        "This image shows a dog near a lighthouse."
    )
    assert e.names == ["dog", "lighthouse"] and e.meta == ["image"]


def test_synonyms_map_truth_and_objects_before_comparison():
    # "woman" is a node of the release graph, so the extractor names it "woman" (graph names win a surface); the
    # truth says "person". CHAIR's table maps both to person: not a hallucination, and the truth is covered.
    vocab = build_vocabulary(graph_terms=["woman", "dog", "person"])
    objects = ObjectExtractor(vocab).extract("A woman walks a puppy past a cat.").objects
    assert [o.name for o in objects] == ["woman", "dog", "cat"]
    cap = judge_caption("c", "i", objects, ["person", "dog"], vocab)
    assert cap.hallucinated == [False, False, True]
    stats = object_statistics([cap])
    assert (stats["n_hallucinated"], stats["recall"]) == (1, 1.0)
    # the other way round: truth "women", caption "person"
    assert judge_caption(
        "c", "i", ObjectExtractor(vocab).extract("A person.").objects, ["women"], vocab
    ).hallucinated == [False]
    # without CHAIR's table there is no synonym class: names are compared
    plain = build_vocabulary(graph_terms=["woman", "person"], synonyms=False)
    assert judge_caption(
        "c", "i", ObjectExtractor(plain).extract("A woman.").objects, ["person"], plain
    ).hallucinated == [True]


class Unit:
    def embed(self, texts):
        return np.ones((len(texts), 2))

    def describe(self):
        return BackendInfo(role="embedder", backend="unit", model="unit")


def _caos_doc(policy: str, oracle: dict | None = None) -> dict:
    queries = pl.DataFrame(
        {
            "query_id": ["q1", "q2"],
            "image_id": ["i1", "i2"],
            "query_type": ["generative", "generative"],
            "objects": [["person", "grass"], ["dog"]],
        }
    )
    answers = pl.DataFrame(
        {
            "query_id": ["q1", "q2"],
            "answer": ["The picture shows a woman on the grass beside a lighthouse.", "A dog and a kite."],
            "status": ["ok", "ok"],
            "stand_in": [False, False],
        }
    )
    nodes = pl.DataFrame({"node": ["woman", "grass", "dog", "kite"], "frequency": [4, 3, 2, 1]})
    extractor = ObjectExtractor(build_vocabulary(graph_terms=nodes["node"].to_list(), open_vocabulary=True))
    summary, objects, _ = score_release_answers(
        answers,
        queries,
        nodes,
        release_dir=None,
        extractor=extractor,
        embedders={"unit": Unit()},
        ood_without_oracle=policy,
    )
    hallucinated = objects.filter(pl.col("hallucinated"))["object"].to_list()
    assert not set(hallucinated) & META_WORDS and "woman" not in hallucinated  # picture left out, woman = person
    summary.update(
        model="m",
        metrics=metrics_side_by_side(None),
        embedder_info={"unit": Unit().describe().as_dict()},
        extractor="vocab",
        llm=None,
        oracle=oracle,
    )
    return summary


@pytest.mark.parametrize(
    "policy, says",
    [
        ("hallucinated", "no oracle: out-of-domain objects the truth does not list counted as hallucinated"),
        ("exclude", "no oracle: out-of-domain objects the truth does not list left undecided, excluded"),
    ],
)
def test_the_caos_page_caption_says_the_runs_oracle_setting(tmp_path, policy, says):
    doc = _caos_doc(policy)
    assert doc["settings"]["ood_without_oracle"] == policy and doc["settings"]["oracle"] is False
    assert doc["extraction"]["meta_words_left_out"] == 1
    (tmp_path / "results" / "caos").mkdir(parents=True)
    (tmp_path / "results" / "caos" / "m.json").write_text(json.dumps(doc))
    caos_sections(tmp_path / "results", tmp_path / "page")
    for section in ("fig3", "fig4", "fig5", "oracle"):
        caption = json.loads((tmp_path / "page" / f"{section}.json").read_text())["caption"]
        assert says in caption, section
        assert "out-of-domain objects undecided)" not in caption  # the old hard-coded text
        assert "meta-words (picture, image, scene, background...) not objects (1 mentions left out)" in caption
        assert "compared by CHAIR synonym class (woman = person)" in caption


def test_the_caos_page_names_the_oracle_when_one_ran(tmp_path):
    oracle = {"members": [{"name": "judge-vlm", "stand_in": True}], "vote": "majority", "tie": "absent"}
    doc = _caos_doc("hallucinated", oracle)
    (tmp_path / "results" / "caos").mkdir(parents=True)
    (tmp_path / "results" / "caos" / "m.json").write_text(json.dumps(doc))
    caos_sections(tmp_path / "results", tmp_path / "page")
    caption = json.loads((tmp_path / "page" / "oracle.json").read_text())["caption"]
    assert (
        "oracle ensemble [judge-vlm (STAND-IN)] (vote majority, tie absent)" in caption and "no oracle" not in caption
    )


def test_score_caos_reads_captions_without_meta_words(tmp_path, capsys):
    from halluflow.cli import main

    (tmp_path / "c.jsonl").write_text(json.dumps({"image_id": "1", "caption": "The picture shows a woman and a dog."}))
    (tmp_path / "t.jsonl").write_text(json.dumps({"image_id": "1", "objects": ["person"]}) + "\n")
    vectors = tmp_path / "v.tsv"
    vectors.write_text("".join(f"{w}\t1\t{i}\n" for i, w in enumerate(["person", "dog", "woman", "picture"])))
    base = ["score", "caos", "--objects", str(tmp_path / "c.jsonl"), "--truth", str(tmp_path / "t.jsonl")]
    base += ["--frequent", "coco", "--embedder", "table", "--vectors", str(vectors)]
    assert main(base) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["object"] for r in out["per_object"]] == ["dog"]  # no "picture"; "woman" names the truth "person"
    assert out["objects"]["n_objects"] == 2 and out["objects"]["recall"] == 1.0
