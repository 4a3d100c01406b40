"""UniHall instance schema (UniHall/SAMF paper, Appendix B.1), validated on load.

Every error names the instance_id (or its position in the file) and the offending field. On top of the
JSON schema we check what a schema cannot: the id's digits agree with meta_inf, YON truths are Yes/No.
halluflow extensions, all optional: `visual_facts` (V of BHR's evidence sets) and extra keys in mutation_inf.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from ..errors import InputError
from ..io import read_json, write_json
from .taxonomy import ATTRIBUTE_SUBSUBTYPES, CATEGORY_DIGITS, QUESTION_TYPES, group_key, parse_instance_id, subtype

_STR_LIST = {"type": "array", "items": {"type": "string"}}

INSTANCE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "UniHall instance",
    "type": "object",
    "required": ["instance_id", "meta_inf", "source_inf", "seed_data"],
    "additionalProperties": False,
    "properties": {
        "instance_id": {"type": "string", "pattern": r"^[1-3][1-9]\d{4}$"},
        "meta_inf": {
            "type": "object",
            "required": ["category", "subtype", "risk_level"],
            "additionalProperties": False,
            "properties": {
                "category": {"enum": sorted(CATEGORY_DIGITS)},
                "subtype": {"type": "string", "minLength": 1},
                "subsubtype": {"type": "string"},
                "risk_level": {"type": "integer", "minimum": 1, "maximum": 5},
            },
        },
        "source_inf": {
            "type": "object",
            "required": ["source_dataset", "source_id"],
            "properties": {"source_dataset": {"type": "string"}, "source_id": {"type": "string"}},
        },
        "seed_data": {
            "type": "object",
            "required": ["type", "image_path", "question", "ground_truth"],
            "additionalProperties": False,
            "properties": {
                "type": {"enum": list(QUESTION_TYPES)},
                "image_path": {"type": "string", "minLength": 1},
                "question": {"type": "string", "minLength": 1},
                "ground_truth": {"type": "string", "minLength": 1},
                "expected_other_answers": _STR_LIST,
                "negative_answers": _STR_LIST,
            },
        },
        "mutation_inf": {
            "type": "object",
            "properties": {
                "image_operators_applied": _STR_LIST,
                "text_operators_applied": _STR_LIST,
                "mutated_image_path": {"type": ["string", "null"]},
                "mutated_text": {"type": "string"},
                "mutated_ground_truth": {"type": "string"},
            },
        },
        "evidence": _STR_LIST,
        "visual_facts": _STR_LIST,
    },
}

_VALIDATOR = Draft202012Validator(INSTANCE_SCHEMA)


def _label(raw: Any, index: int | None) -> str:
    iid = raw.get("instance_id") if isinstance(raw, dict) else None
    if isinstance(iid, str):
        return f"instance {iid}"
    return f"instance #{index}" if index is not None else "instance"


def validate_instance(raw: Any, index: int | None = None) -> dict:
    """Return `raw` if it is a valid UniHall instance; otherwise raise InputError naming instance and field."""
    label = _label(raw, index)
    if not isinstance(raw, dict):
        raise InputError(f"{label}: expected a JSON object, got {type(raw).__name__}")
    errors = sorted(_VALIDATOR.iter_errors(raw), key=lambda e: (len(e.absolute_path), str(list(e.absolute_path))))
    if errors:
        err = errors[0]
        field = ".".join(str(p) for p in err.absolute_path) or "<instance>"
        raise InputError(f"{label}: field {field!r}: {err.message}")
    meta, seed = raw["meta_inf"], raw["seed_data"]
    try:
        st = subtype(meta["category"], meta["subtype"])
    except InputError as exc:
        raise InputError(f"{label}: field 'meta_inf.subtype': {exc}") from None
    id_subtype, _ = parse_instance_id(raw["instance_id"])
    if id_subtype != st:
        raise InputError(
            f"{label}: field 'instance_id': digits {raw['instance_id'][:2]} encode "
            f"{id_subtype.category}/{id_subtype.name} but meta_inf says {st.category}/{st.name}"
        )
    sub = meta.get("subsubtype", "")
    if sub and st.name == "attribute" and sub not in ATTRIBUTE_SUBSUBTYPES:
        raise InputError(
            f"{label}: field 'meta_inf.subsubtype': {sub!r} is not one of {', '.join(ATTRIBUTE_SUBSUBTYPES)}"
        )
    if seed["type"] == "YON":
        if seed["ground_truth"].strip().lower() not in ("yes", "no"):
            raise InputError(
                f"{label}: field 'seed_data.ground_truth': a YON instance needs Yes or No, got {seed['ground_truth']!r}"
            )
    return raw


def validate_instances(items: Any, source: str = "instances") -> list[dict]:
    if not isinstance(items, list):
        raise InputError(f"{source}: expected a JSON array of UniHall instances")
    seen: set[str] = set()
    for i, raw in enumerate(items):
        validate_instance(raw, i)
        iid = raw["instance_id"]
        if iid in seen:
            raise InputError(f"{source}: instance {iid}: field 'instance_id': duplicated")
        seen.add(iid)
    return items


def load_instances(path: str | os.PathLike) -> list[dict]:
    """A UniHall file is a JSON array of instances (a single object is accepted as a one-item file)."""
    data = read_json(path)
    if isinstance(data, dict):
        data = [data]
    return validate_instances(data, str(path))


def write_instances(path: str | os.PathLike, items: list[dict]) -> None:
    validate_instances(items, str(path))
    write_json(Path(path), sorted(items, key=lambda r: r["instance_id"]))


def truth_answers(instance: dict) -> list[str]:
    """G: the ground truth plus its accepted variants."""
    seed = instance["seed_data"]
    return [seed["ground_truth"], *seed.get("expected_other_answers", [])]


def negative_answers(instance: dict) -> list[str]:
    """N: annotated plausible-but-wrong answers; a YON item's negative is the opposite of its truth."""
    seed = instance["seed_data"]
    negatives = list(seed.get("negative_answers", []))
    if seed["type"] == "YON" and not negatives:
        negatives = ["No" if seed["ground_truth"].strip().lower() == "yes" else "Yes"]
    return negatives


def group_of(instance: dict) -> str:
    return group_key(instance["meta_inf"]["subtype"], instance["seed_data"]["type"])
