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
from halluflow.backends.base import LLM, VLM, BackendInfo
from halluflow.config import load_config
from halluflow.errors import ConfigError, InputError
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


class VerdictLLM(LLM):
    """A verifier backend defined here: every claim is ENTAILED, so BHR is 0 wherever it is asked."""

    calls = 0

    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def describe(self):
        return BackendInfo("llm", "verdict", "verdict-judge", revision="r1", stand_in=True)

    def chat(self, messages):
        VerdictLLM.calls += 1
        return "ENTAILED"


registry.LLMS.register("samf-test-verdict", "test_samf_workflow:VerdictLLM")


def test_bhr_reward_is_judged_by_the_configured_verifier(setup):
    """reward_metric: bhr with samf.verifier: llm trains on the LLM's verdicts (before: the rule verifier, whatever
    samf.verifier said). The rule verifier sees the sycophant's wrong yes/no answers under the learnt policy (BHR > 0);
    the LLM verifier entails every claim, so its reward is 0."""
    samf, root = setup
    o = root / "bhr"
    W.make_instances(samf, None, "sim", 3, o / "instances.json", o / "split.parquet")
    args = (o / "instances.json", o / "split.parquet", SPEC, "existence_YON", None, root, None, 3)
    W.run_train(dict(samf, reward_metric="bhr"), *args, o / "rule.json")
    rule = json.loads((o / "rule.json").read_text())
    assert rule["full_reward"] > 0.0 and rule["judges"]["models"]["verifier"] is None
    VerdictLLM.calls = 0
    judged = dict(samf, reward_metric="bhr", verifier="llm")
    W.run_train(judged, *args, o / "llm.json", judges={"llm": {"backend": "samf-test-verdict"}})
    trained = json.loads((o / "llm.json").read_text())
    assert VerdictLLM.calls > 0 and trained["full_reward"] == 0.0
    assert trained["reward_metric"] == "bhr" and trained["judges"]["verifier"] == "llm"
    verifier = trained["judges"]["models"]["verifier"]
    assert verifier["asked"] == VerdictLLM.calls
    assert {k: verifier["model"][k] for k in ("backend", "model", "revision", "stand_in")} == {
        "backend": "verdict",
        "model": "verdict-judge",
        "revision": "r1",
        "stand_in": True,
    }


def test_every_summary_names_its_judges(setup):
    """comparison.json, the standard / fuzzed / dynamic tables (parquet metadata), policies.json and each training
    record say which judge, verifier, Sim_NLP and detector produced them: kind, backend, model id, revision and
    stand_in, and `loaded: false` for a configured backend no call needed (named from its config spec)."""
    samf, root = setup
    samf = dict(samf, verifier="llm", reward_metric="bhr", similarity={"backend": "minilm", "revision": "v9"})
    judges = {"llm": {"backend": "samf-test-verdict", "model": "verdict-judge"}}
    o = root / "rec"
    W.make_instances(samf, None, "sim", 3, o / "instances.json", o / "split.parquet")
    common = (o / "instances.json", o / "split.parquet")
    W.run_standard(samf, *common, SPEC, None, root, None, o / "standard.parquet", judges=judges)
    groups = W.groups_for(samf)
    for g in groups:
        W.run_train(samf, *common, SPEC, g, None, root, None, 3, o / "train" / f"{g}.json", judges=judges)
    outs = [o / "policies.json", o / "fuzzed.parquet", o / "fuzzed_instances.json", o / "dynamic.parquet"]
    trained = [o / "train" / f"{g}.json" for g in groups]
    W.run_fuzzed(samf, *common, trained, SPEC, None, root, None, 3, o, *outs, judges=judges)
    W.run_compare(
        o / "standard.parquet", o / "fuzzed.parquet", "syco", o / "c.parquet", o / "c.json", o / "dynamic.parquet"
    )
    summary = json.loads((o / "c.json").read_text())
    assert set(summary["judges"]) == {"standard", "dynamic", "fuzzed"}
    for setting, record in summary["judges"].items():
        assert record == W.read_judges(o / f"{setting}.parquet"), setting
        models = record["models"]
        assert models["judge"] is None and models["ghr_judge"] is None  # samf.judge: rule
        assert models["verifier"]["model"]["backend"] == "verdict" and models["verifier"]["model"]["loaded"]
        assert models["verifier"]["asked"] > 0  # YON items: one claim per answer, each verified
        # YON items never ask Sim_NLP, so MiniLM was never loaded: named from samf.similarity, not loaded to say so.
        assert models["similarity"] == {
            "kind": "embedder",
            "model": {
                "role": "embedder",
                "backend": "minilm",
                "model": None,
                "revision": "v9",
                "stand_in": False,
                "loaded": False,
            },
        }
    assert W.read_judges(o / "c.parquet") == summary["judges"]
    assert json.loads((o / "policies.json").read_text())["judges"] == summary["judges"]["fuzzed"]
    assert all(json.loads(p.read_text())["judges"]["verifier"] == "llm" for p in trained)
    # A table that records no judges is refused at compare time, in one line naming it.
    pl.read_parquet(o / "standard.parquet").write_parquet(o / "bare.parquet")
    with pytest.raises(InputError, match=r"bare.parquet: records no judges"):
        W.run_compare(o / "bare.parquet", o / "fuzzed.parquet", "syco", o / "d.parquet", o / "d.json")
