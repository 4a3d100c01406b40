"""UniHall schema (UniHall/SAMF paper, B.1), taxonomy (B.2) and converters from ODE queries, POPE and AMBER."""

from __future__ import annotations

import copy
import json

import pytest
from helpers import shared_data

from halluflow.errors import InputError
from halluflow.samf import convert, taxonomy
from halluflow.samf.schema import load_instances, negative_answers, validate_instance, write_instances

PAPER_EXAMPLE = {  # Appendix B.1's example, verbatim
    "instance_id": "120001",
    "meta_inf": {"category": "object", "subtype": "attribute", "subsubtype": "color", "risk_level": 1},
    "source_inf": {"source_dataset": "BEAF", "source_id": "BEAF-098"},
    "seed_data": {
        "type": "VQA",
        "image_path": "images/002221.jpg",
        "question": "What color is the car in the image?",
        "ground_truth": "Blue",
        "expected_other_answers": ["It is blue", "It’s Blue"],
        "negative_answers": ["Yellow", "Red"],
    },
    "mutation_inf": {
        "image_operators_applied": ["image_brightness_shift"],
        "text_operators_applied": ["context_expansion"],
        "mutated_image_path": "images/fuzzed/002221_dark.jpg",
        "mutated_text": "At dusk, what color is the car?",
        "mutated_ground_truth": "Blue",
    },
}


def test_paper_example_is_valid():
    assert validate_instance(copy.deepcopy(PAPER_EXAMPLE))["instance_id"] == "120001"


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda d: d["seed_data"].pop("question"),
            "instance 120001: field 'seed_data': 'question' is a required property",
        ),
        (lambda d: d["meta_inf"].update(risk_level=6), "instance 120001: field 'meta_inf.risk_level'"),
        (lambda d: d["seed_data"].update(type="MCQ"), "instance 120001: field 'seed_data.type'"),
        (lambda d: d.update(instance_id="12001"), "instance 12001: field 'instance_id'"),
        (
            lambda d: d["meta_inf"].update(subtype="existence"),
            "digits 12 encode object/attribute but meta_inf says object/existence",
        ),
        (lambda d: d["meta_inf"].update(subtype="sycophancy"), "field 'meta_inf.subtype'"),
        (lambda d: d["meta_inf"].update(subsubtype="smell"), "field 'meta_inf.subsubtype'"),
        (lambda d: d["seed_data"].update(type="YON"), "a YON instance needs Yes or No"),
        (lambda d: d.update(extra=1), "Additional properties"),
    ],
)
def test_errors_name_instance_and_field(edit, message):
    bad = copy.deepcopy(PAPER_EXAMPLE)
    edit(bad)
    with pytest.raises(InputError) as exc:
        validate_instance(bad)
    assert message in str(exc.value)


def test_file_errors(tmp_path):
    (tmp_path / "dup.json").write_text(json.dumps([PAPER_EXAMPLE, PAPER_EXAMPLE]))
    with pytest.raises(InputError, match="instance 120001: field 'instance_id': duplicated"):
        load_instances(tmp_path / "dup.json")
    (tmp_path / "noid.json").write_text(json.dumps([PAPER_EXAMPLE, {"meta_inf": {}}]))
    with pytest.raises(InputError, match="instance #1: field '<instance>'"):
        load_instances(tmp_path / "noid.json")
    write_instances(tmp_path / "ok.json", [PAPER_EXAMPLE])
    assert load_instances(tmp_path / "ok.json") == [PAPER_EXAMPLE]


def test_taxonomy_and_ids():
    assert len(taxonomy.SUBTYPES) == 9
    assert {s.category for s in taxonomy.SUBTYPES} == {"object", "instruction", "knowledge"}
    assert taxonomy.make_instance_id("instruction", "refuse", 17) == "220017"  # paper's table spelling accepted
    assert taxonomy.make_instance_id("knowledge", "detail", 9999) == "339999"
    st, serial = taxonomy.parse_instance_id("310042")
    assert (st.category, st.name, serial) == ("knowledge", "factual", 42)
    with pytest.raises(InputError, match="out of range"):
        taxonomy.make_instance_id("object", "existence", 10000)
    assert taxonomy.group_key("Exist", "YON") == "existence_YON"


def test_from_ode_queries_balanced_and_mapped():
    rows = []
    for i in range(12):
        qt = ["existence", "attribute", "count", "counterfactual"][i % 4]
        rows.append(
            {
                "query_id": f"q{i:02d}",
                "image_id": f"img{i // 2}",
                "image": f"images/img{i // 2}.png",
                "task": "discriminative",
                "query_type": qt,
                "attribute_kind": {"attribute": "action", "count": "count"}.get(qt),
                "question": f"Q{i}?",
                "truth": "yes" if i % 3 else "no",
                "objects": ["dog", "sofa"],
                "distribution": "standard",
            }
        )
    rows.append(
        {"query_id": "g", "task": "generative", "query_type": "generative", "question": "Describe", "truth": None}
    )
    items = convert.from_ode_queries(rows, "demo", limit=8, seed=1)
    assert len(items) == 8
    subs = [(i["meta_inf"]["subtype"], i["meta_inf"].get("subsubtype")) for i in items]
    assert (
        subs.count(("existence", "")) == 4
        and subs.count(("attribute", "state")) == 2
        and subs.count(("attribute", "number")) == 2
    )
    assert sorted(i["instance_id"] for i in items)[:2] == ["110001", "110002"]  # serials restart per subtype
    assert items[0]["visual_facts"][0] == "There is a dog in the image."
    assert all(negative_answers(i) == ["No" if i["seed_data"]["ground_truth"] == "Yes" else "Yes"] for i in items)
    assert convert.ode_groups(["existence", "count", "counterfactual"]) == ["attribute_YON", "existence_YON"]
    assert convert.ode_groups(["counterfactual"]) == ["attribute_YON", "existence_YON"]
    assert convert.ode_groups(["existence"]) == ["existence_YON"]
    assert convert.ode_mapping("counterfactual", "action") == (
        "object",
        "attribute",
        "state",
    )  # "Does the person strike?"
    assert convert.ode_mapping("counterfactual", None) == ("object", "existence", "")  # "Is there a baggage?"
    with pytest.raises(InputError, match="ODE query q00: truth 'maybe'"):
        convert.from_ode_queries([dict(rows[0], truth="maybe")], "demo")


def test_from_pope_peer_file():
    path = shared_data("pope-rucaibox", "coco", "coco_pope_popular.json")
    items = convert.from_pope(path)
    assert len(items) == 3000 and items[0]["instance_id"] == "110001" and items[-1]["instance_id"] == "113000"
    assert items[0]["seed_data"]["question"] == "Is there a snowboard in the image?"
    assert sum(i["seed_data"]["ground_truth"] == "Yes" for i in items) == 1500
    small = convert.from_pope(
        shared_data("pope-rucaibox", "gqa", "gqa_pope_seem_random.json"), limit=10
    )  # JSON array file
    assert sum(i["seed_data"]["ground_truth"] == "Yes" for i in small) == 5


def test_from_amber_peer_files():
    ann = shared_data("amber", "data", "annotations.json")
    # All 1,664 relation queries (975 discriminative-relation + 689 relation, PROVENANCE.md counts) -> object/relation
    rel = convert.from_amber(ann, shared_data("amber", "data", "query", "query_discriminative-relation.json"))
    assert len(rel) == 1664 and {i["meta_inf"]["subtype"] for i in rel} == {"relation"}
    assert rel[-1]["instance_id"] == "131664"
    queries = {
        q["id"]: q
        for q in json.loads(shared_data("amber", "data", "query", "query_discriminative-relation.json").read_text())
    }
    assert rel[0]["source_inf"]["source_id"] == "13557"
    assert rel[0]["seed_data"]["question"] == queries[13557]["query"] and rel[0]["seed_data"]["ground_truth"] == "Yes"
    # A balanced sample of the whole discriminative file: 10 per AMBER discriminative type (6 types).
    items = convert.from_amber(ann, shared_data("amber", "data", "query", "query_discriminative.json"), limit=60)
    by = {}
    for i in items:
        key = (i["meta_inf"]["subtype"], i["meta_inf"]["subsubtype"])
        by[key] = by.get(key, 0) + 1
    assert by == {("existence", ""): 10, ("attribute", "state"): 20, ("attribute", "number"): 10, ("relation", ""): 20}


def test_cli_convert_pope(tmp_path, capsys):
    from halluflow.cli import main

    src = shared_data("pope-rucaibox", "coco", "coco_pope_random.json")
    assert (
        main(
            [
                "fuzz",
                "convert",
                "--source",
                "pope",
                "--input",
                str(src),
                "--limit",
                "6",
                "--out",
                str(tmp_path / "u.json"),
            ]
        )
        == 0
    )
    items = load_instances(tmp_path / "u.json")
    assert len(items) == 6 and sum(i["seed_data"]["ground_truth"] == "Yes" for i in items) == 3
    assert "6 UniHall instances" in capsys.readouterr().out
    assert main(["fuzz", "convert", "--source", "amber", "--input", str(src), "--out", str(tmp_path / "x.json")]) == 1
    assert "--queries" in capsys.readouterr().err
