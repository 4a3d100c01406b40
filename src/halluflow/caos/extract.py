"""Object extraction from captions in generation order (CAOS, seed 001: "LLM-augmented object identification").

A vocabulary matcher (COCO 80 + CHAIR synonyms, plus the release's concept-graph nodes; multi-word objects, plurals)
finds in-domain objects; an optional LLM (the `llm` registry) adds out-of-domain objects through a strict JSON reply.
When the reply does not parse, the vocabulary result is used alone. Every object records which extractor found it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from ..errors import InputError

_TOKEN = re.compile(r"[a-z0-9]+")

# Irregular plurals common in captions; the regular rules below cover the rest.
IRREGULAR_PLURALS = {
    "person": ["people", "persons"],
    "man": ["men"],
    "woman": ["women"],
    "child": ["children"],
    "mouse": ["mice"],
    "foot": ["feet"],
    "tooth": ["teeth"],
    "goose": ["geese"],
    "ox": ["oxen"],
    "knife": ["knives"],
    "leaf": ["leaves"],
    "loaf": ["loaves"],
    "shelf": ["shelves"],
    "wolf": ["wolves"],
    "calf": ["calves"],
    "half": ["halves"],
    "scarf": ["scarves", "scarfs"],
    "life": ["lives"],
    "wife": ["wives"],
    "cactus": ["cacti", "cactuses"],
    "fungus": ["fungi"],
    "glasses": ["glasses"],
}
# Same form in singular and plural: no extra surface needed, listed so no wrong "-s" form is added.
UNCHANGED_PLURALS = {"sheep", "deer", "fish", "aircraft", "series", "species", "moose", "bison", "skis", "scissors"}


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def plural_forms(word: str) -> list[str]:
    """Plural surface forms of one English noun (regular rules + a small irregular table)."""
    if word in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[word]
    if word in UNCHANGED_PLURALS or not word:
        return []
    if re.search(r"(s|x|z|ch|sh)$", word):
        return [word + "es"]
    if re.search(r"[^aeiou]y$", word):
        return [word[:-1] + "ies"]
    if re.search(r"[^aeiou]o$", word):
        return [word + "es", word + "s"]  # tomatoes, but also photos / pianos
    return [word + "s"]


@dataclass(frozen=True)
class Mention:
    canonical: str
    surface: str
    token_index: int


class Vocabulary:
    """Surface forms (token tuples) → canonical object; first source added wins a surface (graph before COCO)."""

    def __init__(self) -> None:
        self.surfaces: dict[tuple[str, ...], str] = {}
        self.source_of: dict[str, str] = {}
        self.max_len = 0

    def add(self, surface: str, canonical: str, source: str) -> None:
        toks = tuple(tokens(surface))
        if not toks:
            return
        canonical = " ".join(tokens(canonical))
        self.source_of.setdefault(canonical, source)
        variants = [toks] + [toks[:-1] + (p,) for p in plural_forms(toks[-1])]
        for v in variants:
            # setdefault: an earlier (more specific) source keeps the surface, e.g. graph node "table" over COCO's
            # "table" → "dining table".
            self.surfaces.setdefault(v, canonical)
            self.max_len = max(self.max_len, len(v))

    def add_terms(self, terms: Iterable[str], source: str) -> "Vocabulary":
        for t in terms:
            self.add(t, t, source)
        return self

    def __contains__(self, canonical: str) -> bool:
        return " ".join(tokens(canonical)) in self.source_of

    def __len__(self) -> int:
        return len(self.source_of)

    def canonical(self, phrase: str) -> str | None:
        """Canonical object for a whole phrase ("puppies" → "dog"), or None when it is not in the vocabulary."""
        return self.surfaces.get(tuple(tokens(phrase)))

    def normalise(self, phrase: str) -> str:
        """Canonical name when known, else the lower-cased phrase: how truth lists and LLM objects are compared."""
        return self.canonical(phrase) or " ".join(tokens(phrase))

    def match(self, text: str) -> list[Mention]:
        """Greedy longest match left to right, so "hot dog" is one object and not "dog".

        Like CHAIR, the matcher does not read negation ("no dog" is a mention of dog); the LLM extractor is told
        to leave absent objects out.
        """
        toks = tokens(text)
        out: list[Mention] = []
        i = 0
        while i < len(toks):
            for n in range(min(self.max_len, len(toks) - i), 0, -1):
                key = tuple(toks[i : i + n])
                if key in self.surfaces:
                    out.append(Mention(self.surfaces[key], " ".join(key), i))
                    i += n
                    break
            else:
                i += 1
        return out


def default_chair_synonyms() -> Path | None:
    """CHAIR's synonym table: the derived table we ship (same on every machine, so results do not depend on what
    sits beside the clone), else ../shared/data's copy."""
    repo = Path(__file__).resolve().parents[3]
    for candidate in (
        repo / "resources" / "caos" / "coco_synonyms.tsv",
        repo.parent / "shared" / "data" / "chair-lisaanne-hallucination" / "chair_synonym_to_category.tsv",
    ):
        if candidate.exists():
            return candidate
    return None


def read_synonym_table(path: str | Path) -> list[tuple[str, str]]:
    """(synonym, category) pairs from a TSV with a header holding `synonym` and `coco_category` columns."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: synonym table not found")
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise InputError(f"{path}: empty synonym table")
    header = lines[0].split("\t")
    try:
        s_col, c_col = header.index("synonym"), header.index("coco_category")
    except ValueError:
        raise InputError(f"{path}: header must have 'synonym' and 'coco_category' columns, got {header}") from None
    pairs = []
    for lineno, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) <= max(s_col, c_col):
            raise InputError(f"{path}:{lineno}: expected {len(header)} tab-separated columns")
        pairs.append((cells[s_col].strip(), cells[c_col].strip()))
    return pairs


def derive_synonym_table(source: str | Path, target: str | Path) -> int:
    """Write resources/caos/coco_synonyms.tsv from CHAIR's synonym table (see resources/README.md); returns rows."""
    from ..io import write_text

    pairs = read_synonym_table(source)
    seen: set[str] = set()
    lines = ["synonym\tcoco_category"]
    for syn, cat in pairs:
        if syn.lower() not in seen:
            seen.add(syn.lower())
            lines.append(f"{syn.lower()}\t{cat}")
    write_text(target, "\n".join(lines) + "\n")
    return len(lines) - 1


def build_vocabulary(
    graph_terms: Iterable[str] = (),
    synonyms: str | Path | None | bool = True,
    extra_terms: Iterable[str] = (),
) -> Vocabulary:
    """Vocabulary = graph nodes (the release's concepts) first, then COCO categories + CHAIR synonyms.

    `synonyms`: a path, True for the default table (see default_chair_synonyms), False/None for none.
    """
    vocab = Vocabulary()
    vocab.add_terms(graph_terms, "graph")
    vocab.add_terms(extra_terms, "extra")
    if synonyms is True:
        synonyms = default_chair_synonyms()
    if synonyms:
        pairs = read_synonym_table(synonyms)
        # Category names first so that a category is always its own canonical form.
        vocab.add_terms(sorted({c for _, c in pairs}), "coco")
        for syn, cat in pairs:
            vocab.add(syn, cat, "coco")
    return vocab


# ---- the LLM-augmented extractor -------------------------------------------------------------------------------

LLM_SYSTEM = (
    "You extract the physical objects mentioned in an image caption: things, animals, people, plants and places such "
    "as a beach, in the order they first appear, as singular nouns, leaving out objects the caption says are absent. "
    'You reply with JSON only, in the form {"objects": [...]}.'
)
LLM_USER = 'Caption: "{caption}"'
# One worked example as a previous turn: small instruct models copy a literal format template ("first object")
# but follow a demonstrated answer.
LLM_EXAMPLE = (
    LLM_USER.format(caption="A cat sleeps on a red bed beside two windows, with no dog around."),
    '{"objects": ["cat", "bed", "window"]}',
)


def llm_messages(caption: str) -> list[dict]:
    return [
        {"role": "system", "content": LLM_SYSTEM},
        {"role": "user", "content": LLM_EXAMPLE[0]},
        {"role": "assistant", "content": LLM_EXAMPLE[1]},
        {"role": "user", "content": LLM_USER.format(caption=caption.replace('"', "'"))},
    ]


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def parse_llm_objects(reply: str) -> list[str] | None:
    """Strict: the reply (optionally in a ```json fence) must be {"objects": [str, ...]}; anything else → None."""
    text = _FENCE.sub("", (reply or "").strip())
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return None
    if not isinstance(data, dict) or set(data) != {"objects"} or not isinstance(data["objects"], list):
        return None
    if not all(isinstance(o, str) for o in data["objects"]):
        return None
    return [o.strip() for o in data["objects"] if o.strip()]


@dataclass
class ExtractedObject:
    name: str  # canonical name
    surface: str  # words as written in the caption
    token_index: int  # first mention, in caption tokens: the generation order
    extractor: str  # vocab | llm | vocab+llm
    in_domain: bool  # in the vocabulary (judged against truth) or not (judged by the oracle)


@dataclass
class Extraction:
    objects: list[ExtractedObject]
    llm_status: str  # not_used | ok | unparsed (fell back to the vocabulary matcher)
    llm_dropped: list[str] = field(default_factory=list)  # LLM objects not found in the caption text

    @property
    def names(self) -> list[str]:
        return [o.name for o in self.objects]


def _find_phrase(caption_tokens: Sequence[str], phrase: str) -> tuple[int, str] | None:
    toks = tokens(phrase)
    if not toks:
        return None
    variants = [toks] + [toks[:-1] + [p] for p in plural_forms(toks[-1])]
    best: tuple[int, str] | None = None
    for v in variants:
        n = len(v)
        for i in range(len(caption_tokens) - n + 1):
            if list(caption_tokens[i : i + n]) == v:
                if best is None or i < best[0]:
                    best = (i, " ".join(v))
                break
    return best


class ObjectExtractor:
    """Ordered, de-duplicated objects of a caption (first mention order), optionally LLM-augmented.

    `llm`: an LLM backend (registry role "llm") or None for the vocabulary matcher alone.
    """

    def __init__(self, vocabulary: Vocabulary, llm=None):
        self.vocabulary = vocabulary
        self.llm = llm

    def extract(self, caption: str) -> Extraction:
        return self.extract_many([caption])[0]

    def extract_many(self, captions: Sequence[str]) -> list[Extraction]:
        replies: list[str | None] = [None] * len(captions)
        if self.llm is not None:
            todo = [i for i, c in enumerate(captions) if tokens(c or "")]
            answers = self.llm.chat_batch([llm_messages(captions[i]) for i in todo]) if todo else []
            for i, a in zip(todo, answers):
                replies[i] = a
        return [self._combine(c or "", r) for c, r in zip(captions, replies)]

    def _combine(self, caption: str, reply: str | None) -> Extraction:
        vocab = self.vocabulary
        found: dict[str, list] = {}  # canonical → [token_index, surface, extractors]
        # token → the vocabulary object matched there: an LLM phrase overlapping a match ("dog" of "hot dog",
        # "graffiti wall" around "wall") confirms that object instead of adding a second, out-of-domain one.
        covered: dict[int, str] = {}
        for m in vocab.match(caption):
            for t in range(m.token_index, m.token_index + len(m.surface.split())):
                covered[t] = m.canonical
            if m.canonical not in found:
                found[m.canonical] = [m.token_index, m.surface, {"vocab"}]
        status, dropped = "not_used", []
        if self.llm is not None and tokens(caption):
            llm_objects = parse_llm_objects(reply or "")
            if llm_objects is None:
                status = "unparsed"
            else:
                status = "ok"
                caption_tokens = tokens(caption)
                for obj in llm_objects:
                    where = _find_phrase(caption_tokens, obj)
                    if where is None:
                        # The LLM named something the caption never says: not an object *of the caption*.
                        dropped.append(obj)
                        continue
                    name = vocab.normalise(obj)
                    span = range(where[0], where[0] + len(where[1].split()))
                    overlap = next((covered[t] for t in span if t in covered), None)
                    if name not in found and overlap is not None:
                        found[overlap][2].add("llm")
                        continue
                    entry = found.setdefault(name, [where[0], where[1], set()])
                    entry[2].add("llm")
                    if where[0] < entry[0]:
                        entry[0], entry[1] = where[0], where[1]
        ordered = sorted(found.items(), key=lambda kv: (kv[1][0], kv[0]))
        objects = [
            ExtractedObject(
                name=name,
                surface=surface,
                token_index=idx,
                extractor="+".join(sorted(ex, key=["vocab", "llm"].index)),
                in_domain=name in vocab,
            )
            for name, (idx, surface, ex) in ordered
        ]
        return Extraction(objects=objects, llm_status=status, llm_dropped=dropped)
