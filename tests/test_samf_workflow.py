"""The samf_* rule steps on files (UniHall/SAMF paper, Sec. 3.3): UniHall source -> instances/split -> standard eval ->
per-group training -> policies.json + fuzzed eval -> comparison, through the answer stage's ModelUnderTest and the
vlm registry (the simulated evaluatee below is registered like any backend)."""

from __future__ import annotations

import copy
import json

import numpy as np
import polars as pl
import pytest
from helpers import REPO as REPO_ROOT  # the checkout: its config.yaml
from PIL import Image

from halluflow.backends.base import LLM, VLM, BackendInfo
from halluflow.config import load_config
from halluflow.errors import ConfigError, InputError
from halluflow.models import registry
from halluflow.samf import workflow as W
from halluflow.samf.judges import backend_record


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


def _run(samf, root, out, agreement=None):
    """The rule steps as the workflow runs them: one standard and one dynamic table per model, one training job per
    controller x group and one fuzzed evaluation per controller, then the comparison of every controller."""
    o = root / out
    m = o / "m"
    W.make_instances(samf, None, "sim", 3, o / "instances.json", o / "split.parquet")
    common = (o / "instances.json", o / "split.parquet")
    W.run_standard(samf, *common, SPEC, None, root, None, m / "standard.parquet")
    W.run_dynamic(samf, *common, SPEC, None, root, None, 3, m / "dynamic", m / "dynamic.parquet")
    groups = W.groups_for(samf)
    for c in W.controllers_of(samf):
        for g in groups:
            W.run_train(samf, *common, SPEC, g, None, root, None, 3, m / c / "train" / f"{g}.json", controller=c)
        outs = [m / c / "policies.json", m / c / "fuzzed.parquet", m / c / "fuzzed_instances.json"]
        trained = [m / c / "train" / f"{g}.json" for g in groups]
        W.run_fuzzed(samf, *common, trained, SPEC, None, root, None, 3, m / c, *outs, controller=c)
    W.run_compare(
        m / "standard.parquet",
        {c: m / c / "fuzzed.parquet" for c in W.controllers_of(samf)},
        "syco",
        m / "comparison.parquet",
        m / "comparison.json",
        m / "dynamic.parquet",
        m / "controllers.parquet",
        agreement,
    )
    return o


def test_rule_steps_end_to_end(setup):
    samf, root = setup
    assert W.groups_for(samf) == ["existence_YON", "sycophancy_YON"]
    o = _run(samf, root, "a")
    split = pl.read_parquet(o / "split.parquet")
    assert split.filter(pl.col("split") == "train").height == 2  # 20% of 6 -> 1, 20% of 4 -> 1
    policies = json.loads((o / "m" / "ucb" / "policies.json").read_text())
    assert set(policies["groups"]) == {"existence_YON", "sycophancy_YON"} and policies["default"]["key"]
    assert policies["stand_in"] is True and policies["controller"] == "ucb"
    assert pl.read_parquet(o / "m" / "comparison.parquet")["stand_in"].all()
    summary = json.loads((o / "m" / "comparison.json").read_text())
    assert summary["stand_in"] is True and summary["rows"][0]["group"] == "overall"
    overall = summary["rows"][0]
    assert overall["n"] == 8 and overall["ghr_standard"] == 0.0 and overall["ghr_fuzzed"] > 0.0
    dynamic = pl.read_parquet(o / "m" / "dynamic.parquet")
    assert dynamic.height == 10 and dynamic["policy"].n_unique() > 1  # one random policy per instance
    assert overall["ghr_dynamic"] == dynamic.filter(pl.col("split") == "test")["ghr"].mean()
    fuzzed = json.loads((o / "m" / "ucb" / "fuzzed_instances.json").read_text())
    assert all(m["mutation_inf"]["policy"] for m in fuzzed)
    trained = json.loads((o / "m" / "ucb" / "train" / "existence_YON.json").read_text())
    assert trained["method"] == "bandit_ucb" and trained["stand_in"] is True and len(trained["history"]) == 4
    assert trained["controller"] == "ucb" and summary["controllers"] == ["ucb"]  # the default: one controller


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
    # VerdictLLM describes itself as a stand-in with the revision "r1": a stand-in never carries a hub revision
    # (the revision names weights it never loaded), so the record keeps backend, model and stand_in, revision None.
    assert {k: verifier["model"][k] for k in ("backend", "model", "revision", "stand_in")} == {
        "backend": "verdict",
        "model": "verdict-judge",
        "revision": None,
        "stand_in": True,
    }
    # A real model keeps its revision, built or named from its spec; a spec marked stand_in drops the spec's one.
    real = VerdictLLM()
    real.describe = lambda: BackendInfo("llm", "verdict", "verdict-judge", revision="r1")
    assert backend_record(real, "chat")["revision"] == "r1"
    spec = {"backend": "samf-test-verdict", "args": {"model": "verdict-judge", "revision": "r1"}}
    assert backend_record(lambda: real, "chat", spec)["revision"] == "r1"
    unloaded = backend_record(lambda: real, "chat", {**spec, "stand_in": True})
    assert (unloaded["revision"], unloaded["stand_in"], unloaded["loaded"]) == (None, True, False)


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
    W.run_dynamic(samf, *common, SPEC, None, root, None, 3, o / "dyn", o / "dynamic.parquet", judges=judges)
    groups = W.groups_for(samf)
    for g in groups:
        W.run_train(samf, *common, SPEC, g, None, root, None, 3, o / "train" / f"{g}.json", judges=judges)
    outs = [o / "policies.json", o / "fuzzed.parquet", o / "fuzzed_instances.json"]
    trained = [o / "train" / f"{g}.json" for g in groups]
    W.run_fuzzed(samf, *common, trained, SPEC, None, root, None, 3, o, *outs, judges=judges)
    W.run_compare(
        o / "standard.parquet",
        {"ucb": o / "fuzzed.parquet"},
        "syco",
        o / "c.parquet",
        o / "c.json",
        o / "dynamic.parquet",
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
    assert summary["fuzzed_judges"] == {"ucb": summary["judges"]["fuzzed"]}
    assert json.loads((o / "policies.json").read_text())["judges"] == summary["judges"]["fuzzed"]
    assert all(json.loads(p.read_text())["judges"]["verifier"] == "llm" for p in trained)
    # A table that records no judges is refused at compare time, in one line naming it.
    pl.read_parquet(o / "standard.parquet").write_parquet(o / "bare.parquet")
    with pytest.raises(InputError, match=r"bare.parquet: records no judges"):
        W.run_compare(o / "bare.parquet", {"ucb": o / "fuzzed.parquet"}, "syco", o / "d.parquet", o / "d.json")


def test_two_controllers_in_one_run_share_the_instances_and_the_static_answers(setup):
    """samf.controllers [hill_climb, ucb]: both train on the same pilot split and fuzz the same instances; one
    comparison holds the controller x category x static/fuzzed table (JSON by_category = controllers.parquet), its
    static rows identical across controllers, each fuzzed row from that controller's own fuzzed table; Table 4's
    agreement is computed from human labels of the static answers. Every number has its catalogue entry."""
    from halluflow.metrics.catalogue import CATALOGUE, entry_for_path

    samf, root = setup
    samf = dict(samf, controllers=["hill_climb", "ucb"])
    # Human labels (sycophant's static answers are all right: GHR 0 on every one): 2 of 4 say hallucinated, one
    # label names an instance with no answer, one belongs to another model and is dropped.
    labels = root / "labels.csv"
    o = _run(samf, root, "two")
    test_ids = sorted(pl.read_parquet(o / "split.parquet").filter(pl.col("split") == "test")["instance_id"])
    lines = ["instance_id,label,model"] + [f"{i},{k % 2},syco" for k, i in enumerate(test_ids[:4])]
    labels.write_text("\n".join(lines + ["999999,1,syco", f"{test_ids[0]},1,other"]) + "\n")
    agreement = {"labels": str(labels), "thresholds": {}, "metrics": ["ghr", "bhr"], "seed": 3}
    o = _run(samf, root, "two", agreement)
    m = o / "m"
    summary = json.loads((m / "comparison.json").read_text())
    assert summary["controllers"] == ["hill_climb", "ucb"] and summary["controller"] == "hill_climb"
    for c in ("hill_climb", "ucb"):
        assert json.loads((m / c / "policies.json").read_text())["controller"] == c
        assert {json.loads(p.read_text())["controller"] for p in (m / c / "train").glob("*.json")} == {c}
    assert set(summary["fuzzed_judges"]) == {"hill_climb", "ucb"}
    rows = pl.DataFrame(summary["by_category"])
    assert pl.read_parquet(m / "controllers.parquet").to_dicts() == summary["by_category"]
    assert W.read_judges(m / "controllers.parquet")["fuzzed"] == summary["fuzzed_judges"]
    # 8 test instances: object 5 (6 existence, 1 trains), instruction 3 (4 sycophancy, 1 trains)
    static = rows.filter(pl.col("setting") == "static")
    for category, n in (("overall", 8), ("object", 5), ("instruction", 3)):
        both = static.filter(pl.col("category") == category).drop("controller").to_dicts()
        assert len(both) == 2 and both[0] == both[1] and both[0]["n"] == n and both[0]["ghr"] == 0.0
    for c in ("hill_climb", "ucb"):
        fz = pl.read_parquet(m / c / "fuzzed.parquet").filter(pl.col("split") == "test")
        for category in ("object", "instruction"):
            got = rows.filter(
                (pl.col("controller") == c) & (pl.col("category") == category) & (pl.col("setting") == "fuzzed")
            )["ghr"].item()
            assert got == fz.filter(pl.col("category") == category)["ghr"].mean()
    # Table 11 rows are the first controller's
    overall = next(r for r in summary["rows"] if r["group"] == "overall")
    assert (
        overall["ghr_fuzzed"]
        == rows.filter(
            (pl.col("controller") == "hill_climb") & (pl.col("category") == "overall") & (pl.col("setting") == "fuzzed")
        )["ghr"].item()
    )
    # Table 4: ghr is 0 on every labelled answer -> every decision "not hallucinated": accuracy 2/4, recall 0
    agree = summary["agreement"]
    assert (agree["n_labels"], agree["n_hallucinated"], agree["n_unmatched"]) == (5, 3, 1)
    ghr = next(r for r in agree["table"] if r["metric"] == "ghr" and r["analysis"] == "original")
    assert ghr["n"] == 4 and ghr["accuracy"] == 0.5 and ghr["recall"] == 0.0 and ghr["pearson"] is None
    assert {r["metric"] for r in agree["table"]} == {"ghr", "bhr", "random"}  # + the seeded chance row
    # every number of the new sections is catalogued and read back through its entry
    n = 0
    for r in summary["by_category"]:
        sel = f"by_category[controller={r['controller']},category={r['category']},setting={r['setting']}]"
        for key in ("n", "n_failed", "ghr", "bhr", "shr", "ghs"):
            entry = entry_for_path(f"{sel}.{key}", "samf")
            assert entry is not None, key
            kw = {"controller": r["controller"], "category": r["category"], "setting": r["setting"]}
            assert CATALOGUE.read(summary, entry.name, **kw) == r[key]
            n += 1
    for r in agree["table"]:
        for key in ("n", "accuracy", "recall", "f1", "kappa", "pearson", "spearman"):
            entry = entry_for_path(f"agreement.table[metric={r['metric']},analysis={r['analysis']}].{key}", "samf")
            assert CATALOGUE.read(summary, entry.name, metric=r["metric"], analysis=r["analysis"]) == r[key]
            n += 1
    for key in ("n_labels", "n_hallucinated", "n_unmatched"):
        assert CATALOGUE.read(summary, f"samf.agreement.{key}") == agree[key]
    assert CATALOGUE.read(summary, "samf.agreement.threshold", metric="random") == 0.5
    assert n == 2 * 3 * 2 * 6 + len(agree["table"]) * 7


def test_controller_list_is_checked_in_one_line(setup):
    samf, _ = setup
    assert W.controllers_of(samf) == ["ucb"]  # no samf.controllers: the single samf.controller.method
    assert W.controller_config(dict(samf, controllers=["hill_climb", "ucb"]), "ucb")["method"] == "ucb"
    for bad, match in (
        ("ucb", "expected a non-empty list"),
        ([], "expected a non-empty list"),
        (["ucb", "bogus"], "'bogus'; known: ucb, epsilon_greedy, hill_climb"),
        (["ucb", "ucb"], "names a controller twice"),
    ):
        with pytest.raises(ConfigError, match=rf"config key 'samf.controllers': .*{match}"):
            W.controllers_of(dict(samf, controllers=bad))
    with pytest.raises(ConfigError, match="'hill_climb' is not one of"):
        W.controller_config(samf, "hill_climb")
