"""SAMF speed (UniHall/SAMF paper): each mutation operator per level on a 256 px image, the controllers' own overhead at
the paper's sizes (K = 1024, T = 16, B = 4, k = 3) with a model-free reward, so the numbers show the library's
cost, not a model's, and the metric suite per free-form answer: Sim_NLP trigram vs MiniLM, and `--judges` the tiny
stand-in VLM judge (sees the image) and detector oracle. Run: python bench/bench_samf.py [--judges]
(prints a table; nothing is asserted)."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from halluflow.samf import controllers as C
from halluflow.samf import operators as O


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "images").mkdir()
        rng = np.random.default_rng(0)
        Image.fromarray(rng.integers(0, 255, (256, 256, 3), dtype=np.uint8)).save(root / "images" / "x.png")
        inst = {
            "instance_id": "110001",
            "meta_inf": {"category": "object", "subtype": "existence", "risk_level": 1},
            "source_inf": {"source_dataset": "bench", "source_id": "1"},
            "seed_data": {
                "type": "YON",
                "image_path": "images/x.png",
                "question": "Is there a dog?",
                "ground_truth": "Yes",
            },
        }
        print(f"{'operator':<26} " + " ".join(f"L{lv} ms" for lv in (1, 3, 5)) + "   chars@L5")
        for name in O.OPERATORS:
            times, chars = [], 0
            for lv in (1, 3, 5):
                t0 = time.perf_counter()
                for seed in range(5):
                    m = O.mutate_instance(inst, [(name, lv)], seed, root, root / "out")
                times.append((time.perf_counter() - t0) / 5 * 1000)
                chars = len(m["mutation_inf"]["mutated_text"])
            print(f"{name:<26} " + " ".join(f"{t:6.1f}" for t in times) + f"   {chars}")

    train = [dict(id=i) for i in range(40)]

    def reward(policy, batch):
        return min(1.0, sum(lv for _, lv in policy.ops()) / 25)

    for method, ctl in (
        ("ucb", C.BanditController("ucb", pool_size=1024, steps=16, top_k=3, seed=0)),
        ("epsilon_greedy", C.BanditController("epsilon_greedy", pool_size=1024, steps=16, top_k=3, seed=0)),
        ("hill_climb", C.HillClimbController(steps=16, seed=0)),
    ):
        t0 = time.perf_counter()
        res = ctl.train("existence_YON", train, reward)
        print(
            f"{method:<15} {time.perf_counter() - t0:6.2f} s controller overhead, {res.evaluations} instance evaluations, "
            f"best R_full {res.full_reward:.2f}"
        )
    bench_metrics("--judges" in sys.argv)
    return 0


def bench_metrics(with_judges: bool) -> None:
    """Per-answer cost of the metric suite on 200 free-form answers (distinct texts, so no memo hits)."""
    from halluflow.samf import workflow as W
    from halluflow.samf.metrics import MetricSuite, RuleVerifier, scorer_from_config

    inst = {
        "instance_id": "120001",
        "meta_inf": {"category": "object", "subtype": "attribute", "subsubtype": "color", "risk_level": 1},
        "source_inf": {"source_dataset": "bench", "source_id": "1"},
        "seed_data": {
            "type": "VQA",
            "image_path": "images/x.png",
            "question": "What color is the car?",
            "ground_truth": "Blue",
            "expected_other_answers": ["It is blue"],
            "negative_answers": ["Red", "Yellow"],
        },
    }
    answers = [f"The car looks shade {i} of teal, parked near tree {i}." for i in range(200)]
    for name, spec in (("trigram", "trigram"), ("minilm", {"backend": "minilm"})):
        suite = MetricSuite(scorer_from_config({}, similarity=spec), ("ghr", "bhr"), None, RuleVerifier())
        suite.score(inst, "warm-up")  # model load is not the per-answer cost
        t0 = time.perf_counter()
        for a in answers:
            suite.score(inst, a)
        print(f"GHR + BHR, Sim_NLP {name:<8} {(time.perf_counter() - t0) / len(answers) * 1000:7.2f} ms per answer")
    if not with_judges:
        return
    from halluflow.models.standins import build_standin

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "images").mkdir()
        Image.fromarray(np.full((64, 64, 3), 90, np.uint8)).save(root / "images" / "x.png")
        samf = {
            "judge": "vlm",
            "verifier": "rule",
            "ghr": {},
            "similarity": "trigram",
            "metrics": ["ghr", "bhr", "shr", "ghs"],
            "detector": {"enabled": True, "threshold": 0.3, "max_labels": 8},
        }
        judges = {
            "vlm": {
                "name": "judge",
                "backend": "transformers",
                "args": {
                    "model": str(build_standin("smolvlm", root / "vlm", hidden_size=32, image_size=64)),
                    "device": "cpu",
                },
            },
            "detector": {
                "backend": "transformers",
                "model": str(build_standin("owlv2", root / "owl")),
                "device": "cpu",
            },
        }
        suite = W.make_suite(samf, judges)
        image = str(root / "images" / "x.png")
        t0 = time.perf_counter()
        for a in answers[:20]:
            suite.score(inst, a, image)
        info = suite.describe()
        print(
            f"GHR+BHR+SHR+GHS, tiny VLM judge + detector {(time.perf_counter() - t0) / 20 * 1000:7.1f} ms per answer "
            f"({info['judge_calls']} judge calls, {info['judge_failures']} unparsed, {suite.detector.calls} detector calls)"
        )


if __name__ == "__main__":
    sys.exit(main())
