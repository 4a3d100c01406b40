"""SAMF loop end to end (UniHall/SAMF paper, C.3/C.6): standard eval, per-group training, CentralFuzzController, fuzzed eval,
comparison. The evaluatee is a simulated VLM defined here: it reads the image (bright = the object is there) and
turns sycophantic when the prompt grows long, so fuzzing has something real to find."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import polars as pl
import pytest
from PIL import Image

from halluflow.backends.base import VLM, BackendInfo
from halluflow.io import write_parquet
from halluflow.samf import pipeline as P
from halluflow.samf.controllers import CentralFuzzController, Policy, pilot_split
from halluflow.samf.metrics import MetricSuite
from halluflow.samf.schema import validate_instance


class BrightnessVLM(VLM):
    """Answers "Yes" when the image is bright; flips its answer when the prompt is longer than `max_chars`."""

    def __init__(self, max_chars: int = 400):
        self.max_chars, self.calls, self.batches = max_chars, 0, 0

    def describe(self):
        return BackendInfo("vlm", "simulated", "brightness", stand_in=True)

    def answer(self, requests: Sequence) -> list[str]:
        self.batches += 1
        out = []
        for r in requests:
            self.calls += 1
            with Image.open(r.image_path) as im:
                says_yes = float(np.asarray(im.convert("L")).mean()) > 128
            if len(r.prompt) > self.max_chars:
                says_yes = not says_yes
            out.append("Yes, there is." if says_yes else "No, there is not.")
        return out


@pytest.fixture
def bench(tmp_path):
    (tmp_path / "images").mkdir()
    items = []
    for i in range(20):
        subtype, digits = ("existence", "11") if i < 12 else ("attribute", "12")
        truth = "Yes" if i % 2 == 0 else "No"
        level = 220 if truth == "Yes" else 30
        rng = np.random.default_rng(i)
        arr = np.clip(level + rng.normal(0, 10, (32, 32, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(arr, "RGB").save(tmp_path / "images" / f"{i}.png")
        items.append(
            validate_instance(
                {
                    "instance_id": f"{digits}{i + 1:04d}",
                    "meta_inf": {
                        "category": "object",
                        "subtype": subtype,
                        "subsubtype": "state" if subtype == "attribute" else "",
                        "risk_level": 1 + i % 5,
                    },
                    "source_inf": {"source_dataset": "sim", "source_id": str(i)},
                    "seed_data": {
                        "type": "YON",
                        "image_path": f"images/{i}.png",
                        "question": "Is there a lamp in the image?",
                        "ground_truth": truth,
                    },
                }
            )
        )
    return items, tmp_path


CFG = {"method": "ucb", "pool_size": 8, "n_init": 1, "batch_size": 2, "steps": 4, "top_k": 3}


def _run(items, root, out, method="ucb"):
    vlm = BrightnessVLM()
    split = pilot_split(items, 0.2, seed=1)
    std = P.standard_eval(items, split, vlm, "sim", root)
    results = {
        g: P.train_group(items, split, g, vlm, root, root / out / "work", dict(CFG, method=method), seed=7)
        for g in ("attribute_YON", "existence_YON")
    }
    ctl = CentralFuzzController({g: r.policy for g, r in results.items()})
    fz, mutated = P.fuzzed_eval(items, split, ctl, vlm, "sim", root, root / out, seed=7)
    return std, fz, mutated, results, P.compare(std, fz), vlm


def test_fuzzing_finds_hallucinations_the_standard_eval_misses(bench):
    items, root = bench
    std, fz, mutated, results, table, vlm = _run(items, root, "a")
    assert std["ghr"].sum() == 0  # the simulated model reads every original image correctly
    for r in results.values():
        assert r.n_train >= 1 and r.full_reward == max(a.get("full_reward", -1) for a in r.arms)
        assert r.evaluations == 8 * 2 + 4 * 2 + 3 * r.n_train  # K*N_init*B + T*B + k*N
    overall = table.row(0, named=True)
    assert overall["group"] == "overall" and overall["n"] == 16  # 20 instances - 4 pilot
    assert overall["ghr_fuzzed"] > overall["ghr_standard"] == 0.0
    assert overall["ghr_delta"] == pytest.approx(overall["ghr_fuzzed"])
    assert overall["ghr_dynamic"] is None  # the dynamic setting was not run here: null, not a fake number
    assert all(r["stand_in"] for r in fz.iter_rows(named=True))
    for m in mutated:
        info = m["mutation_inf"]
        assert info["policy"] and info["mutated_ground_truth"] == m["seed_data"]["ground_truth"]
        if info["mutated_image_path"]:
            assert (root / "a" / info["mutated_image_path"]).exists()


def test_same_seed_same_outputs(bench):
    items, root = bench
    a = _run(items, root, "a")
    b = _run(items, root, "b")
    for df_a, df_b, name in ((a[0], b[0], "std"), (a[1], b[1], "fz"), (a[4], b[4], "cmp")):
        write_parquet(root / f"a_{name}.parquet", df_a)
        write_parquet(root / f"b_{name}.parquet", df_b)
        assert (root / f"a_{name}.parquet").read_bytes() == (root / f"b_{name}.parquet").read_bytes()
    assert [m["mutation_inf"].get("mutated_image_sha256") for m in a[2]] == [
        m["mutation_inf"].get("mutated_image_sha256") for m in b[2]
    ]


def test_hill_climb_runs_through_the_same_loop(bench):
    items, root = bench
    std, fz, mutated, results, table, vlm = _run(items, root, "h", method="hill_climb")
    assert {r.method for r in results.values()} == {"hill_climb"}
    assert isinstance(table, pl.DataFrame) and table.height == 3


def test_train_group_without_pilot_items_names_the_group(bench):
    items, root = bench
    with pytest.raises(Exception, match="group relation_YON: no training instances"):
        P.train_group(items, pilot_split(items), "relation_YON", BrightnessVLM(), root, root / "w", CFG, 0)


def test_optional_shr_ghs_columns_reach_the_comparison(bench):
    items, root = bench
    split = pilot_split(items, 0.2, seed=1)
    vlm = BrightnessVLM(max_chars=40)  # the bare question is 29 chars: any added context flips the answer
    std = P.standard_eval(items, split, vlm, "sim", root, MetricSuite(metrics=("ghr", "bhr", "shr", "ghs")))
    assert std["shr"].null_count() == 0 and std["ghs"].max() == 0.0  # correct answers: rule-judged severity 0
    ctl = CentralFuzzController(
        {
            "existence_YON": __import__("halluflow.samf.controllers", fromlist=["Policy"]).Policy(
                (("constraint_stack", 1),)
            )
        }
    )
    fz, _ = P.fuzzed_eval(
        items, split, ctl, vlm, "sim", root, root / "o", seed=0, suite=MetricSuite(metrics=("ghr", "bhr", "shr", "ghs"))
    )
    assert fz["ghr"].sum() == len(items)  # every prompt grew past 40 chars -> every answer flipped
    assert fz["ghs"].min() == 1.0  # GHS fallback = max(h_GHR, BHR)
    table = P.compare(std, fz)
    overall = table.row(0, named=True)
    assert overall["ghs_standard"] == 0.0 and overall["ghs_fuzzed"] == 1.0 and overall["ghr_risk_fuzzed"] == 1.0
    assert overall["bhr_fuzzed"] == 1.0 and overall["shr_fuzzed"] == 1.0  # every flipped yes/no is Contradicted
    assert overall["shr_standard"] == 0.0
    assert set(std["ghs_source"]) == {"rule"} and overall["n_ghs_fallback_fuzzed"] == 0  # no judge configured


def test_batched_warm_up_equals_one_by_one(bench):
    """Phase-1 pulls and the top-k full evaluations go to the model together; results equal the sequential path."""
    from halluflow.samf.controllers import BanditController

    items, root = bench
    train = [i for i in items if i["instance_id"].startswith("11")]
    ctl = BanditController("ucb", pool_size=12, batch_size=2, steps=3, top_k=3, seed=5)
    batched_vlm, single_vlm = BrightnessVLM(), BrightnessVLM()
    batched = P.PolicyEvaluator(batched_vlm, root, root / "b", seed=1)
    single = P.PolicyEvaluator(single_vlm, root, root / "s", seed=1)
    a = ctl.train("existence_YON", train, batched)
    b = ctl.train("existence_YON", train, lambda p, batch: single(p, batch))  # no `many`: one call per pull
    assert a.as_dict() == b.as_dict()
    assert batched_vlm.calls == single_vlm.calls  # the same requests (memoised either way) ...
    assert batched_vlm.batches < single_vlm.batches / 2  # ... in far fewer model calls


def test_answers_are_returned_in_request_order_whatever_the_batching_order(bench):
    from halluflow.backends.base import VLMRequest

    class EchoVLM(BrightnessVLM):
        def answer(self, requests):
            self.seen = [r.request_id for r in requests]
            return [r.request_id for r in requests]

    vlm = EchoVLM()
    reqs = [VLMRequest(str(i), "x" * n, None) for i, n in enumerate([50, 5, 500, 20])]
    assert P._answers(vlm, reqs) == ["0", "1", "2", "3"]
    assert vlm.seen == ["1", "3", "0", "2"]  # shortest prompt first


class FlakyVLM(BrightnessVLM):
    """Every third request fails: the backend returns nothing for it (an empty answer is a failure too)."""

    def answer(self, requests):
        out = super().answer(requests)
        ids = [r.request_id.split("-")[0] for r in requests]  # fuzzed requests are "<instance>-<prompt hash>"
        return [None if i.endswith(("3", "6", "9")) else (" " if i.endswith("2") else a) for i, a in zip(ids, out)]


def test_failed_requests_are_never_scored_as_not_hallucinated(bench):
    items, root = bench
    split = {i["instance_id"]: "test" for i in items}
    vlm = FlakyVLM(max_chars=40)  # every answered mutated prompt is a hallucination
    std = P.standard_eval(items, split, vlm, "sim", root)
    failed_ids = {i["instance_id"] for i in items if i["instance_id"].endswith(("2", "3", "6", "9"))}
    assert set(std.filter(pl.col("failed"))["instance_id"]) == failed_ids
    assert std.filter(pl.col("failed"))["ghr"].null_count() == len(failed_ids)  # no number from a failed answer
    ctl = CentralFuzzController(
        {"existence_YON": Policy((("constraint_stack", 1),)), "attribute_YON": Policy((("constraint_stack", 1),))}
    )
    fz, _ = P.fuzzed_eval(items, split, ctl, vlm, "sim", root, root / "o", seed=0)
    overall = P.compare(std, fz).row(0, named=True)
    # Before: failures scored GHR 0 and pulled the fuzzed GHR down to (20 - 8) / 20 = 0.6.
    assert overall["ghr_fuzzed"] == 1.0 and overall["n_failed_fuzzed"] == len(failed_ids)
    assert overall["ghr_standard"] == 0.0 and overall["n_failed_standard"] == len(failed_ids)
    # The bandit's reward leaves failures out too: a batch with one answer scores that answer.
    evaluator = P.PolicyEvaluator(FlakyVLM(max_chars=40), root, root / "r", seed=0)
    batch = [i for i in items if i["instance_id"] in ("110002", "110004")]
    assert evaluator(Policy((("constraint_stack", 1),)), batch) == 1.0


class MultiImageVLM(BrightnessVLM):
    """Takes up to 4 images per request and records what it got."""

    max_images = 4

    def answer(self, requests):
        self.got = [list(getattr(r, "images", None) or [r.image_path]) for r in requests]
        return ["No."] * len(requests)


def test_multi_image_operators_send_several_images_or_record_the_tiled_fallback(bench):
    items, root = bench
    policy = Policy((("multi_image_copy_v1", 2),))
    single = P.PolicyEvaluator(BrightnessVLM(), root, root / "s", seed=0).items(policy, items[:1])[0]
    assert single["image_mode"] == "tiled" and single["n_images"] > 1  # one-image backend: the labelled panel
    vlm = MultiImageVLM()
    multi = P.PolicyEvaluator(vlm, root, root / "m", seed=0).items(policy, items[:1])[0]
    if not P.MULTI_IMAGE_REQUESTS:
        pytest.skip("VLMRequest has no `images` field yet: every backend receives the tiled panel")
    assert multi["image_mode"] == "multi" and len(vlm.got[0]) == multi["n_images"] > 1


def _mixed_pool(root) -> list[dict]:
    """4 object/existence + 2 instruction/sycophancy yes/no instances (bright image = the truth is Yes)."""
    (root / "mixed").mkdir()
    items = []
    for i in range(6):
        truth = "Yes" if i % 2 == 0 else "No"
        Image.fromarray(np.full((16, 16, 3), 220 if truth == "Yes" else 30, np.uint8)).save(root / "mixed" / f"{i}.png")
        category, subtype, digits = ("object", "existence", "11") if i < 4 else ("instruction", "sycophancy", "23")
        items.append(
            validate_instance(
                {
                    "instance_id": f"{digits}{i + 1:04d}",
                    "meta_inf": {"category": category, "subtype": subtype, "risk_level": 2},
                    "source_inf": {"source_dataset": "sim", "source_id": str(i)},
                    "seed_data": {
                        "type": "YON",
                        "image_path": f"mixed/{i}.png",
                        "question": "Is the lamp on?",
                        "ground_truth": truth,
                    },
                }
            )
        )
    return items


def test_category_table_puts_two_controllers_side_by_side_on_the_same_instances(tmp_path):
    """Hand-checkable: the bare question (15 chars) is answered right; any policy that adds context pushes the prompt
    past 40 chars and flips every answer. Controller `flip` stacks a constraint (every fuzzed answer wrong), controller
    `keep` applies no operator (fuzzed = static answers). Pilot split 20%: existence 4 -> 1 train, 3 test; sycophancy
    2 -> 1 train, 1 test; so the test split holds 3 object + 1 instruction instances."""
    items = _mixed_pool(tmp_path)
    split = pilot_split(items, 0.2, seed=1)
    assert sum(v == "test" for v in split.values()) == 4
    vlm = BrightnessVLM(max_chars=40)
    std = P.standard_eval(items, split, vlm, "sim", tmp_path)
    flip = CentralFuzzController({"existence_YON": Policy((("constraint_stack", 1),))})  # sycophancy: the default
    keep = CentralFuzzController({"existence_YON": Policy()})
    fuzzed = {
        name: P.fuzzed_eval(items, split, ctl, vlm, "sim", tmp_path, tmp_path / name, seed=0)[0]
        for name, ctl in (("flip", flip), ("keep", keep))
    }
    table = P.category_table(std, fuzzed)
    # controller x (overall, instruction, object) x (static, fuzzed), in that order
    assert table.height == 2 * 3 * 2
    assert table.select("controller", "category", "setting").rows()[:6] == [
        ("flip", "overall", "static"),
        ("flip", "overall", "fuzzed"),
        ("flip", "instruction", "static"),
        ("flip", "instruction", "fuzzed"),
        ("flip", "object", "static"),
        ("flip", "object", "fuzzed"),
    ]

    def cell(controller, category, setting):
        return table.filter(
            (pl.col("controller") == controller) & (pl.col("category") == category) & (pl.col("setting") == setting)
        ).row(0, named=True)

    metrics = ["n", "n_failed", "ghr", "bhr", "shr", "ghs"]
    for category, n in (("overall", 4), ("object", 3), ("instruction", 1)):
        static = [{k: cell(c, category, "static")[k] for k in metrics} for c in ("flip", "keep")]
        assert static[0] == static[1] == {"n": n, "n_failed": 0, "ghr": 0.0, "bhr": 0.0, "shr": None, "ghs": None}
        assert cell("flip", category, "fuzzed")["ghr"] == 1.0 and cell("flip", category, "fuzzed")["bhr"] == 1.0
        assert cell("keep", category, "fuzzed")["ghr"] == 0.0 and cell("keep", category, "fuzzed")["n"] == n
    assert table["model"].unique().to_list() == ["sim"] and table["stand_in"].all()
    with pytest.raises(Exception, match="no controller's fuzzed table"):
        P.category_table(std, {})


def test_category_table_fuzzed_rows_come_from_each_trained_controller(bench):
    """Hill climbing and UCB trained on the same pilot instances: one table, static rows identical across them,
    each fuzzed row the mean of that controller's own fuzzed answers (its Table 11 overall number)."""
    items, root = bench
    split = pilot_split(items, 0.2, seed=1)
    vlm = BrightnessVLM()
    std = P.standard_eval(items, split, vlm, "sim", root)
    fuzzed, policies = {}, {}
    for method in ("hill_climb", "ucb"):
        results = {
            g: P.train_group(items, split, g, vlm, root, root / method / "work", dict(CFG, method=method), seed=7)
            for g in ("attribute_YON", "existence_YON")
        }
        assert {r.method for r in results.values()} == {"hill_climb" if method == "hill_climb" else "bandit_ucb"}
        ctl = CentralFuzzController({g: r.policy for g, r in results.items()})
        policies[method] = ctl.as_dict()
        fuzzed[method] = P.fuzzed_eval(items, split, ctl, vlm, "sim", root, root / method, seed=7)[0]
    table = P.category_table(std, fuzzed)
    static = table.filter(pl.col("setting") == "static").drop("controller")
    assert static.filter(pl.col("category") == "overall").height == 2
    assert static[:2].to_dicts() == static[2:].to_dicts()  # same instances, same static answers
    for method, fz in fuzzed.items():
        row = table.filter(
            (pl.col("controller") == method) & (pl.col("category") == "overall") & (pl.col("setting") == "fuzzed")
        ).row(0, named=True)
        assert row["ghr"] == P.compare(std, fz).row(0, named=True)["ghr_fuzzed"]
        assert row["n"] == fz.filter(pl.col("split") == "test").height == 16


def test_report_panel_draws_static_beside_each_controllers_fuzzed_bars(tmp_path):
    """The report's SAMF figure gains a row per model from controllers.parquet: per category a static bar and one
    fuzzed bar per controller, their heights the table's GHR (n/a drawn as 0 and labelled)."""
    from halluflow.report.collect import Results
    from halluflow.report.figures import samf_bars

    items = _mixed_pool(tmp_path)
    split = pilot_split(items, 0.2, seed=1)
    vlm = BrightnessVLM(max_chars=40)
    std = P.standard_eval(items, split, vlm, "sim", tmp_path)
    ctls = {"flip": Policy((("constraint_stack", 1),)), "keep": Policy()}
    fuzzed = {
        name: P.fuzzed_eval(
            items, split, CentralFuzzController({"existence_YON": p}), vlm, "sim", tmp_path, tmp_path / name, 0
        )[0]
        for name, p in ctls.items()
    }
    root = tmp_path / "results"
    write_parquet(root / "fuzz" / "sim" / "comparison.parquet", P.compare(std, fuzzed["flip"]))
    assert len(samf_bars(Results(root), ["sim"]).axes) == 1  # no controllers table: the per-group panel only
    write_parquet(root / "fuzz" / "sim" / "controllers.parquet", P.category_table(std, fuzzed))
    fig = samf_bars(Results(root), ["sim"])
    assert len(fig.axes) == 2
    panel = fig.axes[1]
    assert [t.get_text() for t in panel.get_xticklabels()] == ["overall", "instruction", "object"]
    heights = [round(b.get_height(), 6) for b in panel.patches]
    # static (0, 0, 0), fuzzed flip (1, 1, 1), fuzzed keep (0, 0, 0)
    assert heights == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert [t.get_text() for t in panel.get_legend().get_texts()] == ["static", "fuzzed · flip", "fuzzed · keep"]
    fig.savefig(tmp_path / "samf.png")  # it renders
