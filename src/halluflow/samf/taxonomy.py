"""UniHall hallucination taxonomy ("Unified Hallucination Fuzzing for Multimodal Large Language Models", Appendix
B.2), the digit encoding of instance ids (B.1) and default risk levels per subtype.

Three categories (object / instruction / knowledge), three subtypes each, and the six attribute
subsubtypes. The first digit of an instance_id is the category, the second the subtype.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError


@dataclass(frozen=True)
class Subtype:
    category: str
    name: str
    digit: int
    description: str
    min_instances: int  # B.2's minimum quantity requirement, kept for coverage reports


CATEGORY_DIGITS: dict[str, int] = {"object": 1, "instruction": 2, "knowledge": 3}
CATEGORY_MINIMUM: dict[str, int] = {"object": 1000, "instruction": 500, "knowledge": 500}

SUBTYPES: tuple[Subtype, ...] = (
    Subtype("object", "existence", 1, "objects that do not exist in the input are generated", 200),
    Subtype("object", "attribute", 2, "wrong category/number/spatial/size/state/color of an object", 600),
    Subtype("object", "relation", 3, "fabricated relationships between objects", 200),
    Subtype("instruction", "context", 1, "the user's instruction or context is invented or distorted", 200),
    Subtype("instruction", "failure_to_refuse", 2, "an ill-posed or impossible question is answered", 200),
    Subtype("instruction", "sycophancy", 3, "agrees with an obviously untrue premise of the user", 200),
    Subtype("knowledge", "factual", 1, "facts, mechanisms or knowledge that do not exist", 200),
    Subtype("knowledge", "reference", 2, "fabricated sources or citations", 200),
    Subtype("knowledge", "detail", 3, "plausible but fabricated details (dates, places)", 200),
)

# B.2 lists six attribute subtypes (each >= 100 instances); only `attribute` has subsubtypes.
ATTRIBUTE_SUBSUBTYPES: tuple[str, ...] = ("category", "number", "spatial", "size", "state", "color")

# Spellings used in the paper's tables and prose, mapped to the canonical names above.
SUBTYPE_ALIASES: dict[str, str] = {
    "exist": "existence",
    "attr": "attribute",
    "rel": "relation",
    "ctxt": "context",
    "refuse": "failure_to_refuse",
    "refusal": "failure_to_refuse",
    "failure-to-refuse": "failure_to_refuse",
    "syco": "sycophancy",
    "sycophantic": "sycophancy",
    "fact": "factual",
    "ref": "reference",
}

QUESTION_TYPES: tuple[str, ...] = ("YON", "VQA")

# Risk r in 1..5 ("the potential harm of an incorrect answer", B.1) for instances whose source has none. The paper
# annotates risk per instance and publishes no table; these defaults follow its examples: an object attribute
# (colour) at 1, a failure to refuse at 2; higher where B.2's examples are harmful (a wrong state such as "acute
# bleeding", agreeing with an untrue premise, invented facts or citations). Override per key with samf.risk_levels.
RISK_LEVELS: dict[str, int] = {
    "object/existence": 2,
    "object/attribute": 1,
    "object/attribute/color": 1,
    "object/attribute/category": 2,
    "object/attribute/number": 2,
    "object/attribute/spatial": 2,
    "object/attribute/size": 3,
    "object/attribute/state": 3,
    "object/relation": 2,
    "instruction/context": 2,
    "instruction/failure_to_refuse": 2,
    "instruction/sycophancy": 3,
    "knowledge/factual": 4,
    "knowledge/reference": 4,
    "knowledge/detail": 3,
}


def risk_level(category: str, subtype_name: str, subsubtype: str = "", overrides: dict | None = None) -> int:
    """The most specific entry of `overrides`, then RISK_LEVELS, for category/subtype[/subsubtype]."""
    table = {**RISK_LEVELS, **(overrides or {})}
    base = f"{category}/{canonical_subtype(subtype_name)}"
    for key in ([f"{base}/{subsubtype}"] if subsubtype else []) + [base]:
        if key in table:
            value = int(table[key])
            if not 1 <= value <= 5:
                raise InputError(f"risk level for {key!r}: {value} is not in 1..5")
            return value
    raise InputError(f"no risk level for {base!r}; known: {', '.join(sorted(table))}")


def canonical_subtype(name: str) -> str:
    key = name.strip().lower().replace(" ", "_")
    return SUBTYPE_ALIASES.get(key, key)


def subtype(category: str, name: str) -> Subtype:
    """The Subtype record for (category, name); raises InputError naming both when they do not match B.2."""
    name = canonical_subtype(name)
    for st in SUBTYPES:
        if st.category == category and st.name == name:
            return st
    known = ", ".join(s.name for s in SUBTYPES if s.category == category)
    if category not in CATEGORY_DIGITS:
        raise InputError(f"unknown category {category!r}; known: {', '.join(CATEGORY_DIGITS)}")
    raise InputError(f"subtype {name!r} is not a subtype of {category!r}; known: {known}")


def subtype_by_digits(category_digit: int, subtype_digit: int) -> Subtype:
    for st in SUBTYPES:
        if CATEGORY_DIGITS[st.category] == category_digit and st.digit == subtype_digit:
            return st
    raise InputError(f"no UniHall subtype has digits {category_digit}{subtype_digit}")


def make_instance_id(category: str, name: str, serial: int) -> str:
    """6 digits: category, subtype, then a 4-digit serial within the subtype (B.1)."""
    if not 1 <= serial <= 9999:
        raise InputError(f"instance serial {serial} out of range 1..9999 for {category}/{name}")
    st = subtype(category, name)
    return f"{CATEGORY_DIGITS[category]}{st.digit}{serial:04d}"


def parse_instance_id(instance_id: str) -> tuple[Subtype, int]:
    if not (isinstance(instance_id, str) and len(instance_id) == 6 and instance_id.isdigit()):
        raise InputError(f"instance_id {instance_id!r} is not 6 digits")
    return subtype_by_digits(int(instance_id[0]), int(instance_id[1])), int(instance_id[2:])


def group_key(subtype_name: str, question_type: str) -> str:
    """The (s, q) group a controller policy is learnt for (C.2); also a Snakemake wildcard value."""
    return f"{canonical_subtype(subtype_name)}_{question_type}"
