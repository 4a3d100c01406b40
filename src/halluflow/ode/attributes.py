"""Attribute words of ODE's prompts and questions, cleaned per kind (Tu, Hu, Sang, CVPR 2025, §3.2 attributes;
ODE's code mines them from AMBER's attribute questions, github Iridescent-y/ODE).

The mined words mix parts of speech: AMBER's "Does the person yellow" puts an adjective among actions, "Is the vase 1"
a count among states, and actions are bare verbs ("a swim dog"). `resources/vocab/attribute_words.tsv` gives every
word of the shipped graph its kind (state = adjective, action = verb as a gerund, number = a count, none = left out)
and the form questions and prompts use; words outside it (other graph sources) follow spelling rules.
"""

from __future__ import annotations

import csv
import re
from functools import lru_cache
from pathlib import Path

from ..errors import InputError
from ..resources import resource_path

ATTRIBUTE_WORDS = resource_path("vocab/attribute_words.tsv")
KINDS = ("state", "action", "number", "none")
NUMBER_WORDS = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
)
_VOWELS = "aeiou"


def gerund(verb: str) -> str:
    """English -ing form: sit → sitting, dance → dancing, lie → lying, see → seeing, skiing stays."""
    if verb.endswith("ing") and len(verb) > 4:
        return verb
    if verb.endswith("ie"):
        return verb[:-2] + "ying"
    if verb.endswith("e") and not verb.endswith(("ee", "ye", "oe")) and len(verb) > 2:
        return verb[:-1] + "ing"
    # one-syllable consonant-vowel-consonant verbs double the consonant (run, swim, stop), never w, x or y
    if (
        len(verb) >= 3
        and verb[-1] not in _VOWELS + "wxy"
        and verb[-2] in _VOWELS
        and verb[-3] not in _VOWELS
        and sum(c in _VOWELS for c in verb) == 1
    ):
        return verb + verb[-1] + "ing"
    return verb + "ing"


def number_word(n: int) -> str | None:
    return NUMBER_WORDS[n] if 0 <= n < len(NUMBER_WORDS) else None


@lru_cache(maxsize=4)
def read_attribute_words(path: str | None = None) -> dict[str, tuple[str, str]]:
    """word → (kind, form) from the shipped table (or another with the same columns)."""
    path = Path(path) if path else ATTRIBUTE_WORDS
    if not path.exists():
        raise InputError(f"{path}: attribute word table not found")
    table = {}
    with open(path, encoding="utf-8", newline="") as fh:
        for i, row in enumerate(csv.DictReader(fh, delimiter="\t"), 2):
            kind = row.get("kind")
            if kind not in KINDS or not row.get("word"):
                raise InputError(f"{path}:{i}: needs a word and a kind in {', '.join(KINDS)}")
            table[row["word"]] = (kind, row.get("form") or "")
    return table


def clean_word(word: str, mined_kind: str, table: dict | None = None) -> tuple[str, str] | None:
    """(kind, form) of a mined attribute word, or None when it cannot be asked about (a count, a noun, ...)."""
    table = read_attribute_words() if table is None else table
    if word in table:
        kind, form = table[word]
        return (kind, form) if kind in ("state", "action") else None
    if not re.fullmatch(r"[a-z]+(-[a-z]+)?", word or "") or word in NUMBER_WORDS:
        return None
    if mined_kind == "action":
        return "action", gerund(word)
    return "state", word


def clean_pair(pair: str, mined_kind: str, table: dict | None = None) -> tuple[str, str, str | None] | None:
    """(form, kind, contrast form) of a mined "true/contrast" pair; the contrast is kept only when it is a
    different word of the same kind (so "Is the car red?" / "Is the car blue?", never a state against an action)."""
    word, _, contrast = pair.partition("/")
    cleaned = clean_word(word, mined_kind, table)
    if cleaned is None:
        return None
    kind, form = cleaned
    other = clean_word(contrast, mined_kind, table) if contrast else None
    return form, kind, (other[1] if other and other[0] == kind and other[1] != form else None)


def node_attribute_forms(node: dict, table: dict | None = None) -> set[str]:
    """Every cleaned word an object has in the graph, either kind, either side of a pair."""
    out = set()
    for kind in ("state", "action"):
        for pair in node.get(f"{kind}_pairs") or []:
            for word in pair.split("/"):
                cleaned = clean_word(word, kind, table) if word else None
                if cleaned:
                    out.add(cleaned[1])
    return out


# ------------------------------------------------------------------------------------- what an attribute fits
ATTRIBUTE_TYPES = resource_path("vocab/attribute_types.tsv")
# class groups of the `fits` column (classes: halluflow.ode.concepts)
CLASS_GROUPS = {
    "vehicles": ("vehicle", "aircraft", "watercraft"),
    "things-made": ("vehicle", "aircraft", "watercraft", "furniture", "clothing", "object", "structure", "material",
                    "part"),
    "things": ("person", "animal", "bird", "fish", "vehicle", "aircraft", "watercraft", "plant", "food", "furniture",
               "clothing", "object"),
    "stuff": ("water", "sky", "ground", "vegetation", "structure", "material"),
}  # fmt: skip
# what an environment in the prompt makes true of every object in it: never asked as a counterfactual "no"
IMPLIED_BY_ENVIRONMENT = {
    **dict.fromkeys(("sea", "ocean", "lake", "river", "pond", "water", "waterfall", "swamp", "rain", "surf"), ("wet",)),
    **dict.fromkeys(("snow", "glacier"), ("wet",)),
    "desert": ("dry",),
}


class AttributeType(tuple):
    """(type, exclusive, fits, near) of one attribute form."""

    @property
    def type(self) -> str:
        return self[0]

    @property
    def exclusive(self) -> bool:
        return self[1]

    @property
    def fits(self) -> frozenset[str]:
        return self[2]

    @property
    def near(self) -> frozenset[str]:
        return self[3]


@lru_cache(maxsize=4)
def read_attribute_types(path: str | None = None) -> dict[str, AttributeType]:
    """form → AttributeType from the shipped typed attribute lexicon (resources/vocab/attribute_types.tsv): the
    attribute's type (colour, posture, locomotion, activity, emotion-like temper …), whether a value of the type
    rules out the others (a red car is not blue; a sitting person may laugh), the object classes it fits, and the
    values too near it to be a reliable "no" (blue / azure)."""
    path = Path(path) if path else ATTRIBUTE_TYPES
    if not path.exists():
        raise InputError(f"{path}: typed attribute lexicon not found")
    out = {}
    with open(path, encoding="utf-8", newline="") as fh:
        for i, row in enumerate(csv.DictReader(fh, delimiter="\t"), 2):
            if not row.get("form") or not row.get("type"):
                raise InputError(f"{path}:{i}: needs a form and a type")
            fits = set()
            for name in filter(None, (row.get("fits") or "").split(",")):
                fits |= set(CLASS_GROUPS.get(name, (name,)))
            near = frozenset(filter(None, (row.get("near") or "").split(",")))
            out[row["form"]] = AttributeType((row["type"], row.get("exclusive") == "yes", frozenset(fits), near))
    return out


def attribute_fit_problem(form: str, cls: str, kind: str, types: dict | None = None) -> str | None:
    """Why an attribute form makes no sense of an object of class `cls` (None when it does): a vague word no
    picture settles, an action for something that cannot do it ("Is the truck hiking?"), an emotion for an object
    ("Is the chair gloomy?"), a food state for an animal ("Is the cat unappetizing?")."""
    types = read_attribute_types() if types is None else types
    entry = types.get(form)
    if entry is None:  # a word of another graph source the typed lexicon lacks: not judged (its form is)
        return None
    if not entry.fits:
        return f"{form!r} is {entry.type}: no picture settles it"
    if cls and cls not in entry.fits:  # a concept the lexicon does not type (another graph source): not judged
        return f"{kind} {form!r} ({entry.type}) does not fit a {cls or 'concept of unknown class'}"
    return None


def counterfactual_forms(
    own: str, cls: str, words: list[str], exclude: set[str], implied: set[str], types: dict | None = None
) -> list[str]:
    """The words a counterfactual attribute question may ask beside the prompt's own attribute `own` of an object
    of class `cls`: of the same exclusive type (the image shows a red car, so "blue" is a reliable "no"; a sitting
    person may well be laughing, so activities are never counterfactuals), fitting the class, not too near `own`,
    not in `exclude` (the object's own words) and not implied by the prompt's environment."""
    types = read_attribute_types() if types is None else types
    mine = types.get(own)
    if mine is None or not mine.exclusive:
        return []
    return [
        w
        for w in words
        if w != own
        and w not in exclude
        and w not in implied
        and w not in mine.near
        and (t := types.get(w)) is not None
        and t.type == mine.type
        and own not in t.near
        and (cls in t.fits or not cls)
    ]
