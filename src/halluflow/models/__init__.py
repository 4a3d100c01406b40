"""One model resolver for the workflow and the library: a config model spec -> what it loads and what it needs.

`resolve(spec)` answers, for a `models:` entry (or an `llm:` block, or a CAOS oracle member): the local folder the
backend loads (None for hub ids and servers), the workflow rule that builds that folder first (the stand-in VLM
builder, or the SmolLM2 conversion), whether a job running it needs a GPU or an API slot, whether it reads the
concept graph, and the backend arguments with the built folder filled in. Snakemake input functions, the Slurm
resources of every model rule, and `halluflow.models.model.ModelUnderTest` all use this one answer, so a model cannot be
resolved one way when planned and another way when run. The same answer checks the backend arguments against the
backend's declared signature (names, types, bounds), so a typo or an impossible value is one line at planning time,
before any job runs or any request is paid.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import os
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import ConfigError, MissingExtraError

MODELS_CACHE = "resources/models"
# The packaged SmolLM2-135M-Instruct GGUF converted into a Hugging Face folder by rule build_local_llm.
LOCAL_LLM_NAME = "smollm2-135m-instruct"
LOCAL_LLM = f"{MODELS_CACHE}/{LOCAL_LLM_NAME}"

# Backends that load local weights through transformers (their `device` decides CPU or GPU).
_TORCH_BACKENDS = ("transformers", "blind")


ROLES = ("vlm", "llm", "detector", "synthesizer", "embedder", "image_embedder")


@dataclass(frozen=True)
class ModelSpec:
    """One model of any role (model under test, LLM, judge, detector, synthesizer, embedder), whatever config shape
    it came from: a `models:` entry {name, backend, args, build, stand_in} (the vlm role, and an llm block written
    that way), a flat block {backend, **arguments} (`llm:`, `caos.llm`, embedders, detector specs). `args` are the
    backend's constructor arguments; `build` names a stand-in recipe; `stand_in` labels the model's outputs."""

    role: str
    backend: str
    name: str
    args: dict = field(default_factory=dict, hash=False)
    build: Any = None
    stand_in: bool = False

    @classmethod
    def of(cls, role: str, raw: "ModelSpec | Mapping[str, Any]", default_backend: str | None = None) -> "ModelSpec":
        """The spec of `raw` in `role`; ConfigError names what is missing or malformed."""
        if isinstance(raw, ModelSpec):
            return raw
        if role not in ROLES:
            raise ConfigError(f"model role {role!r}: expected one of {', '.join(ROLES)}")
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{role} model spec {raw!r}: expected a mapping with a 'backend'")
        backend = raw.get("backend") or default_backend
        if not backend:
            raise ConfigError(f"model spec {dict(raw)!r}: missing key 'backend'")
        name = str(raw.get("name") or backend)
        if role == "vlm" or isinstance(raw.get("args"), dict):  # the `models:` shape
            if not isinstance(raw.get("args") or {}, dict):
                raise ConfigError(f"model {name!r}: 'args' must be a mapping of backend arguments")
            args = dict(raw.get("args") or {})
            return cls(role, str(backend), name, args, raw.get("build"), bool(raw.get("stand_in", False)))
        args = {k: v for k, v in raw.items() if k not in ("backend", "name")}
        return cls(role, str(backend), name, args, None, bool(args.get("stand_in", False)))

    def registry_spec(self) -> dict:
        """{backend, **args}: what halluflow.models.registry.create builds."""
        return {"backend": self.backend, **self.args}


@dataclass(frozen=True)
class ResolvedModel:
    name: str
    backend: str
    folder: str | None  # local folder the backend loads; None = a hub id, a server, or no weights
    build_rule: str | None  # workflow rule that writes `folder` first; None = the user provides it
    gpu: bool  # a job running this model asks the scheduler for one GPU
    api: bool  # a job running this model uses an HTTP API slot (throttled with --resources api_calls=N)
    reads_graph: bool  # the prior baseline reads results/<release>/graph unless args.graph points elsewhere
    args: dict = field(default_factory=dict)  # backend arguments, args.model filled in for a `build:` stand-in

    def inputs(self) -> list[str]:
        """The folder as a file dependency: built by a rule, or local weights whose change reruns the job."""
        if self.folder and (self.build_rule or Path(self.folder).exists()):
            return [self.folder]
        return []


def default_device(role: str, backend: str) -> str:
    """The `device` a backend runs on when the spec leaves it out: the default its own signature declares (written
    once, in the backend; "cpu" for the transformers vlm and llm and the blind baseline), "cpu" when the backend
    cannot be imported here (a missing extra: its job reports that)."""
    signature = backend_signature(role, backend)
    param = signature[0].get("device") if signature else None
    if param is None or param.default is param.empty:
        return "cpu"
    return str(param.default)


def _wants_gpu(backend: str, args: dict, gpu_available: bool, role: str = "vlm") -> bool:
    if backend == "vllm":
        return True
    if backend not in _TORCH_BACKENDS:
        return False
    device = str(args.get("device") or default_device(role, backend))
    return device.startswith("cuda") or (device == "auto" and gpu_available)


def resolve(
    spec: ModelSpec | dict,
    models_cache: str | os.PathLike = MODELS_CACHE,
    gpu_available: bool = False,
    role: str = "vlm",
) -> ResolvedModel:
    """Resolve one model spec (a ModelSpec, or a `models:` entry {name, backend, args, build, ...} read as one);
    `gpu_available` = config key `gpu` (device auto). Its arguments are checked against the `role` backend's
    signature (ConfigError naming the model and argument). Used at planning (rules, halluflow plan) and at run time
    (ModelUnderTest, Model.llm), so a model is resolved one way."""
    spec = ModelSpec.of(role, spec)
    role, backend, name, args = spec.role, spec.backend, spec.name, dict(spec.args)
    folder = build_rule = None
    if spec.build:
        folder = str(args.get("model") or Path(models_cache) / name)
        build_rule = "build_standin_vlm"
    elif backend in _TORCH_BACKENDS:
        folder = args.get("model") or (str(Path(models_cache) / LOCAL_LLM_NAME) if backend == "blind" else None)
        if folder and not _is_local(folder):
            folder = None  # a hub id: transformers resolves it from its cache
    if folder and not build_rule and Path(folder) == Path(models_cache) / LOCAL_LLM_NAME:
        folder, build_rule = str(Path(models_cache) / LOCAL_LLM_NAME), "build_local_llm"
    if spec.build:
        args["model"] = str(folder)  # only a stand-in's folder is implied; other specs keep their args (cache keys)
    reads_graph = backend == "prior" and not args.get("graph")
    check_backend_args(role, backend, args, name, filled_in=("graph",) if reads_graph else ())
    return ResolvedModel(
        name=name,
        backend=backend,
        folder=str(folder) if folder else None,
        build_rule=build_rule,
        gpu=_wants_gpu(backend, args, gpu_available, role),
        api=backend == "openai",
        reads_graph=reads_graph,
        args=args,
    )


def resolve_llm(
    llm: dict | None, models_cache: str | os.PathLike = MODELS_CACHE, gpu_available: bool = False
) -> ResolvedModel | None:
    """The `llm:` block (CEDI examiner/parser, CAOS extractor, SAMF judge) resolved like a model under test: flat
    {backend, **arguments} or the `models:` shape {backend, args}; the backend defaults to transformers."""
    if not llm:
        return None
    spec = ModelSpec.of("llm", llm, default_backend="transformers")
    return resolve(ModelSpec("llm", spec.backend, "llm", spec.args), models_cache, gpu_available, role="llm")


def check_config_models(config: dict, models_cache: str | os.PathLike = MODELS_CACHE) -> None:
    """Every backend a config names, resolved (arguments checked) before any job is planned: the `models:` entries,
    inline CAOS oracle members and the `llm:` blocks. ConfigError names the config key, the model, the argument."""

    def check(key: str, call) -> None:
        try:
            call()
        except ConfigError as exc:
            raise ConfigError(f"config key {key!r}: {exc}") from None

    for i, spec in enumerate(config.get("models") or []):
        check(f"models.{i}.args", lambda spec=spec: resolve(spec, models_cache))
    for j, member in enumerate(((config.get("caos") or {}).get("oracle") or {}).get("members") or []):
        if isinstance(member, dict):
            spec = {"name": f"oracle-{j}", **member}
            check(f"caos.oracle.members.{j}", lambda spec=spec: resolve(spec, models_cache))
    for key in ("llm", "caos.llm", "cedi.llm"):
        section, _, sub = key.partition(".")
        block = (config.get(section) or {}).get(sub) if sub else config.get(section)
        if block:
            check(key, lambda block=block: resolve_llm(block, models_cache))


# ---- backend arguments ------------------------------------------------------------------------------------------
_BOUND_OPS = {">": lambda v, b: v > b, ">=": lambda v, b: v >= b}


@functools.lru_cache(maxsize=None)
def backend_signature(role: str, backend: str) -> tuple[dict, dict, dict, bool] | None:
    """(parameters, type hints, bounds, open) of a registered backend: its __init__'s, followed through `**kwargs`
    to the class named by FORWARDS_ARGS_TO (OpenAIVLM -> OpenAIClient); bounds from ARG_BOUNDS; `open` when some
    **kwargs go nowhere declared (names then cannot be checked). None when the backend's module cannot be imported
    here (a missing extra): the job that builds it reports that."""
    from . import registry

    if role not in registry.REGISTRIES:
        return None
    try:
        cls = registry.REGISTRIES[role].resolve(backend)
    except MissingExtraError:
        return None
    params: dict[str, inspect.Parameter] = {}
    hints: dict[str, typing.Any] = {}
    bounds: dict[str, tuple[str, float]] = {}
    open_kwargs = False
    seen = set()
    while cls is not None and cls not in seen:
        seen.add(cls)
        init = cls.__init__
        try:
            found = typing.get_type_hints(init)
        except Exception:  # noqa: BLE001 - an unresolvable annotation only means that argument's type goes unchecked
            found = {}
        forward = None
        for p in list(inspect.signature(init).parameters.values())[1:]:
            if p.kind is p.VAR_KEYWORD:
                forward = getattr(cls, "FORWARDS_ARGS_TO", None)
                open_kwargs = open_kwargs or forward is None
            elif p.kind is not p.VAR_POSITIONAL:
                params.setdefault(p.name, p)
                if p.name in found:
                    hints.setdefault(p.name, found[p.name])
        bounds = {**getattr(cls, "ARG_BOUNDS", {}), **bounds}
        cls = forward
    return params, hints, bounds, open_kwargs


def _type_ok(value, hint) -> bool:
    origin = typing.get_origin(hint)
    if hint is typing.Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, a) for a in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint in (str, bool, dict, list, tuple):
        return isinstance(value, hint)
    if origin in (dict, list, tuple):
        return isinstance(value, origin)
    return True  # a hint this check does not know (a Sequence, a class): the backend itself checks it


def _type_name(hint) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(hint))
    if hint is type(None):
        return "null"
    if hint is float:
        return "a number"
    return {int: "an integer", str: "a string", bool: "true/false", dict: "a mapping", list: "a list"}.get(
        hint, getattr(hint, "__name__", str(hint))
    )


def check_backend_args(
    role: str, backend: str, args: dict, name: str | None = None, filled_in: typing.Iterable[str] = ()
) -> None:
    """Refuse, in one line naming the model and the argument, backend arguments the backend cannot take: unknown
    names (with the closest known one), wrong types (`timeout_s: "fast"`), impossible values (`max_retries: -1`),
    missing required ones (`base_url`). `filled_in`: arguments the workflow supplies itself (the prior's graph)."""
    from ..secrets import register_args

    who = f"model {name or backend!r} ({role} backend {backend!r})"
    # Before any message about these arguments is formed: the key api_key_env names and base_url's credentials
    # join the process's redaction, and a key pasted into another argument is refused without echoing it.
    register_args(args, who)
    signature = backend_signature(role, str(backend))
    if signature is None:
        return
    params, hints, bounds, open_kwargs = signature
    for arg, value in args.items():
        if arg not in params:
            if open_kwargs:
                continue
            close = difflib.get_close_matches(str(arg), list(params), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{who}: unknown argument {arg!r}{hint}; it takes: {', '.join(sorted(params))}")
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        if arg in hints and not _type_ok(value, hints[arg]):
            raise ConfigError(f"{who}: argument {arg!r} is {shown}; expected {_type_name(hints[arg])}")
        if arg in bounds and isinstance(value, (int, float)) and not isinstance(value, bool):
            op, limit = bounds[arg]
            if not (math.isfinite(float(value)) and _BOUND_OPS[op](value, limit)):
                raise ConfigError(f"{who}: argument {arg!r} is {shown}; expected a finite number {op} {limit:g}")
    for arg, p in params.items():
        if p.default is p.empty and arg not in args and arg not in filled_in:
            raise ConfigError(f"{who}: argument {arg!r} is required")
    if isinstance(args.get("engine_args"), dict) and "trust_remote_code" in args["engine_args"]:
        # vLLM's engine_args reach the engine unchecked: remote code must come through the pinned argument.
        raise ConfigError(
            f"{who}: engine_args.trust_remote_code is not taken; set trust_remote_code as its own argument"
        )
    if args.get("trust_remote_code") is True and "trust_remote_code" in params:
        model = args.get("model", params["model"].default if "model" in params else None)
        problem = remote_code_refusal(model, args.get("revision"))
        if problem:
            raise ConfigError(f"{who}: {problem}")


# A pinned Hub commit: a branch or tag ("main", "v1.0") can move to different code after the run was planned.
_PINNED_COMMIT = re.compile(r"[0-9a-f]{40}")


def remote_code_refusal(model, revision) -> str | None:
    """Why `trust_remote_code: true` is refused for this model and revision, or None when it is allowed.

    Remote code is the model repo's own Python, run with the user's rights: allowed only for a local folder (whose
    code is the user's own) or a Hub id pinned to a full commit hash, so the code that runs is the code reviewed.
    Checked at planning time (check_backend_args) and again by each backend that takes it (library callers)."""
    if isinstance(model, str) and model.strip() and _is_local(model):
        return None
    if isinstance(revision, str) and _PINNED_COMMIT.fullmatch(revision):
        return None
    got = f"revision is {revision!r}" if revision is not None else "no revision is given"
    return (
        f"trust_remote_code runs the model repo's own Python code, but {got}; pin it with "
        "revision: <40-hex commit> (or point model at a local folder)"
    )


def _is_local(model: str) -> bool:
    # A hub id is "org/name"; a path that exists, is absolute, starts with "." or lives under resources/ is local.
    path = Path(model)
    return path.exists() or path.is_absolute() or model.startswith((".", "resources/")) or path.name == LOCAL_LLM_NAME


def resolve_model_path(model: str) -> str:
    """The folder or hub id a backend loads. The packaged SmolLM2 folder is converted on first use for library and
    CLI callers; inside the workflow every rule loading it lists it as an input (ResolvedModel.inputs), so there it
    is always built first by rule build_local_llm, as a planned job."""
    path = Path(model)
    if path.exists():
        return str(path)
    if path.name == LOCAL_LLM_NAME:
        from .packaged import convert_packaged_llm

        return str(convert_packaged_llm(path))
    if _is_local(model):
        raise ConfigError(f"model folder {model!r} does not exist")
    return model  # a hub id: transformers resolves it (offline machines need it in the HF cache)


def generators(synthesis: dict) -> list[dict]:
    """The synthesis section per generator: `synthesis.generators` entries merged over the section (stand_in merged
    key by key), each with its `name` and `share`; without entries, the section itself as one generator.

    Several text-to-image models in one release keep a benchmark from testing one generator's style (ODE)."""
    base = {k: v for k, v in synthesis.items() if k != "generators"}
    entries = synthesis.get("generators") or []
    if not entries:
        return [
            {**base, "name": base["stand_in"]["name"] if base["stand_in"]["enabled"] else base["model"], "share": 1.0}
        ]
    out = []
    for entry in entries:
        merged = {**base, **{k: v for k, v in entry.items() if k != "stand_in"}}
        merged["stand_in"] = {**base["stand_in"], **(entry.get("stand_in") or {})}
        out.append(merged)
    return out


def shard_generators(synthesis: dict, n_shards: int) -> list[dict]:
    """One generator per image shard: shards split by share (largest remainder), in the generators' order."""
    gens = generators(synthesis)
    if len(gens) > n_shards:
        raise ConfigError(
            f"config key 'synthesis.generators': {len(gens)} generators need at least as many image "
            f"shards (shards.images is {n_shards})"
        )
    total = sum(float(g["share"]) for g in gens)
    exact = [n_shards * float(g["share"]) / total for g in gens]
    counts = [max(1, int(e)) for e in exact]
    while sum(counts) < n_shards:
        i = max(range(len(gens)), key=lambda j: exact[j] - counts[j])
        counts[i] += 1
    while sum(counts) > n_shards:
        i = max((j for j in range(len(gens)) if counts[j] > 1), key=lambda j: counts[j] - exact[j])
        counts[i] -= 1
    return [g for g, c in zip(gens, counts) for _ in range(c)]


def stage_model(section: dict, models_cache: str | os.PathLike = MODELS_CACHE) -> str:
    """The model a synthesis / detection backend loads: its stand-in folder, or the configured hub id / path."""
    stand_in = section["stand_in"]
    return str(Path(models_cache) / stand_in["name"]) if stand_in["enabled"] else section["model"]


def detector_kwargs(section: dict, model: str) -> dict:
    """Backend kwargs from the `detection:` config block (workflow-only keys dropped, backend-specific kept)."""
    drop = {"backend", "model", "stand_in", "batch_size", "ultralytics"}
    kwargs = {k: v for k, v in section.items() if k not in drop}
    if section["backend"] == "ultralytics":
        kwargs.update(section.get("ultralytics") or {})
    return {"backend": section["backend"], "model": model, **kwargs}


def stage_model_inputs(section: dict, models_cache: str | os.PathLike = MODELS_CACHE) -> list[str]:
    # A stand-in (or local weights) is a file dependency, so rebuilding it reruns the stage; a hub id is not.
    model = stage_model(section, models_cache)
    return [model] if section["stand_in"]["enabled"] or Path(model).exists() else []


def oracle_members(config: dict) -> list[dict]:
    """CAOS oracle members as model specs: names are looked up in `models:` so one spec serves both roles."""
    by_name = {m["name"]: m for m in config.get("models") or []}
    return [
        dict(by_name[m]) if isinstance(m, str) else {"name": f"oracle-{i}", **m}
        for i, m in enumerate(config["caos"]["oracle"]["members"])
    ]


def any_on_gpu(models=(), llms=(), gpu_available: bool = False, models_cache=MODELS_CACHE) -> bool:
    """Whether a job loading these helper models (oracle members, judges) and LLM blocks needs a GPU."""
    return any(resolve(m, models_cache, gpu_available).gpu for m in models) or any(
        resolve_llm(llm, models_cache, gpu_available).gpu for llm in llms if llm
    )


def judge_models(judges: dict) -> tuple[list[dict], list[dict]]:
    """(model specs, LLM blocks) among judge specs {"llm": block, "vlm": models: entry, "detector": ...}, for
    `any_on_gpu`: the SAMF jobs run their judges in process, so a judge on a GPU moves the job there."""
    return ([judges["vlm"]] if "vlm" in judges else []), ([judges["llm"]] if "llm" in judges else [])


NO_PIXELS = ("blind", "prior")  # backends that never look at the image: no oracle for an image's truth


def oracle_specs(config: dict, names: list[str] | None = None) -> list[dict]:
    """The label audit's oracle model specs (halluflow release audit): `names` from `models:` ([] = no oracle); None: caos.oracle.members, else every
    `models:` entry whose backend looks at the image (not blind, not prior)."""
    by_name = {m["name"]: m for m in config.get("models") or []}
    if names is not None:
        unknown = [n for n in names if n not in by_name]
        if unknown:
            known = ", ".join(sorted(by_name)) or "none in the config"
            raise ConfigError(f"audit oracle {unknown[0]!r}: not a `models:` entry ({known})")
        return [dict(by_name[n]) for n in names]
    members = oracle_members(config) if (config.get("caos") or {}).get("oracle") else []
    return members or [dict(m) for m in config.get("models") or [] if m.get("backend") not in NO_PIXELS]
