"""SAMF evaluation loop ("Unified Hallucination Fuzzing for Multimodal Large Language Models", Appendix C.3 and
C.6): apply a policy, ask the model under test, score.

`PolicyEvaluator` is R(pi, D) of eq. (19) over any `vlm` backend; the functions below are what the workflow's
samf_* rules call: standard (unmutated) evaluation, per-group controller training, fuzzed evaluation with the
CentralFuzzController, the standard-vs-fuzzed comparison table (Table 11 layout) and the per-category table of
several controllers side by side (static vs fuzzed, GHR/BHR/SHR/GHS).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import polars as pl
from PIL import Image

from ..backends.base import VLMRequest
from ..errors import BackendError, InputError
from ..io import open_rgb, safe_join, stable_hash
from ..metrics.parsers import is_failed
from ..models.model import image_sha256, vlm_request
from ..progress import get_logger, progress
from .controllers import CentralFuzzController, Policy, PolicySpace, TrainResult, make_controller, random_policy
from .metrics import GHRScorer, MetricSuite, bhr, risk_weighted
from .operators import mutate_instance
from .schema import group_of

log = get_logger(__name__)
REWARD_METRICS = ("ghr", "bhr")


def _answers(vlm, requests: list[VLMRequest]) -> list[str | None]:
    """Answers in request order; None for a failed or empty answer (never scored, counted as failed).

    Requests go out shortest prompt first: fuzzed prompts range from tens to tens of thousands of characters, and
    backends that batch pad every prompt of a batch to its longest one."""
    if not requests:
        return []
    order = sorted(range(len(requests)), key=lambda i: (len(requests[i].prompt), i))
    texts = vlm.answer([requests[i] for i in order])
    if len(texts) != len(requests):
        raise BackendError(f"vlm returned {len(texts)} answers for {len(requests)} requests")
    out: list[str | None] = [None] * len(requests)
    for i, text in zip(order, texts):
        out[i] = None if is_failed(text) else text  # the shared failed-answer rule
    return out


# VLMRequest gains `images` (several images in one request) in backends that accept them; older ones take one.
MULTI_IMAGE_REQUESTS = "images" in {f.name for f in dataclasses.fields(VLMRequest)}


def image_capacity(vlm) -> int:
    """How many images one request to `vlm` may carry: its `max_images` capability (attribute or describe().extra),
    1 when it declares none."""
    value = getattr(vlm, "max_images", None)
    if value is None:
        # A wrapper around a models: entry (ModelUnderTest) answers for its backend.
        value = getattr(getattr(getattr(vlm, "model", None), "backend", None), "max_images", None)
    if value is None:
        value = (getattr(vlm.describe(), "extra", None) or {}).get("max_images")
    # 0 = a backend that ignores images on purpose (the blind baseline): it gets the one tiled panel it ignores.
    return max(1, int(value or 1))


class PolicyEvaluator:
    """R(pi, D) = mean hallucination score of the model on D mutated by pi (eq. 19).

    Mutation seeds derive from (seed, instance, policy), so the same policy on the same instance is the same input;
    results are memoised per (policy, instance) because re-asking a deterministic model teaches the bandit nothing.
    With metric `bhr` the claims are judged by `verifier` (samf.verifier; the rule verifier when None)."""

    def __init__(
        self,
        vlm,
        images_root: str | Path,
        work_dir: str | Path,
        seed: int = 0,
        scorer: GHRScorer | None = None,
        metric: str = "ghr",
        distractors: Sequence[Image.Image] = (),
        verifier=None,
    ):
        if metric not in REWARD_METRICS:
            raise InputError(f"reward metric {metric!r}; known: {', '.join(REWARD_METRICS)}")
        self.vlm, self.images_root, self.work_dir = vlm, Path(images_root), Path(work_dir)
        self.seed, self.scorer, self.metric = seed, scorer or GHRScorer(), metric
        self.verifier = verifier
        self.distractors = list(distractors)
        self.cache: dict[tuple[str, str], dict] = {}
        self._capacity: int | None = None

    @property
    def capacity(self) -> int:
        if self._capacity is None:
            self._capacity = image_capacity(self.vlm) if MULTI_IMAGE_REQUESTS else 1
        return self._capacity

    def _score(self, instance: dict, answer: str | None) -> tuple[float | None, int | None, str]:
        if answer is None:
            return None, None, "failed"
        image = original_image(instance, self.images_root)
        h, stage = self.scorer.score(instance, answer, image)
        if self.metric == "ghr":  # an unreadable yes/no answer GHR excludes (h None) is no evidence either way
            value = None if h is None else float(h)
        else:
            value = bhr(instance, answer, self.verifier, image)[0]
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
        for (policy, inst), m, (req, mode), answer in zip(
            todo, mutated, requests, _answers(self.vlm, [r for r, _ in requests])
        ):
            score, h, stage = self._score(inst, answer)
            self.cache[(policy.key(), inst["instance_id"])] = {
                "instance_id": inst["instance_id"],
                "prompt": req.prompt,
                "image": m["mutation_inf"]["mutated_image_path"] or inst["seed_data"]["image_path"],
                "image_sha256": req.image_sha256,
                "image_mode": mode,
                "n_images": len(m["mutation_inf"].get("mutated_image_paths") or [None]),
                "answer": answer,
                "failed": answer is None,
                "score": score,
                "ghr": h,
                "ghr_stage": stage,
                "mutated": m,
            }
        return [self.cache[(policy.key(), inst["instance_id"])] for policy, inst in pairs]

    def _request(self, mutated: dict) -> tuple[VLMRequest, str]:
        """The model's request and how its images travel: `single`, `multi` (several images in one request, for
        backends whose max_images allows) or `tiled` (the labelled panel: the recorded fallback)."""
        info = mutated["mutation_inf"]
        request_id = f"{mutated['instance_id']}-{stable_hash(info['mutated_text'])[:12]}"
        parts = info.get("mutated_image_paths") or []
        if len(parts) > 1:
            if 1 < len(parts) <= self.capacity:
                paths = [str(self.work_dir / p) for p in parts]
                digest = stable_hash([image_sha256(p) for p in paths])
                request = vlm_request(request_id, info["mutated_text"], paths[0], image_sha256=digest, images=paths)
                return request, "multi"
            path, mode = self.work_dir / info["mutated_image_path"], "tiled"
        elif info["mutated_image_path"]:
            path, mode = self.work_dir / info["mutated_image_path"], "single"
        else:
            path, mode = Path(original_image(mutated, self.images_root)), "single"
        return vlm_request(request_id, info["mutated_text"], path, image_sha256=image_sha256(path)), mode

    def __call__(self, policy: Policy, batch: Sequence[dict]) -> float:
        return _reward(self.items(policy, batch))

    def many(self, jobs: Sequence[tuple[Policy, Sequence[dict]]]) -> list[float]:
        """R(pi, D) for several (policy, batch) jobs with one model call for all their uncached items."""
        items = self.pairs([(p, inst) for p, batch in jobs for inst in batch])
        out, pos = [], 0
        for _, batch in jobs:
            out.append(_reward(items[pos : pos + len(batch)]))
            pos += len(batch)
        return out


def _reward(items: Sequence[dict]) -> float:
    """Mean score over the answered items: a failed request is no evidence either way (0.0 when none answered)."""
    scores = [r["score"] for r in items if r["score"] is not None]
    return float(np.mean(scores)) if scores else 0.0


def original_image(instance: dict, images_root: str | Path) -> str:
    """The instance's unmutated image: what the judge and the detector oracle look at."""
    path = safe_join(images_root, instance["seed_data"]["image_path"])
    if not path.exists():
        raise InputError(
            f"instance {instance['instance_id']}: image {instance['seed_data']['image_path']!r} not found under {images_root}"
        )
    return str(path)


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
    instances,
    split: dict[str, str],
    vlm,
    model_name: str,
    images_root,
    suite: MetricSuite | None = None,
) -> pl.DataFrame:
    """Every instance asked unmutated (the 'Standard' setting of Table 11), scored by `suite`."""
    suite = suite or MetricSuite()
    paths = [original_image(inst, images_root) for inst in instances]
    requests = [
        vlm_request(inst["instance_id"], inst["seed_data"]["question"], p, image_sha256=image_sha256(p))
        for inst, p in zip(instances, paths)
    ]
    extra = _model_fields(vlm, model_name)
    rows = [
        _row(inst, split, answer, "", suite, path, image_mode="single", n_images=1, **extra)
        for inst, path, answer in zip(instances, paths, _answers(vlm, requests))
    ]
    return _frame(rows)


def _row(inst, split, answer, policy_key, suite: MetricSuite, image_path: str, **extra) -> dict:
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
        **suite.score(inst, answer, image_path),
        **extra,
    }


_SCHEMA = {
    "instance_id": pl.String,
    "group": pl.String,
    "category": pl.String,
    "subtype": pl.String,
    "qtype": pl.String,
    "risk_level": pl.Int64,
    "split": pl.String,
    "policy": pl.String,
    "answer": pl.String,
    "failed": pl.Boolean,
    "ghr": pl.Int64,
    "ghr_stage": pl.String,
    "bhr": pl.Float64,
    "bhr_source": pl.String,
    "shr": pl.Float64,
    "shr_source": pl.String,
    "ghs": pl.Float64,
    "ghs_source": pl.String,
    "image_mode": pl.String,
    "n_images": pl.Int64,
    "model": pl.String,
    "stand_in": pl.Boolean,
}


def _frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=_SCHEMA).sort("instance_id")


def train_group(
    instances,
    split: dict[str, str],
    group: str,
    vlm,
    images_root,
    work_dir,
    controller_cfg: dict,
    seed: int,
    scorer: GHRScorer | None = None,
    metric: str = "ghr",
    verifier=None,
) -> TrainResult:
    """Train one (s, q) group's policy on its pilot (train) instances (C.4.3 / C.5); the reward is `metric`, scored
    by `scorer` (GHR) or `verifier` (BHR's claims)."""
    train = [i for i in instances if group_of(i) == group and split.get(i["instance_id"]) == "train"]
    if not train:
        raise InputError(
            f"group {group}: no training instances (groups present: {', '.join(sorted({group_of(i) for i in instances}))})"
        )
    evaluator = PolicyEvaluator(
        vlm, images_root, work_dir, seed, scorer, metric, load_distractors(instances, images_root), verifier
    )
    return make_controller(controller_cfg, seed).train(group, train, evaluator)


def policy_eval(
    instances,
    split: dict[str, str],
    assign: Callable[[dict], Policy],
    vlm,
    model_name: str,
    images_root,
    out_dir,
    seed: int,
    suite: MetricSuite | None = None,
) -> tuple[pl.DataFrame, list[dict]]:
    """Every instance mutated by the policy `assign` gives it; one model batch; images under out_dir/fuzzed/."""
    suite = suite or MetricSuite()
    evaluator = PolicyEvaluator(
        vlm, images_root, out_dir, seed, suite.scorer, "ghr", load_distractors(instances, images_root)
    )
    pairs = [(assign(inst), inst) for inst in instances]
    extra = _model_fields(vlm, model_name)
    rows, mutated = [], []
    for (policy, inst), item in zip(pairs, evaluator.pairs(pairs)):
        rows.append(
            _row(
                inst,
                split,
                item["answer"],
                policy.key(),
                suite,
                original_image(inst, images_root),
                image_mode=item["image_mode"],
                n_images=item["n_images"],
                **extra,
            )
        )
        mutated.append(
            {**item["mutated"], "mutation_inf": {**item["mutated"]["mutation_inf"], "image_mode": item["image_mode"]}}
        )
    return _frame(rows), sorted(mutated, key=lambda m: m["instance_id"])


def fuzzed_eval(instances, split, controller: CentralFuzzController, vlm, model_name, images_root, out_dir, seed, **kw):
    """The fuzzing setting: each instance gets its group's learnt policy (the default policy for unseen groups)."""
    return policy_eval(
        instances, split, controller.policy_for_instance, vlm, model_name, images_root, out_dir, seed, **kw
    )


def dynamic_eval(instances, split, space: PolicySpace, vlm, model_name, images_root, out_dir, seed, **kw):
    """Table 11's "Dynamic" setting: one random policy per instance (seeded by instance), no controller."""

    def assign(inst: dict) -> Policy:
        return random_policy(
            np.random.default_rng(int(stable_hash(["samf-dynamic", seed, inst["instance_id"]])[:16], 16)), space
        )

    return policy_eval(instances, split, assign, vlm, model_name, images_root, out_dir, seed, **kw)


def empty_table() -> pl.DataFrame:
    return _frame([])


SETTINGS = ("standard", "dynamic", "fuzzed")


def compare(
    standard: pl.DataFrame, fuzzed: pl.DataFrame, split: str = "test", dynamic: pl.DataFrame | None = None
) -> pl.DataFrame:
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
            # Failed answers are no predictions: left out of every mean, counted per setting.
            failed = df["failed"].fill_null(False) if "failed" in df.columns else pl.Series([False] * df.height)
            row[f"n_failed_{setting}"] = int(failed.sum()) if df.height else 0
            # yes/no answers GHR could not read (excluded from GHR by default): counted beside the failures
            unparsed = (
                (df["ghr_stage"] == "yon_unparsed").fill_null(False) & ~failed if "ghr_stage" in df.columns else None
            )
            row[f"n_yon_unparsed_{setting}"] = int(unparsed.sum()) if unparsed is not None and df.height else 0
            for m in ("shr", "ghs"):
                # The judge failed and its rule fallback gave the number: reported, not hidden in the mean.
                col = f"{m}_source"
                row[f"n_{m}_fallback_{setting}"] = (
                    int((df[col] == "fallback").sum()) if col in df.columns and df.height else 0
                )
            for m in ("ghr", "bhr", "shr", "ghs"):
                scored = df.filter(~failed).drop_nulls(m) if m in df.columns else df.clear()
                row[f"{m}_{setting}"] = float(scored[m].mean()) if scored.height else None
                row[f"{m}_risk_{setting}"] = (
                    risk_weighted(scored[m].to_list(), scored["risk_level"].to_list()) if scored.height else None
                )
        both = row["ghr_fuzzed"] is not None and row["ghr_standard"] is not None
        row["ghr_delta"] = (row["ghr_fuzzed"] - row["ghr_standard"]) if both else None
        row["policy"] = ";".join(sorted(set(f["policy"].to_list())))
        row["model"] = (
            ";".join(sorted({m for df in (standard, fuzzed) if "model" in df.columns for m in df["model"].to_list()}))
            or None
        )
        row["stand_in"] = any(
            bool(df["stand_in"].any()) for df in (standard, dynamic, fuzzed) if "stand_in" in df.columns
        )
        rows.append(row)
    schema = {"group": pl.String, "split": pl.String, "n": pl.Int64}
    for setting in SETTINGS:
        schema[f"n_failed_{setting}"] = pl.Int64
        schema[f"n_yon_unparsed_{setting}"] = pl.Int64
        schema.update({f"n_shr_fallback_{setting}": pl.Int64, f"n_ghs_fallback_{setting}": pl.Int64})
        for m in ("ghr", "bhr", "shr", "ghs"):
            schema.update({f"{m}_{setting}": pl.Float64, f"{m}_risk_{setting}": pl.Float64})
    schema.update({"ghr_delta": pl.Float64, "policy": pl.String, "model": pl.String, "stand_in": pl.Boolean})
    return pl.DataFrame(rows, schema=schema)


CATEGORY_METRICS = ("ghr", "bhr", "shr", "ghs")
# The paper's per-category tables call the unmutated inputs "static"; the Table 11 layout above says "standard".
CATEGORY_SETTINGS = ("static", "fuzzed")


def _category_row(df: pl.DataFrame, controller: str, category: str, setting: str, split: str) -> dict:
    failed = df["failed"].fill_null(False) if df.height else pl.Series([], dtype=pl.Boolean)
    row = {
        "controller": controller,
        "category": category,
        "setting": setting,
        "split": split,
        "n": df.height,
        "n_failed": int(failed.sum()) if df.height else 0,
    }
    for m in CATEGORY_METRICS:
        # Failed answers are no predictions: left out of every mean (the same rule as compare()).
        scored = df.filter(~failed).drop_nulls(m) if df.height else df
        row[m] = float(scored[m].mean()) if scored.height else None
    return row


def category_table(standard: pl.DataFrame, fuzzed: dict[str, pl.DataFrame], split: str = "test") -> pl.DataFrame:
    """Rows controller x category (overall first, then object / instruction / knowledge as present) x setting
    (static, fuzzed), columns GHR / BHR / SHR / GHS on one split.

    Every controller's static rows come from the one `standard` table (the same instances, the same answers), so they
    are identical across controllers; its fuzzed rows come from that controller's fuzzed table."""
    if not fuzzed:
        raise InputError("category table: no controller's fuzzed table")
    std = standard.filter(pl.col("split") == split)
    tables = {c: df.filter(pl.col("split") == split) for c, df in fuzzed.items()}
    categories = sorted(
        set(std["category"].to_list()).union(*(set(df["category"].to_list()) for df in tables.values()))
    )
    stand_in = bool(standard["stand_in"].any()) if "stand_in" in standard.columns else False
    models = set(standard["model"].to_list()) if "model" in standard.columns else set()
    rows = []
    for controller, fz in tables.items():
        for category in ["overall", *categories]:
            for setting, df in zip(CATEGORY_SETTINGS, (std, fz)):
                sub = df if category == "overall" else df.filter(pl.col("category") == category)
                rows.append(_category_row(sub, controller, category, setting, split))
        stand_in = stand_in or ("stand_in" in fz.columns and bool(fuzzed[controller]["stand_in"].any()))
        models |= set(fuzzed[controller]["model"].to_list()) if "model" in fz.columns else set()
    schema = {"controller": pl.String, "category": pl.String, "setting": pl.String, "split": pl.String}
    schema |= {"n": pl.Int64, "n_failed": pl.Int64, **{m: pl.Float64 for m in CATEGORY_METRICS}}
    return pl.DataFrame(rows, schema=schema).with_columns(
        model=pl.lit(";".join(sorted(models)) or None, pl.String), stand_in=pl.lit(stand_in)
    )
