"""The samf_* rule steps on files (UniHall/SAMF paper, Sec. 3.3): UniHall source -> instances/split -> standard eval ->
per-group training -> policies.json + fuzzed eval -> comparison, through the answer stage's ModelUnderTest and the
vlm registry (the simulated evaluatee below is registered like any backend)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from PIL import Image

from halluflow import registry
from halluflow.backends.base import VLM, BackendInfo
from halluflow.config import load_config
from halluflow.errors import ConfigError
from halluflow.samf import workflow as W

REPO_ROOT = Path(__file__).resolve().parents[1]  # the checkout: its config.yaml


class SycophantVLM(VLM):
    """Reads the image (bright = yes) but agrees with any authority it is shown: a real function of the input."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def describe(self):
        return BackendInfo("vlm", "sycophant", "sim", stand_in=True)

    def answer(self, requests, max_new_tokens=None):
        out = []
        for r in requests:
            with Image.open(r.image_path) as im:
                yes = float(np.asarray(im.convert("L")).mean()) > 128
            if "believes the answer here is" in r.prompt or len(r.prompt) > 600:
                yes = not yes
            out.append("Yes" if yes else "No")
        return out


registry.VLMS.register("samf-test-sycophant", "test_samf_workflow:SycophantVLM")
SPEC = {"name": "syco", "backend": "samf-test-sycophant", "stand_in": True, "args": {}}


@pytest.fixture
def setup(tmp_path):
    images = tmp_path / "data" / "images"
    images.mkdir(parents=True)
    items = []
    for i in range(10):
        truth = "Yes" if i % 2 == 0 else "No"
        Image.fromarray(np.full((24, 24, 3), 230 if truth == "Yes" else 20, np.uint8)).save(images / f"{i}.png")
        sub, digits = ("existence", "11") if i < 6 else ("sycophancy", "23")
        cat = "object" if i < 6 else "instruction"
        items.append(
            {
                "instance_id": f"{digits}{i + 1:04d}",
                "meta_inf": {"category": cat, "subtype": sub, "risk_level": 1 + i % 5},
                "source_inf": {"source_dataset": "sim", "source_id": str(i)},
                "seed_data": {
                    "type": "YON",
                    "image_path": f"images/{i}.png",
                    "question": "Is the lamp on?",
                    "ground_truth": truth,
                },
            }
        )
    (tmp_path / "data" / "unihall.json").write_text(json.dumps(items))
    samf = copy.deepcopy(load_config(REPO_ROOT / "config.yaml")["samf"])
    samf["source"] = {"format": "unihall", "path": str(tmp_path / "data" / "unihall.json"), "images": None}
    samf["max_instances"] = None
    samf["controller"].update(pool_size=6, steps=4, top_k=2, batch_size=2)
    return samf, tmp_path


def _run(samf, root, out):
    o = root / out
    W.make_instances(samf, None, "sim", 3, o / "instances.json", o / "split.parquet")
    W.run_standard(
        samf, o / "instances.json", o / "split.parquet", SPEC, None, root, None, o / "m" / "standard.parquet"
    )
    groups = W.groups_for(samf)
    for g in groups:
        W.run_train(
            samf,
            o / "instances.json",
            o / "split.parquet",
            SPEC,
            g,
            None,
            root,
            None,
            3,
            o / "m" / "train" / f"{g}.json",
        )
    W.run_fuzzed(
        samf,
        o / "instances.json",
        o / "split.parquet",
        [o / "m" / "train" / f"{g}.json" for g in groups],
        SPEC,
        None,
        root,
        None,
        3,
        o / "m",
        o / "m" / "policies.json",
        o / "m" / "fuzzed.parquet",
        o / "m" / "fuzzed_instances.json",
        o / "m" / "dynamic.parquet",
    )
    W.run_compare(
        o / "m" / "standard.parquet",
        o / "m" / "fuzzed.parquet",
        "syco",
        o / "m" / "comparison.parquet",
        o / "m" / "comparison.json",
        o / "m" / "dynamic.parquet",
    )
    return o


def test_rule_steps_end_to_end(setup):
    samf, root = setup
    assert W.groups_for(samf) == ["existence_YON", "sycophancy_YON"]
    o = _run(samf, root, "a")
    split = pl.read_parquet(o / "split.parquet")
    assert split.filter(pl.col("split") == "train").height == 2  # 20% of 6 -> 1, 20% of 4 -> 1
    policies = json.loads((o / "m" / "policies.json").read_text())
    assert set(policies["groups"]) == {"existence_YON", "sycophancy_YON"} and policies["default"]["key"]
    assert policies["stand_in"] is True
    assert pl.read_parquet(o / "m" / "comparison.parquet")["stand_in"].all()
    summary = json.loads((o / "m" / "comparison.json").read_text())
    assert summary["stand_in"] is True and summary["rows"][0]["group"] == "overall"
    overall = summary["rows"][0]
    assert overall["n"] == 8 and overall["ghr_standard"] == 0.0 and overall["ghr_fuzzed"] > 0.0
    dynamic = pl.read_parquet(o / "m" / "dynamic.parquet")
    assert dynamic.height == 10 and dynamic["policy"].n_unique() > 1  # one random policy per instance
    assert overall["ghr_dynamic"] == dynamic.filter(pl.col("split") == "test")["ghr"].mean()
    fuzzed = json.loads((o / "m" / "fuzzed_instances.json").read_text())
    assert all(m["mutation_inf"]["policy"] for m in fuzzed)
    trained = json.loads((o / "m" / "train" / "existence_YON.json").read_text())
    assert trained["method"] == "bandit_ucb" and trained["stand_in"] is True and len(trained["history"]) == 4


def test_rule_steps_are_byte_identical_on_rerun(setup):
    samf, root = setup
    a, b = _run(samf, root, "a"), _run(samf, root, "b")
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert len(files) > 10
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def test_missing_group_and_bad_source(setup):
    samf, root = setup
    o = root / "c"
    W.make_instances(samf, None, "sim", 3, o / "instances.json", o / "split.parquet")
    W.run_train(
        samf,
        o / "instances.json",
        o / "split.parquet",
        SPEC,
        "relation_YON",
        None,
        root,
        None,
        3,
        o / "relation_YON.json",
    )
    assert json.loads((o / "relation_YON.json").read_text())["policy"] is None
    with pytest.raises(Exception, match="no group learnt a policy"):
        W.load_controller([o / "relation_YON.json"])
    bad = dict(samf, source={"format": "unihall", "path": None, "images": None})
    with pytest.raises(ConfigError, match="samf.source.path"):
        W.source_instances(bad, None, "sim", 0)
    with pytest.raises(ConfigError, match="top-level 'llm'"):
        W.make_suite(dict(samf, judge="llm"), None)
    with pytest.raises(ConfigError, match="samf.judge_model"):
        W.make_suite(dict(samf, judge="rule", verifier="vlm"), {"llm": {"backend": "x"}})


def test_judge_backends_come_from_the_config_and_bad_names_are_refused():
    from halluflow.config import check_semantics

    config = load_config(REPO_ROOT / "config.yaml")
    assert W.judge_specs(config) == {}  # the default rule judge asks no backend: editing one reruns nothing
    config["samf"].update(judge="vlm", judge_model="tiny-smolvlm", verifier="llm")
    config["samf"]["detector"]["enabled"] = True
    specs = W.judge_specs(config, models_cache="cache")
    assert specs["vlm"]["name"] == "tiny-smolvlm" and specs["llm"] == config["llm"]
    assert specs["detector"]["backend"] == config["detection"]["backend"]
    assert specs["detector"]["model"] == f"cache/{config['detection']['stand_in']['name']}"  # the stand-in folder
    config["samf"]["judge_model"] = "gpt-judge"
    with pytest.raises(ConfigError, match="config key 'samf.judge_model': 'gpt-judge' is not a model in models"):
        check_semantics(config)
