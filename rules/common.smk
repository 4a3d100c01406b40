# Shared helpers of the workflow: config validation, output layout, shard lists, input functions.
# Stage rule files (rules/<stage>.smk) hold rules only; their helpers live here.
import sys
from pathlib import Path

from halluflow.config import validate_config
from halluflow.errors import ConfigError

try:
    validate_config(config)
except ConfigError as _exc:
    # One line naming the key, before any job runs.
    sys.exit(f"halluflow: invalid config: {_exc}")


RELEASE = config["release"]
OUT = f"results/{RELEASE}"
LOGS = f"logs/{RELEASE}"
BENCH = f"benchmarks/{RELEASE}"
MODELS_CACHE = "resources/models"
IMAGE_SHARDS = [f"{i:03d}" for i in range(config["shards"]["images"])]
ANSWER_SHARDS = [f"{i:03d}" for i in range(config["shards"]["answers"])]



# Every stage appends a function returning its final targets; `rule all` asks for all of them.
FINAL_TARGETS = []


def get_final_output():
    targets = []
    for fn in FINAL_TARGETS:
        targets.extend(fn())
    return targets




# ---- ODE data pipeline (rules/ode.smk) ----
ODE_CONFIG = config["ode"]
ODE_PROMPTS = f"{OUT}/prompts/prompts.parquet"  # read by rule synthesize (column `shard` picks its rows)
ODE_QUERIES = f"{OUT}/queries/queries.parquet"  # read by the answer rules
ODE_RELEASE = f"{OUT}/release"  # images + scenes + queries + manifest.json + DATACARD.md
ODE_RELEASE_MANIFEST = f"{ODE_RELEASE}/manifest.json"  # the rule's declared output (written last)


def get_prompt_table():
    return ODE_PROMPTS


def get_graph_source_files(wildcards):
    """Annotation files build_graph reads, so editing one reruns the graph (and everything after it)."""
    graph = ODE_CONFIG["graph"]
    files = [graph["environments"] or "resources/vocab/environments.txt"]
    for source in [graph["source"], *graph["extra_sources"]]:
        if source["format"] == "seed":
            seed_dir = source["path"] or "resources/graph_seed"
            files += [f"{seed_dir}/nodes.tsv", f"{seed_dir}/edges.tsv"]
        else:
            files += [p for p in (source["path"], source["attribute_queries"], source["attributes"]) if p]
    return files


def get_ode_targets():
    # The release needs the synthesize/detect rules (rules/models.smk); without them stop at the prompts.
    if hasattr(rules, "detect") and hasattr(rules, "synthesize"):
        return [ODE_RELEASE_MANIFEST]
    return [ODE_PROMPTS]


FINAL_TARGETS.append(get_ode_targets)


# ---- synthesis + detection (rules/models.smk) ----
SYNTHESIS = config["synthesis"]
DETECTION = config["detection"]


def standin_dir(section):
    """Where a stand-in model of a config section (synthesis, detection) is built."""
    return f"{MODELS_CACHE}/{section['stand_in']['name']}"


def model_of(section):
    """The model a backend loads: the stand-in folder, or the configured hub id / local path."""
    return standin_dir(section) if section["stand_in"]["enabled"] else section["model"]


def _model_input(section):
    # A stand-in (or local weights) is a file dependency, so rebuilding it reruns the stage; a hub id is not.
    model = model_of(section)
    return [model] if section["stand_in"]["enabled"] or Path(model).exists() else []


def get_synthesis_model_input(wildcards):
    return _model_input(SYNTHESIS)


def get_detection_model_input(wildcards):
    return _model_input(DETECTION)


def get_detection_targets():
    return expand(f"{OUT}/detections/{{shard}}.parquet", shard=IMAGE_SHARDS)


FINAL_TARGETS.append(get_detection_targets)


# ---- report (rules/report.smk) ----
REPORT_DIR = f"{OUT}/report"


def get_report_upstream(wildcards):
    # The report reads whatever the enabled stages produced, so it waits for every other stage's final targets;
    # a stage switched off simply adds nothing here and its report section says "not run".
    targets = []
    for fn in FINAL_TARGETS:
        if fn is not get_report_targets:
            targets.extend(fn())
    return targets


def get_report_options():
    return {key: config["report"][key] for key in ("gallery_size", "max_boxes", "dpi")}


def get_report_targets():
    if not config["report"]["enabled"]:
        return []
    return [f"{REPORT_DIR}/summary.html"]


FINAL_TARGETS.append(get_report_targets)


# ---- CAOS + ODE diagnosis (rules/caos.smk) ----
CAOS_CONFIG = config["caos"]
DIAGNOSIS_CONFIG = config["diagnosis"]
CAOS_RELEASE_MANIFEST = ODE_RELEASE_MANIFEST  # rule package_release writes it last; its folder is the release
CAOS_NODES = f"{OUT}/graph/nodes.parquet"  # from build_graph: node frequencies = the frequent-object ranking


def _caos_model_names():
    return [m["name"] for m in config.get("models", [])]


def _caos_has_rule(name):
    # The scoring stage is optional: CAOS shows its POPE-F1 / CHAIR side by side only when the rule exists.
    try:
        getattr(rules, name)
    except Exception:
        return False
    return True


def get_caos_answers(wildcards):
    return expand(f"{OUT}/answers/{wildcards.model}/{{shard}}.parquet", shard=ANSWER_SHARDS)


def get_caos_metrics(wildcards):
    return [f"{OUT}/metrics/{wildcards.model}.json"] if _caos_has_rule("score") else []


def get_diagnosis_scores(wildcards):
    return [f"{OUT}/scores/{wildcards.model}/answers.parquet"] if _caos_has_rule("score") else []


def get_caos_oracle_members():
    # Members named in caos.oracle.members are looked up in `models:` so one model spec serves both roles.
    by_name = {m["name"]: m for m in config.get("models", [])}
    members = []
    for i, member in enumerate(CAOS_CONFIG["oracle"]["members"]):
        if isinstance(member, str):
            if member not in by_name:
                sys.exit(f"halluflow: invalid config: config key 'caos.oracle.members.{i}': no model named {member!r} in models")
            members.append(dict(by_name[member]))
        else:
            members.append({"name": f"oracle-{i}", **member})
    return members


def get_caos_model_inputs(wildcards):
    # Folders the job loads must be built first: the extractor's LLM (rule build_local_llm) and the oracle members'
    # stand-ins / converted models (as the answer stage resolves them), plus the graph a `prior` member reads.
    inputs = []
    if CAOS_CONFIG["extractor"] == "llm" and not CAOS_CONFIG["llm"]:
        inputs += get_llm_model_input()
    for spec in get_caos_oracle_members():
        folder = _model_dir_of(spec)
        if folder and (folder.startswith(MODELS_CACHE) or Path(folder).exists()):
            inputs.append(folder)
        if spec["backend"] == "prior" and not (spec.get("args") or {}).get("graph"):
            inputs.append(f"{OUT}/graph/edges.parquet")
    return sorted(set(inputs))


def get_caos_llm():
    # Only handed to the job when the extractor uses the default `llm:`, so editing `llm:` does not rerun CAOS.
    return config.get("llm") if CAOS_CONFIG["extractor"] == "llm" and not CAOS_CONFIG["llm"] else None


def _caos_runs():
    # CAOS reads the ODE release's generative queries: nothing to do for POPE / AMBER answer sources.
    return config["answer"]["source"]["kind"] == "ode" and hasattr(rules, "package_release")


def get_caos_targets():
    if not CAOS_CONFIG["enabled"] or not _caos_runs():
        return []
    return expand(f"{OUT}/caos/{{model}}.json", model=_caos_model_names())


def get_diagnosis_targets():
    if not DIAGNOSIS_CONFIG["enabled"] or not _caos_runs():
        return []
    return expand(f"{OUT}/diagnosis/{{model}}.{{ext}}", model=_caos_model_names(), ext=["parquet", "png"])


FINAL_TARGETS.append(get_caos_targets)
FINAL_TARGETS.append(get_diagnosis_targets)


# ---- CEDI (rules/cedi.smk) ----
CEDI_CONFIG = config.get("cedi", {})
CEDI_DIR = f"{OUT}/cedi"
CEDI_RELEASE_MANIFEST = f"{OUT}/release/manifest.json"  # written last by package_release; its folder is the release


def get_cedi_params():
    # Only what the CEDI jobs read, so editing another stage's config does not rerun them.
    return {"seed": config["seed"], "cedi": CEDI_CONFIG, "llm": config.get("llm")}


def _cedi_model_specs():
    specs = {m["name"]: m for m in config.get("models") or []}
    chosen = CEDI_CONFIG.get("models")
    if chosen is None:
        return specs
    unknown = [n for n in chosen if n not in specs]
    if unknown:
        sys.exit(f"halluflow: invalid config: config key 'cedi.models': unknown model(s) {unknown} (models: {sorted(specs)})")
    return {n: specs[n] for n in chosen}


def get_cedi_model_spec(wildcards):
    return _cedi_model_specs()[wildcards.model]


def get_cedi_llm_input(wildcards):
    # The converted SmolLM2 folder (rule build_local_llm) when the examiner or parser uses the default `llm`.
    uses_llm = CEDI_CONFIG.get("question_writer") == "llm" or CEDI_CONFIG.get("parser") == "llm"
    return get_llm_model_input() if uses_llm and not CEDI_CONFIG.get("llm") else []


def get_cedi_targets():
    if not CEDI_CONFIG.get("enabled", True) or not hasattr(rules, "package_release"):
        return []
    return [f"{CEDI_DIR}/{name}/grades.json" for name in _cedi_model_specs()]


FINAL_TARGETS.append(get_cedi_targets)


# ---- scoring (rules/score.smk) ----
SCORING = config["scoring"]


def get_score_answers(wildcards):
    return expand(f"{OUT}/answers/{wildcards.model}/{{shard}}.parquet", shard=ANSWER_SHARDS)


def get_score_targets():
    models = [m["name"] for m in config.get("models") or []]
    return [f"{OUT}/{kind}" for name in models for kind in (f"metrics/{name}.json", f"scores/{name}/answers.parquet")]


FINAL_TARGETS.append(get_score_targets)


# ---- answer stage: models under test (rules/answer.smk) ----
import re as _re

ANSWER = config["answer"]
MODELS = {m["name"]: m for m in config.get("models") or []}
LOCAL_LLM = f"{MODELS_CACHE}/smollm2-135m-instruct"  # built by build_local_llm: the packaged SmolLM2 GGUF as an HF folder
STANDIN_VLMS = [name for name, m in MODELS.items() if m.get("build")]
NEVER = "(?!x)x"  # a wildcard pattern that matches nothing (no stand-in to build)
ANSWER_MODEL_PATTERN = "|".join(_re.escape(n) for n in MODELS) or NEVER
STANDIN_VLM_PATTERN = "|".join(_re.escape(n) for n in STANDIN_VLMS) or NEVER


def _answer_release_dir():
    return ANSWER["source"]["path"] or f"{OUT}/release"


def get_answer_source_input(wildcards):
    """The release manifest (written last by package_release) or the POPE/AMBER question files."""
    src = ANSWER["source"]
    if src["kind"] == "ode":
        return [f"{_answer_release_dir()}/manifest.json"]
    return [p for p in (src["path"], src["annotations"]) if p]


def _model_dir_of(spec):
    args = spec.get("args") or {}
    if spec.get("build"):
        return args.get("model") or f"{MODELS_CACHE}/{spec['name']}"
    if spec["backend"] in ("transformers", "blind"):
        return args.get("model") or (LOCAL_LLM if spec["backend"] == "blind" else None)
    return None


def get_answer_model_input(wildcards):
    # Stand-in folders and the converted SmolLM2 are built by rules; other local folders are plain inputs; hub ids none.
    folder = _model_dir_of(MODELS[wildcards.model])
    return [folder] if folder and (folder.startswith(MODELS_CACHE) or Path(folder).exists()) else []


def get_answer_graph_input(wildcards):
    # The prior reads the concept graph (unless args.graph points elsewhere).
    spec = MODELS[wildcards.model]
    if spec["backend"] == "prior" and not (spec.get("args") or {}).get("graph"):
        return [f"{OUT}/graph/nodes.parquet", f"{OUT}/graph/edges.parquet"]
    return []


def get_answer_params(wildcards):
    """Only what the job reads, so editing another model's entry does not rerun this one."""
    return {
        "spec": MODELS[wildcards.model],
        "answer": ANSWER,
        "shards": len(ANSWER_SHARDS),
        "release": _answer_release_dir(),
        "graph": f"{OUT}/graph",
        "cache": f"{OUT}/cache/{wildcards.model}",
        "models_cache": MODELS_CACHE,
    }


def get_answer_gpus(wildcards):
    spec = MODELS[wildcards.model]
    device = (spec.get("args") or {}).get("device", "auto")
    return 1 if spec["backend"] == "vllm" or (spec["backend"] == "transformers" and device != "cpu") else 0


def get_answer_api_calls(wildcards):
    # Throttle HTTP models across jobs with `snakemake --resources api_calls=N`.
    return 1 if MODELS[wildcards.model]["backend"] == "openai" else 0


def get_standin_vlm_spec(wildcards):
    return MODELS[wildcards.vlm]["build"]


def get_llm_model_input(wildcards=None):
    """For rules that use the `llm` backend: the converted SmolLM2 folder when config llm.model points at it."""
    llm = config.get("llm") or {}
    return [LOCAL_LLM] if llm.get("backend", "transformers") == "transformers" and llm.get("model") == LOCAL_LLM else []


def get_answer_targets():
    if ANSWER["source"]["kind"] == "ode" and not hasattr(rules, "package_release"):
        return []
    return expand(f"{OUT}/answers/{{model}}/{{shard}}.parquet", model=list(MODELS), shard=ANSWER_SHARDS)


FINAL_TARGETS.append(get_answer_targets)


# ---- UniHall / SAMF (rules/samf.smk) ----
SAMF_CONFIG = config["samf"]
SAMF_DIR = f"{OUT}/fuzz"
SAMF_RELEASE = f"{OUT}/release"  # package_release's folder: queries.parquet + images/ (ODE source)
SAMF_GRAPH_DIR = f"{OUT}/graph"  # the `prior` baseline reads the concept graph


def _samf_models():
    specs = {m["name"]: m for m in config.get("models") or []}
    names = list(specs) if SAMF_CONFIG["models"] is None else SAMF_CONFIG["models"]
    for i, name in enumerate(names):
        if name not in specs:
            sys.exit(f"halluflow: invalid config: config key 'samf.models.{i}': no model named {name!r} in models")
    return {name: specs[name] for name in names}


def get_samf_groups():
    # Static: ODE groups follow from samf.query_types; a UniHall file is read at DAG time (it is a user input).
    from halluflow.samf.workflow import groups_for

    return groups_for(SAMF_CONFIG)


def get_samf_source_input(wildcards):
    if SAMF_CONFIG["source"]["format"] == "ode":
        return [ODE_RELEASE_MANIFEST]  # written last by package_release: the queries and images are complete
    return [SAMF_CONFIG["source"]["path"]]


def get_samf_model_spec(wildcards):
    return _samf_models()[wildcards.model]


def get_samf_model_input(wildcards):
    # A `build:` stand-in must exist before it is loaded; the prior baseline needs the concept graph.
    spec = _samf_models()[wildcards.model]
    inputs = []
    if spec.get("build"):
        inputs.append(spec.get("args", {}).get("model") or f"{MODELS_CACHE}/{spec['name']}")
    if spec["backend"] == "prior":
        inputs.append(f"{SAMF_GRAPH_DIR}/nodes.parquet")
    return inputs


def get_samf_llm():
    # Only handed to the jobs when the judge is the LLM, so editing `llm:` does not rerun rule-judged SAMF jobs.
    return config.get("llm") if SAMF_CONFIG["judge"] == "llm" else None


def get_samf_trained(wildcards):
    return expand(f"{SAMF_DIR}/{wildcards.model}/train/{{group}}.json", group=get_samf_groups())


def get_samf_targets():
    if not SAMF_CONFIG["enabled"]:
        return []
    if SAMF_CONFIG["source"]["format"] == "ode" and not hasattr(rules, "package_release"):
        return []
    return expand(
        f"{SAMF_DIR}/{{model}}/{{name}}",
        model=list(_samf_models()),
        name=["policies.json", "comparison.parquet", "comparison.json"],
    )


FINAL_TARGETS.append(get_samf_targets)
