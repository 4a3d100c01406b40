"""Object extraction from captions in generation order (CAOS: "LLM-augmented object identification").

A vocabulary matcher (COCO 80 + CHAIR synonyms, plus the release's concept-graph nodes; multi-word objects, plurals)
finds in-domain objects; an open vocabulary (Visual Genome's 1600 object classes) finds out-of-domain ones; an
optional LLM (the `llm` registry) adds out-of-domain objects through a strict JSON reply. When the reply does not
parse, the vocabulary result is used alone. Mentions in a negation's scope ("There is no dog.") are left out unless
`negation="ignore"` (CHAIR's reading). Words about the image itself ("The picture shows...", "in the background":
resources/caos/meta_words.txt) are not objects and are left out (counted) unless `meta_words="keep"`. Every object
records which extractor found it. `Vocabulary.synonym_class` maps a name to its COCO category through CHAIR's
synonym table ("woman" → "person"), whichever source named it first: CAOS compares extracted and truth objects
by that class, as CHAIR does.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from ..errors import InputError
from ..io import read_text
from ..resources import resource_path

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
    negated: bool = False


# Negation cues: "no dog", "not a dog", "without a hat", "isn't any cat" ("isn't" tokenises as isn + t).
NEGATION_CUES = {"no", "not", "without", "nor", "never", "none", "neither", "t", "cannot"}
# A negation reaches the next mention across at most this many tokens, never across a preposition or a clause break:
# "no red car" and "not a single dog" are negated, "not sleeping on the sofa" says nothing about the sofa.
NEGATION_REACH = 3
SCOPE_BREAKERS = {
    "on",
    "in",
    "at",
    "under",
    "near",
    "next",
    "behind",
    "beside",
    "above",
    "below",
    "by",
    "with",
    "while",
    "but",
    "although",
    "though",
    "which",
    "that",
    "where",
    "who",
    "is",
    "are",
    "was",
    "were",
    "has",
    "have",
}
# Coordinated objects stay in the scope: "no dogs or cats", "neither a cup nor a plate".
COORDINATORS = {"or", "nor", "and", "a", "an", "any", "the"}
_CLAUSE = re.compile(r"[.;:!?\n]+")
NEGATION_MODES = ("skip", "ignore")


class Vocabulary:
    """Surface forms (token tuples) → canonical object; first source added wins a surface (graph before COCO)."""

    def __init__(self) -> None:
        self.surfaces: dict[tuple[str, ...], str] = {}
        self.source_of: dict[str, str] = {}
        self.max_len = 0
        # name (and plural) → COCO category, from CHAIR's synonym table, whatever source won the surface
        self.synonym_of: dict[str, str] = {}

    def add_synonym(self, synonym: str, category: str) -> None:
        """Record `synonym` (and its plural) as a name of COCO `category` (CHAIR's table): synonym_class reads it."""
        toks = tokens(synonym)
        if not toks:
            return
        category = " ".join(tokens(category))
        for v in [toks] + [toks[:-1] + [p] for p in plural_forms(toks[-1])]:
            self.synonym_of.setdefault(" ".join(v), category)

    def synonym_class(self, name: str) -> str:
        """The COCO category of `name` by CHAIR's synonym table ("woman" → "person", "puppy" → "dog"), else the name
        itself: how CAOS compares extracted and truth objects (both sides mapped, as CHAIR does)."""
        key = " ".join(tokens(name))
        return self.synonym_of.get(key, key)

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

    def in_domain(self, canonical: str) -> bool:
        """Known and not only from the open (out-of-domain) vocabulary: judged against the truth."""
        return self.source_of.get(" ".join(tokens(canonical)), OPEN) != OPEN

    def __len__(self) -> int:
        return len(self.source_of)

    def canonical(self, phrase: str) -> str | None:
        """Canonical object for a whole phrase ("puppies" → "dog"), or None when it is not in the vocabulary."""
        return self.surfaces.get(tuple(tokens(phrase)))

    def normalise(self, phrase: str) -> str:
        """Canonical name when known, else the lower-cased phrase: how truth lists and LLM objects are compared."""
        return self.canonical(phrase) or " ".join(tokens(phrase))

    def match(self, text: str, negation: str = "skip") -> list[Mention]:
        """Greedy longest match left to right, so "hot dog" is one object and not "dog".

        negation "skip" marks mentions inside a negation's scope (`negated=True`: "There is no dog.", "a man
        without a hat", "no cats or dogs"); "ignore" reads every mention as present, as CHAIR's matcher does.
        """
        if negation not in NEGATION_MODES:
            raise ValueError(f"negation must be one of {NEGATION_MODES}, got {negation!r}")
        out: list[Mention] = []
        offset = 0
        for clause in _CLAUSE.split(text):
            toks = tokens(clause)
            out.extend(self._match_clause(toks, offset, negation == "skip"))
            offset += len(toks)
        return out

    def _match_clause(self, toks: list[str], offset: int, read_negation: bool) -> list[Mention]:
        out: list[Mention] = []
        scope_left = 0  # tokens a pending negation may still cross before its mention
        in_coordination = False
        i = 0
        while i < len(toks):
            for n in range(min(self.max_len, len(toks) - i), 0, -1):
                key = tuple(toks[i : i + n])
                if key in self.surfaces:
                    negated = read_negation and (scope_left > 0 or in_coordination)
                    out.append(Mention(self.surfaces[key], " ".join(key), offset + i, negated))
                    in_coordination = negated
                    scope_left = 0
                    i += n
                    break
            else:
                tok = toks[i]
                if tok in NEGATION_CUES:
                    scope_left, in_coordination = NEGATION_REACH + 1, False
                elif in_coordination and tok not in COORDINATORS:
                    in_coordination = False
                elif scope_left:
                    scope_left = 0 if tok in SCOPE_BREAKERS else scope_left - 1
                i += 1
        return out


OPEN = "open"  # vocabulary source of out-of-domain objects
COCO_FREQUENCY = resource_path("caos/coco_train2014_frequency.tsv")
OPEN_VOCABULARY = resource_path("caos/open_objects.tsv")
COCO_SYNONYMS = resource_path("caos/coco_synonyms.tsv")
META_WORDS_FILE = resource_path("caos/meta_words.txt")
# skip: words about the image itself (picture, photo, image, scene, view, background, shot...) are not objects
# (left out, counted); keep: every vocabulary match is an object (the reading before meta-words were filtered)
META_WORD_MODES = ("skip", "keep")


def read_meta_words(path: str | Path = META_WORDS_FILE) -> frozenset[str]:
    """The meta-words (one per line, '#' comments): names a caption uses for the image, not for an object in it."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: meta-word list not found")
    lines = path.read_text(encoding="utf-8").splitlines()
    return frozenset(" ".join(tokens(line)) for line in lines if line.strip() and not line.startswith("#"))


META_WORDS = read_meta_words()


def is_meta_word(name: str, meta_words: frozenset[str] = META_WORDS) -> bool:
    return " ".join(tokens(name)) in meta_words


def default_chair_synonyms() -> Path:
    """CHAIR's synonym table: the derived table halluflow ships (the same on every machine and install)."""
    return COCO_SYNONYMS


def read_synonym_table(path: str | Path) -> list[tuple[str, str]]:
    """(synonym, category) pairs from a TSV with a header holding `synonym` and `coco_category` columns."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: synonym table not found")
    lines = read_text(path).splitlines()
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


def derive_coco_frequency(source: str | Path, target: str | Path) -> int:
    """Write resources/caos/coco_train2014_frequency.tsv (object, images; most frequent first, ties by name) from
    ML-GCN's COCO train2014 per-category image counts (`name` and `image_count` columns); returns rows."""
    from ..io import write_text

    source = Path(source)
    if not source.is_file():
        raise InputError(f"{source}: COCO category counts not found")
    lines = source.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t") if lines else []
    if "name" not in header or "image_count" not in header:
        raise InputError(f"{source}: header must have 'name' and 'image_count' columns, got {header}")
    n_col, c_col = header.index("name"), header.index("image_count")
    rows = []
    for lineno, line in enumerate(lines[1:], 2):
        cells = line.split("\t")
        try:
            rows.append((cells[n_col].strip(), int(cells[c_col])))
        except (IndexError, ValueError):
            raise InputError(f"{source}:{lineno}: expected a name and an integer image_count") from None
    rows.sort(key=lambda r: (-r[1], r[0]))
    write_text(target, "object\timages\n" + "".join(f"{n}\t{c}\n" for n, c in rows))
    return len(rows)


def read_frequency(path: str | Path) -> list[str]:
    """Training objects, most frequent first: a TSV with an `object` column, or a text file of one name per line."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: frequent-objects file not found")
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    if lines and lines[0].split("\t")[0] == "object":
        lines = [line.split("\t")[0] for line in lines[1:]]
    items = [line.strip() for line in lines if line.strip()]
    if not items:
        raise InputError(f"{path}: no objects listed")
    return items


def derive_open_vocabulary(source: str | Path, target: str | Path) -> int:
    """Write resources/caos/open_objects.tsv (surface, canonical) from Visual Genome's 1600 object classes (one
    class per line, comma-separated synonyms, the first canonical — the bottom-up-attention vocabulary), leaving out
    the meta-words (resources/caos/meta_words.txt); returns rows."""
    from ..io import write_text

    source = Path(source)
    if not source.is_file():
        raise InputError(f"{source}: object vocabulary not found")
    seen: set[str] = set()
    out = ["surface\tcanonical"]
    for line in source.read_text(encoding="utf-8").splitlines():
        names = [" ".join(tokens(n)) for n in line.split(",")]
        # a class named by a meta-word (picture, photo, image, scene, view, background...) is no object
        names = [n for n in names if n and n not in META_WORDS]
        for name in names:
            if name not in seen:
                seen.add(name)
                out.append(f"{name}\t{names[0]}")
    write_text(target, "\n".join(out) + "\n")
    return len(out) - 1


def read_open_vocabulary(path: str | Path) -> list[tuple[str, str]]:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: open object vocabulary not found")
    pairs = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines()[1:], 2):
        cells = line.split("\t")
        if len(cells) != 2:
            raise InputError(f"{path}:{lineno}: expected surface<TAB>canonical")
        pairs.append((cells[0], cells[1]))
    return pairs


def build_vocabulary(
    graph_terms: Iterable[str] = (),
    synonyms: str | Path | None | bool = True,
    extra_terms: Iterable[str] = (),
    open_vocabulary: str | Path | None | bool = False,
) -> Vocabulary:
    """Vocabulary = graph nodes (the release's concepts) first, then COCO categories + CHAIR synonyms: the domain.
    Then, optionally, an open vocabulary of other objects (Visual Genome's 1600 classes): these are OUT of the domain,
    judged by the oracle as in CAOS, since the truth cannot say they are absent.

    `synonyms`: a path, True for the default table (see default_chair_synonyms), False/None for none.
    `open_vocabulary`: a path, True for resources/caos/open_objects.tsv, False/None for none.
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
            vocab.add_synonym(syn, cat)
    if open_vocabulary is True:
        open_vocabulary = OPEN_VOCABULARY
    if open_vocabulary:
        for surface, canonical in read_open_vocabulary(open_vocabulary):
            vocab.add(surface, canonical, OPEN)
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
    in_domain: bool  # in the domain vocabulary (judged against truth) or not (judged by the oracle)


@dataclass
class Extraction:
    objects: list[ExtractedObject]
    llm_status: str  # not_used | ok | unparsed (fell back to the vocabulary matcher)
    llm_dropped: list[str] = field(default_factory=list)  # LLM objects not found in the caption text
    negated: list[str] = field(default_factory=list)  # objects the caption says are absent ("no dog")
    meta: list[str] = field(default_factory=list)  # meta-word mentions left out ("picture" of "The picture shows")

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

    def __init__(self, vocabulary: Vocabulary, llm=None, negation: str = "skip", meta_words: str = "skip"):
        if negation not in NEGATION_MODES:
            raise InputError(f"negation {negation!r}: expected one of {', '.join(NEGATION_MODES)}")
        if meta_words not in META_WORD_MODES:
            raise InputError(f"meta_words {meta_words!r}: expected one of {', '.join(META_WORD_MODES)}")
        self.vocabulary = vocabulary
        self.llm = llm
        self.negation = negation
        self.meta_words = meta_words
        if meta_words == "keep":
            # the reading before meta-words were filtered: Visual Genome's picture, photo, image, scene, view,
            # background... were out-of-domain objects of the open vocabulary
            for word in sorted(META_WORDS):
                if any(src == OPEN for src in vocabulary.source_of.values()) and word not in vocabulary:
                    vocabulary.add(word, word, OPEN)
        self._meta_phrases = [tuple(w.split()) for w in sorted(META_WORDS)]

    def _is_meta(self, name: str, surface: str) -> bool:
        return self.meta_words == "skip" and (is_meta_word(name) or is_meta_word(surface))

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
        negated: list[str] = []
        meta: list[str] = []
        for m in vocab.match(caption, self.negation):
            for t in range(m.token_index, m.token_index + len(m.surface.split())):
                covered[t] = m.canonical
            if self._is_meta(m.canonical, m.surface):
                meta.append(m.canonical)
                continue
            if m.negated:
                negated.append(m.canonical)
                continue
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
                    if self._is_meta(name, where[1]):
                        meta.append(name)
                        continue
                    span = range(where[0], where[0] + len(where[1].split()))
                    overlap = next((covered[t] for t in span if t in covered), None)
                    if name not in found and overlap is not None:
                        if overlap in found:
                            found[overlap][2].add("llm")
                        continue  # overlaps a negated mention: the caption says it is absent
                    entry = found.setdefault(name, [where[0], where[1], set()])
                    entry[2].add("llm")
                    if where[0] < entry[0]:
                        entry[0], entry[1] = where[0], where[1]
        if self.meta_words == "skip":
            # every meta-word the caption uses outside a longer object ("picture" of "The picture shows", not of
            # "picture frame"), whether or not a vocabulary lists it: what was left out, counted
            meta = []  # (the vocabulary matches dropped above are among these)
            toks = tokens(caption)
            for phrase in self._meta_phrases:
                n = len(phrase)
                for i in range(len(toks) - n + 1):
                    if tuple(toks[i : i + n]) == phrase and not any(
                        t in covered and not is_meta_word(covered[t]) for t in range(i, i + n)
                    ):
                        meta.append(" ".join(phrase))
        ordered = sorted(found.items(), key=lambda kv: (kv[1][0], kv[0]))
        objects = [
            ExtractedObject(
                name=name,
                surface=surface,
                token_index=idx,
                extractor="+".join(sorted(ex, key=["vocab", "llm"].index)),
                in_domain=vocab.in_domain(name),
            )
            for name, (idx, surface, ex) in ordered
        ]
        return Extraction(
            objects=objects,
            llm_status=status,
            llm_dropped=dropped,
            negated=sorted(set(negated) - set(found)),
            meta=meta,
        )
