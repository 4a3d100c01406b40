"""File-level SAMF steps behind the samf_* Snakemake rules ("Unified Hallucination Fuzzing for Multimodal Large
Language Models", Sec. 3.3 and Appendix C.3/C.7).

samf_instances -> fuzz/instances.json + fuzz/split.parquet; samf_standard_eval -> fuzz/<model>/standard.parquet;
samf_train -> fuzz/<model>/<controller>/train/<group>.json (one job per controller of samf.controllers and (s, q)
group, all on the same instances and split); samf_fuzzed_eval -> fuzz/<model>/<controller>/policies.json (the
CentralFuzzController), fuzzed.parquet, fuzzed_instances.json, fuzzed/ images; samf_dynamic_eval ->
fuzz/<model>/dynamic.parquet (random policies, no controller); samf_compare -> comparison.parquet + .json (standard /
dynamic / fuzzed on the test split for the first controller, the controller x category x static/fuzzed table of every
controller, and the metric-human agreement of Table 4 when samf.agreement.labels is set) + controllers.parquet.
Stand-ins flagged.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..config_types import Samf, SamfController
from ..errors import ConfigError, InputError
from ..io import atomic_path, dumps_json, read_json, read_parquet, safe_join, write_json, write_parquet
from ..models.model import GenerateConfig, Model
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

# The controllers a run may train (samf.controllers / samf.controller.method), as controllers.make_controller builds them.
CONTROLLERS = ("ucb", "epsilon_greedy", "hill_climb")

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


def controllers_of(samf: dict) -> list[str]:
    """The controllers one run trains and fuzzes with, in order: samf.controllers (a list) when set, else the single
    samf.controller.method. The first is the primary one whose Table 11 rows the comparison (and scorecard) show."""
    names = samf.get("controllers")
    if names is None:
        names = [SamfController.from_dict(samf["controller"]).method]
    if isinstance(names, str) or not names:
        raise ConfigError(
            f"config key 'samf.controllers': {names!r}; expected a non-empty list, e.g. [hill_climb, ucb]"
        )
    unknown = [n for n in names if n not in CONTROLLERS]
    if unknown:
        raise ConfigError(f"config key 'samf.controllers': {unknown[0]!r}; known: {', '.join(CONTROLLERS)}")
    if len(set(names)) != len(names):
        raise ConfigError(f"config key 'samf.controllers': {names} names a controller twice")
    return list(names)


def controller_config(samf: dict, controller: str | None = None) -> dict:
    """The samf.controller block (shared hyperparameters) with `method` set to one controller of the run."""
    name = controller or controllers_of(samf)[0]
    if name not in controllers_of(samf):
        raise ConfigError(f"config key 'samf.controllers': {name!r} is not one of {controllers_of(samf)}")
    return {**samf["controller"], "method": name}


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


def make_judges(samf: dict, judges: dict | None, models_cache=None, graph_dir=None, requests_cache=None) -> dict:
    """Judge objects from config: `judges` = {"llm": top-level llm spec, "vlm": the `models:` entry named by
    samf.judge_model, "detector": a detector registry spec} (each None when unused). `requests_cache`: the run's
    request cache root; the vlm judge asks through its `models:` entry's folder (the answer stage's), the llm judge
    through its block's (None: no cache)."""
    from ..models import MODELS_CACHE, registry
    from ..models.model import cache_folder
    from .judges import DetectorOracle, TextJudge, VisualJudge

    s = Samf.from_dict(samf)
    judges = judges or {}
    built: dict = {}
    for key in {s.judge, s.verifier} - {"rule"}:
        if key not in JUDGE_KINDS:
            raise ConfigError(f"config key 'samf.judge': {key!r}; known: {', '.join(JUDGE_KINDS)}")
        spec = judges.get(key)
        if not spec:
            where = "top-level 'llm'" if key == "llm" else "'samf.judge_model' (a name from models:)"
            raise ConfigError(
                f"config key {where}: samf.judge or samf.verifier is {key} but no {key} backend is configured"
            )
        # Loaded on the first judge call: a training job whose reward never asks the judge never loads it.
        if key == "llm":
            model = Model.llm(spec, method="samf judge", cache=cache_folder(requests_cache, spec, role="llm"))
            built[key] = TextJudge(model, spec=spec)
        else:
            model = Model.under_test(
                spec,
                graph_dir=graph_dir,
                models_cache=models_cache or MODELS_CACHE,
                method="samf judge",
                cache=cache_folder(requests_cache, spec),
            )
            # Named from the resolved entry (a stand-in's folder included) until the judge is first asked.
            mut = model.under
            resolved = {"name": mut.name, "backend": mut.backend_name, "args": mut.args}
            built[key] = VisualJudge(model, s.judge_max_new_tokens, spec={**resolved, "stand_in": mut.spec_stand_in})
    if s.detector.enabled:
        if not judges.get("detector"):
            raise ConfigError("config key 'detection': samf.detector.enabled needs a detector backend")
        spec = judges["detector"]
        built["detector"] = DetectorOracle(
            lambda: registry.create("detector", spec), s.detector.threshold, s.detector.max_labels, spec=spec
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


def make_suite(
    samf: dict, judges: dict | None = None, models_cache=None, graph_dir=None, requests_cache=None
) -> MetricSuite:
    """The run's metric suite: Sim_NLP (samf.similarity), GHR's and SHR/GHS's judge (samf.judge), BHR's verifier
    (samf.verifier) and the detector oracle (samf.detector)."""
    from .metrics import LLMVerifier, MetricSuite, RuleVerifier, scorer_from_config

    built = make_judges(samf, judges, models_cache, graph_dir, requests_cache)
    judge = built.get(samf["judge"])
    verifier_kind = Samf.from_dict(samf).verifier
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


def _evaluatee(samf, spec, models_cache, graph_dir) -> Model:
    return Model.under_test(
        spec,
        graph_dir=graph_dir,
        models_cache=models_cache,
        config=GenerateConfig(max_new_tokens=samf["max_new_tokens"]),
        method="samf",
    )


def run_standard(
    samf, instances_path, split_path, spec, release_dir, models_cache, graph_dir, out, judges=None, requests_cache=None
) -> None:
    """The model on the unmutated test instances. `requests_cache` (every run_*): the run's request cache root, which
    the judges ask through (make_judges)."""
    from .pipeline import standard_eval

    vlm = _evaluatee(samf, spec, models_cache, graph_dir)
    suite = make_suite(samf, judges, models_cache, graph_dir, requests_cache)
    df = standard_eval(
        load_instances(instances_path), read_split(split_path), vlm, spec["name"], images_root(samf, release_dir), suite
    )
    write_table(out, df, suite.describe())
    _log_table("standard", spec["name"], df, suite)


def run_train(
    samf,
    instances_path,
    split_path,
    spec,
    group,
    release_dir,
    models_cache,
    graph_dir,
    seed,
    out,
    judges=None,
    controller=None,
    requests_cache=None,
) -> None:
    """Train one controller (None: the first of samf.controllers) on one group's pilot instances."""
    from .pipeline import train_group

    ctl = controller_config(samf, controller)
    items = load_instances(instances_path)
    split = read_split(split_path)
    if not any(group_of(i) == group and split.get(i["instance_id"]) == "train" for i in items):
        # A configured group the data did not produce: recorded, and the central controller falls back to its default.
        write_json(
            out,
            {
                "group": group,
                "policy": None,
                "skipped": "no training instances",
                "model": spec["name"],
                "controller": ctl["method"],
            },
        )
        log.warning("samf train %s/%s: no training instances", spec["name"], group)
        return
    vlm = _evaluatee(samf, spec, models_cache, graph_dir)
    suite = make_suite(samf, judges, models_cache, graph_dir, requests_cache)
    with tempfile.TemporaryDirectory(prefix="samf-train-") as work:
        # Training mutations are scratch: only the learnt policy and its history are kept.
        result = train_group(
            items,
            split,
            group,
            vlm,
            images_root(samf, release_dir),
            work,
            ctl,
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
            "controller": ctl["method"],
            "stand_in": bool(info.stand_in),
            "backend": info.as_dict(),
            "reward_metric": samf["reward_metric"],
            "judges": suite.describe(),
        },
    )
    log.info(
        "samf train %s/%s/%s: %s (R_full %.3f, %d evaluations)",
        spec["name"],
        ctl["method"],
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
            {
                k: data.get(k)
                for k in ("group", "controller", "method", "full_reward", "n_train", "evaluations", "skipped")
            }
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
    judges=None,
    controller=None,
    requests_cache=None,
) -> None:
    """One controller's learnt policies on every instance: policies.json, fuzzed.parquet, fuzzed_instances.json and
    the mutated images under out_dir/fuzzed/."""
    from .pipeline import fuzzed_eval

    name = controller_config(samf, controller)["method"]
    central, records = load_controller(trained)
    vlm = _evaluatee(samf, spec, models_cache, graph_dir)
    stand_in = bool(vlm.describe().stand_in)
    Path(out_dir, "fuzzed").mkdir(parents=True, exist_ok=True)
    suite = make_suite(samf, judges, models_cache, graph_dir, requests_cache)
    items, split, root = load_instances(instances_path), read_split(split_path), images_root(samf, release_dir)
    df, mutated = fuzzed_eval(items, split, central, vlm, spec["name"], root, out_dir, seed, suite=suite)
    fuzzed_judges = suite.describe()
    write_table(out_fuzzed, df, fuzzed_judges)
    write_instances(out_instances, mutated)
    _log_table(f"fuzzed ({name})", spec["name"], df, suite)
    write_json(
        out_policies,
        {
            **central.as_dict(),
            "model": spec["name"],
            "controller": name,
            "stand_in": stand_in,
            "training": records,
            "judges": fuzzed_judges,
        },
    )


def run_dynamic(
    samf,
    instances_path,
    split_path,
    spec,
    release_dir,
    models_cache,
    graph_dir,
    seed,
    out_dir,
    out,
    judges=None,
    requests_cache=None,
) -> None:
    """Table 11's Dynamic setting (one random policy per instance, no controller): run once per model, whatever the
    controllers; samf.dynamic false writes an empty table that records no judges (null)."""
    from .controllers import policy_space
    from .pipeline import dynamic_eval, empty_table

    Path(out_dir, "fuzzed").mkdir(parents=True, exist_ok=True)  # the rule's images folder exists either way
    if not samf["dynamic"]:
        write_table(out, empty_table(), None)  # the setting was not run: compare reports null dynamic columns
        return
    vlm = _evaluatee(samf, spec, models_cache, graph_dir)
    suite = make_suite(samf, judges, models_cache, graph_dir, requests_cache)
    items, split, root = load_instances(instances_path), read_split(split_path), images_root(samf, release_dir)
    df, _ = dynamic_eval(
        items, split, policy_space(samf["controller"]), vlm, spec["name"], root, out_dir, seed, suite=suite
    )
    write_table(out, df, suite.describe())
    _log_table("dynamic", spec["name"], df, suite)


def agreement_section(standard_path, labels, model: str, metrics, thresholds: dict | None = None, seed: int = 0):
    """Table 4 of the UniHall/SAMF paper: agreement of each scored metric with human labels of the static answers.

    `labels`: a file `halluflow align human` reads (an instance_id column and a human label column; a `model` column,
    when present, keeps that model's rows). Failed answers carry no metric value and are left out; the seeded random
    metric is the paper's chance row."""
    from ..align import align, read_rows, table_rows

    rows = read_rows(labels)
    if rows and "model" in rows[0]:
        rows = [r for r in rows if str(r.get("model")) == model]
        if not rows:
            raise InputError(f"{labels}: no human label for model {model!r} (its model column names others)")
    if rows and "instance_id" not in rows[0]:
        raise InputError(f"{labels}: no instance_id column (columns: {', '.join(rows[0])})")
    answers = [
        {k: r[k] for k in ("instance_id", "risk_level", *metrics)} for r in read_parquet(standard_path).to_dicts()
    ]
    specs = [f"{m}={v}" for m, v in sorted((thresholds or {}).items())]
    result = align(
        rows, {str(standard_path): answers}, str(labels), "instance_id", None, None, metrics, specs, 0.0, seed
    )
    human = result["human"]
    return {
        "labels": str(labels),
        "setting": "static",
        "n_labels": human["n"],
        "n_hallucinated": human["n_hallucinated"],
        "n_unmatched": result["unmatched"][str(standard_path)],
        "thresholds": {m: e["threshold"] for m, e in result["metrics"].items()},
        "table": table_rows(result),
    }


def run_compare(
    standard_path,
    fuzzed: dict,
    model: str,
    out_parquet,
    out_json,
    dynamic_path=None,
    out_categories=None,
    agreement: dict | None = None,
) -> None:
    """`fuzzed`: {controller: fuzzed.parquet} in samf.controllers order. Table 11 rows for the first controller; the controller x category x setting table of all;
    `agreement` = {labels, thresholds, metrics, seed} adds Table 4 (None or labels null: left out)."""
    from .pipeline import category_table, compare

    primary = next(iter(fuzzed))
    std = read_parquet(standard_path)
    fz = {name: read_parquet(path) for name, path in fuzzed.items()}
    table = compare(std, fz[primary], dynamic=read_parquet(dynamic_path) if dynamic_path else None)
    categories = category_table(std, fz)
    # Which judge, verifier, Sim_NLP and detector produced each setting's numbers, from the tables themselves.
    judges = {
        "standard": read_judges(standard_path),
        "dynamic": read_judges(dynamic_path) if dynamic_path else None,
        "fuzzed": read_judges(fuzzed[primary]),
    }
    by_controller = {name: read_judges(path) for name, path in fuzzed.items()}
    write_table(out_parquet, table, judges)
    if out_categories:
        write_table(out_categories, categories, {"standard": judges["standard"], "fuzzed": by_controller})
    stand_in = bool(std["stand_in"].any() or any(df["stand_in"].any() for df in fz.values()))
    doc = {
        "model": model,
        "stand_in": stand_in,
        "split": "test",
        "controller": primary,
        "controllers": list(fuzzed),
        "judges": judges,
        "fuzzed_judges": by_controller,
        "rows": table.to_dicts(),
        "by_category": categories.to_dicts(),
    }
    if agreement and agreement.get("labels"):
        doc["agreement"] = agreement_section(
            standard_path,
            agreement["labels"],
            model,
            agreement["metrics"],
            agreement.get("thresholds"),
            agreement.get("seed", 0),
        )
    write_json(out_json, doc)
