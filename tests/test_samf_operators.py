"""SAMF mutation operators (UniHall/SAMF paper, C.1): seeded, output differs from input, the question's truth is unchanged."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from halluflow.cli import main
from halluflow.errors import InputError
from halluflow.samf import operators as O
from halluflow.samf.schema import validate_instance


@pytest.fixture
def item(tmp_path):
    rng = np.random.default_rng(3)
    (tmp_path / "images").mkdir()
    # Smooth content (gradient + blocks) so a mild degradation keeps it recognisable, as a photo would.
    x = np.linspace(0, 255, 80)[None, :, None].repeat(60, 0).repeat(3, 2)
    arr = (x * np.array([1.0, 0.5, 0.2])).astype(np.uint8)
    arr[10:30, 20:50] = rng.integers(0, 255, 3)
    Image.fromarray(arr, "RGB").save(tmp_path / "images" / "car.png")
    inst = {
        "instance_id": "120001",
        "meta_inf": {"category": "object", "subtype": "attribute", "subsubtype": "color", "risk_level": 3},
        "source_inf": {"source_dataset": "test", "source_id": "t-1"},
        "seed_data": {
            "type": "VQA",
            "image_path": "images/car.png",
            "question": "What color is the car in the image?",
            "ground_truth": "Blue",
            "expected_other_answers": ["It is blue"],
            "negative_answers": ["Yellow", "Red"],
        },
    }
    return validate_instance(inst), tmp_path


def _original(root):
    return np.asarray(Image.open(root / "images" / "car.png").convert("RGB"))


def _mutate(inst, root, name, level, seed, out):
    return O.mutate_instance(inst, [(name, level)], seed, root, root / out)


def _image_bytes(m, root, out):
    info = m["mutation_inf"]
    paths = info.get("mutated_image_paths", [])
    return [(root / out / p).read_bytes() for p in paths]


ALL = sorted(O.OPERATORS)


def test_catalog_names_match_design():
    assert O.TEXT_OPERATORS == (
        "expand_context_irrelevant",
        "constraint_stack",
        "syntactic_complication",
        "disturbance_exclusion",
        "authority_bias_context",
    )
    assert O.IMAGE_OPERATORS == (
        "background_interference",
        "multi_image_copy_v1",
        "multi_image_copy_v2",
        "multi_image_copy_v3",
        "multi_image_composition",
    )
    assert [O.OPERATORS[n].difficulty for n in O.TEXT_OPERATORS] == ["Easy", "Common", "Medium", "Hard", "Extreme"]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("level", [1, 3, 5])
def test_same_seed_same_output(item, name, level):
    inst, root = item
    a = _mutate(inst, root, name, level, 11, "a")
    b = _mutate(inst, root, name, level, 11, "b")
    assert a["mutation_inf"]["mutated_text"] == b["mutation_inf"]["mutated_text"]
    assert a["mutation_inf"]["operations"] == b["mutation_inf"]["operations"]
    assert _image_bytes(a, root, "a") == _image_bytes(b, root, "b")
    assert a["mutation_inf"].get("mutated_image_sha256") == b["mutation_inf"].get("mutated_image_sha256")


@pytest.mark.parametrize("name", ALL)
def test_other_seed_or_level_changes_output(item, name):
    inst, root = item
    outs = {(s, lv): _mutate(inst, root, name, lv, s, f"o{s}{lv}") for s, lv in ((1, 2), (2, 2), (1, 4))}
    sig = {
        k: (m["mutation_inf"]["mutated_text"], tuple(_image_bytes(m, root, f"o{k[0]}{k[1]}"))) for k, m in outs.items()
    }
    assert len(set(sig.values())) >= 2  # the seed and the level matter


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("level", [1, 5])
def test_output_differs_from_input(item, name, level):
    inst, root = item
    m = _mutate(inst, root, name, level, 5, "o")
    info = m["mutation_inf"]
    if O.OPERATORS[name].modality == "text":
        assert info["mutated_text"] != inst["seed_data"]["question"]
        assert info["mutated_image_path"] is None
    else:
        images = [np.asarray(Image.open(root / "o" / p).convert("RGB")) for p in info["mutated_image_paths"]]
        original = _original(root)
        assert len(images) > 1 or images[0].shape != original.shape or not np.array_equal(images[0], original)
        assert (
            info["mutated_image_sha256"]
            == __import__("hashlib").sha256((root / "o" / info["mutated_image_path"]).read_bytes()).hexdigest()
        )


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("level", [1, 3, 5])
def test_truth_is_unchanged(item, name, level):
    inst, root = item
    m = _mutate(inst, root, name, level, 7, "o")
    info = m["mutation_inf"]
    # The question is never edited, only framed; the answer key and the seed data stay as they were.
    assert inst["seed_data"]["question"] in info["mutated_text"]
    assert info["mutated_ground_truth"] == "Blue"
    assert m["seed_data"] == inst["seed_data"]
    if name == "authority_bias_context" and level >= 3:
        # Pressure toward a wrong answer is attributed to an authority, never asserted as fact.
        assert "believes the answer here is" in info["mutated_text"]
    if O.OPERATORS[name].modality == "text":
        return
    original = _original(root)
    details = info["operations"][0]["details"]
    if name == "background_interference":
        out = np.asarray(Image.open(root / "o" / info["mutated_image_path"]).convert("RGB"))
        x, y = details["images"][0]["offset"]
        np.testing.assert_array_equal(out[y : y + original.shape[0], x : x + original.shape[1]], original)
        return
    ref = info["reference_image"]
    assert f"Image {ref}" in info["mutated_text"] or name == "multi_image_copy_v3"
    ref_img = np.asarray(Image.open(root / "o" / info["mutated_image_paths"][ref - 1]).convert("RGB"))
    if name == "multi_image_copy_v2":
        # Degraded, not altered: the reference stays close to the original (PSNR well above noise level).
        mse = np.mean((ref_img.astype(float) - original.astype(float)) ** 2)
        assert 10 * np.log10(255**2 / max(mse, 1e-9)) > 20
    else:
        np.testing.assert_array_equal(ref_img, original)


def test_chain_and_prompt_cap(item):
    inst, root = item
    long_q = dict(inst, seed_data=dict(inst["seed_data"], question="What color is the car? " + "x" * 79_000))
    m = O.mutate_instance(
        long_q,
        [("authority_bias_context", 5), ("expand_context_irrelevant", 5), ("constraint_stack", 2)],
        1,
        root,
        root / "o",
    )
    info = m["mutation_inf"]
    assert len(info["mutated_text"]) <= O.MAX_PROMPT_CHARS
    assert long_q["seed_data"]["question"] in info["mutated_text"]
    assert info["prompt_truncated"] is True
    assert any(r.get("skipped") == "max_prompt_chars" for r in info["operations"])


def test_chained_text_and_image_ops(item):
    inst, root = item
    ops = [
        ("syntactic_complication", 2),
        ("constraint_stack", 1),
        ("background_interference", 1),
        ("multi_image_copy_v1", 2),
    ]
    m = O.mutate_instance(inst, ops, 3, root, root / "o")
    info = m["mutation_inf"]
    assert info["text_operators_applied"] == ["syntactic_complication", "constraint_stack"]
    assert info["image_operators_applied"] == ["background_interference", "multi_image_copy_v1"]
    assert len(info["mutated_image_paths"]) == 3
    validate_instance(m)


def test_bad_inputs_name_the_item(item, tmp_path):
    inst, root = item
    with pytest.raises(InputError, match="unknown operator 'blur'"):
        O.mutate_instance(inst, [("blur", 1)], 0, root, root / "o")
    with pytest.raises(InputError, match="level 7"):
        O.mutate_instance(inst, [("constraint_stack", 7)], 0, root, root / "o")
    missing = dict(inst, seed_data=dict(inst["seed_data"], image_path="images/none.png"))
    with pytest.raises(InputError, match="instance 120001: image 'images/none.png' not found"):
        O.mutate_instance(missing, [("multi_image_copy_v1", 1)], 0, root, root / "o")


def test_cli_mutate_and_operators(item, capsys):
    inst, root = item
    (root / "item.json").write_text(json.dumps(inst))
    args = [
        "fuzz",
        "mutate",
        "--instance",
        str(root / "item.json"),
        "--op",
        "multi_image_copy_v3",
        "--level",
        "2",
        "--seed",
        "4",
        "--out",
        str(root / "cli"),
    ]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mutation_inf"]["image_operators_applied"] == ["multi_image_copy_v3"]
    assert (root / "cli" / out["mutation_inf"]["mutated_image_path"]).exists()
    assert out["mutation_inf"]["mutated_image_path"].startswith("fuzzed/")
    assert main(["fuzz", "operators", "--json"]) == 0
    names = [r["name"] for r in json.loads(capsys.readouterr().out)]
    assert names == list(O.OPERATORS)
    (root / "bad.json").write_text(json.dumps(dict(inst, meta_inf=dict(inst["meta_inf"], risk_level=9))))
    assert (
        main(
            [
                "fuzz",
                "mutate",
                "--instance",
                str(root / "bad.json"),
                "--op",
                "constraint_stack",
                "--level",
                "1",
                "--out",
                str(root / "x"),
            ]
        )
        == 1
    )
    assert "instance 120001: field 'meta_inf.risk_level'" in capsys.readouterr().err


def test_composition_uses_distinct_pool_images_and_tiny_images_work(item):
    inst, root = item
    original = Image.open(root / "images" / "car.png").convert("RGB")
    other = Image.fromarray(np.full((60, 80, 3), 200, np.uint8))
    m = O.mutate_instance(
        inst, [("multi_image_composition", 2)], 1, root, root / "o", distractors=[original.copy(), other]
    )
    info = m["mutation_inf"]
    assert info["operations"][0]["details"]["images"].count("other_image") == 1  # the copy of the reference is skipped
    imgs = [np.asarray(Image.open(root / "o" / p).convert("RGB")) for p in info["mutated_image_paths"]]
    assert sum(np.array_equal(a, np.asarray(original)) for a in imgs) == 1
    (root / "images" / "tiny.png").parent.mkdir(exist_ok=True)
    Image.fromarray(np.zeros((5, 6, 3), np.uint8)).save(root / "images" / "tiny.png")
    tiny = dict(inst, seed_data=dict(inst["seed_data"], image_path="images/tiny.png"))
    for name in O.IMAGE_OPERATORS:
        for seed in range(4):
            O.mutate_instance(tiny, [(name, 5)], seed, root, root / "t")
