"""ODE's fine-tuning loop (halluflow.ode.finetune), the fast parts: the disjointness check, the training rows built
from the release's exports, the config checks, the weights hash and the before/after table. The loop itself (TRL
training of the stand-in, answering and scoring a child release) runs end to end in
tests/test_configs.py::test_ode_paper_offline."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from helpers import make_lineage_release

from halluflow.errors import ConfigError, InputError
from halluflow.ode.export import export_release
from halluflow.ode.finetune import (
    check_config,
    check_disjoint,
    dpo_rows,
    finetune_model,
    sft_rows,
    train_release_dir,
    weights_hash,
)
from halluflow.report.finetune_section import before_after_rows, finetune_section


def test_a_child_sharing_a_pair_is_refused_in_one_line(tmp_path):
    train = make_lineage_release(tmp_path, "parent", [("standard", "dog", "frisbee"), ("random", "car", "tree")])
    # the same pair named the other way round, in another distribution, is still the same concept pair
    child = make_lineage_release(tmp_path, "child", [("long_tail", "frisbee", "dog"), ("random", "cat", "sofa")])
    with pytest.raises(InputError) as err:
        check_disjoint(train, child)
    message = str(err.value)
    assert "\n" not in message
    assert "shares 1 concept pair" in message and "dog|frisbee" in message and str(child) in message
    disjoint = make_lineage_release(tmp_path, "other", [("standard", "cat", "sofa"), ("fictional", "car", "moon")])
    assert check_disjoint(train, disjoint) == 2


def test_training_rows_come_from_the_release_exports(release, tmp_path):
    answers = pl.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4"],
            "model": ["m"] * 4,
            "answer": ["No.", "Yes, a cat.", "A dog and a cat.", "Yes"],
            "status": ["ok"] * 4,
            "parsed": ["no", "yes", None, "yes"],
            "hallucinated": [True, True, True, False],
        }
    )
    answers.write_parquet(tmp_path / "answers.parquet")
    export_release(release, "dpo", tmp_path / "dpo", answers=tmp_path / "answers.parquet")
    export_release(release, "llava", tmp_path / "llava")
    dpo = dpo_rows(json.loads((tmp_path / "dpo" / "dpo.json").read_text()), tmp_path / "dpo")
    # q1 (truth yes answered no), q2 (truth no answered yes), q3 (a cat that is not there); q4 was right
    assert [(r["prompt"][0]["content"], r["chosen"][0]["content"], r["rejected"][0]["content"]) for r in dpo] == [
        ("Is there a dog in the image?", "Yes.", "No."),
        ("Is there a cat in the image?", "No.", "Yes, a cat."),
        ("Describe this image.", "The image shows a dog and a frisbee.", "A dog and a cat."),
    ]
    assert all(r["prompt"][0]["role"] == "user" and r["chosen"][0]["role"] == "assistant" for r in dpo)
    assert all(Path(p).is_file() for r in dpo for p in r["images"])
    sft = sft_rows(json.loads((tmp_path / "llava" / "llava.json").read_text()), tmp_path / "llava")
    assert len(sft) == 2  # one conversation per image
    first = sft[0]["messages"]
    assert [m["role"] for m in first] == ["user", "assistant"] * (len(first) // 2)
    assert "<image>" not in json.dumps(sft)  # the image goes in as an image part, not as the tag's text
    assert ("Is there a cat in the image?", "No.") in [(q["content"], a["content"]) for q, a in zip(first, first[1:])]
    assert all(Path(r["images"][0]).is_file() for r in sft)


def _config(**finetune):
    return {
        "models": [
            {"name": "prior", "backend": "prior"},
            {"name": "vlm", "backend": "transformers", "args": {"model": "x"}},
        ],
        "ode": {"lineage": {"parent": "results/old/release"}},
        "answer": {"source": {"kind": "ode"}},
        "finetune": {"enabled": True, "methods": ["sft"], **finetune},
    }


def test_config_checks_name_the_key():
    assert finetune_model(_config())["name"] == "vlm"  # the first transformers model
    assert train_release_dir(_config()) == "results/old/release"  # the lineage parent
    assert train_release_dir(_config(train_release="elsewhere")) == "elsewhere"
    for finetune, key in (
        ({"model": "prior"}, "finetune.model"),
        ({"model": "nope"}, "finetune.model"),
        ({"methods": []}, "finetune.methods"),
    ):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            check_config(_config(**finetune))
    no_parent = _config()
    no_parent["ode"]["lineage"]["parent"] = None
    with pytest.raises(ConfigError, match=r"finetune\.train_release"):
        check_config(no_parent)
    pope = _config()
    pope["answer"]["source"]["kind"] = "pope"
    with pytest.raises(ConfigError, match=r"finetune\.enabled"):
        check_config(pope)


def test_weights_hash_follows_the_tensors_not_the_file(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    before = weights_hash(model)
    torch.save(model.state_dict(), tmp_path / "w.pt")
    again = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    again.load_state_dict(torch.load(tmp_path / "w.pt"))
    assert weights_hash(again) == before
    with torch.no_grad():
        model[0].weight[1, 2] += 1e-3
    assert weights_hash(model) != before


def _metrics(rate, accuracy, chair_i, by):
    doc = {
        "n_answers": 10,
        "hallucination_rate": rate,
        "pope": {"accuracy": accuracy, "f1": 0.5},
        "generative": {"chair_s": 0.5, "chair_i": chair_i},
        "by_distribution": {},
    }
    for dist, (r, a) in by.items():
        doc["by_distribution"][dist] = {"hallucination_rate": r, "pope": {"accuracy": a, "f1": None}}
    return doc


def test_before_after_table_per_distribution_and_overall():
    base = _metrics(0.5, 0.6, 0.4, {"standard": (0.4, 0.7), "fictional": (0.6, 0.5)})
    tuned = {"sft": _metrics(0.25, 0.8, 0.1, {"standard": (0.2, 0.9), "fictional": (0.3, 0.6)})}
    columns, rows = before_after_rows(base, tuned)
    assert columns == ["distribution", "metric", "base", "sft", "sft - base"]
    table = {(r[0], r[1]): r[2:] for r in rows}
    assert table[("overall", "hallucination_rate")] == [0.5, 0.25, -0.25]
    assert table[("overall", "generative.chair_i")] == [0.4, 0.1, -0.3]
    assert table[("standard", "by.pope.accuracy")] == [0.7, 0.9, 0.2]
    assert table[("fictional", "by.generative.chair_i")] == [None, None, None]  # no descriptions scored there: n/a
    assert [r[0] for r in rows][:: len(rows) // 3] == ["overall", "standard", "fictional"]  # overall first


def test_section_flags_the_stand_in_and_passes_the_renderer(tmp_path):
    from halluflow.report.papers import load_section

    base = _metrics(0.5, 0.6, 0.4, {"standard": (0.4, 0.7)})
    (tmp_path / "base.json").write_text(json.dumps(base))
    (tmp_path / "dpo.json").write_text(json.dumps(_metrics(0.4, 0.7, 0.3, {"standard": (0.3, 0.8)})))
    record = {
        "method": "dpo",
        "base": {"name": "tiny", "model": "resources/models/tiny", "revision": None},
        "stand_in": True,
        "examples": 6,
        "steps": 2,
        "batch_size": 2,
        "gradient_accumulation_steps": 1,
        "learning_rate": 0.001,
        "beta": 0.1,
        "lora": {"enabled": True, "r": 4, "alpha": 8},
        "weights_sha256_before": "a" * 64,
        "weights_sha256_after": "b" * 64,
        "weights_changed": True,
        "train_release": "results/p/release",
        "eval_release": "results/c/release",
        "train_pairs": 8,
        "shared_pairs": 0,
    }
    (tmp_path / "dpo.train.json").write_text(json.dumps(record))
    out = tmp_path / "paper" / "section.json"
    finetune_section(
        tmp_path / "base.json", {"dpo": tmp_path / "dpo.json"}, {"dpo": tmp_path / "dpo.train.json"}, out, "tiny"
    )
    section = load_section(out, "ode")  # shape, figure file and catalogue keys as the paper page checks them
    assert section["stand_ins"] == ["tiny"] and "STAND-IN" in section["caption"]
    assert "DPO 2 steps" in section["caption"] and "LoRA r=4" in section["caption"] and "shares 0" in section["caption"]
    weights = section["tables"][1]["rows"]
    assert weights == [["dpo", 6, 2, 0.001, "LoRA r=4", "a" * 16, "b" * 16, "yes"]]
