"""File-level SAMF steps behind the samf_* Snakemake rules ("Unified Hallucination Fuzzing for Multimodal Large
Language Models", Sec. 3.3 and Appendix C.3/C.7).

samf_instances -> fuzz/instances.json + fuzz/split.parquet; samf_standard_eval -> fuzz/<model>/standard.parquet;
samf_train -> fuzz/<model>/train/<group>.json (one job per (s, q) group); samf_fuzzed_eval -> policies.json
(the CentralFuzzController), fuzzed.parquet, fuzzed_instances.json, dynamic.parquet (random policies), fuzzed/
images; samf_compare -> comparison.parquet + .json (standard / dynamic / fuzzed on the test split). Stand-ins flagged.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..backends.evaluatee import Evaluatee
from ..errors import ConfigError, InputError
from ..io import atomic_path, dumps_json, read_json, read_parquet, safe_join, write_json, write_parquet
from ..progress import get_logger
from . import convert
from .schema import group_of, load_instances, write_instances

# polars and the controllers, judges, metrics and pipeline (PIL) are imported by the functions that use them:
# rules/common.smk imports this module for judge_specs and groups_for, so every snakemake invocation would pay for them.
if TYPE_CHECKING:
    import polars as pl

    from .controllers import CentralFuzzController
    from .metrics import MetricSuite

log = get_logger(__name__)

# Key of the parquet metadata entry that names the judges, verifier, Sim_NLP and detector behind a results table.
JUDGES_KEY = "halluflow.samf.judges"


# ---------------------------------------------------------------------------------------------- instances
def source_instances(samf: dict, release_dir: str | Path, release: str, seed: int) -> list[dict]:
    """The UniHall instances the stage fuzzes: ODE release queries (default) or a UniHall JSON file."""
    src = samf["source"]
    if src["format"] == "ode":
        queries = Path(release_dir) / "queries.parquet"
        if not queries.exists():
            raise InputError(f"{queries}: the release has no queries table")

        rows = read_parquet(queries).to_dicts()
        return convert.from_ode_queries(
            rows, release, samf["query_types"], risk_setting(samf), samf["max_instances"], seed
        )
    if src["format"] == "unihall":
        if not src.get("path"):
            raise ConfigError(
                "config key 'samf.source.path': a UniHall JSON file is needed when samf.source.format is unihall"
            )
        items = load_instances(src["path"])
        limit = samf["max_instances"]
        return items if limit is None else convert.balanced_take(items, group_of, limit, seed)
    raise ConfigError(f"config key 'samf.source.format': {src['format']!r}; known: ode, unihall")


def risk_setting(samf: dict):
    """samf.risk_level: a number fixes every converted instance's risk; "taxonomy" takes each item's subtype level,
    with samf.risk_levels overriding entries of the taxonomy's table."""
    if samf["risk_level"] == "taxonomy":
        return dict(samf.get("risk_levels") or {})
    return int(samf["risk_level"])


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
    import polars as pl

    rows = [
        {"instance_id": i["instance_id"], "group": group_of(i), "split": split[i["instance_id"]]} for i in instances
    ]
    write_parquet(
        path,
        pl.DataFrame(rows, schema={"instance_id": pl.String, "group": pl.String, "split": pl.String}).sort(
            "instance_id"
        ),
    )


def read_split(path) -> dict[str, str]:

    return dict(read_parquet(path).select("instance_id", "split").iter_rows())


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
    from .controllers import pilot_split

    items = source_instances(samf, release_dir, release, seed)
    if not items:
        raise InputError(
            f"samf: no instances from {samf['source']['format']} source (query types {samf['query_types']})"
        )
    if samf["source"]["format"] == "unihall":
        check_image_paths(items, images_root(samf, release_dir), samf["source"]["path"])
    split = pilot_split(items, samf["pilot_ratio"], seed)
    write_instances(out_instances, items)
    write_split(out_split, items, split)
    log.info("samf: %d instances, %d pilot (train)", len(items), sum(v == "train" for v in split.values()))
    return len(items)


# ---------------------------------------------------------------------------------------------- model calls
JUDGE_KINDS = ("rule", "llm", "vlm")


def make_judges(samf: dict, judges: dict | None, models_cache=None, graph_dir=None) -> dict:
    """Judge objects from config: `judges` = {"llm": top-level llm spec, "vlm": the `models:` entry named by
    samf.judge_model, "detector": a detector registry spec} (each None when unused)."""
    from .. import registry
    from .judges import DetectorOracle, TextJudge, VisualJudge

    judges = judges or {}
    built: dict = {}
    for key in {samf["judge"], samf.get("verifier", "rule")} - {"rule"}:
        if key not in JUDGE_KINDS:
            raise ConfigError(f"config key 'samf.judge': {key!r}; known: {', '.join(JUDGE_KINDS)}")
        spec = judges.get(key)
        if not spec:
            where = "top-level 'llm'" if key == "llm" else "'samf.judge_model' (a name from models:)"
            raise ConfigError(
                f"config key {where}: samf.judge or samf.verifier is {key} but no {key} backend is configured"
            )
        if key == "llm":
            built[key] = TextJudge(lambda spec=spec: registry.create("llm", spec), spec=spec)
        else:
            from ..answer import ModelUnderTest

            # Loaded on the first judge call: a training job whose reward never asks the judge never loads it.
            model = ModelUnderTest(spec, graph_dir=graph_dir, models_cache=models_cache or "resources/models")
            # Named from the resolved entry (a stand-in's folder included) until the judge is first asked.
            resolved = {"name": model.name, "backend": model.backend_name, "args": model.args}
            built[key] = VisualJudge(
                lambda model=model: model.backend,
                samf.get("judge_max_new_tokens", 96),
                spec={**resolved, "stand_in": model.spec_stand_in},
            )
    detector = samf.get("detector") or {}
    if detector.get("enabled"):
        if not judges.get("detector"):
            raise ConfigError("config key 'detection': samf.detector.enabled needs a detector backend")
        spec = judges["detector"]
        built["detector"] = DetectorOracle(
            lambda: registry.create("detector", spec),
            detector.get("threshold", 0.3),
            detector.get("max_labels", 16),
            spec=spec,
        )
    return built


def judge_specs(config: dict, models_cache=None) -> dict:
    """The judge backends the samf jobs need, from the whole config: only those samf.judge / samf.verifier /
    samf.detector use, so editing an unused backend reruns no SAMF job."""
    from ..models import MODELS_CACHE, detector_kwargs, stage_model

    samf = config["samf"]
    kinds = {samf["judge"], samf["verifier"]}
    out: dict = {}
    if "llm" in kinds:
        out["llm"] = config["llm"]
    if "vlm" in kinds:
        out["vlm"] = next(m for m in config["models"] if m["name"] == samf["judge_model"])
    if samf["detector"]["enabled"]:
        section = config["detection"]
        out["detector"] = detector_kwargs(section, stage_model(section, models_cache or MODELS_CACHE))
    return out


def make_suite(samf: dict, judges: dict | None = None, models_cache=None, graph_dir=None) -> MetricSuite:
    """The run's metric suite: Sim_NLP (samf.similarity), GHR's and SHR/GHS's judge (samf.judge), BHR's verifier
    (samf.verifier) and the detector oracle (samf.detector)."""
    from .metrics import LLMVerifier, MetricSuite, RuleVerifier, scorer_from_config

    built = make_judges(samf, judges, models_cache, graph_dir)
    judge = built.get(samf["judge"])
    verifier_kind = samf.get("verifier", "rule")
    verifier = LLMVerifier(built[verifier_kind]) if verifier_kind != "rule" else RuleVerifier()
    scorer = scorer_from_config(samf["ghr"], judge=judge, similarity=samf.get("similarity", "trigram"))
    return MetricSuite(scorer, tuple(samf["metrics"]), judge, verifier, built.get("detector"))


def write_table(path, df: pl.DataFrame, judges: dict | None) -> None:
    """A results table with the record of what judged it (MetricSuite.describe) in its parquet metadata; None: the
    setting was not run. Same bytes-reproducible settings as io.write_parquet."""
    with atomic_path(path) as tmp:
        df.write_parquet(tmp, compression="zstd", statistics=False, metadata={JUDGES_KEY: dumps_json(judges)})


def read_judges(path) -> dict | None:
    """The judges record of a table written by write_table; a table without one is refused (one line)."""
    import polars as pl

    meta = pl.read_parquet_metadata(path)
    if JUDGES_KEY not in meta:
        raise InputError(f"{path}: records no judges ({JUDGES_KEY}); rerun the samf step that wrote it")
    return json.loads(meta[JUDGES_KEY])


def _log_table(what: str, model: str, df: pl.DataFrame, suite: MetricSuite) -> None:
    import polars as pl

    failed = int(df["failed"].sum()) if df.height else 0
    ghr = df.filter(~pl.col("failed"))["ghr"].mean() if df.height > failed else None
    info = suite.describe()
    log.info(
        "samf %s %s: GHR %s over %d answered, %d failed; judge %s (%d calls, %d failed)",
        what,
        model,
        "n/a" if ghr is None else f"{ghr:.3f}",
        df.height - failed,
        failed,
        info["judge"],
        info["judge_calls"],
        info["judge_failures"],
    )


def run_standard(
    samf, instances_path, split_path, spec, release_dir, models_cache, graph_dir, out, judges=None
) -> None:
    from .pipeline import standard_eval

    vlm = Evaluatee(
        spec, graph_dir=graph_dir, models_cache=models_cache, max_new_tokens=samf["max_new_tokens"], method="samf"
    )
    suite = make_suite(samf, judges, models_cache, graph_dir)
    df = standard_eval(
        load_instances(instances_path), read_split(split_path), vlm, spec["name"], images_root(samf, release_dir), suite
    )
    write_table(out, df, suite.describe())
    _log_table("standard", spec["name"], df, suite)


def run_train(
    samf, instances_path, split_path, spec, group, release_dir, models_cache, graph_dir, seed, out, judges=None
) -> None:
    from .pipeline import train_group

    items = load_instances(instances_path)
    split = read_split(split_path)
    if not any(group_of(i) == group and split.get(i["instance_id"]) == "train" for i in items):
        # A configured group the data did not produce: recorded, and the central controller falls back to its default.
        write_json(out, {"group": group, "policy": None, "skipped": "no training instances", "model": spec["name"]})
        log.warning("samf train %s/%s: no training instances", spec["name"], group)
        return
    vlm = Evaluatee(
        spec, graph_dir=graph_dir, models_cache=models_cache, max_new_tokens=samf["max_new_tokens"], method="samf"
    )
    suite = make_suite(samf, judges, models_cache, graph_dir)
    with tempfile.TemporaryDirectory(prefix="samf-train-") as work:
        # Training mutations are scratch: only the learnt policy and its history are kept.
        result = train_group(
            items,
            split,
            group,
            vlm,
            images_root(samf, release_dir),
            work,
            samf["controller"],
            seed,
            suite.scorer,
            samf["reward_metric"],
            suite.verifier,  # BHR rewards: the configured verifier judges the claims
        )
    info = vlm.describe()
    write_json(
        out,
        {
            **result.as_dict(),
            "model": spec["name"],
            "stand_in": bool(info.stand_in),
            "backend": info.as_dict(),
            "reward_metric": samf["reward_metric"],
            "judges": suite.describe(),
        },
    )
    log.info(
        "samf train %s/%s: %s (R_full %.3f, %d evaluations)",
        spec["name"],
        group,
        result.policy.key(),
        result.full_reward,
        result.evaluations,
    )


def load_controller(trained_paths) -> tuple[CentralFuzzController, list[dict]]:
    from .controllers import CentralFuzzController, Policy

    policies, records = {}, []
    for p in sorted(trained_paths):
        data = read_json(p)
        records.append(
            {k: data.get(k) for k in ("group", "method", "full_reward", "n_train", "evaluations", "skipped")}
        )
        if data.get("policy"):
            policies[data["group"]] = Policy.from_dict(data["policy"])
    if not policies:
        raise InputError(f"no group learnt a policy ({', '.join(map(str, trained_paths))}): nothing to fuzz with")
    return CentralFuzzController(policies), records


def run_fuzzed(
    samf,
    instances_path,
    split_path,
    trained,
    spec,
    release_dir,
    models_cache,
    graph_dir,
    seed,
    out_dir,
    out_policies,
    out_fuzzed,
    out_instances,
    out_dynamic,
    judges=None,
) -> None:
    from .controllers import policy_space
    from .pipeline import dynamic_eval, empty_table, fuzzed_eval

    controller, records = load_controller(trained)
    vlm = Evaluatee(
        spec, graph_dir=graph_dir, models_cache=models_cache, max_new_tokens=samf["max_new_tokens"], method="samf"
    )
    stand_in = bool(vlm.describe().stand_in)
    Path(out_dir, "fuzzed").mkdir(parents=True, exist_ok=True)
    suite = make_suite(samf, judges, models_cache, graph_dir)
    items, split, root = load_instances(instances_path), read_split(split_path), images_root(samf, release_dir)
    df, mutated = fuzzed_eval(items, split, controller, vlm, spec["name"], root, out_dir, seed, suite=suite)
    fuzzed_judges = suite.describe()
    write_table(out_fuzzed, df, fuzzed_judges)
    write_instances(out_instances, mutated)
    _log_table("fuzzed", spec["name"], df, suite)
    dynamic_judges = None  # the setting was not run: compare reports null dynamic columns and no judges
    dynamic = empty_table()
    if samf["dynamic"]:
        # The same judges (loaded once) score the dynamic setting; its record counts its own calls only.
        suite.reset_counts()
        dynamic, _ = dynamic_eval(
            items, split, policy_space(samf["controller"]), vlm, spec["name"], root, out_dir, seed, suite=suite
        )
        dynamic_judges = suite.describe()
        _log_table("dynamic", spec["name"], dynamic, suite)
    write_table(out_dynamic, dynamic, dynamic_judges)
    write_json(
        out_policies,
        {
            **controller.as_dict(),
            "model": spec["name"],
            "stand_in": stand_in,
            "training": records,
            "judges": fuzzed_judges,
        },
    )


def run_compare(standard_path, fuzzed_path, model: str, out_parquet, out_json, dynamic_path=None) -> None:

    from .pipeline import compare

    std, fz = read_parquet(standard_path), read_parquet(fuzzed_path)
    table = compare(std, fz, dynamic=read_parquet(dynamic_path) if dynamic_path else None)
    # Which judge, verifier, Sim_NLP and detector produced each setting's numbers, from the tables themselves.
    judges = {
        "standard": read_judges(standard_path),
        "dynamic": read_judges(dynamic_path) if dynamic_path else None,
        "fuzzed": read_judges(fuzzed_path),
    }
    write_table(out_parquet, table, judges)
    stand_in = bool(std["stand_in"].any() or fz["stand_in"].any())
    write_json(
        out_json, {"model": model, "stand_in": stand_in, "split": "test", "judges": judges, "rows": table.to_dicts()}
    )
