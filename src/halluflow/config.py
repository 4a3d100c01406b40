"""Load and validate the workflow config against schemas/config.schema.yaml (JSON Schema 2020-12).

Validation fills in schema defaults and stops with a one-line message naming the offending key
(`config key 'sampling.sizes.standard': 'ten' is not of type 'integer'`) before any job runs. After the schema
(types, ranges, name patterns) come the checks a schema cannot express: unique model names, cross-references between
sections (cedi.models, samf.models, caos.oracle.members, the LLM a judge or examiner needs). Which stages can run on
the configured answer source is planning, not validation: halluflow.plan.stage_plan.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator, validators

from .errors import ConfigError
from .resources import schema_path, workflow_input

SCHEMA_PATH = Path(os.environ.get("HALLUFLOW_SCHEMA") or schema_path())
SEED_TABLES = ("nodes.tsv", "edges.tsv")  # what rule build_graph reads of a seed folder
SEED_HALLU = "hallu_edges.tsv"  # G_H of a seed folder: read by build_graph when the folder has it
# Shipped tables that shape the scenes, prompts and questions (halluflow.ode.nouns, halluflow.ode.attributes and
# CHAIR's synonym table of ode.queries / ode.scoring): workflow inputs of the rules that read them, so editing one
# reruns those steps, and hashed in the release manifest.
QUESTION_RESOURCES = {
    "nouns": "vocab/nouns.tsv",
    "attribute_words": "vocab/attribute_words.tsv",
    "synonyms": "caos/coco_synonyms.tsv",
    # what a "no" object may be and what a prompt implies; what each attribute fits; misspelt graph words
    "concepts": "vocab/concepts.tsv",
    "attribute_types": "vocab/attribute_types.tsv",
    "spelling": "vocab/spelling.tsv",
}


def _extend_with_defaults(validator_class):
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub and key not in instance:
                    instance[key] = _copy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": set_defaults})


def _copy(value):
    import copy

    return copy.deepcopy(value)


_DefaultFillingValidator = _extend_with_defaults(Draft202012Validator)


def load_schema(path: str | os.PathLike = SCHEMA_PATH) -> dict:
    # libyaml's safe loader when PyYAML has it: same result, ~14x faster on this 60 kB schema, which every
    # snakemake call loads while parsing the workflow
    with open(path, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _key_path(error) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "<top level>"


def _message(error) -> str:
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        prefix = _key_path(error)
        names = ", ".join(f"{prefix}.{k}" if prefix != "<top level>" else k for k in extra)
        return f"config key {names!r}: unknown key (allowed here: {', '.join(allowed)})"
    return f"config key {_key_path(error)!r}: {error.message}"


MAX_CONFIG_DEPTH = 32  # the schema nests 7 deep; deeper data is a mistake or an attack
MAX_CONFIG_VALUES = 200_000  # values once YAML aliases are expanded; a paper config has under 2,000
MAX_CONFIG_INT = 2**63  # |integer| below this: seeds, sizes and counts fit a 64-bit integer
MAX_CONFIG_BYTES = 16 << 20


def _dotted(path: tuple[str, ...], show: int = 8) -> str:
    return ".".join(path[:show]) + (f"... ({len(path)} levels)" if len(path) > show else "") or "<top level>"


def check_shape(config: Any) -> None:
    """Refuse in one line, naming the key, what the schema cannot check or would choke on: NaN (it passes every
    minimum/maximum: every comparison with NaN is false), an integer of 2**63 or more, nesting deeper than
    MAX_CONFIG_DEPTH, a value that contains itself, and YAML aliases expanding to more than MAX_CONFIG_VALUES values
    (a "billion laughs" document). Each shared (aliased) value is walked once, without recursion, so the check is
    linear in the size of the YAML text whatever it expands to."""
    expanded: dict[int, int] = {}  # id -> values under it once expanded (a shared node is counted, not re-walked)
    height: dict[int, int] = {}  # id -> levels of containers it holds, itself included, once expanded
    open_ids: set[int] = set()
    stack: list[tuple[Any, tuple[str, ...], bool]] = [(config, (), False)]
    keep = []  # the walked containers stay referenced, so their ids are not reused while the walk runs
    while stack:
        node, path, done = stack.pop()
        if isinstance(node, float) and node != node:
            raise ConfigError(f"config key {_dotted(path)!r}: .nan is not a number (give a value in the key's range)")
        if isinstance(node, int) and not isinstance(node, bool) and abs(node) >= MAX_CONFIG_INT:
            digits = len(str(abs(node))) if abs(node) < 10**4000 else "thousands of"
            raise ConfigError(
                f"config key {_dotted(path)!r}: a {digits}-digit integer is out of range (at most 2**63 - 1)"
            )
        if not isinstance(node, (dict, list)):
            continue
        key = id(node)
        children = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        if done:
            open_ids.discard(key)
            expanded[key] = 1 + sum(expanded.get(id(v), 1) for _, v in children)
            height[key] = 1 + max((height.get(id(v), 0) for _, v in children), default=0)
            if len(path) + height[key] > MAX_CONFIG_DEPTH + 1:  # aliases nested in aliases count at full depth
                raise ConfigError(
                    f"config key {_dotted(path)!r}: nested deeper than {MAX_CONFIG_DEPTH} levels once its aliases "
                    "are expanded"
                )
            if expanded[key] > MAX_CONFIG_VALUES:
                raise ConfigError(
                    f"config key {_dotted(path)!r}: expands to more than {MAX_CONFIG_VALUES:,} values (YAML "
                    "aliases repeating aliases: a 'billion laughs' document?); write the values out"
                )
            continue
        if key in open_ids:
            raise ConfigError(f"config key {_dotted(path)!r}: contains itself (a YAML alias to an enclosing value)")
        if key in expanded:
            continue  # an alias of a value already walked
        if len(path) > MAX_CONFIG_DEPTH:
            raise ConfigError(f"config key {_dotted(path)!r}: nested deeper than {MAX_CONFIG_DEPTH} levels")
        open_ids.add(key)
        keep.append(node)
        stack.append((node, path, True))
        for name, value in reversed(children):
            stack.append((value, (*path, str(name)), False))


def validate_config(config: dict, schema: dict | None = None) -> dict:
    """Validate in place (filling defaults) and return `config`; raise ConfigError naming the key."""
    check_shape(config)
    schema = schema if schema is not None else load_schema()
    validator = _DefaultFillingValidator(schema)
    errors = sorted(
        validator.iter_errors(config), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path)))
    )
    if errors:
        raise ConfigError(_message(errors[0]))
    check_semantics(config)
    return config


# Methods evaluating models under test; each has `<method>.models` or (caos, diagnosis) runs every model.
METHODS = ("caos", "diagnosis", "cedi", "samf")
LLM_BACKENDS = ("transformers", "openai")


def check_semantics(config: dict) -> None:
    """Cross-key checks of a schema-valid config; ConfigError names the key."""
    names: dict[str, int] = {}
    for i, spec in enumerate(config.get("models") or []):
        name = spec["name"]
        if name in names:
            raise ConfigError(
                f"config key 'models.{i}.name': duplicate model name {name!r} (also models.{names[name]})"
            )
        names[name] = i
    for method in ("cedi", "samf"):
        chosen = (config.get(method) or {}).get("models")
        if isinstance(chosen, str) and chosen != "all":
            raise ConfigError(f"config key '{method}.models': {chosen!r}: expected all, null or a list of model names")
        for j, name in enumerate(chosen if isinstance(chosen, list) else []):
            if name not in names:
                raise ConfigError(
                    f"config key '{method}.models.{j}': no model named {name!r} in models "
                    f"(models: {', '.join(names) or 'none'}; use all for every model)"
                )
    for j, member in enumerate(config["caos"]["oracle"]["members"]):
        if isinstance(member, str) and member not in names:
            raise ConfigError(f"config key 'caos.oracle.members.{j}': no model named {member!r} in models")
        if isinstance(member, dict) and "backend" not in member:
            raise ConfigError(f"config key 'caos.oracle.members.{j}': an inline member needs a backend")
    for section in ("caos", "cedi"):
        spec = (config.get(section) or {}).get("llm")
        if spec is not None and spec.get("backend") not in LLM_BACKENDS:
            raise ConfigError(
                f"config key '{section}.llm.backend': {spec.get('backend')!r}: expected one of "
                f"{', '.join(LLM_BACKENDS)} (or set {section}.llm to null for the top-level llm)"
            )
    source = config["answer"]["source"]
    required = {"pope": ("path", "images"), "amber": ("path", "images", "annotations"), "coco": ("path", "annotations")}
    for key in required.get(source.get("kind"), ()):
        if not source.get(key):
            raise ConfigError(f"config key 'answer.source.{key}': required for a {source['kind']} source")
    if source.get("kind") == "coco" and config["caos"]["frequent"] == "graph":
        raise ConfigError(
            "config key 'caos.frequent': 'graph' needs this config's ODE graph, which a coco source "
            "does not build (use coco or a frequency list)"
        )
    samf = config.get("samf") or {}
    if "vlm" in (samf.get("judge"), samf.get("verifier")) and samf.get("judge_model") not in names:
        raise ConfigError(
            f"config key 'samf.judge_model': {samf.get('judge_model')!r} is not a model in models "
            f"(samf.judge or samf.verifier is vlm; models: {', '.join(names) or 'none'})"
        )
    cedi = config.get("cedi") or {}
    if cedi["source"] != "ode":  # validated: the schema filled in its default
        for key in ("scene_graphs", "images_dir"):
            if not cedi.get(key):
                raise ConfigError(f"config key 'cedi.{key}': required when cedi.source is {cedi['source']}")
    scoring = config.get("scoring") or {}
    if scoring.get("parser") in ("lmms_eval", "vlmevalkit", "pope_official") and scoring.get("positive") == "no":
        raise ConfigError(
            f"config key 'scoring.positive': 'no' with parser {scoring['parser']}, a peer parser that scores as its "
            "peer does, whose positive class is always yes"
        )
    samf_source = config["samf"]["source"]
    if samf_source.get("format") == "unihall" and not samf_source.get("path"):
        raise ConfigError("config key 'samf.source.path': required for a unihall source")


def method_models(config: dict, method: str) -> list[str]:
    """Names of the models `method` evaluates: its `models` list, or every model not skipping it."""
    chosen = (config.get(method) or {}).get("models")
    if isinstance(chosen, list):
        return list(chosen)
    return [m["name"] for m in config.get("models") or [] if method not in (m.get("skip") or [])]


def method_llm(config: dict, section: str, *keys: str) -> dict | None:
    """The LLM block a method loads when one of its `keys` (extractor, question_writer, parser...) is `llm`: the
    method's own `llm:` block, else the top-level one; None when it uses no LLM."""
    method = config[section]
    if not any(method.get(k) == "llm" for k in keys):
        return None
    return method.get("llm") or config["llm"]


class _ConfigLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML's safe loader refusing a key given twice in one mapping (plain YAML keeps the last without a word)."""


def _construct_mapping(loader, node, deep=False):
    seen: dict = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=deep)
        try:
            if key in seen:
                raise _DuplicateKey(key, key_node.start_mark.line + 1, seen[key])
            seen[key] = key_node.start_mark.line + 1
        except TypeError:  # an unhashable key: the constructor below says so
            pass
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


class _DuplicateKey(Exception):
    def __init__(self, key, line: int, first: int):
        super().__init__(key, line, first)
        self.key, self.line, self.first = key, line, first


_ConfigLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_config_text(text: str, shown: str) -> Any:
    """The YAML of a config file, `shown` naming it in the one-line ConfigError (invalid YAML, a duplicate key,
    nesting too deep to read)."""
    try:
        return yaml.load(text, Loader=_ConfigLoader)
    except _DuplicateKey as dup:
        raise ConfigError(
            f"{shown}: line {dup.line}: key {str(dup.key)[:80]!r} given twice in one mapping (first on line "
            f"{dup.first}); YAML would silently keep the last"
        ) from None
    except yaml.YAMLError as exc:
        problem, mark = getattr(exc, "problem", None), getattr(exc, "problem_mark", None)
        if problem and mark is not None:
            reason = f"line {mark.line + 1}: {problem}"
        else:
            reason = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{shown}: not valid YAML ({reason[:200]})") from None
    except RecursionError:
        raise ConfigError(f"{shown}: nested too deeply to read (a config nests a few levels)") from None


def read_config_file(path: str | os.PathLike) -> dict:
    """One config file as a mapping, not yet validated (the workflow's config.yaml, a --configfile layer): UTF-8
    YAML of at most MAX_CONFIG_BYTES, no key twice in one mapping, and the shape check_shape accepts (aliases walked
    once, bounded depth and integers). ConfigError in one line naming the file otherwise."""
    from .errors import InputError
    from .io import decode_utf8, read_bytes

    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise ConfigError(f"config file {path} not found")
    try:
        text = decode_utf8(read_bytes(path, MAX_CONFIG_BYTES), f"config file {path}")
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    config = parse_config_text(text, str(path)) or {}
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: the config must be a mapping of keys to values")
    try:
        check_shape(config)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return config


def merge_config(base: dict, layer: dict) -> dict:
    """`layer` over `base` as Snakemake merges config files: mappings key by key, every other value (lists too)
    replaced whole. Returns a new mapping; neither argument is changed."""
    out = dict(base)
    for key, value in layer.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merge_config(out[key], value) if both else copy.deepcopy(value)
    return out


def load_config(path: str | os.PathLike) -> dict:
    return validate_config(read_config_file(path))


def section(config: dict, dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        node = node[part]
    return node


def question_resource_files(config: dict | None = None) -> dict[str, str]:
    """The QUESTION_RESOURCES as workflow inputs (the checkout's resources/ or the installed files), plus the
    category table of a domain release (`ode.domain.categories`: COCO's shipped table or the user's file)."""
    files = {key: workflow_input(name) for key, name in QUESTION_RESOURCES.items()}
    domain = ((config or {}).get("ode") or {}).get("domain") or {}
    if domain.get("categories"):
        table = domain.get("category_table") or "coco"
        files["domain_categories"] = workflow_input("vocab/coco_supercategories.tsv") if table == "coco" else table
    return files


def graph_source_files(config: dict) -> list[str]:
    """Annotation files rule build_graph reads, so editing one reruns the graph (and everything after it)."""
    graph = config["ode"]["graph"]
    files = [graph["environments"] or workflow_input("vocab/environments.txt")]
    for source in [graph["source"], *graph["extra_sources"]]:
        if source["format"] == "seed":
            seed_dir = source["path"]  # null: the shipped seed
            files += [f"{seed_dir}/{n}" if seed_dir else workflow_input(f"graph_seed/{n}") for n in SEED_TABLES]
            if not seed_dir:
                files.append(workflow_input(f"graph_seed/{SEED_HALLU}"))
            elif Path(seed_dir, SEED_HALLU).is_file():
                files.append(f"{seed_dir}/{SEED_HALLU}")
        else:
            files += [p for p in (source["path"], source["attribute_queries"], source["attributes"]) if p]
    return files
