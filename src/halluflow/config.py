"""Load and validate the workflow config against schemas/config.schema.yaml (JSON Schema 2020-12).

Validation fills in schema defaults and stops with a one-line message naming the offending key
(`config key 'sampling.sizes.standard': 'ten' is not of type 'integer'`) before any job runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator, validators

from .errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = Path(os.environ.get("HALLUFLOW_SCHEMA", REPO_ROOT / "schemas" / "config.schema.yaml"))


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
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


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


def validate_config(config: dict, schema: dict | None = None) -> dict:
    """Validate in place (filling defaults) and return `config`; raise ConfigError naming the key."""
    schema = schema if schema is not None else load_schema()
    validator = _DefaultFillingValidator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        raise ConfigError(_message(errors[0]))
    return config


def load_config(path: str | os.PathLike) -> dict:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {path} not found")
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: the config must be a mapping of keys to values")
    return validate_config(config)


def section(config: dict, dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        node = node[part]
    return node
