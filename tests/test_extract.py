"""Object extraction: generation order, multi-word objects, plurals, synonyms, and the LLM path with its fallback."""

from __future__ import annotations

import pytest
from helpers import shared_data

from halluflow.caos.extract import (
    ObjectExtractor,
    Vocabulary,
    build_vocabulary,
    default_chair_synonyms,
    derive_synonym_table,
    parse_llm_objects,
    plural_forms,
    read_synonym_table,
)
from halluflow.errors import InputError
from halluflow.models import registry


@pytest.mark.parametrize(
    "word, plurals",
    [
        ("dog", ["dogs"]),
        ("bus", ["buses"]),
        ("bench", ["benches"]),
        ("pony", ["ponies"]),
        ("toy", ["toys"]),
        ("person", ["people", "persons"]),
        ("knife", ["knives"]),
        ("sheep", []),
        ("tomato", ["tomatoes", "tomatos"]),
    ],
)
def test_plural_forms(word, plurals):
    assert plural_forms(word) == plurals


def test_vocabulary_order_multiword_plural_and_priority():
    vocab = build_vocabulary(graph_terms=["table", "sky", "traffic light"], synonyms=True)
    text = "Three puppies sit at a table; a hot dog, two traffic lights and people under the sky. The dog barks."
    ex = ObjectExtractor(vocab).extract(text)
    assert ex.names == ["dog", "table", "hot dog", "traffic light", "person", "sky"]
    assert [o.surface for o in ex.objects] == ["puppies", "table", "hot dog", "traffic lights", "people", "sky"]
    assert [o.token_index for o in ex.objects] == sorted(o.token_index for o in ex.objects)
    assert all(o.extractor == "vocab" and o.in_domain for o in ex.objects)
    assert ex.llm_status == "not_used"
    # the graph's "table" keeps its own name; COCO's "table" → "dining table" does not override it
    assert vocab.canonical("table") == "table" and vocab.canonical("dining table") == "dining table"


def test_vocabulary_without_synonyms_and_empty_text():
    vocab = Vocabulary().add_terms(["wine glass"], "extra")
    assert [m.canonical for m in vocab.match("Two wine glasses and a glass.")] == ["wine glass"]
    assert ObjectExtractor(vocab).extract("").objects == []
    assert ObjectExtractor(vocab).extract("   ...  ").names == []


def test_synonym_table_reading_and_errors(tmp_path):
    path = default_chair_synonyms()
    assert path is not None and path.name == "coco_synonyms.tsv"  # the shipped derived table wins
    pairs = read_synonym_table(path)
    assert len(pairs) == 403 and len({c for _, c in pairs}) == 80
    bad = tmp_path / "bad.tsv"
    bad.write_text("word\tcategory\ndog\tdog\n")
    with pytest.raises(InputError, match="header must have 'synonym' and 'coco_category'"):
        read_synonym_table(bad)
    with pytest.raises(InputError, match="not found"):
        read_synonym_table(tmp_path / "missing.tsv")


def test_shipped_table_is_derived_from_chair(tmp_path):
    src = shared_data("chair-lisaanne-hallucination", "chair_synonym_to_category.tsv")
    out = tmp_path / "coco_synonyms.tsv"
    assert derive_synonym_table(src, out) == 403
    assert out.read_bytes() == default_chair_synonyms().read_bytes()


@pytest.mark.parametrize(
    "reply, parsed",
    [
        ('{"objects": ["dog", "frisbee"]}', ["dog", "frisbee"]),
        ('```json\n{"objects": ["kite"]}\n```', ["kite"]),
        ('{"objects": []}', []),
        ('Sure! {"objects": ["dog"]}', None),  # strict: prose around the JSON is not accepted
        ('["dog"]', None),
        ('{"objects": ["dog"], "note": "x"}', None),
        ('{"objects": [1, 2]}', None),
        ("", None),
    ],
)
def test_parse_llm_objects_is_strict(reply, parsed):
    assert parse_llm_objects(reply) == parsed


@pytest.fixture
def llm():
    registry.LLMS.register("scripted-test", "helpers:ScriptedLLM")
    yield lambda replies: registry.create("llm", {"backend": "scripted-test", "replies": replies})
    registry.LLMS._targets.pop("scripted-test", None)


def test_llm_augmented_extraction_order_and_provenance(llm):
    vocab = build_vocabulary(synonyms=True)
    backend = llm({"skateboard": '{"objects": ["man", "skateboard", "graffiti wall", "dragon", "hot dog"]}'})
    ex = ObjectExtractor(vocab, llm=backend).extract("A man rides a skateboard past a graffiti wall near a hot dog.")
    assert ex.llm_status == "ok"
    assert ex.names == ["person", "skateboard", "graffiti wall", "hot dog"]
    assert [o.extractor for o in ex.objects] == ["vocab+llm", "vocab+llm", "llm", "vocab+llm"]
    assert [o.in_domain for o in ex.objects] == [True, True, False, True]
    assert ex.llm_dropped == ["dragon"]  # named by the LLM but absent from the caption text


def test_llm_output_that_does_not_parse_falls_back_to_vocabulary(llm):
    vocab = build_vocabulary(synonyms=True)
    backend = llm({"cat": "The objects are: cat, sofa."})
    ex = ObjectExtractor(vocab, llm=backend).extract("A cat on a couch.")
    assert ex.llm_status == "unparsed"
    assert ex.names == ["cat", "couch"] and {o.extractor for o in ex.objects} == {"vocab"}


def test_llm_object_overlapping_a_vocabulary_match_is_not_a_second_object(llm):
    vocab = build_vocabulary(synonyms=True)
    backend = llm({"hot dog": '{"objects": ["dog", "hot dog"]}'})
    ex = ObjectExtractor(vocab, llm=backend).extract("A hot dog on a plate.")
    assert ex.names == ["hot dog"]  # "plate" is not a COCO object and the LLM did not name it
    assert ex.objects[0].extractor == "vocab+llm" and ex.llm_dropped == []
    # a longer LLM phrase around a vocabulary match confirms that object, it is not a second (out-of-domain) one
    backend = llm({"wall": '{"objects": ["graffiti wall"]}'})
    ex = ObjectExtractor(Vocabulary().add_terms(["wall"], "graph"), llm=backend).extract("A graffiti wall.")
    assert ex.names == ["wall"] and ex.objects[0].extractor == "vocab+llm"


def test_llm_is_not_asked_about_empty_captions(llm):
    backend = llm({})
    out = ObjectExtractor(build_vocabulary(synonyms=True), llm=backend).extract_many(["", "  ", "A dog."])
    assert backend.calls == 1
    assert [e.llm_status for e in out] == ["not_used", "not_used", "unparsed"]
    assert out[2].names == ["dog"]


@pytest.mark.slow  # ~8 s alone (model load + 24 greedy tokens); much longer on a loaded machine
def test_real_smollm2_extractor_follows_the_json_format():
    # The REAL offline default llm (SmolLM2-135M-Instruct, greedy): the one-shot example keeps it on the format,
    # and objects it names that the caption never mentions are dropped.
    from helpers import REPO

    from halluflow.models import LOCAL_LLM

    backend = registry.create("llm", {"backend": "transformers", "model": str(REPO / LOCAL_LLM), "max_new_tokens": 24})
    ex = ObjectExtractor(build_vocabulary(synonyms=True), llm=backend).extract(
        "A brown dog lies on a sofa next to a lamp."
    )
    assert ex.llm_status == "ok"
    assert ex.names[:2] == ["dog", "couch"] and ex.objects[0].extractor == "vocab+llm"
    assert all(o.surface in "a brown dog lies on a sofa next to a lamp" for o in ex.objects)


def test_shipped_categories_are_the_coco_80():
    tsv = shared_data("coco-categories", "coco_categories.tsv")
    names = {line.split("\t")[2] for line in tsv.read_text().splitlines()[1:] if line.strip()}
    assert len(names) == 80
    assert {c for _, c in read_synonym_table(default_chair_synonyms())} == names
