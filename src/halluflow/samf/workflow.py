"""File-level SAMF steps behind the samf_* Snakemake rules (seed 003, Sec. 3.3 and Appendix C.3/C.7).

samf_instances -> fuzz/instances.json + fuzz/split.parquet; samf_standard_eval -> fuzz/<model>/standard.parquet;
samf_train -> fuzz/<model>/train/<group>.json (one job per (s, q) group); samf_fuzzed_eval -> policies.json
(the CentralFuzzController), fuzzed.parquet, fuzzed_instances.json, dynamic.parquet (random policies), fuzzed/
images; samf_compare -> comparison.parquet + .json (standard / dynamic / fuzzed on the test split). Stand-ins flagged.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl

from ..errors import ConfigError, InputError
from ..io import read_json, safe_join, write_json, write_parquet
from ..progress import get_logger
from . import convert
from .controllers import CentralFuzzController, Policy, pilot_split, policy_space
from .metrics import scorer_from_config
from .pipeline import compare, dynamic_eval, empty_table, fuzzed_eval, standard_eval, train_group
from .schema import group_of, load_instances, write_instances

log = get_logger(__name__)


# ---------------------------------------------------------------------------------------------- instances
def source_instances(samf: dict, release_dir: str | Path, release: str, seed: int) -> list[dict]:
    """The UniHall instances the stage fuzzes: ODE release queries (default) or a UniHall JSON file."""
    src = samf["source"]
    if src["format"] == "ode":
        queries = Path(release_dir) / "queries.parquet"
        if not queries.exists():
            raise InputError(f"{queries}: the release has no queries table")
        rows = pl.read_parquet(queries).to_dicts()
        return convert.from_ode_queries(rows, release, samf["query_types"], samf["risk_level"], samf["max_instances"], seed)
    if src["format"] == "unihall":
        if not src.get("path"):
            raise ConfigError("config key 'samf.source.path': a UniHall JSON file is needed when samf.source.format is unihall")
        items = load_instances(src["path"])
        limit = samf["max_instances"]
        return items if limit is None else convert.balanced_take(items, group_of, limit, seed)
    raise ConfigError(f"config key 'samf.source.format': {src['format']!r}; known: ode, unihall")


def images_root(samf: dict, release_dir: str | Path) -> Path:
    src = samf["source"]
    if src["format"] == "ode":
        return Path(release_dir)
    return Path(src.get("images") or Path(src["path"]).parent)


def groups_for(samf: dict) -> list[str]:
    """The (s, q) groups one samf_train job each: from config for ODE, from the file for a UniHall source."""
    if samf["source"]["format"] == "ode":
        return convert.ode_groups(samf["query_types"])
    return sorted({group_of(i) for i in load_instances(samf["source"]["path"])})


def write_split(path, instances: list[dict], split: dict[str, str]) -> None:
    rows = [{"instance_id": i["instance_id"], "group": group_of(i), "split": split[i["instance_id"]]} for i in instances]
    write_parquet(path, pl.DataFrame(rows, schema={"instance_id": pl.String, "group": pl.String, "split": pl.String}).sort("instance_id"))


def read_split(path) -> dict[str, str]:
    return dict(pl.read_parquet(path).select("instance_id", "split").iter_rows())


def check_image_paths(items: list[dict], root: Path, source) -> None:
    """Fail before any output is written when an instance's image escapes the images folder or is missing."""
    for item in items:
        rel = item["seed_data"]["image_path"]
        where = f"{source}: instance {item['instance_id']}: field 'seed_data.image_path'"
        try:
            path = safe_join(root, rel)
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
        if not path.is_file():
            raise InputError(f"{where}: {rel!r} not found under {root}")


def make_instances(samf: dict, release_dir, release: str, seed: int, out_instances, out_split) -> int:
    items = source_instances(samf, release_dir, release, seed)
    if not items:
        raise InputError(f"samf: no instances from {samf['source']['format']} source (query types {samf['query_types']})")
    if samf["source"]["format"] == "unihall":
        check_image_paths(items, images_root(samf, release_dir), samf["source"]["path"])
    split = pilot_split(items, samf["pilot_ratio"], seed)
    write_instances(out_instances, items)
    write_split(out_split, items, split)
    log.info("samf: %d instances, %d pilot (train)", len(items), sum(v == "train" for v in split.values()))
    return len(items)


# ---------------------------------------------------------------------------------------------- model calls
class ModelAnswers:
    """Adapts the answer stage's ModelUnderTest (lazy backend, answer-length cap) to the VLM `answer` call."""

    def __init__(self, spec: dict, models_cache, graph_dir=None, max_new_tokens: int = 32):
        from ..answer import ModelUnderTest

        self.model = ModelUnderTest(spec, graph_dir=graph_dir, models_cache=models_cache)
        self.max_new_tokens = max_new_tokens
        self.failed = 0

    def describe(self):
        return self.model.backend.describe()

    def answer(self, requests) -> list[str]:
        out = []
        for text, error in self.model.run(list(requests), self.max_new_tokens):
            if error is not None:
                # A failed request answers nothing: scored as unparsed (no hallucination), counted in the log.
                self.failed += 1
                log.warning("samf: request failed: %s", error)
            out.append(text or "")
        return out


def make_judge(samf: dict, llm_spec: dict | None):
    """The `llm` judge when samf.judge is llm (GHR's judge branch, SHR, GHS); None = rule-based fallbacks."""
    if samf["judge"] != "llm":
        return None
    if not llm_spec:
        raise ConfigError("config key 'llm': samf.judge is llm but no top-level llm backend is configured")
    from .. import registry

    return registry.create("llm", llm_spec)


def _scorer(samf: dict, llm=None):
    return scorer_from_config(samf["ghr"], llm=llm)


def run_standard(samf, instances_path, split_path, spec, release_dir, models_cache, graph_dir, out, llm_spec=None) -> None:
    vlm = ModelAnswers(spec, models_cache, graph_dir, samf["max_new_tokens"])
    judge = make_judge(samf, llm_spec)
    df = standard_eval(
        load_instances(instances_path), read_split(split_path), vlm, spec["name"], images_root(samf, release_dir),
        _scorer(samf, judge), samf["metrics"], judge,
    )
    write_parquet(out, df)
    log.info("samf standard %s: GHR %.3f over %d", spec["name"], df["ghr"].mean() or 0.0, df.height)


def run_train(samf, instances_path, split_path, spec, group, release_dir, models_cache, graph_dir, seed, out, llm_spec=None) -> None:
    items = load_instances(instances_path)
    split = read_split(split_path)
    if not any(group_of(i) == group and split.get(i["instance_id"]) == "train" for i in items):
        # A configured group the data did not produce: recorded, and the central controller falls back to its default.
        write_json(out, {"group": group, "policy": None, "skipped": "no training instances", "model": spec["name"]})
        log.warning("samf train %s/%s: no training instances", spec["name"], group)
        return
    vlm = ModelAnswers(spec, models_cache, graph_dir, samf["max_new_tokens"])
    with tempfile.TemporaryDirectory(prefix="samf-train-") as work:
        # Training mutations are scratch: only the learnt policy and its history are kept.
        result = train_group(
            items, split, group, vlm, images_root(samf, release_dir), work, samf["controller"], seed,
            _scorer(samf, make_judge(samf, llm_spec)), samf["reward_metric"],
        )
    info = vlm.describe()
    write_json(out, {**result.as_dict(), "model": spec["name"], "stand_in": bool(info.stand_in), "backend": info.as_dict()})
    log.info("samf train %s/%s: %s (R_full %.3f, %d evaluations)", spec["name"], group, result.policy.key(), result.full_reward, result.evaluations)


def load_controller(trained_paths) -> tuple[CentralFuzzController, list[dict]]:
    policies, records = {}, []
    for p in sorted(trained_paths):
        data = read_json(p)
        records.append({k: data.get(k) for k in ("group", "method", "full_reward", "n_train", "evaluations", "skipped")})
        if data.get("policy"):
            policies[data["group"]] = Policy.from_dict(data["policy"])
    if not policies:
        raise InputError(f"no group learnt a policy ({', '.join(map(str, trained_paths))}): nothing to fuzz with")
    return CentralFuzzController(policies), records


def run_fuzzed(
    samf, instances_path, split_path, trained, spec, release_dir, models_cache, graph_dir, seed, out_dir, out_policies,
    out_fuzzed, out_instances, out_dynamic, llm_spec=None,
) -> None:
    controller, records = load_controller(trained)
    vlm = ModelAnswers(spec, models_cache, graph_dir, samf["max_new_tokens"])
    stand_in = bool(vlm.describe().stand_in)
    write_json(out_policies, {**controller.as_dict(), "model": spec["name"], "stand_in": stand_in, "training": records})
    Path(out_dir, "fuzzed").mkdir(parents=True, exist_ok=True)
    judge = make_judge(samf, llm_spec)
    items, split, root = load_instances(instances_path), read_split(split_path), images_root(samf, release_dir)
    scoring = {"scorer": _scorer(samf, judge), "metrics": samf["metrics"], "llm": judge}
    df, mutated = fuzzed_eval(items, split, controller, vlm, spec["name"], root, out_dir, seed, **scoring)
    write_parquet(out_fuzzed, df)
    write_instances(out_instances, mutated)
    if samf["dynamic"]:
        dynamic, _ = dynamic_eval(items, split, policy_space(samf["controller"]), vlm, spec["name"], root, out_dir, seed, **scoring)
    else:
        dynamic = empty_table()  # the setting was not run: compare reports null dynamic columns
    write_parquet(out_dynamic, dynamic)
    log.info("samf fuzzed %s: GHR %.3f over %d", spec["name"], df["ghr"].mean() or 0.0, df.height)


def run_compare(standard_path, fuzzed_path, model: str, out_parquet, out_json, dynamic_path=None) -> None:
    std, fz = pl.read_parquet(standard_path), pl.read_parquet(fuzzed_path)
    table = compare(std, fz, dynamic=pl.read_parquet(dynamic_path) if dynamic_path else None)
    write_parquet(out_parquet, table)
    stand_in = bool(std["stand_in"].any() or fz["stand_in"].any())
    write_json(out_json, {"model": model, "stand_in": stand_in, "split": "test", "rows": table.to_dicts()})
