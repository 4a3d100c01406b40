"""AMBER scores (Wang et al., "An LLM-free Multi-dimensional Benchmark for MLLMs Hallucination Evaluation";
code: junyangwang0410/AMBER inference.py), in AMBER's percent scale and rounding.

Discriminative: the response must be exactly "Yes"/"No"; "No" is the positive class; counters start at the
0.001 of AMBER's metrics.txt; F1 is computed from the ROUNDED precision/recall with +1e-4 (+1e-3 for existence,
as in the original). Generative: CHAIR / Cover / Hal / Cog with AMBER's association (relation.json) and safe-word
rules. Two steps of the original depend on downloadable data:
- noun extraction (nltk word_tokenize + POS tags NN* + WordNet lemmatizer): used as is when nltk and its punkt,
  tagger and WordNet data are installed ("noun_extractor": "nltk" in the output). Otherwise the documented
  offline rules ("rules"): every token (nltk's tokenization, halluflow.metrics.treebank) whose noun lemma
  (WordNet morphy suffix rules + irregular plurals, candidates checked against AMBER's vocabulary, shortest wins,
  as WordNetLemmatizer does) is in relation.json. Case is kept, as in the original ("Trees" is not "tree"). Words
  used as verbs/adjectives are not filtered out (no tagger): a divergence, visible in the per-response rows.
- spaCy en_core_web_lg similarity > 0.8: a pluggable `similarity` matcher; default "exact" (no similarity step:
  only exact words and relation.json associations count); any embedder backend name (glove, minilm) uses cosine
  similarity of its embeddings with the same threshold.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError
from ..io import read_json, read_text
from ..progress import progress
from .formats import read_amber_annotations
from .parsers import default_rule_reasons, failed_mask, parse_answers

if TYPE_CHECKING:
    import numpy as np
    import polars as pl


# AMBER's metrics.txt: every *_num counter starts at 0.001 so empty sections divide safely.
DEFAULT_START = 0.001
TYPE_SECTION = {
    "discriminative-attribute-state": "state",
    "discriminative-attribute-number": "number",
    "discriminative-attribute-action": "action",
    "discriminative-hallucination": "existence",
}  # every other discriminative type ("discriminative-relation", "relation") counts as relation
DIMENSIONS = {
    "all": ("generative", "overall", "existence", "attribute", "state", "number", "action", "relation"),
    "g": ("generative",),
    "d": ("overall", "existence", "attribute", "state", "number", "action", "relation"),
    "de": ("existence",),
    "da": ("attribute", "state", "number", "action"),
    "dr": ("relation",),
}
DIMENSIONS["a"] = DIMENSIONS["all"]


@dataclass
class AmberData:
    """AMBER's annotation folder as the scorer uses it (read_amber_folder). Annotation ids are 1..n: id i has type
    types[i-1] and, for a discriminative item, the truth truths[i-1] (None for a generative item, whose record is
    kept whole in `generative`)."""

    types: list[str]
    truths: list[str | None]
    generative: list[dict]
    association: dict[str, list[str]]
    safe_words: list[str]
    start: float = DEFAULT_START
    vocabulary: set[str] = field(init=False)
    safe_set: set[str] = field(init=False)
    generative_by_id: dict[int, dict] = field(init=False)

    def __post_init__(self):
        self.vocabulary = set(self.association) | {w for ws in self.association.values() for w in ws}
        self.safe_set = set(self.safe_words)
        self.generative_by_id = {a["id"]: a for a in self.generative}

    @property
    def n(self) -> int:
        return len(self.types)

    @cached_property
    def frame(self) -> pl.DataFrame:
        """The annotations as columns: id, type, truth (the yes/no of a discriminative item; null for generative)."""
        import polars as pl

        return pl.DataFrame(
            {"id": range(1, self.n + 1), "type": self.types, "truth": self.truths},
            schema={"id": pl.Int64, "type": pl.String, "truth": pl.String},
        )


def read_start_value(path: Path) -> float:
    """The initial value of the *_num counters in AMBER's metrics.txt (all equal there)."""
    values = set()
    for line in read_text(path).splitlines():
        name, eq, value = line.partition("=")
        if eq and name.strip().endswith("_num"):
            try:
                values.add(float(value))
            except ValueError:
                raise InputError(f"{path}: {name.strip()} = {value.strip()!r} is not a number") from None
    if len(values) != 1:
        raise InputError(f"{path}: expected one common start value for the *_num counters, found {sorted(values)}")
    return values.pop()


def load_amber(directory: str | Path) -> AmberData:
    """AMBER's annotation folder: annotations.json, relation.json, safe_words.txt and (optional) metrics.txt."""
    return AmberData(*read_amber_folder(directory))


def read_amber_folder(directory: str | Path) -> tuple:
    """AmberData's arguments, checked, as plain data: (types, truths, generative records, association, safe words,
    start value). Pure Python, no polars: `score amber` runs it in a forked helper (halluflow.forked), and it sends
    back only what scoring uses, each distinct type and truth string once."""
    d = Path(directory)
    if not d.is_dir():
        raise InputError(f"AMBER annotations folder {d} not found")
    annotations = read_amber_annotations(d / "annotations.json")
    association = read_json(d / "relation.json")
    if not isinstance(association, dict):
        raise InputError(f"{d / 'relation.json'}: expected a JSON object {{object: [related objects]}}")
    safe_path = d / "safe_words.txt"
    if not safe_path.exists():
        raise InputError(f"{safe_path}: file not found")
    safe = [line.split("\n")[0] for line in read_text(safe_path).splitlines(keepends=True)]
    start = read_start_value(d / "metrics.txt") if (d / "metrics.txt").exists() else DEFAULT_START
    generative = [a for a in annotations if a["type"] == "generative"]
    for a in generative:
        for w in a["truth"] + a.get("hallu", []):
            if w not in association:
                raise InputError(f"{d / 'relation.json'}: object {w!r} of annotation {a['id']} has no entry")
    one: dict[str, str] = {}  # one object per distinct string: marshal then writes each once
    types = [one.setdefault(t, t) for t in map(itemgetter("type"), annotations)]
    truths = [one.setdefault(t, t) if type(t) is str else None for t in map(itemgetter("truth"), annotations)]
    return types, truths, generative, association, safe, start


# ---------------------------------------------------------------- noun extraction (WordNet-morphy stand-in)
_NOUN_EXCEPTIONS = {
    "men": "man",
    "women": "woman",
    "children": "child",
    "feet": "foot",
    "teeth": "tooth",
    "mice": "mouse",
    "geese": "goose",
    "oxen": "ox",
    "knives": "knife",
    "wives": "wife",
    "lives": "life",
    "leaves": "leaf",
    "loaves": "loaf",
    "wolves": "wolf",
    "shelves": "shelf",
    "halves": "half",
    "calves": "calf",
    "scarves": "scarf",
    "hooves": "hoof",
    "thieves": "thief",
    "dice": "die",
    "people": "person",
}
# WordNet morphy's noun detachment rules
_MORPHY_NOUN = [
    ("s", ""),
    ("ses", "s"),
    ("ves", "f"),
    ("xes", "x"),
    ("zes", "z"),
    ("ches", "ch"),
    ("shes", "sh"),
    ("men", "man"),
    ("ies", "y"),
]


def noun_lemma(word: str, vocabulary: set[str]) -> str:
    """WordNetLemmatizer.lemmatize(word) restricted to AMBER's vocabulary: the shortest valid form, else the word."""
    candidates = [word] if word in vocabulary else []
    if word in _NOUN_EXCEPTIONS and _NOUN_EXCEPTIONS[word] in vocabulary:
        candidates.append(_NOUN_EXCEPTIONS[word])
    for old, new in _MORPHY_NOUN:
        if word.endswith(old) and len(word) > len(old):
            base = word[: -len(old)] + new
            if base in vocabulary:
                candidates.append(base)
    return min(candidates, key=len) if candidates else word


def extract_nouns(text: str, vocabulary: set[str]) -> list[str]:
    """Vocabulary nouns of one response by the offline rules, in order, duplicates kept (AMBER counts every
    mention)."""
    return RulesNouns(vocabulary).extract_many([text])[0]


class RulesNouns:
    """The offline noun rules, vectorised: tokenize every response at once, lemmatize each distinct token once."""

    name = "rules"

    def __init__(self, vocabulary: set[str]):
        self.vocabulary = vocabulary

    def extract_many(self, texts: list[str]) -> list[list[str]]:
        import polars as pl

        from .treebank import token_frame

        tokens = token_frame(pl.Series(texts, dtype=pl.String))
        # each distinct token lemmatised once; only tokens whose lemma is a vocabulary noun are kept
        lemma = {t: noun_lemma(t, self.vocabulary) for t in tokens["tok"].unique().to_list()}
        keep = {t: n for t, n in lemma.items() if n in self.vocabulary}
        nouns = (
            tokens.lazy()
            .filter(pl.col("tok").is_in(list(keep)))
            .group_by("doc", maintain_order=True)
            .agg(pl.col("tok").replace_strict(keep, return_dtype=pl.String))
            .collect()
        )
        by_doc = dict(zip(nouns["doc"].to_list(), nouns["tok"].to_list()))
        return [by_doc.get(i, []) for i in range(len(texts))]


class NltkNouns:
    """AMBER's own extract_nouns: nltk.word_tokenize, pos_tag, keep NN*, WordNetLemmatizer.lemmatize."""

    name = "nltk"
    DATA = ("tokenizers/punkt_tab/english/", "taggers/averaged_perceptron_tagger_eng/", "corpora/wordnet")

    def __init__(self):
        import nltk
        from nltk.stem import WordNetLemmatizer

        missing = []
        for resource in self.DATA:
            try:
                nltk.data.find(resource)
            except LookupError:
                missing.append(resource)
        if missing:
            raise InputError(
                f"nltk data not installed: {', '.join(missing)} (nltk.download them, or use --nouns rules)"
            )
        self._nltk, self._lemmatizer = nltk, WordNetLemmatizer()

    def extract_many(self, texts: list[str]) -> list[list[str]]:
        out = []
        for text in texts:
            tagged = self._nltk.pos_tag(self._nltk.word_tokenize(text))
            out.append([self._lemmatizer.lemmatize(word) for word, pos in tagged if pos.startswith("NN")])
        return out


def _nltk_data_may_exist() -> bool:
    """Whether nltk is installed and a tagger folder sits in one of nltk's data folders — checked without importing
    nltk (its import pulls scipy and sklearn: seconds), which only happens when the data may be there."""
    import importlib.util
    import os
    import sys

    if importlib.util.find_spec("nltk") is None:
        return False
    roots = [
        *os.environ.get("NLTK_DATA", "").split(os.pathsep),
        os.path.expanduser("~/nltk_data"),
        *(
            os.path.join(p, d)
            for p in {sys.prefix, sys.base_prefix}
            for d in ("nltk_data", "share/nltk_data", "lib/nltk_data")
        ),
        "/usr/share/nltk_data",
        "/usr/local/share/nltk_data",
        "/usr/lib/nltk_data",
        "/usr/local/lib/nltk_data",
    ]
    return any(r and os.path.isdir(os.path.join(r, "taggers")) for r in roots)


def make_noun_extractor(name: str, vocabulary: set[str]):
    """ "nltk" (AMBER's exact step; needs nltk and its data), "rules" (offline), or "auto": nltk when usable."""
    if name == "rules":
        return RulesNouns(vocabulary)
    if name == "nltk":
        try:
            return NltkNouns()
        except ImportError:
            raise InputError("--nouns nltk needs the nltk package (pip install 'halluflow[nlp]')") from None
    if name == "auto":
        if _nltk_data_may_exist():
            try:
                return NltkNouns()
            except (ImportError, InputError):
                pass
        return RulesNouns(vocabulary)
    raise InputError(f"unknown noun extractor {name!r} (known: auto, nltk, rules)")


# ---------------------------------------------------------------- similarity matchers
class ExactMatcher:
    """No similarity step: the default (spaCy's en_core_web_lg is not available offline)."""

    name = "exact"

    def first_similar(self, noun: str, words: list[str]) -> int | None:
        return None


class EmbeddingMatcher:
    """spaCy-style token similarity with an embedder backend: first word with cosine > threshold."""

    def __init__(self, backend: str, threshold: float = 0.8, **kwargs):
        from ..models.registry import create

        self.name = backend
        self.embedder = create("embedder", {"backend": backend, **kwargs})
        self.threshold = threshold
        self._cache: dict[str, np.ndarray] = {}

    def _vectors(self, words: list[str]) -> np.ndarray:
        import numpy as np

        todo = [w for w in dict.fromkeys(words) if w not in self._cache]
        if todo:
            vecs = np.asarray(self.embedder.embed(todo), dtype=np.float64)
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            for w, v in zip(todo, vecs / np.where(norms == 0, 1, norms)):
                self._cache[w] = v
        return np.stack([self._cache[w] for w in words])

    def first_similar(self, noun: str, words: list[str]) -> int | None:
        if not words:
            return None
        import numpy as np

        sims = self._vectors(words) @ self._vectors([noun])[0]
        hits = np.flatnonzero(sims > self.threshold)
        return int(hits[0]) if hits.size else None


def make_matcher(name: str = "exact", threshold: float = 0.8):
    return ExactMatcher() if name == "exact" else EmbeddingMatcher(name, threshold)


# ---------------------------------------------------------------- scoring
def _accumulated(start: float, n: int) -> float:
    """`start` + 1 + 1 + ... (n ones) with the float rounding of AMBER's counters, which add 1 once per item
    (0.001 + n computed once can differ in the last bit). In O(log n) steps: adding 1 is exact while the total stays
    below the next power of two, so only the additions that cross one round, and those are done one by one."""
    total = start
    while n > 0 and 0.0 <= total < 2.0**52:
        step = min(n, math.ceil(2.0 ** math.frexp(total)[1] - total) - 1)
        total += step  # exact: the sum stays in total's binade, where 1 is a multiple of the spacing
        n -= step
        if n:
            total += 1  # crosses into the next binade: rounds, as the loop does
            n -= 1
    return _accumulate(total, [1] * n) if n else total


def _accumulate(start: float, values) -> float:
    total = start
    for v in values:
        total += v
    return total


def _r(x: float) -> float:
    return round(x, 1)


def _prf(correct, correct_num, ans_no, ans_no_num, no, no_num, eps) -> dict:
    acc = _r(correct / correct_num * 100)
    precision = _r(ans_no / ans_no_num * 100)
    recall = _r(no / no_num * 100)
    f1 = _r(2 * (precision / 100) * (recall / 100) / ((precision / 100) + (recall / 100) + eps) * 100)
    return {"accuracy": acc, "precision": precision, "recall": recall, "f1": f1}


def discriminative_rows(responses: pl.DataFrame, data: AmberData) -> pl.DataFrame:
    """Per discriminative response: id, section, truth, response, parsed, correct (vectorised)."""
    import polars as pl

    df = responses.join(data.frame, on="id", how="left", maintain_order="left").filter(pl.col("type") != "generative")
    return df.with_columns(
        section=pl.col("type").replace_strict(TYPE_SECTION, default="relation"),
        parsed=parse_answers(df["response"], "amber"),
    ).with_columns(correct=pl.col("parsed").fill_null("") == pl.col("truth"))


def discriminative_scores(rows: pl.DataFrame, start: float = DEFAULT_START) -> dict[str, dict]:
    import polars as pl

    counts = rows.group_by("section").agg(
        n=pl.len(),
        correct=pl.col("correct").sum(),
        no_num=(pl.col("truth") == "no").sum(),
        no=((pl.col("truth") == "no") & (pl.col("parsed") == "no")).sum(),
        ans_no_num=(pl.col("parsed") == "no").sum(),
    )
    c = {r["section"]: r for r in counts.to_dicts()}
    zero = {"n": 0, "correct": 0, "no_num": 0, "no": 0, "ans_no_num": 0}

    def counters(sections):
        rs = [c.get(s, zero) for s in sections]
        # separate float counters per type, summed in AMBER's order (state, number, action)
        return (
            sum(r["correct"] for r in rs),
            sum(_accumulated(start, r["n"]) for r in rs),
            sum(r["no"] for r in rs),
            sum(_accumulated(start, r["ans_no_num"]) for r in rs),
            sum(r["no"] for r in rs),
            sum(_accumulated(start, r["no_num"]) for r in rs),
        )

    out = {}
    for section, eps in (("existence", 0.001), ("state", 1e-4), ("number", 1e-4), ("action", 1e-4), ("relation", 1e-4)):
        out[section] = _prf(*counters([section]), eps) | {"n": c.get(section, zero)["n"]}
    attr = ["state", "number", "action"]
    out["attribute"] = _prf(*counters(attr), 1e-4) | {"n": sum(c.get(s, zero)["n"] for s in attr)}
    total = {k: sum(r[k] for r in c.values()) for k in zero}
    out["overall"] = _prf(
        total["correct"],
        _accumulated(start, total["n"]),
        total["no"],
        _accumulated(start, total["ans_no_num"]),
        total["no"],
        _accumulated(start, total["no_num"]),
        1e-4,
    ) | {"n": total["n"]}
    return out


def _first_owner(objects: list[str], association: dict[str, list[str]]) -> dict[str, int]:
    """word → index of the object it belongs to, in AMBER's order: association words first (in object order), then
    the objects themselves; the first hit decides, exactly as AMBER's safe_words/safe_list and ha_words/ha_list do."""
    owner: dict[str, int] = {}
    for i, o in enumerate(objects):
        for w in association[o]:
            owner.setdefault(w, i)
    for i, o in enumerate(objects):
        owner.setdefault(o, i)
    return owner


def _word_list(objects: list[str], association: dict[str, list[str]]) -> tuple[list[str], list[int]]:
    """AMBER's word list in order, with the owning object of each word (for a similarity matcher)."""
    words = [w for o in objects for w in association[o]] + objects
    owners = [i for i, o in enumerate(objects) for _ in association[o]] + list(range(len(objects)))
    return words, owners


def generative_row(nouns: list[str], ann: dict, data: AmberData, matcher) -> dict:
    """One generative response: AMBER's mention-by-mention rules (association, safe words, similarity)."""
    truth, hallu = ann["truth"], ann["hallu"]
    safe_owner, ha_owner = _first_owner(truth, data.association), _first_owner(hallu, data.association)
    similar = not isinstance(matcher, ExactMatcher)  # the exact matcher never finds a similar word
    if similar:
        safe_words, safe_list = _word_list(truth, data.association)
        ha_words, ha_list = _word_list(hallu, data.association)
    covered, cognitive = [0] * len(truth), [0] * len(hallu)
    nouns = [n for n in nouns if n in data.vocabulary]  # AMBER's after_process_nouns
    hallucinated = []
    for noun in nouns:
        if noun in data.safe_set:
            continue
        if noun in safe_owner:
            covered[safe_owner[noun]] = 1
            continue
        if noun in ha_owner:
            cognitive[ha_owner[noun]] = 1
        if similar:
            j = matcher.first_similar(noun, ha_words)
            if j is not None:
                cognitive[ha_list[j]] = 1
            j = matcher.first_similar(noun, safe_words)
            if j is not None:
                covered[safe_list[j]] = 1
                continue
        hallucinated.append(noun)
    return {
        "id": ann["id"],
        "nouns": nouns,
        "hallucinated": hallucinated,
        "n_mentions": len(nouns),
        "n_hallucinated": len(hallucinated),
        "covered": sum(covered),
        "n_truth": len(truth),
        "cog": sum(cognitive),
        "n_hallu": len(hallu),
    }


def generative_scores(rows: list[dict], start: float = DEFAULT_START) -> dict:
    chair = sum(r["n_hallucinated"] for r in rows) / _accumulate(start, [r["n_mentions"] for r in rows])
    cover = sum(r["covered"] for r in rows) / _accumulate(start, [r["n_truth"] for r in rows])
    cog = sum(r["cog"] for r in rows) / _accumulate(start, [r["n_hallu"] for r in rows])
    non_hallu = sum(r["n_hallucinated"] == 0 for r in rows) / _accumulated(start, len(rows))
    return {
        "chair": _r(chair * 100),
        "cover": _r(cover * 100),
        "hal": _r(100 - non_hallu * 100),
        "cog": _r(cog * 100),
        "n": len(rows),
    }


def load_responses(path: str | Path, n_annotations: int | None) -> pl.DataFrame:
    from .formats import read_amber_responses

    return read_amber_responses(path, n_annotations)


def amber_scores(
    responses: pl.DataFrame,
    data: AmberData,
    dimension: str = "all",
    matcher=None,
    with_rows: bool = False,
    nouns: str = "auto",
):
    """AMBER sections for `dimension`; with_rows also returns (discriminative rows, generative rows).
    `nouns`: the generative noun step, "auto" (nltk when its data is installed, else the rules), "nltk", "rules";
    the output's "noun_extractor" says which ran."""
    import polars as pl

    if dimension not in DIMENSIONS:
        raise InputError(f"unknown AMBER dimension {dimension!r} (known: {', '.join(DIMENSIONS)})")
    matcher = matcher or ExactMatcher()
    wanted = DIMENSIONS[dimension]
    # Failed / empty responses are no answers (docs/failed-answers.md): left out of every section, counted.
    failed = failed_mask(responses["response"], responses["status"] if "status" in responses.columns else None)
    n_failed = int(failed.sum())
    if n_failed:
        responses = responses.filter(~failed)
    if "status" in responses.columns:  # read; the rows below are AMBER's (id, response)
        responses = responses.drop("status")
    out: dict = {}
    gen_rows: list[dict] = []
    # Python work and polars work (which releases the GIL) side by side: the noun step (mostly polars) runs while the
    # discriminative job turns the annotation columns into a frame (Python objects to polars), and that job's polars
    # part runs while this thread builds the generative rows (Python).
    with ThreadPoolExecutor(2) as pool:
        if "generative" in wanted:
            gen = responses.filter(pl.col("id").is_in(list(data.generative_by_id)))
            gen_ids = gen["id"].to_list()
            extractor = make_noun_extractor(nouns, data.vocabulary)
            nouns_job = pool.submit(extractor.extract_many, gen["response"].to_list())
        disc_job = pool.submit(discriminative_rows, responses, data)
        if "generative" in wanted:
            all_nouns = nouns_job.result()
            gen_rows = [
                generative_row(n, data.generative_by_id[i], data, matcher)
                for i, n in progress(zip(gen_ids, all_nouns), total=len(gen_ids), desc="AMBER generative")
            ]
            out["generative"] = generative_scores(gen_rows, data.start)
            out["noun_extractor"] = extractor.name
        disc = disc_job.result()
    if set(wanted) - {"generative"}:
        scores = discriminative_scores(disc, data.start)
        out.update({k: scores[k] for k in wanted if k != "generative"})
        # AMBER's default rule: a response other than exactly Yes/No is wrong (counted, and why: parsers)
        sections = set(wanted) | ({"state", "number", "action"} if {"attribute", "overall"} & set(wanted) else set())
        if "overall" in wanted:
            sections |= {"existence", "relation"}
        unread = disc.filter(pl.col("parsed").is_null() & pl.col("section").is_in(sorted(sections)))
        out["n_default_rule"] = unread.height
        out["default_rule_reasons"] = default_rule_reasons(unread["response"].to_list())
    for section in out.values():  # a section nothing was scored in has no numbers (AMBER's epsilons give 0 or 100)
        if isinstance(section, dict) and section.get("n") == 0:
            section.update({k: None for k in section if k != "n"})
    out["dimension"] = dimension
    out["similarity"] = matcher.name
    out["n_failed"] = n_failed
    return (out, disc, gen_rows) if with_rows else out


def score_files(
    annotations: str,
    responses_path: str,
    *,
    dimension: str,
    similarity: str,
    similarity_threshold: float,
    nouns: str,
    max_failed_fraction: float | None,
) -> dict:
    """AMBER scores of one response file against an AMBER annotation folder (`halluflow score amber`); refused
    (TooManyFailedError) when more than `max_failed_fraction` of the responses failed."""
    from ..forked import Forked
    from .parsers import check_failed

    # A helper process reads the annotation folder (CPython's JSON parsing and our checks) while this one loads
    # polars and reads the responses. Errors are those of load_amber then load_responses, in that order.
    with Forked(read_amber_folder, annotations) as folder:
        try:
            responses = load_responses(responses_path, None)  # ids checked from 1 up; the upper end below
        except InputError:
            responses = None
        data = AmberData(*folder.result())  # a bad annotation folder is reported first
    if responses is None or responses["id"].max() > data.n:
        # read again with AMBER's id count: raises the response file's error, naming AMBER's id range
        responses = load_responses(responses_path, data.n)
    matcher = make_matcher(similarity, similarity_threshold)
    scores = amber_scores(responses, data, dimension, matcher, nouns=nouns)
    check_failed(scores["n_failed"], responses.height, max_failed_fraction, f"score amber {responses_path}")
    return scores
