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
