"""SAMF evaluation loop (seed 003, Appendix C.3 and C.6): apply a policy, ask the model under test, score.

`PolicyEvaluator` is R(pi, D) of eq. (19) over any `vlm` backend; the functions below are what the workflow's
samf_* rules call: standard (unmutated) evaluation, per-group controller training, fuzzed evaluation with the
CentralFuzzController, and the standard-vs-fuzzed comparison table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import polars as pl
from PIL import Image

from ..backends.base import VLMRequest
from ..errors import BackendError, InputError
from ..io import open_rgb, safe_join, sha256_file, stable_hash
from ..progress import get_logger, progress
from .controllers import CentralFuzzController, Policy, PolicySpace, TrainResult, make_controller, random_policy
from .metrics import GHRScorer, bhr, ghs, risk_weighted, shr
from .operators import mutate_instance
from .schema import group_of

log = get_logger(__name__)
REWARD_METRICS = ("ghr", "bhr")


def _answers(vlm, requests: list[VLMRequest]) -> list[str]:
    """Answers in request order. Requests go out shortest prompt first: fuzzed prompts range from tens to tens of
    thousands of characters, and backends that batch pad every prompt of a batch to its longest one."""
    if not requests:
        return []
    order = sorted(range(len(requests)), key=lambda i: (len(requests[i].prompt), i))
    texts = vlm.answer([requests[i] for i in order])
    if len(texts) != len(requests):
        raise BackendError(f"vlm returned {len(texts)} answers for {len(requests)} requests")
    out = [""] * len(requests)
    for i, text in zip(order, texts):
        out[i] = text if isinstance(text, str) else ""
    return out


class PolicyEvaluator:
    """R(pi, D) = mean hallucination score of the model on D mutated by pi (eq. 19).

    Mutation seeds derive from (seed, instance, policy), so the same policy on the same instance is the same input;
    results are memoised per (policy, instance) because re-asking a deterministic model teaches the bandit nothing."""

    def __init__(
        self,
        vlm,
        images_root: str | Path,
        work_dir: str | Path,
        seed: int = 0,
        scorer: GHRScorer | None = None,
        metric: str = "ghr",
        distractors: Sequence[Image.Image] = (),
    ):
        if metric not in REWARD_METRICS:
            raise InputError(f"reward metric {metric!r}; known: {', '.join(REWARD_METRICS)}")
        self.vlm, self.images_root, self.work_dir = vlm, Path(images_root), Path(work_dir)
        self.seed, self.scorer, self.metric = seed, scorer or GHRScorer(), metric
        self.distractors = list(distractors)
        self.cache: dict[tuple[str, str], dict] = {}

    def _score(self, instance: dict, answer: str) -> tuple[float, int, str]:
        h, stage = self.scorer.score(instance, answer)
        value = float(h) if self.metric == "ghr" else bhr(instance, answer)[0]
        return value, h, stage

    def items(self, policy: Policy, batch: Sequence[dict]) -> list[dict]:
        return self.pairs([(policy, inst) for inst in batch])

    def pairs(self, pairs: Sequence[tuple[Policy, dict]]) -> list[dict]:
        """Evaluate (policy, instance) pairs; all uncached ones go to the model in one batch."""
        todo, seen = [], set()
        for policy, inst in pairs:
            key = (policy.key(), inst["instance_id"])
            if key not in self.cache and key not in seen:
                seen.add(key)
                todo.append((policy, inst))
        mutated = [
            mutate_instance(
                inst,
                policy.ops(),
                int(stable_hash(["samf-apply", self.seed, inst["instance_id"], policy.key()])[:8], 16),
                self.images_root,
                self.work_dir,
                distractors=self.distractors,
                policy_key=policy.key(),
            )
            for policy, inst in progress(todo, desc="mutate", total=len(todo))
        ]
        requests = [self._request(m) for m in mutated]
        for (policy, inst), m, req, answer in zip(todo, mutated, requests, _answers(self.vlm, requests)):
            score, h, stage = self._score(inst, answer)
            self.cache[(policy.key(), inst["instance_id"])] = {
                "instance_id": inst["instance_id"],
                "prompt": req.prompt,
                "image": m["mutation_inf"]["mutated_image_path"] or inst["seed_data"]["image_path"],
                "image_sha256": req.image_sha256,
                "answer": answer,
                "score": score,
                "ghr": h,
                "ghr_stage": stage,
                "mutated": m,
            }
        return [self.cache[(policy.key(), inst["instance_id"])] for policy, inst in pairs]

    def _request(self, mutated: dict) -> VLMRequest:
        info = mutated["mutation_inf"]
        if info["mutated_image_path"]:
            path = self.work_dir / info["mutated_image_path"]
        else:
            path = safe_join(self.images_root, mutated["seed_data"]["image_path"])
            if not path.exists():
                raise InputError(f"instance {mutated['instance_id']}: image {mutated['seed_data']['image_path']!r} not found under {self.images_root}")
        return VLMRequest(
            request_id=f"{mutated['instance_id']}-{stable_hash(info['mutated_text'])[:12]}",
            prompt=info["mutated_text"],
            image_path=str(path),
            image_sha256=sha256_file(path),
        )

    def __call__(self, policy: Policy, batch: Sequence[dict]) -> float:
        return float(np.mean([r["score"] for r in self.items(policy, batch)])) if batch else 0.0

    def many(self, jobs: Sequence[tuple[Policy, Sequence[dict]]]) -> list[float]:
        """R(pi, D) for several (policy, batch) jobs with one model call for all their uncached items."""
        items = self.pairs([(p, inst) for p, batch in jobs for inst in batch])
        out, pos = [], 0
        for _, batch in jobs:
            out.append(float(np.mean([r["score"] for r in items[pos : pos + len(batch)]])) if batch else 0.0)
            pos += len(batch)
        return out


def load_distractors(instances: Sequence[dict], images_root: str | Path, limit: int = 8) -> list[Image.Image]:
    """Other instances' images for multi_image_composition (first `limit` distinct images by instance id)."""
    seen, out = set(), []
    for inst in sorted(instances, key=lambda i: i["instance_id"]):
        rel = inst["seed_data"]["image_path"]
        path = safe_join(images_root, rel)
        if rel in seen or not path.exists():
            continue
        seen.add(rel)
        out.append(open_rgb(path, f"instance {inst['instance_id']}: image"))
        if len(out) >= limit:
            break
    return out


# ---------------------------------------------------------------------------------------------- workflow steps
def _model_fields(vlm, model_name: str) -> dict:
    info = vlm.describe()
    return {"model": model_name, "stand_in": bool(getattr(info, "stand_in", False))}


def standard_eval(
    instances, split: dict[str, str], vlm, model_name: str, images_root, scorer: GHRScorer | None = None,
    metrics: Sequence[str] = (), llm=None,
) -> pl.DataFrame:
    """Every instance asked unmutated (the 'Standard' setting of Table 11); `metrics` may add shr/ghs (judge `llm`)."""
    scorer = scorer or GHRScorer()
    requests = []
    for inst in instances:
        path = safe_join(images_root, inst["seed_data"]["image_path"])
        if not path.exists():
            raise InputError(f"instance {inst['instance_id']}: image {inst['seed_data']['image_path']!r} not found under {images_root}")
        requests.append(VLMRequest(inst["instance_id"], inst["seed_data"]["question"], str(path), sha256_file(path)))
    rows = []
    extra = _model_fields(vlm, model_name)
    for inst, answer in zip(instances, _answers(vlm, requests)):
        h, stage = scorer.score(inst, answer)
        rows.append(_row(inst, split, answer, h, stage, "", metrics, llm, **extra))
    return _frame(rows)


def _row(inst, split, answer, h, stage, policy_key, metrics=(), llm=None, **extra) -> dict:
    # SHR / GHS ask the judge once per answer: only computed when asked for (null columns otherwise).
    shr_value = shr(inst, answer, llm)[0] if "shr" in metrics else None
    ghs_value = ghs(inst, answer, llm, h)[0] if "ghs" in metrics else None
    return {
        "instance_id": inst["instance_id"],
        "group": group_of(inst),
        "category": inst["meta_inf"]["category"],
        "subtype": inst["meta_inf"]["subtype"],
        "qtype": inst["seed_data"]["type"],
        "risk_level": int(inst["meta_inf"]["risk_level"]),
        "split": split.get(inst["instance_id"], "test"),
        "policy": policy_key,
        "answer": answer,
        "ghr": int(h),
        "ghr_stage": stage,
        "bhr": float(bhr(inst, answer)[0]),
        "shr": shr_value,
        "ghs": ghs_value,
        **extra,
    }


_SCHEMA = {
    "instance_id": pl.String, "group": pl.String, "category": pl.String, "subtype": pl.String, "qtype": pl.String,
    "risk_level": pl.Int64, "split": pl.String, "policy": pl.String, "answer": pl.String, "ghr": pl.Int64,
    "ghr_stage": pl.String, "bhr": pl.Float64, "shr": pl.Float64, "ghs": pl.Float64, "model": pl.String,
    "stand_in": pl.Boolean,
}


def _frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=_SCHEMA).sort("instance_id")


def train_group(
    instances, split: dict[str, str], group: str, vlm, images_root, work_dir, controller_cfg: dict, seed: int,
    scorer: GHRScorer | None = None, metric: str = "ghr",
) -> TrainResult:
    """Train one (s, q) group's policy on its pilot (train) instances (C.4.3 / C.5)."""
    train = [i for i in instances if group_of(i) == group and split.get(i["instance_id"]) == "train"]
    if not train:
        raise InputError(f"group {group}: no training instances (groups present: {', '.join(sorted({group_of(i) for i in instances}))})")
    evaluator = PolicyEvaluator(vlm, images_root, work_dir, seed, scorer, metric, load_distractors(instances, images_root))
    return make_controller(controller_cfg, seed).train(group, train, evaluator)


def policy_eval(
    instances, split: dict[str, str], assign: Callable[[dict], Policy], vlm, model_name: str, images_root, out_dir,
    seed: int, scorer: GHRScorer | None = None, metrics: Sequence[str] = (), llm=None,
) -> tuple[pl.DataFrame, list[dict]]:
    """Every instance mutated by the policy `assign` gives it; one model batch; images under out_dir/fuzzed/."""
    evaluator = PolicyEvaluator(vlm, images_root, out_dir, seed, scorer, "ghr", load_distractors(instances, images_root))
    pairs = [(assign(inst), inst) for inst in instances]
    extra = _model_fields(vlm, model_name)
    rows, mutated = [], []
    for (policy, inst), item in zip(pairs, evaluator.pairs(pairs)):
        rows.append(_row(inst, split, item["answer"], item["ghr"], item["ghr_stage"], policy.key(), metrics, llm, **extra))
        mutated.append(item["mutated"])
    return _frame(rows), sorted(mutated, key=lambda m: m["instance_id"])


def fuzzed_eval(instances, split, controller: CentralFuzzController, vlm, model_name, images_root, out_dir, seed, **kw):
    """The fuzzing setting: each instance gets its group's learnt policy (the default policy for unseen groups)."""
    return policy_eval(instances, split, controller.policy_for_instance, vlm, model_name, images_root, out_dir, seed, **kw)


def dynamic_eval(instances, split, space: PolicySpace, vlm, model_name, images_root, out_dir, seed, **kw):
    """Table 11's "Dynamic" setting: one random policy per instance (seeded by instance), no controller."""

    def assign(inst: dict) -> Policy:
        return random_policy(np.random.default_rng(int(stable_hash(["samf-dynamic", seed, inst["instance_id"]])[:16], 16)), space)

    return policy_eval(instances, split, assign, vlm, model_name, images_root, out_dir, seed, **kw)


def empty_table() -> pl.DataFrame:
    return _frame([])


SETTINGS = ("standard", "dynamic", "fuzzed")


def compare(standard: pl.DataFrame, fuzzed: pl.DataFrame, split: str = "test", dynamic: pl.DataFrame | None = None) -> pl.DataFrame:
    """GHR / risk-weighted GHR / BHR (SHR, GHS when scored) per setting — standard, dynamic (null when not run),
    fuzzed — per group and overall, on one split (Table 11 layout)."""
    rows = []
    dynamic = dynamic if dynamic is not None else empty_table()
    tables = {name: df.filter(pl.col("split") == split) for name, df in zip(SETTINGS, (standard, dynamic, fuzzed))}
    std, fz = tables["standard"], tables["fuzzed"]
    groups = sorted(set(std["group"].to_list()) | set(fz["group"].to_list()))
    for name in ["overall", *groups]:
        sub = {k: (df if name == "overall" else df.filter(pl.col("group") == name)) for k, df in tables.items()}
        s, f = sub["standard"], sub["fuzzed"]
        row = {"group": name, "split": split, "n": s.height}
        for setting, df in sub.items():
            row[f"ghr_{setting}"] = float(df["ghr"].mean()) if df.height else None
            row[f"ghr_risk_{setting}"] = risk_weighted(df["ghr"].to_list(), df["risk_level"].to_list()) if df.height else None
            for m in ("bhr", "shr", "ghs"):
                values = df[m].drop_nulls() if m in df.columns else []
                row[f"{m}_{setting}"] = float(values.mean()) if len(values) else None
                row[f"{m}_risk_{setting}"] = (
                    risk_weighted(df.drop_nulls(m)[m].to_list(), df.drop_nulls(m)["risk_level"].to_list()) if len(values) else None
                )
        row["ghr_delta"] = (row["ghr_fuzzed"] - row["ghr_standard"]) if s.height and f.height else None
        row["policy"] = ";".join(sorted(set(f["policy"].to_list())))
        row["model"] = ";".join(sorted({m for df in (standard, fuzzed) if "model" in df.columns for m in df["model"].to_list()})) or None
        row["stand_in"] = any(bool(df["stand_in"].any()) for df in (standard, dynamic, fuzzed) if "stand_in" in df.columns)
        rows.append(row)
    schema = {"group": pl.String, "split": pl.String, "n": pl.Int64}
    for setting in SETTINGS:
        schema.update({f"ghr_{setting}": pl.Float64, f"ghr_risk_{setting}": pl.Float64})
        for m in ("bhr", "shr", "ghs"):
            schema.update({f"{m}_{setting}": pl.Float64, f"{m}_risk_{setting}": pl.Float64})
    schema.update({"ghr_delta": pl.Float64, "policy": pl.String, "model": pl.String, "stand_in": pl.Boolean})
    return pl.DataFrame(rows, schema=schema)
