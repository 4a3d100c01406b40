"""The typed concept lexicon: what kind of thing a concept is, and what a prompt naming it implies.

`resources/vocab/concepts.tsv` (written by `tools/build_concepts.py` from WordNet 3.0, COCO's categories and
COCO-Stuff's stuff classes; docs/ode.md) gives every concept a graph can hold a kind:
- thing (with a class: person, animal, bird, fish, vehicle, aircraft, watercraft, plant, food, furniture, clothing,
  object): a bounded object a detector can box and whose absence a picture can show;
- stuff (water, sky, ground, vegetation, structure, material: sky, wall, floor, grass, road, table, tree …);
- scene (kitchen, park, airport …), part (wheel, handle, ear …), abstract (sailing, tennis, sound …);
- none: never asked (no noun, ODE's virtual nodes, a misspelling the spelling table corrects).

A "no" object is a thing, never stuff, a scene, a part or an abstract concept, and never implied by the prompt:
a hypernym or hyponym of a prompt object ("dog" beside "puppy"), its whole or part, or what the environment
typically shows ("sea" → water, sky). `resources/vocab/spelling.tsv` corrects misspelt graph words at
graph-building time ("seegull" → seagull) or drops them (an empty correction).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import InputError
from ..resources import resource_path

CONCEPTS = resource_path("vocab/concepts.tsv")
SPELLING = resource_path("vocab/spelling.tsv")
KINDS = ("thing", "stuff", "scene", "part", "abstract", "none", "unknown")
COLUMNS = ("concept", "kind", "class", "synset", "broader", "whole", "typical", "rule")
# why a concept is never a "no" object, by kind (the DATACARD's and docs' wording)
NOT_A_THING = {
    "stuff": "stuff (background a detector cannot rule out)",
    "scene": "a scene",
    "part": "a part of another object",
    "abstract": "not visual",
    "none": "not a noun",
    "unknown": "not in the concept lexicon",
}


@dataclass(frozen=True)
class Concept:
    name: str
    kind: str
    cls: str = ""
    broader: tuple[str, ...] = ()
    whole: tuple[str, ...] = ()
    typical: tuple[str, ...] = ()

    @property
    def thing(self) -> bool:
        return self.kind == "thing"


@lru_cache(maxsize=4)
def read_concepts(path: str | None = None) -> dict[str, Concept]:
    """name → Concept from the shipped lexicon (or another file with the same columns)."""
    path = Path(path) if path else CONCEPTS
    if not path.is_file():
        raise InputError(f"{path}: concept lexicon not found (tools/build_concepts.py writes it)")
    out = {}
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise InputError(f"{path}: not a concept lexicon (tab-separated columns {', '.join(COLUMNS)})")
        for i, row in enumerate(reader, 2):
            if row["kind"] not in KINDS or not row["concept"]:
                raise InputError(f"{path}:{i}: needs a concept and a kind in {', '.join(KINDS)}")
            split = [tuple(filter(None, (row[c] or "").split("|"))) for c in ("broader", "whole", "typical")]
            out[row["concept"]] = Concept(row["concept"], row["kind"], row["class"] or "", *split)
    return out


@lru_cache(maxsize=4)
def read_spelling(path: str | None = None) -> dict[str, str]:
    """wrong → right spelling of graph words ("" = dropped: no English noun, or which one is meant is unclear)."""
    path = Path(path) if path else SPELLING
    if not path.is_file():
        raise InputError(f"{path}: spelling table not found")
    out = {}
    with open(path, encoding="utf-8", newline="") as fh:
        for i, row in enumerate(csv.DictReader(fh, delimiter="\t"), 2):
            if not row.get("wrong"):
                raise InputError(f"{path}:{i}: needs a wrong spelling (and its correction, or none to drop it)")
            out[row["wrong"].strip().lower()] = (row.get("right") or "").strip().lower()
    return out


def concept(name: str, lexicon: dict[str, Concept] | None = None) -> Concept:
    """The lexicon's entry, or an `unknown` one (a name of another graph source: asked "yes", never "no")."""
    lexicon = read_concepts() if lexicon is None else lexicon
    return lexicon.get(name) or Concept(name, "unknown")


class Implications:
    """What a prompt naming some objects implies is in the picture: for each object its hypernyms and hyponyms
    (WordNet, among the lexicon's names), its wholes and parts, and what it typically shows (an environment's
    contents). Inverse relations are indexed once."""

    def __init__(self, lexicon: dict[str, Concept] | None = None):
        self.lexicon = read_concepts() if lexicon is None else lexicon
        self.narrower: dict[str, set[str]] = {}
        self.parts: dict[str, set[str]] = {}
        for c in self.lexicon.values():
            for b in c.broader:
                self.narrower.setdefault(b, set()).add(c.name)
            for w in c.whole:
                self.parts.setdefault(w, set()).add(c.name)
        self._cache: dict[tuple[str, ...], frozenset[str]] = {}

    def of(self, name: str) -> set[str]:
        c = concept(name, self.lexicon)
        return (
            set(c.broader)
            | set(c.whole)
            | set(c.typical)
            | self.narrower.get(name, set())
            | self.parts.get(name, set())
        )

    def implied(self, truth) -> frozenset[str]:
        key = tuple(truth)
        if key not in self._cache:
            self._cache[key] = (
                frozenset(set().union(*(self.of(t) for t in key if t)) - set(key)) if key else frozenset()
            )
        return self._cache[key]


def no_object_problem(name: str, truth=(), implications: Implications | None = None) -> str | None:
    """Why an object may not be asked as absent beside the prompt objects `truth` (None when it may): not a thing,
    or implied by the prompt."""
    implications = implications or _implications()
    c = concept(name, implications.lexicon)
    if not c.thing:
        return NOT_A_THING.get(c.kind, c.kind)
    if name in implications.implied(truth):
        return "implied by the prompt"
    return None


@lru_cache(maxsize=1)
def _implications() -> Implications:
    return Implications()
