# Input functions shared by the stage files. The config's meaning is checked once, here, by the library
# (halluflow.config); models are resolved by halluflow.models, the same resolver the jobs use. Rules name each
# other's files through `rules.<name>.output.<key>`, so every artifact path is written once, in its producing rule.
import os
import re
from functools import cache
from pathlib import Path

import polars as pl

from halluflow.config import graph_source_files, method_llm, method_models, read_config_file, validate_config
from halluflow.config import question_resource_files
from halluflow.backends.concurrency import STATE_ENV as SERVER_STATE_ENV
from halluflow.benchmarks import get as get_benchmark
from halluflow.errors import ConfigError, InputError
from halluflow.models import LOCAL_LLM, MODELS_CACHE, any_on_gpu, check_config_models, oracle_members, resolve
from halluflow.plan import job_resources, planning_warnings, stage_plan
from halluflow.models import resolve_llm
from halluflow.models import judge_models, shard_generators, stage_model, stage_model_inputs
from halluflow.samf.workflow import judge_specs as samf_judge_specs
from halluflow.samf.workflow import groups_for
from halluflow.samf.workflow import controllers_of as samf_controllers
from halluflow.samf.workflow import CONTROLLERS as SAMF_CONTROLLERS
from halluflow.models import oracle_specs as audit_oracle_specs
from halluflow.ode.finetune import check_config as check_finetune_config, finetune_model, train_release_dir
from snakemake.logging import logger

try:
    # Snakemake's own reader keeps the last of a key given twice: each config file is read again by halluflow's
    # (a duplicate key, a non-UTF-8 file or a "billion laughs" alias bomb is one line naming the file).
    for _configfile in workflow.configfiles:
        read_config_file(_configfile)
    validate_config(config)
    check_config_models(config, MODELS_CACHE)  # every backend's arguments against its signature
except ConfigError as _exc:
    # One line naming the key, before any job is planned.
    raise SystemExit(f"halluflow: invalid config: {_exc}")

RELEASE = config["release"]
OUT = f"results/{RELEASE}"
LOGS = f"logs/{RELEASE}"
BENCH = f"benchmarks/{RELEASE}"
# Every job of this run that talks to a served model shares one adaptive window per server through a small state
# file here (halluflow.backends.concurrency), so parallel answer jobs against one server neither flood nor starve it.
os.environ.setdefault(SERVER_STATE_ENV, os.path.abspath(f"{OUT}/.servers"))
IMAGE_SHARDS = [f"{i:03d}" for i in range(config["shards"]["images"])]
ANSWER_SHARDS = [f"{i:03d}" for i in range(config["shards"]["answers"])]
# Regeneration rounds after the image shards (round 0). A keep threshold <= 0 rejects no image (detector scores
# are >= 0), so then no round is planned at all.
REGEN_ROUNDS = config["synthesis"]["max_attempts"] - 1 if config["ode"]["filter"]["keep_threshold"] > 0 else 0
SOURCE = config["answer"]["source"]
BENCHMARK = get_benchmark(SOURCE["kind"])  # the source's protocol (halluflow.benchmarks): inputs, answer format
PARENT_MANIFEST = [f"{p}/manifest.json" for p in [config["ode"]["lineage"]["parent"]] if p]
# The noun lexicon, attribute words, synonym table (and a domain's category table): inputs of the rules that read
# them, hashed by the release
QUESTION_RESOURCES = question_resource_files(config)
MODELS = {m["name"]: m for m in config["models"]}
STAGES = stage_plan(config)
NEVER = "(?!x)x"  # a wildcard pattern that matches nothing

for _stage, _reason in STAGES.items():
    if _reason:
        logger.info(f"halluflow: stage {_stage} not planned: {_reason}")
for _line in planning_warnings(config):  # stand-ins outside the demo, moving revisions: one line each
    logger.warning(f"halluflow: warning: {_line}")


# Runtime and host memory of the jobs `halluflow plan` prices (model and GPU jobs), from the same counts, per-item
# seconds (plan.costs.<plan.gpu>) and model sizes as its table (halluflow.plan.job_resources); other jobs keep
# their rule's own values.
try:
    JOB_RESOURCES = job_resources(config)
except (ConfigError, InputError) as _exc:
    logger.warning(f"halluflow: warning: job runtime and memory not derived from the plan: {_exc}")
    JOB_RESOURCES = {}


def _planned(rule, key, wildcards, default):
    return JOB_RESOURCES.get((rule, wildcards.get("model")), {}).get(key, default)


def retry_mem(mb, rule=None):
    """A job's `mem_mb`: the plan's (JOB_RESOURCES of `rule` and the job's model) or `mb`, on the first attempt;
    doubled, tripled... on retries (`--retries`, the profiles' 2), so a job the scheduler killed for memory asks for
    more instead of failing the same way again."""
    return lambda wildcards, attempt: _planned(rule, "mem_mb", wildcards, mb) * attempt


def planned_cpus(rule):
    """A job's `cpus_per_task` (Slurm): the plan's for a model job on a GPU, else 1."""
    return lambda wildcards: _planned(rule, "cpus_per_task", wildcards, 1)


def retry_runtime(minutes, rule=None):
    """A job's `runtime`: the plan's or `minutes` on the first attempt, more on each retry (a job killed at its
    time limit)."""
    return lambda wildcards, attempt: _planned(rule, "runtime", wildcards, minutes) * attempt


def name_pattern(names):
    """Wildcard constraint matching exactly these model names (dots and dashes included)."""
    return "|".join(re.escape(n) for n in names) or NEVER


# ---- models (rules/standins.smk builds the folders; every model rule asks the resolver) ----
@cache
def resolved(name):
    """The resolved `models:` entry `name` (halluflow.models.resolve, the resolver the jobs use), once per run."""
    return resolve(MODELS[name], MODELS_CACHE, config["gpu"])


def graph_inputs(resolved_model):
    """The concept graph's files, for a model that reads it."""
    return [rules.build_graph.output.nodes, rules.build_graph.output.edges] if resolved_model.reads_graph else []


def model_inputs(spec_or_name):
    if isinstance(spec_or_name, str):
        model = resolved(spec_or_name)
    else:
        model = resolve(spec_or_name, MODELS_CACHE, config["gpu"])
    return model.inputs() + graph_inputs(model)


def llm_inputs(llm):
    resolved = resolve_llm(llm, MODELS_CACHE, config["gpu"])
    return resolved.inputs() if resolved else []


def get_model_input(wildcards):
    return model_inputs(wildcards.model)


def get_model_graph_input(wildcards):
    return graph_inputs(resolved(wildcards.model))


def get_model_spec(wildcards):
    return MODELS[wildcards.model]


def standin_vlms():
    """The `models:` entries with a `build` block: rule build_standin_vlm builds their folders."""
    return [name for name in MODELS if resolved(name).build_rule == "build_standin_vlm"]


def get_standin_vlm_build(wildcards):
    return MODELS[wildcards.vlm]["build"]


# ---- text-to-image models and the detector (rules/images.smk, rules/standins.smk) ----
@cache
def generators():
    """The text-to-image model of each image shard (synthesis.generators, round-robin)."""
    return shard_generators(config["synthesis"], len(IMAGE_SHARDS))


def standin_synthesizers():
    """The stand-in synthesizers the shards use, by folder name (rule build_standin_synthesizer)."""
    return {g["stand_in"]["name"]: g["stand_in"] for g in generators() if g["stand_in"]["enabled"]}


def get_standin_synthesizer(wildcards):
    return standin_synthesizers()[wildcards.synthesizer]


def get_generator(wildcards):
    return generators()[int(wildcards.shard)]


def get_generator_weights(wildcards):
    return stage_model_inputs(get_generator(wildcards))


def get_generator_model(wildcards):
    return stage_model(get_generator(wildcards))


def get_generator_names(wildcards):
    # one text-to-image model per image shard: a regeneration job packs only shards of one model
    return [g["name"] for g in generators()]


def get_synthesis_params(wildcards):
    # What a synthesize job reads of its generator: raising synthesis.max_attempts adds rounds, never redoes images.
    return {k: v for k, v in get_generator(wildcards).items() if k != "max_attempts"}


def get_detector_weights(wildcards):
    return stage_model_inputs(config["detection"])


def on_gpu(models=(), llms=(), own=True):
    # The `gpu` resource of a job loading helper models too (oracle members, judges, an LLM): 1 if any is on one.
    helpers = any_on_gpu(models, llms, config["gpu"], MODELS_CACHE)

    def get_gpu(wildcards):
        return int(helpers or (own and resolved(wildcards.model).gpu))

    return get_gpu


def get_api_calls(wildcards):
    # Throttle HTTP helper models across jobs with `snakemake --resources api_calls=N` (answer jobs need no
    # throttle: their served models share one adaptive window per server, see SERVER_STATE_ENV above).
    return int(resolved(wildcards.model).api)


# ---- regeneration rounds (rules/images.smk) ----
def round_jobs(attempt):
    """The jobs of generation round `attempt`: the image shards, then the jobs checkpoint retry_prompts planned."""
    if attempt == 0:
        return IMAGE_SHARDS
    plan = checkpoints.retry_prompts.get(attempt=attempt).output.plan
    return sorted(set(pl.read_parquet(plan, columns=["shard"])["shard"]))


def image_rounds():
    """Every job of every round, in round order (a round without jobs ends the regeneration), and the round plans
    these depend on. A plan not written yet is a plain input, not a checkpoint wait: Snakemake checks nothing but
    missing outputs of a job whose input waits on a checkpoint, so a finished run whose config now asks for
    regeneration would look up to date; as a plain input, the job's changed params make it (and the plan) run."""
    jobs, plans = list(IMAGE_SHARDS), []
    for attempt in range(1, REGEN_ROUNDS + 1):
        plans.append(expand(rules.retry_prompts.output.plan, attempt=attempt)[0])
        if not os.path.exists(plans[-1]):
            break
        planned = round_jobs(attempt)
        if not planned:
            break
        jobs += planned
    return jobs, plans


def previous_round(wildcards):
    """The images and detections of every job of the round before regeneration round `attempt`."""
    jobs = round_jobs(int(wildcards.attempt) - 1)
    return {
        "images": expand(rules.synthesize.output.table, shard=jobs),
        "detections": expand(rules.detect.output.table, shard=jobs),
    }


def get_round_images(wildcards):
    return expand(rules.synthesize.output.table, shard=image_rounds()[0])


def get_round_detections(wildcards):
    return expand(rules.detect.output.table, shard=image_rounds()[0])


def get_round_plans(wildcards):
    # rules reading the rounds' tables list the plans too, since a finished plan re-evaluates its input (Snakemake
    # updates the direct dependents of a checkpoint)
    return image_rounds()[1]


def get_graph_sources(wildcards):
    return graph_source_files(config)


# ---- answer + score ----
def get_answer_source_input(wildcards):
    """The release manifest (written last by package_release), the POPE/AMBER question files or COCO's instances."""
    if BENCHMARK.release and not SOURCE["path"]:
        return [rules.package_release.output.manifest]  # this run's own release
    return BENCHMARK.inputs(SOURCE)


def ode_release_dir():
    return str(Path(rules.package_release.output.manifest).parent)


def get_answer_cache(wildcards):
    return f"{OUT}/cache/{wildcards.model}"


def get_model_answers(wildcards):
    return expand(rules.answer.output.answers, model=wildcards.model, shard=ANSWER_SHARDS)


def get_all_scores(wildcards):
    return expand(rules.score.output.scores, model=list(MODELS))


def get_all_metrics(wildcards):
    return expand(rules.score.output.metrics, model=list(MODELS))


# ---- CAOS / diagnosis / CEDI / SAMF ----
# The run's request cache root: a `models:` entry's folder is the answer stage's, REQUEST_CACHE/<name>, an LLM block's
# REQUEST_CACHE/llm-<model> (halluflow.models.model.cache_folder), so the CAOS oracle, CEDI's evaluatee and LLM and
# SAMF's judges read back what any job of the run asked before.
REQUEST_CACHE = f"{OUT}/cache"


def get_caos_truth_input(wildcards):
    # ode: the release's queries and graph nodes (its vocabulary); coco: the instances file alone, so no ODE stage
    # enters the DAG
    if BENCHMARK.caption_truth:
        return {"annotations": SOURCE["annotations"]}
    return {"release": rules.package_release.output.manifest, "nodes": rules.build_graph.output.nodes}


def get_caos_model_inputs(wildcards):
    # The extractor's LLM and the oracle members' folders (as the answer stage resolves them) are built first.
    members = [f for spec in oracle_members(config) for f in model_inputs(spec)]
    return sorted(set(members + llm_inputs(method_llm(config, "caos", "extractor"))))


def get_cedi_llm_input(wildcards):
    return llm_inputs(method_llm(config, "cedi", "question_writer", "switch", "parser"))


def get_cedi_truth_input(wildcards):
    # ode: the release, its concept graph and the detector's labels; visual_genome / coco: the annotation file alone,
    # so no ODE stage enters the DAG
    if config["cedi"].get("source", "ode") != "ode":
        return {"scene_graphs": config["cedi"]["scene_graphs"]}
    return {
        "release": rules.package_release.output.manifest,
        "nodes": rules.build_graph.output.nodes,
        "edges": rules.build_graph.output.edges,
        "accepted": rules.filter_images.output.accepted,  # detector-seen objects are never asked as absent
    }


def get_cedi_vocabulary_input(wildcards):
    return {"nodes": rules.build_graph.output.nodes} if config["cedi"].get("source", "ode") == "ode" else {}


# What the CEDI jobs read, so editing another stage's config does not rerun them: the section, the top-level `llm:`
# (cedi.llm null), the seed and the request cache.
CEDI_PARAMS = {"cedi": config["cedi"], "llm": config["llm"], "seed": config["seed"], "cache": REQUEST_CACHE}


def get_samf_source_input(wildcards):
    if config["samf"]["source"]["format"] == "ode":
        return {"release": rules.package_release.output.manifest}  # written last: the queries and images are complete
    return {"unihall": config["samf"]["source"]["path"]}


def get_samf_job_input(wildcards):
    """What every SAMF evaluation job reads: the instances and split, the model's and judges' files, the release (an
    ODE source's images) and the concept graph's nodes when the evaluatee or the visual judge reads the graph."""
    inputs = {
        "instances": rules.samf_instances.output.instances,
        "split": rules.samf_instances.output.split,
        "weights": get_model_input(wildcards),
        "judge_weights": get_samf_judge_input(wildcards),
    }
    if config["samf"]["source"]["format"] == "ode":
        inputs["release"] = rules.package_release.output.manifest
    judge = samf_judge_specs(config).get("vlm")
    if any(resolved(name).reads_graph for name in [wildcards.model] + ([judge["name"]] if judge else [])):
        inputs["nodes"] = rules.build_graph.output.nodes
    return inputs


def get_samf_judge_input(wildcards):
    # The judges' model folders are built first: the llm, the vlm judge's models: entry, the detector's stand-in.
    specs = samf_judge_specs(config)
    inputs = llm_inputs(specs.get("llm")) + (model_inputs(specs["vlm"]) if "vlm" in specs else [])
    return sorted(set(inputs + (stage_model_inputs(config["detection"]) if "detector" in specs else [])))


def get_samf_trained(wildcards):
    # One training job per (subtype x question type) group: ODE groups follow from samf.query_types; a UniHall
    # file's groups are read from the split samf_instances wrote (a checkpoint), never from the file at DAG time.
    if config["samf"]["source"]["format"] == "ode":
        groups = groups_for(config["samf"])
    else:
        groups = sorted(pl.read_parquet(checkpoints.samf_instances.get().output.split)["group"].unique())
    return expand(rules.samf_train.output.policy, model=wildcards.model, controller=wildcards.controller, group=groups)


# samf_train / samf_fuzzed_eval run once per controller of samf.controllers, all on the same instances and split.
SAMF_CONTROLLER_PATTERN = "|".join(SAMF_CONTROLLERS)
# What every SAMF evaluation job (standard, train, fuzzed, dynamic) reads besides its files, and what it loads.
SAMF_JOB_PARAMS = {
    "samf": config["samf"],
    "spec": get_model_spec,
    "judges": samf_judge_specs(config),
    "seed": config["seed"],
    "cache": REQUEST_CACHE,
}
SAMF_JOB_RESOURCES = {
    "gpu": on_gpu(*judge_models(samf_judge_specs(config))),
    "api_calls": get_api_calls,
}


def get_samf_fuzzed(wildcards):
    # In samf.controllers order: the first controller's table gives the comparison's Table 11 rows.
    return expand(
        rules.samf_fuzzed_eval.output.table, model=wildcards.model, controller=samf_controllers(config["samf"])
    )


def get_samf_agreement_input(wildcards):
    labels = (config["samf"].get("agreement") or {}).get("labels")
    return [labels] if labels else []


def samf_agreement_params(config):
    # Table 4 over the metrics the run scores; the chance row is seeded by the run's seed. The labels file is an
    # input (get_samf_agreement_input).
    section = config["samf"].get("agreement") or {}
    return {
        "thresholds": section.get("thresholds") or {},
        "metrics": list(config["samf"]["metrics"]),
        "seed": config["seed"],
    }


def get_report_upstream(wildcards):
    # The report reads whatever the enabled stages produced; a stage switched off says "not run" in it.
    return [t for stage, targets in stage_targets().items() if stage != "report" for t in targets]


def get_report_options():
    return {key: config["report"][key] for key in ("gallery_size", "max_boxes", "dpi")}


def get_audit_model_inputs(wildcards):
    """The label audit's oracle members' folders, as the answer stage resolves them (built before the audit)."""
    return [f for spec in audit_oracle_specs(config, config["audit"]["oracle"]) for f in model_inputs(spec)]


# ---- ODE fine-tuning loop (rules/finetune.smk) ----
def finetune_base(name):
    """The base model's weights as the training record names them: resolved model, revision, device and dtype, and
    whether it is a stand-in."""
    model = resolved(name)
    return {
        **{k: model.args.get(k) for k in ("model", "revision", "device", "dtype")},
        "stand_in": bool(MODELS[name].get("stand_in") or model.args.get("stand_in")),
    }


def get_paper_upstream(*stages):
    """Inputs of a paper page (rules/paper.smk): the planned stages' final files (stage_targets, rules/targets.smk);
    a stage that is not planned says "not run" on the page."""
    return lambda wildcards: [t for stage in stages for t in stage_targets().get(stage, [])]


def get_paper_validity(wildcards):
    # ODE's Fig. 1/4 and 7: the validity view, planned when validity.source is set (rules/score.smk)
    return [rules.release_validity.output.validity] if BENCHMARK.release and config["validity"]["source"] else []


def get_finetune_section(wildcards):
    # ODE's Fig. 10/11 section on the ODE paper page (rules/paper.smk), planned only with finetune.enabled
    return [rules.ode_finetune.output.section] if config["finetune"]["enabled"] else []
