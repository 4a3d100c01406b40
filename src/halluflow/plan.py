"""`halluflow plan`: what a config will run and what it will cost, before anything runs.

The counts come from the config alone, the way the workflow derives them (no Snakemake, no model, no network):
concept pairs (ode.sampling.sizes) x attribute variants = scenes, x ode.prompts.images_per_scene = images, and
per image at most the questions ode.queries asks (the filter only removes images, so every count of an ODE run is
an upper bound, marked "<="). Requests, generated tokens and jobs follow per stage and model; GPU-hours multiply
them by per-item seconds (`plan.costs.<gpu>`, schema defaults stated as assumptions with their source, measured on
your GPU by bench/bench_models.py and bench/bench_answer.py). Model cost scales with the parameter count read from
the model id or name ("7b", "2.2B"); 7B when none is given.

The same rows size the workflow's jobs (`job_resources`: runtime and checkpoint-sized host memory per rule and
model, read by rules/common.smk), so the Slurm profile asks for what the table estimates.

Planning also warns, one line each, when a non-demo release scores stand-ins and when a model pins a moving
revision (`planning_warnings`, also logged by the workflow when it builds its DAG).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from .benchmarks import get as get_benchmark
from .config import load_schema, merge_config, method_llm, method_models, read_config_file, validate_config
from .errors import ConfigError, InputError
from .models import MODELS_CACHE, resolve, resolve_llm

DEMO_RELEASE = "ode-demo"
REFERENCE_PARAMS_B = 7.0  # the per-request costs are stated for a 7B model
COMMIT = re.compile(r"^[0-9a-f]{40}\Z")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+\Z")
PARAMS = re.compile(r"(?<![0-9.])(\d+(?:\.\d+)?)\s*[bB](?![a-zA-Z])")
STAND_IN = "stand-in (not priced)"
COST_KEYS = ("synthesis_step_mp_s", "detection_image_s", "request_s", "token_s", "turn_token_s")


# ---- the config, merged as Snakemake merges it ------------------------------------------------------------------
def stage_plan(config: dict) -> dict[str, str | None]:
    """For every stage: None when it runs, else the reason it is left out (logged once when the DAG is built)."""
    kind = config["answer"]["source"]["kind"]
    ode = get_benchmark(kind).release and not config["answer"]["source"]["path"]
    no_release = (
        f"answer.source.kind is {kind}: it reads the ODE release's images and scene graphs"
        if not get_benchmark(kind).release
        else "answer.source.path names an existing release: it needs this config's concept graph"
    )
    plan: dict[str, str | None] = {
        "ode": None if ode else f"answer.source is {kind} {config['answer']['source']['path'] or ''}".rstrip(),
        "answer": None if config.get("models") else "no models under test",
        "score": None if config.get("models") else "no models under test",
    }
    for method in ("caos", "diagnosis", "cedi"):
        if not config[method]["enabled"]:
            plan[method] = f"{method}.enabled is false"
        elif plan["ode"] and not (
            method == "cedi"
            and config["cedi"]["source"] != "ode"
            or method == "caos"
            and get_benchmark(kind).caption_truth
        ):
            # CEDI on Visual Genome / COCO scene graphs and CAOS on COCO captions (truth = instances) need no release
            plan[method] = no_release
        elif not method_models(config, method):
            plan[method] = f"no model selected ({method}.models / models.*.skip)"
        else:
            plan[method] = None
    samf = config["samf"]
    if not samf["enabled"]:
        plan["samf"] = "samf.enabled is false"
    elif samf["source"]["format"] == "ode" and plan["ode"]:
        plan["samf"] = f"samf.source.format is ode but {no_release}; set samf.source to a unihall file instead"
    elif not method_models(config, "samf"):
        plan["samf"] = "no model selected (samf.models / models.*.skip)"
    else:
        plan["samf"] = None
    plan["report"] = (
        "report.enabled is false"
        if not config["report"]["enabled"]
        else None
        if not plan["ode"]
        else f"the report audits this config's ODE release; {plan['ode']}"
    )
    return plan


def _override(text: str) -> dict:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise InputError(f"--config {text!r}: expected KEY=VALUE (e.g. shards.images=64)")
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        parsed = value
    node: dict = {}
    top = node
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = parsed
    return top


def merged_config(configfiles: list[str], overrides: list[str] = (), base: str | Path = "config.yaml") -> dict:
    """The workflow's config.yaml (`base`) + each configfile + each KEY=VALUE, validated (defaults filled) as the
    workflow validates it."""
    if not Path(base).is_file():
        raise InputError(f"base config {base} not found: run in the workflow's folder or give --base")
    config = read_config_file(base)
    for path in configfiles:
        config = merge_config(config, read_config_file(path))
    for text in overrides:
        config = merge_config(config, _override(text))
    return validate_config(config)


# ---- counts -----------------------------------------------------------------------------------------------------
def queries_per_image(queries: dict, pair_kind: str, attributes: bool) -> dict[str, int]:
    """The most questions ode.queries asks about one image of a pair kind, by query type (make_queries):
    one description; a "yes" for both scene objects and negatives_per_image "no"s per strategy; an attribute truth
    and contrast per object (when attributes decorate objects); counterfactual objects, and one attribute
    counterfactual per attributed object; a count "yes" and one "no" per count_negatives word for each entity
    (environments are not counted)."""
    entities = 2 if pair_kind == "entity_entity" else 1
    return {
        "generative": 1,
        "existence": 2 + queries["negatives_per_image"] * len(queries["strategies"]),
        "attribute": 4 if attributes else 0,
        "counterfactual": queries["counterfactual_per_image"]
        + (2 if attributes and queries["counterfactual_attributes"] else 0),
        "count": entities * (1 + len(queries["count_negatives"])),
    }


@dataclass
class Counts:
    images: int  # first-round images (synthesis, detection)
    discriminative: int
    generative: int
    bound: bool  # True: an upper bound (ODE), False: counted from the source's files


def ode_counts(config: dict) -> Counts:
    ode = config["ode"]
    attributes = bool(ode["sampling"]["attribute_kinds"])
    per_scene = ode["sampling"]["variants"] * ode["prompts"]["images_per_scene"]
    images = disc = gen = 0
    for kinds in ode["sampling"]["sizes"].values():
        for pair_kind, pairs in kinds.items():
            n = pairs * per_scene
            per = queries_per_image(ode["queries"], pair_kind, attributes)
            images += n
            gen += n * per["generative"]
            disc += n * (sum(per.values()) - per["generative"])
    return Counts(images, disc, gen, True)


def source_counts(config: dict) -> Counts:
    """Queries of a POPE / AMBER / COCO source or an existing release, counted from its files."""
    from .sources import source_queries

    source = config["answer"]["source"]
    try:
        table, _ = source_queries(source)
    except (OSError, InputError, ConfigError) as exc:
        raise InputError(f"config key 'answer.source': cannot count its queries: {exc}") from None
    gen = int((table["task"] == "generative").sum()) if "task" in table.columns else 0
    return Counts(0, table.height - gen, gen, False)


def params_b(*names: str | None) -> float | None:
    """Billions of parameters named in a model id or name ("llava-1.5-7b-hf" -> 7, "SmolVLM-2.2B" -> 2.2)."""
    for name in names:
        found = PARAMS.findall(str(name or "").rsplit("/", 1)[-1])
        if found:
            return float(found[-1])
    return None


# ---- costs ------------------------------------------------------------------------------------------------------
def cost_table(config: dict) -> tuple[str, dict[str, float], str]:
    """(gpu type, per-item seconds, source) of plan.gpu: the config's entry over the built-in one of that name."""
    plan = config["plan"]
    gpu = plan["gpu"]
    builtin = load_schema()["properties"]["plan"]["properties"]["costs"]["default"]
    costs = {**builtin.get(gpu, {}), **(plan["costs"].get(gpu) or {})}
    if gpu not in builtin and gpu not in plan["costs"]:
        raise ConfigError(
            f"config key 'plan.gpu': no costs for {gpu!r} (plan.costs has {', '.join(sorted({*builtin, *plan['costs']}))})"
        )
    for key in COST_KEYS:
        if not isinstance(costs.get(key), (int, float)):
            raise ConfigError(f"config key 'plan.costs.{gpu}.{key}': missing (seconds per item, see the schema)")
    return gpu, costs, str(costs.get("source") or "")


@dataclass
class Row:
    stage: str
    jobs: int
    images: int | None
    requests: int | None
    tokens: int | None
    gpu_s: float | None  # None: no GPU of this run (CPU, a stand-in, a server elsewhere)
    note: str = ""


def _scale(spec_model: str | None, name: str | None) -> tuple[float, str]:
    size = params_b(spec_model, name)
    return ((size or REFERENCE_PARAMS_B) / REFERENCE_PARAMS_B, "" if size else f"size assumed {REFERENCE_PARAMS_B:g}B")


def _model_rate(config: dict, spec: dict) -> tuple[float | None, str]:
    """(cost factor, note) of a model under test: None when its GPU time is not this run's."""
    resolved = resolve(spec, MODELS_CACHE, config["gpu"])
    if spec.get("stand_in"):
        return None, STAND_IN
    if spec["backend"] == "openai":
        return None, "served elsewhere"
    if not resolved.gpu:
        return None, "CPU"
    return _scale((spec.get("args") or {}).get("model"), spec["name"])


def _llm_rate(config: dict, block: dict | None) -> tuple[float | None, str]:
    if not block:
        return None, ""
    resolved = resolve_llm(block, MODELS_CACHE, config["gpu"])
    if block.get("backend") == "openai":
        return None, "served elsewhere"
    if resolved is None or not resolved.gpu:
        return None, "CPU"
    return _scale(block.get("model"), None)


def _llm_tokens(block: dict | None) -> int:
    """The reply cap of an LLM block (transformers: max_new_tokens, openai: max_tokens; 64 = their defaults)."""
    block = block or {}
    return int(block.get("max_new_tokens") or block.get("max_tokens") or 64)


def _on_gpu(config: dict, device) -> bool:
    """A stage model's device as the resolver reads it: cuda, or auto where the config says jobs get GPUs."""
    device = str(device)
    return device.startswith("cuda") or (device == "auto" and bool(config["gpu"]))


def _seconds(rate: float | None, requests: int, tokens: int, request_s: float, token_s: float) -> float | None:
    return None if rate is None else rate * (requests * request_s + tokens * token_s)


def plan_rows(config: dict) -> tuple[list[Row], dict]:
    """The table's rows and what they assumed ({gpu, costs, source, bound})."""
    gpu, costs, source = cost_table(config)
    stages = stage_plan(config)
    rows: list[Row] = []
    counts = ode_counts(config) if not stages["ode"] else source_counts(config)
    image_shards, answer_shards = config["shards"]["images"], config["shards"]["answers"]
    if not stages["ode"]:
        syn, det = config["synthesis"], config["detection"]
        attempts = syn["max_attempts"]
        extra = f"<= x{attempts} with regenerated rounds" if attempts > 1 else ""
        if syn["stand_in"]["enabled"]:
            syn_s, syn_note = None, STAND_IN
        elif not _on_gpu(config, syn["device"]):
            syn_s, syn_note = None, "CPU"
        else:
            passes = 2 if (syn["true_cfg_scale"] or 1) > 1 else 1
            megapixels = syn["height"] * syn["width"] / 2**20
            syn_s = counts.images * syn["steps"] * passes * megapixels * costs["synthesis_step_mp_s"]
            syn_note = f"{syn['steps']} steps x {passes} pass(es) at {syn['height']}x{syn['width']}"
        rows.append(Row("synthesis", image_shards, counts.images, None, None, syn_s, _join(syn_note, extra)))
        on_gpu = _on_gpu(config, det["device"])
        det_s = counts.images * costs["detection_image_s"] if on_gpu and not det["stand_in"]["enabled"] else None
        det_note = STAND_IN if det["stand_in"]["enabled"] else "" if on_gpu else "CPU"
        rows.append(Row("detection", image_shards, counts.images, None, None, det_s, _join(det_note, extra)))
    mnt = config["answer"]["max_new_tokens"]
    requests = counts.discriminative + counts.generative
    tokens = counts.discriminative * mnt["discriminative"] + counts.generative * mnt["generative"]
    specs = {m["name"]: m for m in config["models"]}
    rates = {name: _model_rate(config, spec) for name, spec in specs.items()}
    for name in specs:
        rate, note = rates[name]
        seconds = _seconds(rate, requests, tokens, costs["request_s"], costs["token_s"])
        rows.append(Row(f"answer {name}", answer_shards, None, requests, tokens, seconds, note))
    if not stages["caos"]:
        rows += _caos_rows(config, counts, rates, costs)
    if not stages["cedi"]:
        rows += _cedi_rows(config, rates, costs)
    if not stages["samf"]:
        rows += _samf_rows(config, counts, rates, costs)
    return rows, {"gpu": gpu, "costs": costs, "source": source, "bound": counts.bound, "stages": stages}


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _caos_rows(config, counts, rates, costs) -> list[Row]:
    caos = config["caos"]
    members = caos["oracle"]["members"]
    objects = config["plan"]["objects_per_description"]
    llm = method_llm(config, "caos", "extractor")
    llm_rate, _ = _llm_rate(config, llm)
    rows = []
    for name in method_models(config, "caos"):
        per_member = counts.generative * objects
        asked = per_member * len(members)
        answer_tokens = config["answer"]["max_new_tokens"]["discriminative"]
        seconds = 0.0
        for member in members:
            rate = rates[member][0] if isinstance(member, str) else _model_rate(config, {"name": "oracle", **member})[0]
            tokens = per_member * answer_tokens
            seconds += _seconds(rate, per_member, tokens, costs["request_s"], costs["token_s"]) or 0.0
        calls = counts.generative if llm else 0
        llm_tokens = calls * _llm_tokens(llm) if llm else 0
        seconds += _seconds(llm_rate, calls, llm_tokens, costs["request_s"], costs["token_s"]) or 0.0
        note = f"{len(members)} oracle member(s) x {objects:g} objects per description" + (
            f"; {calls:,} extractor calls" if llm else ""
        )
        tokens = asked * answer_tokens + llm_tokens
        rows.append(Row(f"caos {name}", 1, None, asked + calls, tokens, seconds or None, note))
    return rows


def _cedi_rows(config, rates, costs) -> list[Row]:
    cedi = config["cedi"]
    from .cedi import POPE_STRATEGIES

    # POPE's questions (truth objects + three negative strategies) are built from the scene graph, never by the LLM
    pope = (1 + len(POPE_STRATEGIES)) * cedi["pope_objects"]
    rounds = {
        "cedi": cedi["max_rounds"],
        "caption": cedi["max_rounds"],
        "prompt_only": cedi["prompt_only_rounds"],
        "pope": pope,
    }
    conversations = cedi["images"] * len(cedi["history"])
    turns = conversations * sum(rounds[e] for e in cedi["examiners"])
    llm_turns = turns - conversations * pope * ("pope" in cedi["examiners"])
    llm = method_llm(config, "cedi", "question_writer", "switch", "parser")
    llm_rate, _ = _llm_rate(config, llm)
    per_turn = sum(cedi[k] == "llm" for k in ("question_writer", "switch", "parser"))
    calls = llm_turns * per_turn + (conversations * len(cedi["examiners"]) if cedi["parser"] == "llm" else 0)
    llm_tokens = calls * _llm_tokens(llm)
    rows = []
    for name in method_models(config, "cedi"):
        tokens = turns * cedi["max_new_tokens"]
        seconds = (_seconds(rates[name][0], turns, tokens, costs["request_s"], costs["turn_token_s"]) or 0.0) + (
            _seconds(llm_rate, calls, llm_tokens, costs["request_s"], costs["turn_token_s"]) or 0.0
        )
        note = f"{turns:,} turns" + (f" + {calls:,} LLM calls" if calls else "")
        rows.append(Row(f"cedi {name}", 1, cedi["images"], turns + calls, tokens + llm_tokens, seconds or None, note))
    return rows


def _samf_rows(config, counts, rates, costs) -> list[Row]:
    from .samf.workflow import groups_for

    samf, ctl = config["samf"], config["samf"]["controller"]
    groups = len(groups_for(samf))
    instances = (
        counts.discriminative if samf["max_instances"] is None else min(samf["max_instances"], counts.discriminative)
    )
    train = math.ceil(instances / max(groups, 1) * (1 - samf["pilot_ratio"]))
    # UniHall's Appendix C.8: K*N_init*B pulls + T*B search steps + top-k arms re-evaluated on the training split,
    # per group; plus every instance once as asked (standard) and once more under a random policy (dynamic)
    search = groups * (
        ctl["pool_size"] * ctl["n_init"] * ctl["batch_size"] + ctl["steps"] * ctl["batch_size"] + ctl["top_k"] * train
    )
    answers = search + instances * (2 if samf["dynamic"] else 1)
    judged = samf["judge"] != "rule"
    llm_calls = answers * (
        judged + sum(m in samf["metrics"] for m in ("shr", "ghs")) * judged + (samf["verifier"] != "rule")
    )
    if samf["judge"] == "vlm":  # the judge model (a models: entry) also verifies BHR's claims when verifier is vlm
        judge_rate, judge_cap = rates[samf["judge_model"]][0], samf["judge_max_new_tokens"]
    else:
        judge_rate = _llm_rate(config, config["llm"])[0] if "llm" in (samf["judge"], samf["verifier"]) else None
        judge_cap = _llm_tokens(config["llm"])
    rows = []
    for name in method_models(config, "samf"):
        tokens = answers * samf["max_new_tokens"]
        judge_tokens = llm_calls * judge_cap
        seconds = (_seconds(rates[name][0], answers, tokens, costs["request_s"], costs["turn_token_s"]) or 0.0) + (
            _seconds(judge_rate, llm_calls, judge_tokens, costs["request_s"], costs["turn_token_s"]) or 0.0
        )
        note = f"{groups} groups; {answers:,} answers" + (f" + {llm_calls:,} judge calls" if llm_calls else "")
        rows.append(
            Row(f"samf {name}", 3 * groups, None, answers + llm_calls, tokens + judge_tokens, seconds or None, note)
        )
    return rows


# ---- Slurm resources --------------------------------------------------------------------------------------------
RUNTIME_MARGIN = 1.5  # a job asks for its estimate x 1.5 (the per-item seconds are assumptions until measured) ...
LOAD_MINUTES = 10  # ... plus start-up: imports and loading the checkpoint onto the GPU
HOST_BASE_MB = 4000  # Python, torch, the job's tables
CHECKPOINT_MB_PER_B = 3072  # host RAM per billion parameters while loading: bf16 weights (2 GB/B) + 50 % in flight
GPU_JOB_CPUS = 4  # CPUs of a model job on a GPU: image decoding, preprocessing and tokenization feed the GPU
CHECKPOINT_BACKENDS = ("transformers", "vllm", "blind")  # the backends that load weights into this job
MILLIONS = re.compile(r"(?<![0-9.])(\d+(?:\.\d+)?)\s*[mM](?![a-zA-Z])")  # "smollm2-135m": 0.135B
# Plan stage -> the rules whose jobs run it (a regeneration round's job holds at most one image shard).
STAGE_RULES = {
    "synthesis": ("synthesize", "synthesize_retry"),
    "detection": ("detect", "detect_retry"),
    "answer": ("answer",),
    "caos": ("caos_score",),
    "cedi": ("cedi_examine",),
    "samf": ("samf_standard_eval", "samf_train", "samf_fuzzed_eval", "samf_dynamic_eval"),
}


def job_minutes(seconds: float) -> int:
    """The runtime a job asks Slurm for, in minutes, from its estimated GPU seconds."""
    return math.ceil(seconds / 60 * RUNTIME_MARGIN) + LOAD_MINUTES


def checkpoint_mb(spec: dict | None, llm: bool = False) -> int:
    """Host RAM (MB) to load one model's checkpoint in its job: 0 for a stand-in, a backend loading no weights
    (openai, prior) or none; else its parameter count (from the id or name: "7b", "2.2B", "135m"; 7B when none is
    given) x CHECKPOINT_MB_PER_B."""
    if not spec or spec.get("stand_in") or spec.get("backend") not in CHECKPOINT_BACKENDS:
        return 0
    model = spec.get("model") if llm else (spec.get("args") or {}).get("model")
    names = (model, None if llm else spec.get("name"))
    millions = [float(n) / 1000 for name in names for n in MILLIONS.findall(str(name or "").rsplit("/", 1)[-1])]
    size = params_b(*names) or (millions[-1] if millions else REFERENCE_PARAMS_B)
    return math.ceil(size * CHECKPOINT_MB_PER_B)


def _host_mb(*checkpoints: int) -> int | None:
    total = sum(checkpoints)
    return HOST_BASE_MB + total if total else None


def job_resources(config: dict) -> dict[tuple[str, str | None], dict[str, int]]:
    """{(rule, model or None): {"runtime": minutes, "mem_mb": MB, "cpus_per_task": n}} of the jobs `plan` prices,
    one job's share of its stage row (rows from plan_rows: the same counts and per-item seconds as the table):
    runtime where the job runs on this run's GPU (job_minutes of the row's GPU seconds / its jobs; a SAMF job gets
    its whole group's share) and then GPU_JOB_CPUS for a model job, mem_mb where it loads checkpoints (HOST_BASE_MB + checkpoint_mb of each). A key or value left out keeps
    the rule's own default. The workflow's rules read this (rules/common.smk), so `plan` and Slurm agree."""
    rows, _ = plan_rows(config)
    specs = {m["name"]: m for m in config["models"]}
    out: dict[tuple[str, str | None], dict[str, int]] = {}
    samf = config["samf"]
    for row in rows:
        stage, _, model = row.stage.partition(" ")
        values: dict[str, int] = {}
        if row.gpu_s:
            jobs = row.jobs // 3 if stage == "samf" else row.jobs  # samf: 3 x groups jobs, priced per group
            values["runtime"] = job_minutes(row.gpu_s / max(jobs, 1))
            if stage not in ("synthesis", "detection"):  # the image stages' CPUs are set in the Slurm profile
                values["cpus_per_task"] = GPU_JOB_CPUS
        spec = specs.get(model)
        if stage == "answer":
            mem = _host_mb(checkpoint_mb(spec))
        elif stage == "caos":
            extractor = method_llm(config, "caos", "extractor")
            members = [specs[m] if isinstance(m, str) else m for m in config["caos"]["oracle"]["members"]]
            mem = _host_mb(*(checkpoint_mb(m) for m in members), checkpoint_mb(extractor, llm=True))
        elif stage == "cedi":
            llm = method_llm(config, "cedi", "question_writer", "switch", "parser")
            mem = _host_mb(checkpoint_mb(spec), checkpoint_mb(llm, llm=True))
        elif stage == "samf":
            judge = specs.get(samf["judge_model"]) if samf["judge"] == "vlm" else None
            llm = config["llm"] if "llm" in (samf["judge"], samf["verifier"]) else None
            mem = _host_mb(checkpoint_mb(spec), checkpoint_mb(judge), checkpoint_mb(llm, llm=True))
        else:
            mem = None
        if mem:
            values["mem_mb"] = mem
        if values:
            for rule in STAGE_RULES[stage]:
                out[(rule, model or None)] = values
    return out


def format_job_resources(resources: dict[tuple[str, str | None], dict[str, int]]) -> str:
    """The per-job requests of job_resources, one line per rule (samf_* together) and model; empty when none."""
    lines: dict[str, str] = {}
    for (rule, model), values in resources.items():
        if rule.endswith("_retry"):  # a regeneration round's job: the same as its stage's
            continue
        name = " ".join(filter(None, ("samf_*" if rule.startswith("samf_") else rule, model)))
        parts = [
            f"{values['runtime']} min" if "runtime" in values else "",
            f"{values['mem_mb']:,} MB" if "mem_mb" in values else "",
            f"{values['cpus_per_task']} CPUs" if "cpus_per_task" in values else "",
        ]
        lines.setdefault(name, f"  {name}: " + ", ".join(p for p in parts if p))
    if not lines:
        return ""
    head = "per job (what the workflow asks Slurm for; other jobs keep their rule's runtime and memory):"
    return "\n".join([head, *lines.values()])


# ---- warnings ---------------------------------------------------------------------------------------------------
def _revision_of(spec: dict) -> tuple[str | None, object]:
    args = spec.get("args") or {}
    return args.get("model"), args.get("revision")


def planning_warnings(config: dict) -> list[str]:
    """One line per problem a run would not stop for: a release outside the demo scoring stand-ins, and models
    that load hub weights from a moving revision (null, a branch: anything but a 40-hex commit)."""
    lines = []
    standins = [m["name"] for m in config["models"] if m.get("stand_in")]
    for section in ("synthesis", "detection"):
        if config[section]["stand_in"]["enabled"] and not stage_plan(config)["ode"]:
            standins.append(f"{section}: {config[section]['stand_in']['name']}")
    if config["release"] != DEMO_RELEASE and standins and not stage_plan(config)["answer"]:
        lines.append(
            f"release {config['release']!r} scores the demo's stand-ins ({', '.join(standins)}): its numbers are "
            "noise; name real models in `models:` and set stand_in.enabled false"
        )
    moving = []
    hub = [(m["name"], *_revision_of(m)) for m in config["models"] if m["backend"] in ("transformers", "vllm", "blind")]
    for section in ("synthesis", "detection"):
        if not config[section]["stand_in"]["enabled"]:
            hub.append((section, config[section]["model"], config[section]["revision"]))
    for key in ("llm", "caos.llm", "cedi.llm"):
        section, _, sub = key.partition(".")
        block = (config.get(section) or {}).get(sub) if sub else config.get(section)
        if block and block.get("backend") == "transformers":
            hub.append((key, block.get("model"), block.get("revision")))
    for name, model, revision in hub:
        # a hub id is owner/name; a folder (resources/models/x, ./x) or a .pt file has no revision to pin
        hub_id = bool(HUB_ID.match(str(model or ""))) and not Path(str(model)).exists()
        if hub_id and not (isinstance(revision, str) and COMMIT.match(revision)):
            moving.append(f"{name} ({revision or 'default branch'})")
    if moving:
        lines.append(
            f"moving revisions, answers may change between runs: {', '.join(moving)}; pin each to a 40-hex commit"
        )
    return lines


# ---- output -----------------------------------------------------------------------------------------------------
def _num(value: int | None, bound: bool) -> str:
    if value is None:
        return "-"
    return ("<= " if bound else "") + f"{value:,}"


def format_plan(rows: list[Row], info: dict, warnings: list[str]) -> str:
    bound = info["bound"]
    header = ("stage", "jobs", "images", "requests", "tokens out", "GPU-h", "note")
    body = [
        (
            r.stage,
            f"{r.jobs:,}",
            _num(r.images, bound and r.stage in ("synthesis", "detection")),
            _num(r.requests, bound),
            _num(r.tokens, bound),
            "-" if r.gpu_s is None else f"{r.gpu_s / 3600:,.1f}",
            r.note,
        )
        for r in rows
    ]
    total = sum(r.gpu_s or 0.0 for r in rows) / 3600
    widths = [max(len(x[i]) for x in [header, *body]) for i in range(len(header))]
    right = {1, 2, 3, 4, 5}
    lines = [f"halluflow: warning: {w}" for w in warnings]
    for row in [header, None, *body]:
        if row is None:
            lines.append("  ".join("-" * w for w in widths).rstrip())
            continue
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    lines.append(f"total: {total:,.1f} GPU-hours on {info['gpu']} (jobs on GPU; CPU jobs and servers not counted)")
    costs = info["costs"]
    lines.append(
        "per-item seconds: "
        + ", ".join(f"{k} {costs[k]:g}" for k in COST_KEYS)
        + (f" ({info['source']})" if info["source"] else "")
    )
    skipped = [f"{s} ({why})" for s, why in info["stages"].items() if why]
    if skipped:
        lines.append("not planned: " + "; ".join(skipped))
    return "\n".join(lines)
