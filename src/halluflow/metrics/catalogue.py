"""The metric catalogue: one entry for every number halluflow reports (its definition, paper and equation or anchor
code, its exact location in the JSON that holds it, its range, which direction is better, and how failed, empty and
unknown answers enter it).

The scorecard, radar, report tables and `score compare` read numbers only through `Catalogue.read`: a location is
followed exactly (never "the first key named f1"), a null or absent value is "n/a", and a value that is not a number
or lies outside its entry's range is an error naming the file and the location. docs/metrics.md is generated from
here (`halluflow docs metrics`), and a test checks that the committed file equals the generated text.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..errors import InputError

# The documents that hold numbers, as the result folder names them (docs/data-contracts.md).
DOCUMENTS = {
    "metrics": "metrics/<model>.json (rule score; `halluflow score pope|chair|amber` print the block under pope / "
    "chair / amber)",
    "caos": "caos/<model>.json (rule caos_score; `halluflow score caos` prints one embedders.<embedder> block)",
    "cedi": "cedi/<model>/grades.json (rule cedi_grade)",
    "samf": "fuzz/<model>/comparison.json (rule samf_compare; comparison.parquet holds its rows, controllers.parquet "
    "its by_category rows)",
    "compare": "compare/models.json (rule score_compare, `halluflow score compare --scores`)",
}

# How failed / empty / unknown answers enter, said once and referred to by name (docs/failed-answers.md).
FAILED_EXCLUDED = "Failed requests and empty answers are left out (counted in n_failed); they never become yes or no."
POPE_UNKNOWN = (
    FAILED_EXCLUDED + " An answer the parser cannot read as yes or no (unknown, counted in n_unknown) stays in n and "
    "is never correct: a miss when the truth is the positive class, neither TP nor FP otherwise; under the release "
    "reader (parser release) it is excluded instead: out of n and of every ratio. A peer-compatible "
    "parser (lmms_eval, vlmevalkit, pope_official) reads every answer string its peer would see, the empty string "
    "included. Answers read only by the parser's default rule (POPE's: no negation word → yes) are counted in "
    "n_default_rule."
)
AMBER_UNKNOWN = (
    FAILED_EXCLUDED + " A response that is not exactly AMBER's Yes/No is counted and never correct (AMBER's rule)."
)
CAPTION_FAILED = (
    FAILED_EXCLUDED + " A caption that names no vocabulary object counts as a caption without hallucination."
)
COUNT_RULE = "A count: failed and unknown answers are counted where the name says so, nowhere else."
CAOS_FAILED = (
    FAILED_EXCLUDED + " Only hallucinated objects enter the means; an object the oracle could not decide is left out "
    "(objects.n_undecided); CAOS_X is undefined for the first object of a caption and left out of its mean."
)
CEDI_FAILED = (
    "Turns that cannot be judged (empty or unparseable answers, yes/no probes answered with neither) are left out of "
    "rates and counted beside them; every conversation enters the GED means."
)
SAMF_FAILED = (
    "Failed answers are no predictions: left out of every mean and counted per setting (n_failed_<setting>); a judge "
    "that failed and was replaced by its rule fallback is counted in n_<metric>_fallback_<setting>."
)

POPE_REF = 'Li et al., "Evaluating Object Hallucination in Large Vision-Language Models" (EMNLP 2023), POPE'
REPOPE_REF = 'Neuhaus & Hein, "RePOPE: Impact of Annotation Errors on the POPE Benchmark" (2025), RePOPE'
CHAIR_REF = 'Rohrbach et al., "Object Hallucination in Image Captioning" (EMNLP 2018), CHAIR'
AMBER_REF = (
    'Wang et al., "AMBER: An LLM-free Multi-dimensional Benchmark for MLLMs Hallucination Evaluation", '
    "AMBER's inference.py"
)
ODE_REF = 'Tu, Hu, Sang, "ODE: Open-Set Evaluation of Hallucinations in Multimodal Large Language Models" (CVPR 2025)'
CAOS_REF = 'CAOS ("context-aware object similarity"; the CAOS paper, no public code)'
CEDI_REF = (
    'Li et al., "Contextualized Evaluation of Vision Language Models through Dynamic, Multi-turn Interactions" (CEDI)'
)
SAMF_REF = "UniHall / SAMF paper (EvalHall), Sec. 4.1 and Appendix D"
BOOT_REF = "percentile bootstrap over answers (Efron & Tibshirani); paired bootstrap of Koehn (2004)"


@dataclass(frozen=True)
class Metric:
    """One reported number. `path` is dotted; `{name}` is a parameter the reader supplies (an embedder, a group);
    `list[key=value]` picks the one row of a list whose `key` equals `value`."""

    name: str
    label: str
    document: str
    path: str
    definition: str
    reference: str
    low: float | None
    high: float | None
    better: str | None  # "higher", "lower" or None (counts and diagnostics have no better direction)
    failed: str
    unit: str = "fraction"  # fraction, percent, count, cosine, ratio, edit cost
    shape: str = "number"  # number, or interval ({value, ci_low, ci_high, n})

    @property
    def bounded(self) -> bool:
        return self.low is not None and self.high is not None

    def in_range(self, value: float) -> bool:
        return (self.low is None or value >= self.low - 1e-9) and (self.high is None or value <= self.high + 1e-9)

    @property
    def range_text(self) -> str:
        lo = "−∞" if self.low is None else _num(self.low)
        hi = "∞" if self.high is None else _num(self.high)
        return f"[{lo}, {hi}]"

    @property
    def parameters(self) -> list[str]:
        return re.findall(r"\{(\w+)\}", self.path)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


_ABSENT = object()


class Catalogue:
    """Every entry by name; `read` follows an entry's location in a document."""

    def __init__(self, entries: Iterable[Metric]):
        self.entries: dict[str, Metric] = {}
        for e in entries:
            if e.name in self.entries:
                raise ValueError(f"metric catalogue: {e.name!r} defined twice")
            if e.document not in DOCUMENTS:
                raise ValueError(f"metric catalogue: {e.name!r} lives in unknown document {e.document!r}")
            self.entries[e.name] = e

    def __getitem__(self, name: str) -> Metric:
        try:
            return self.entries[name]
        except KeyError:
            raise InputError(f"unknown metric {name!r}: not in the metric catalogue (see docs/metrics.md)") from None

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __iter__(self):
        return iter(self.entries.values())

    def in_document(self, document: str) -> list[Metric]:
        return [e for e in self if e.document == document]

    def read(self, doc: Any, name: str, where: str = "document", **params: str) -> float | dict | None:
        """The value of metric `name` in `doc` (None when null or absent: shown as n/a); an interval entry gives its
        {value, ci_low, ci_high, n} object. A value that is not a number or lies outside the entry's range raises
        InputError naming `where` and the location."""
        entry = self[name]
        steps = resolve_steps(entry, params)
        path = ".".join(steps)
        value = follow(doc, steps, where)
        if value is _ABSENT or value is None:
            return None
        if entry.shape == "interval":
            if not isinstance(value, Mapping):
                raise InputError(f"{where}: {path} should be an interval object, got {type(value).__name__}")
            out = dict(value)
            for key in ("value", "ci_low", "ci_high"):
                out[key] = _checked(entry, out.get(key), f"{where}: {path}.{key}")
            return out
        return _checked(entry, value, f"{where}: {path}")

    def check(self, name: str, value: Any, where: str) -> float | None:
        """A value already in hand (a table cell) checked against entry `name`: a number in range, or None."""
        return _checked(self[name], value, where)

    def present(self, doc: Any, name: str, where: str = "document", **params: str) -> bool:
        """Whether the document has the entry's location at all (a null value counts as present)."""
        return follow(doc, resolve_steps(self[name], params), where) is not _ABSENT


def _split(path: str) -> list[str]:
    # dots inside a [key=value] selector are part of the value, not separators
    out, depth, cur = [], 0, ""
    for ch in path:
        if ch == "." and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        cur += ch
    out.append(cur)
    return out


def resolve_steps(entry: Metric, params: Mapping[str, str]) -> list[str]:
    """The entry's location as steps, parameters filled in after splitting (a group named "FLUX.1-dev" stays one
    step)."""
    missing = [p for p in entry.parameters if p not in params]
    if missing:
        raise InputError(f"metric {entry.name!r} ({entry.path}) needs {', '.join(missing)}")
    return [step.format(**params) if "{" in step else step for step in _split(entry.path)]


_STEP = re.compile(r"^(?P<key>[^\[\]]+)(\[(?P<sel>[^\]]+)\])?$")


def follow(doc: Any, steps: list[str], where: str = "document") -> Any:
    """The object at `steps` in `doc`, or the _ABSENT marker when a key is missing. A step `key[a=x,b=y]` picks the
    one row of the list under `key` with those values; more than one such row is an error (never a guess)."""
    node = doc
    for step in steps:
        m = _STEP.match(step)
        if m is None:
            raise ValueError(f"bad catalogue path step {step!r}")
        if not isinstance(node, Mapping) or m["key"] not in node:
            return _ABSENT
        node = node[m["key"]]
        if m["sel"] is not None:
            if not isinstance(node, list):
                return _ABSENT
            wanted = dict(part.split("=", 1) for part in m["sel"].split(","))
            hits = [r for r in node if isinstance(r, Mapping) and all(str(r.get(k)) == v for k, v in wanted.items())]
            if len(hits) > 1:
                raise InputError(f"{where}: {'.'.join(steps)}: {len(hits)} rows match [{m['sel']}] (expected one)")
            if not hits:
                return _ABSENT
            node = hits[0]
    return node


def _checked(entry: Metric, value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: expected a number for {entry.name}, got {value!r}")
    value = float(value)
    if math.isnan(value):
        return None
    if not entry.in_range(value):
        raise InputError(f"{where}: {value:g} is outside the range {entry.range_text} of {entry.name} ({entry.label})")
    return value


# ---- the entries ---------------------------------------------------------------------------------------------------

_POPE_RATES = {
    "accuracy": ("POPE accuracy", "(TP + TN) / n over the yes/no answers", "higher"),
    "precision": ("POPE precision", "TP / (TP + FP); null when nothing was answered positive", "higher"),
    "recall": ("POPE recall", "TP / (TP + FN); null when no truth is positive", "higher"),
    "f1": ("POPE F1", "2·P·R / (P + R) (0 when P + R = 0); null when P or R is undefined", "higher"),
    "yes_ratio": ("yes ratio", "answers read as yes / n (POPE's bias indicator; 0.5 on POPE's balanced sets)", None),
}
_POPE_COUNTS = {
    "n": "yes/no answers scored (failed ones left out; unknown ones in, except under the release reader)",
    "n_failed": "yes/no requests that failed or came back empty (left out)",
    "n_unknown": "answers the parser could not read as yes or no (excluded under the release reader)",
    "n_default_rule": "answers the parser read only by its default rule: for POPE's rule (pope, pope_official, "
    "pope_lower) a yes the answer does not affirm (the release reader reads it as no or cannot read it: another "
    "language, an emoji, a refusal, a hedge); for a parser that leaves what it cannot read unknown and counts it "
    "wrong (exact, lmms_eval, vlmevalkit, amber, ...), its unknown answers; 0 for the release reader",
    "tp": "true positives",
    "fp": "false positives",
    "tn": "true negatives",
    "fn": "false negatives, unknown answers to positive truths included",
    "pred_yes": "answers read as yes",
    "pred_no": "answers read as no",
    "truth_yes": "questions whose truth is yes",
    "truth_no": "questions whose truth is no",
}
_CAPTION = {
    "chair_s": ("CHAIR_s", "captions with ≥ 1 hallucinated object / captions", "lower", "fraction"),
    "chair_i": (
        "CHAIR_i",
        "hallucinated object mentions / all object mentions (duplicates counted)",
        "lower",
        "fraction",
    ),
    "n_captions": ("captions", "captions scored", None, "count"),
    "n_mentions": ("object mentions", "object mentions found in the captions", None, "count"),
    "n_hallucinated_mentions": ("hallucinated mentions", "mentions of objects not in the truth", None, "count"),
    "n_hallucinated_captions": ("hallucinated captions", "captions with ≥ 1 hallucinated mention", None, "count"),
}
_AMBER_SECTIONS = ("overall", "existence", "attribute", "state", "number", "action", "relation")
_AMBER_DISC = {
    "accuracy": ("accuracy", "correct answers / answers (×100)"),
    "precision": ("precision", '"No" is the positive class: correct No / answered No (×100)'),
    "recall": ("recall", "correct No / truth No (×100)"),
    "f1": ("F1", "2·P·R / (P + R + ε) on the fractions (×100); ε = 1e-4"),
}
_AMBER_GEN = {
    "chair": ("AMBER CHAIR", "hallucinated object mentions / in-vocabulary mentions (×100)", "lower"),
    "cover": ("AMBER Cover", "truth objects mentioned / truth objects (×100)", "higher"),
    "hal": ("AMBER Hal", "% of responses with ≥ 1 hallucinated mention", "lower"),
    "cog": ("AMBER Cog", "annotated hallucination-prone objects mentioned / all of them (×100)", "lower"),
}


def _count(name: str, label: str, document: str, path: str, definition: str, reference: str, failed=COUNT_RULE):
    return Metric(name, label, document, path, definition, reference, 0, None, None, failed, unit="count")


def _section_entries(prefix: str, path_prefix: str, scope: str) -> list[Metric]:
    """The numbers of one ODE section (the whole answer set, or one breakdown group): rate, POPE, generative."""
    out = [
        Metric(
            f"{prefix}hallucination_rate",
            "hallucination rate",
            "metrics",
            f"{path_prefix}hallucination_rate",
            f"hallucinated answers / judged answers {scope}: a yes/no answer that is wrong, or a caption naming an "
            "object neither in the scene nor confirmed by the detector",
            ODE_REF + ", §4 (hallucination rate per distribution, fig. 6)",
            0,
            1,
            "lower",
            FAILED_EXCLUDED + " Unknown yes/no answers are not judged (left out of n_judged).",
        ),
        _count(
            f"{prefix}n_judged",
            "judged answers",
            "metrics",
            f"{path_prefix}n_judged",
            f"answers judged {scope}",
            ODE_REF,
        ),
        _count(
            f"{prefix}n_hallucinated",
            "hallucinated answers",
            "metrics",
            f"{path_prefix}n_hallucinated",
            f"judged answers flagged hallucinated {scope}",
            ODE_REF,
        ),
        _count(
            f"{prefix}n_failed",
            "failed answers",
            "metrics",
            f"{path_prefix}n_failed",
            f"failed or empty answers {scope}",
            ODE_REF,
        ),
    ]
    for key, (label, definition, better) in _POPE_RATES.items():
        out.append(
            Metric(
                f"{prefix}pope.{key}",
                label,
                "metrics",
                f"{path_prefix}pope.{key}",
                f"{definition}, {scope}; positive class = the metrics' `positive` (yes by default)",
                POPE_REF + ", evaluate.py",
                0,
                1,
                better,
                POPE_UNKNOWN,
            )
        )
    for key, definition in _POPE_COUNTS.items():
        out.append(
            _count(
                f"{prefix}pope.{key}",
                f"POPE {key}",
                "metrics",
                f"{path_prefix}pope.{key}",
                f"{definition}, {scope}",
                POPE_REF,
            )
        )
    for key, (label, definition, better, unit) in _CAPTION.items():
        ode_label = "ODE " + label if unit == "fraction" else label
        out.append(
            Metric(
                f"{prefix}generative.{key}",
                ode_label,
                "metrics",
                f"{path_prefix}generative.{key}",
                f"CHAIR-like over ODE's concept mentions, {scope}: {definition}; supported = a truth object or a "
                "synonym of one (CHAIR's synonym table)",
                CHAIR_REF + " as applied by " + ODE_REF,
                0,
                1 if unit == "fraction" else None,
                better,
                CAPTION_FAILED,
                unit=unit,
            )
        )
    out.append(
        Metric(
            f"{prefix}generative.cog",
            "ODE Cog",
            "metrics",
            f"{path_prefix}generative.cog",
            f"hallucination-prone objects the captions name / hallucination-prone objects listed, {scope}; an "
            "image's are the heaviest neighbours of its scene objects in the graph scoring.cog_graph names (G_H, or "
            "co-occurrence as ODE's code), at most scoring.cog_objects, never a truth object, a synonym of one or a "
            "detected object; null when none is listed",
            AMBER_REF + " (Cog) as computed by " + ODE_REF + "'s scorer",
            0,
            1,
            "lower",
            CAPTION_FAILED,
        )
    )
    out.append(
        _count(
            f"{prefix}generative.n_hallu_prone",
            "hallucination-prone objects",
            "metrics",
            f"{path_prefix}generative.n_hallu_prone",
            f"hallucination-prone objects listed for the scored captions, {scope} (Cog's denominator)",
            ODE_REF,
        )
    )
    out.append(
        _count(
            f"{prefix}generative.n_hallu_prone_mentioned",
            "hallucination-prone objects named",
            "metrics",
            f"{path_prefix}generative.n_hallu_prone_mentioned",
            f"listed hallucination-prone objects a caption names (directly or by a synonym), {scope}",
            ODE_REF,
        )
    )
    out.append(
        Metric(
            f"{prefix}generative.coverage",
            "ODE coverage",
            "metrics",
            f"{path_prefix}generative.coverage",
            f"scene objects mentioned / scene objects, {scope}",
            ODE_REF + " (AMBER's Cover on ODE's truth)",
            0,
            1,
            "higher",
            CAPTION_FAILED,
        )
    )
    return out


def _metrics_entries() -> list[Metric]:
    out = [
        _count(
            "n_answers", "answers", "metrics", "n_answers", "answers in the scored files, failed ones included", ODE_REF
        ),
        _count(
            "n_requests_failed",
            "failed requests",
            "metrics",
            "n_requests_failed",
            "answers whose request failed (status failed): the part of n_failed that never got an answer "
            "(POPE / AMBER / COCO sources)",
            ODE_REF,
        ),
        _count(
            "n_unknown",
            "unknown answers",
            "metrics",
            "n_unknown",
            "yes/no answers (not failed) the parser could not read (ODE layout; POPE sources: pope.n_unknown)",
            ODE_REF,
        ),
        _count(
            "n_default_rule",
            "answers read by the default rule",
            "metrics",
            "n_default_rule",
            "yes/no answers (not failed) the parser read only by its default rule (ODE layout; see pope.n_default_rule)",
            ODE_REF,
        ),
        _count(
            "default_rule_reasons",
            "why the default rule read them",
            "metrics",
            "default_rule_reasons.{reason}",
            "the answers of n_default_rule by why the release reader does not read them as the parser did: refusal, "
            "hedge, non_english, emoji, no_yes_no_word, negation (it reads no), affirmation (it reads yes); the "
            "phrases are the shared table resources/answers/unreadable.tsv (ODE layout)",
            ODE_REF,
        ),
        _count(
            "pope.default_rule_reasons",
            "why the default rule read them (POPE)",
            "metrics",
            "pope.default_rule_reasons.{reason}",
            "pope.n_default_rule by reason, as default_rule_reasons (`halluflow score pope`)",
            POPE_REF,
        ),
    ]
    out += _section_entries("", "", "over all answers")
    # ODE's breakdowns: the same section numbers per group of one column (by_distribution.fictional.pope.f1 ...);
    # breakdown = distribution, pair_kind, query_type, attribute_kind, generator, distribution_query_type or
    # distribution_pair_kind.
    out += _section_entries("by.", "by_{breakdown}.{group}.", "over the answers of one breakdown group")
    for key, (label, definition, better, unit) in _CAPTION.items():
        out.append(
            Metric(
                f"chair.{key}",
                label,
                "metrics",
                f"chair.{key}",
                f"{definition}; COCO objects and CHAIR's synonym list (`score chair`, COCO sources)",
                CHAIR_REF + ", chair.py",
                0,
                1 if unit == "fraction" else None,
                better,
                CAPTION_FAILED,
                unit=unit,
            )
        )
    out.append(
        _count(
            "chair.n_failed",
            "CHAIR failed captions",
            "metrics",
            "chair.n_failed",
            "captions that failed or came back empty (left out)",
            CHAIR_REF,
        )
    )
    out += _amber_entries("", "", "")
    # ODE's scorer per breakdown group (by_distribution_pair_kind.fictional/entity_entity.amber.existence.f1 ...)
    out += _amber_entries("by.", "by_{breakdown}.{group}.", ", over the answers of one breakdown group")
    out += [
        _count("amber.n_failed", "AMBER failed", "metrics", "amber.n_failed", "failed or empty responses", AMBER_REF),
        _count(
            "amber.n_default_rule",
            "AMBER default rule",
            "metrics",
            "amber.n_default_rule",
            "discriminative responses AMBER read only by its default rule (not exactly Yes / No: counted wrong)",
            AMBER_REF,
        ),
        _count(
            "amber.default_rule_reasons",
            "why AMBER's default rule read them",
            "metrics",
            "amber.default_rule_reasons.{reason}",
            "amber.n_default_rule by why the release reader does not read them (refusal, hedge, non_english, emoji, "
            "no_yes_no_word; negation / affirmation where it reads no / yes)",
            AMBER_REF,
        ),
    ]
    # RePOPE sources with the original POPE file given: what the relabelling changed (halluflow.benchmarks.repope)
    for key, definition in {
        "n_changed": "questions whose corrected label differs from the original POPE label",
        "n_removed": "questions of the original POPE file the corrected file removed (ambiguous ones)",
        "n_original": "questions of the original POPE file",
    }.items():
        out.append(
            _count(
                f"pope.relabelled.{key}", f"RePOPE {key}", "metrics", f"pope.relabelled.{key}", definition, REPOPE_REF
            )
        )
    return out


def _amber_entries(prefix: str, path_prefix: str, scope: str) -> list[Metric]:
    """AMBER's discriminative sections and generative scores: `score amber`'s output, and ODE's scorer (the same
    counters on an ODE release) over all answers or one breakdown group."""
    out = []
    for section in _AMBER_SECTIONS:
        for key, (label, definition) in _AMBER_DISC.items():
            out.append(
                Metric(
                    f"{prefix}amber.{section}.{key}",
                    f"AMBER {section} {label}",
                    "metrics",
                    f"{path_prefix}amber.{section}.{key}",
                    f"{definition} over AMBER's {section} questions{scope}; denominators start at 0.001 (existence) "
                    "or 1e-4 as AMBER's counters do; rounded as AMBER prints; ODE sources map a question onto "
                    "AMBER's sections by what it asks (an attribute counterfactual is a state or action question, "
                    "an object counterfactual an existence one, a count a number one)",
                    AMBER_REF,
                    0,
                    100,
                    "higher",
                    AMBER_UNKNOWN,
                    unit="percent",
                )
            )
        out.append(
            _count(
                f"{prefix}amber.{section}.n",
                f"AMBER {section} n",
                "metrics",
                f"{path_prefix}amber.{section}.n",
                f"responses in AMBER's {section} section{scope}",
                AMBER_REF,
            )
        )
    for key, (label, definition, better) in _AMBER_GEN.items():
        note = (
            " (ODE sources: each image's hallucination-prone objects are the heaviest neighbours of its scene "
            "objects in the graph scoring.cog_graph names, at most scoring.cog_objects, as ODE's scorer lists them; "
            "null when no image has one)"
            if key == "cog"
            else " (ODE sources: over ODE's concept mentions)"
        )
        out.append(
            Metric(
                f"{prefix}amber.generative.{key}",
                label,
                "metrics",
                f"{path_prefix}amber.generative.{key}",
                definition + scope + note,
                AMBER_REF + (" as computed by ODE's scorer, " + ODE_REF if key == "cog" else ""),
                0,
                100,
                better,
                CAPTION_FAILED,
                unit="percent",
            )
        )
    out.append(
        _count(
            f"{prefix}amber.generative.n",
            "AMBER generative n",
            "metrics",
            f"{path_prefix}amber.generative.n",
            f"generative responses scored{scope}",
            AMBER_REF,
        )
    )
    return out


def _caos_entries() -> list[Metric]:
    e = "embedders.{embedder}."
    cos = dict(low=-1, high=1, better=None, failed=CAOS_FAILED, unit="cosine")
    ratio = dict(low=None, high=None, better=None, failed=CAOS_FAILED, unit="ratio")
    out = [
        Metric(
            "caos.caos_t",
            "CAOS_T",
            "caos",
            e + "caos_t",
            "mean over hallucinated objects h of max cos(e(h), e(g)) over the truth objects g",
            CAOS_REF + ", CAOS_T",
            **cos,
        ),
        Metric(
            "caos.caos_x",
            "CAOS_X",
            "caos",
            e + "caos_x",
            "mean over hallucinated objects of the max cosine to the objects mentioned before them in the caption",
            CAOS_REF + ", CAOS_X",
            **cos,
        ),
        Metric(
            "caos.caos_k",
            "CAOS_K",
            "caos",
            e + "caos_k",
            "mean over hallucinated objects of the max cosine to the k most frequent training objects (k = embedders.<e>.k)",
            CAOS_REF + ", CAOS_K",
            **cos,
        ),
        Metric(
            "caos.caos_k_sweep",
            "CAOS_K at k",
            "caos",
            e + "caos_k_sweep.{k}",
            "CAOS_K with the top-k frequent objects, k = 1..10",
            CAOS_REF + " (k sweep)",
            **cos,
        ),
        Metric(
            "caos.caos_avg",
            "CAOS_avg",
            "caos",
            e + "caos_avg",
            "mean of the defined CAOS_T, CAOS_X, CAOS_K",
            CAOS_REF,
            **cos,
        ),
        Metric(
            "caos.caos_t_over_x",
            "CAOS_T/X",
            "caos",
            e + "caos_t_over_x",
            "CAOS_T / CAOS_X (null when CAOS_X is 0 or undefined)",
            CAOS_REF,
            **ratio,
        ),
        Metric("caos.caos_x_over_k", "CAOS_X/K", "caos", e + "caos_x_over_k", "CAOS_X / CAOS_K", CAOS_REF, **ratio),
        _count("caos.k", "k", "caos", e + "k", "number of frequent objects behind CAOS_K", CAOS_REF),
        _count(
            "caos.n_hallucinated",
            "hallucinated objects",
            "caos",
            e + "n_hallucinated",
            "hallucinated objects averaged over",
            CAOS_REF,
        ),
    ]
    for part in ("t", "x", "k"):
        out.append(
            _count(
                f"caos.n_{part}",
                f"n CAOS_{part.upper()}",
                "caos",
                e + f"n_{part}",
                f"hallucinated objects with a defined CAOS_{part.upper()}",
                CAOS_REF,
            )
        )
    for key in ("caos_t", "caos_x", "caos_k"):
        out.append(
            Metric(
                f"caos.subsets.{key}",
                f"{key.upper()} (subset)",
                "caos",
                e + "subsets.{subset}." + key,
                f"{key.upper()} over one subset of hallucinated objects (in_domain, out_of_domain, without_top3_frequent; paper fig. 5)",
                CAOS_REF,
                **cos,
            )
        )
    out.append(
        _count(
            "caos.subsets.n_hallucinated",
            "subset objects",
            "caos",
            e + "subsets.{subset}.n_hallucinated",
            "hallucinated objects in the subset",
            CAOS_REF,
        )
    )
    obj = {
        "precision": ("object precision", "decided objects that are not hallucinated / decided objects", "higher"),
        "recall": ("object recall", "truth objects named / truth objects", "higher"),
        "chair_i": ("CAOS CHAIR_i", "hallucinated objects / decided objects, on the extracted object lists", "lower"),
        "chair_s": ("CAOS CHAIR_s", "captions with ≥ 1 hallucinated object / captions", "lower"),
    }
    for key, (label, definition, better) in obj.items():
        out.append(
            Metric(
                f"caos.objects.{key}",
                label,
                "caos",
                f"objects.{key}",
                definition,
                CAOS_REF + " (object statistics)",
                0,
                1,
                better,
                CAOS_FAILED,
            )
        )
    out.append(
        Metric(
            "caos.objects.objects_per_caption",
            "objects per caption",
            "caos",
            "objects.objects_per_caption",
            "extracted objects / captions",
            CAOS_REF,
            0,
            None,
            None,
            CAOS_FAILED,
            unit="count",
        )
    )
    for key, definition in {
        "n_captions": "captions scored",
        "n_objects": "objects extracted",
        "n_in_domain": "objects in the training vocabulary",
        "n_out_of_domain": "objects outside it (judged by the oracle)",
        "n_oracle_judged": "objects the oracle judged",
        "n_oracle_ties": "oracle votes that tied",
        "n_undecided": "objects nobody could judge (left out)",
        "n_hallucinated": "objects judged hallucinated",
    }.items():
        out.append(_count(f"caos.objects.{key}", key, "caos", f"objects.{key}", definition, CAOS_REF))
    out.append(
        Metric(
            "caos.sequential.rate",
            "rate at position",
            "caos",
            "sequential[position={position}].rate",
            "hallucinated / decided objects at one position of the caption (0 = first)",
            CAOS_REF,
            0,
            1,
            "lower",
            CAOS_FAILED,
        )
    )
    for key in ("n_objects", "n_hallucinated"):
        out.append(
            _count(
                f"caos.sequential.{key}",
                key,
                "caos",
                f"sequential[position={{position}}].{key}",
                f"{key} at one position",
                CAOS_REF,
            )
        )
    for key, definition in {
        "n_generative_queries": "generative queries of the release",
        "n_answers_failed": "their answers that failed or came back empty (left out)",
        "n_answers_missing": "queries without an answer row",
        "extraction.llm_dropped": "objects the LLM extractor named that were dropped",
        "extraction.negated_mentions_left_out": "mentions left out as negated",
        "extraction.meta_words_left_out": "mentions of words about the image itself (picture, photo, image, scene, "
        "view, background, shot...: resources/caos/meta_words.txt) left out as no objects (caos.meta_words: skip)",
    }.items():
        out.append(_count(f"caos.{key}", key, "caos", key, definition, CAOS_REF))
    out.append(
        _count(
            "caos.extraction.llm_status",
            "extraction status",
            "caos",
            "extraction.llm_status.{status}",
            "captions per LLM extraction status (not_used, ok, unparsed)",
            CAOS_REF,
        )
    )
    out.append(
        Metric(
            "caos.metrics.pope_f1",
            "CAOS POPE-F1",
            "caos",
            "metrics.pope_f1",
            "POPE F1 copied from the scoring stage's metrics (metrics.paths.pope_f1 names its location)",
            POPE_REF,
            0,
            1,
            "higher",
            POPE_UNKNOWN,
        )
    )
    for key, label in (("chair_s", "CAOS side CHAIR_s"), ("chair_i", "CAOS side CHAIR_i")):
        out.append(
            Metric(
                f"caos.metrics.{key}",
                label,
                "caos",
                f"metrics.{key}",
                f"{key} copied from the scoring stage's metrics (metrics.paths.{key} names its location)",
                CHAIR_REF,
                0,
                1,
                "lower",
                CAPTION_FAILED,
            )
        )
    return out


def _cedi_block(prefix: str, path: str, scope: str) -> list[Metric]:
    dist = dict(low=0, high=None, better="lower", failed=CEDI_FAILED, unit="edit cost")
    g = f"{CEDI_REF}, graph edit distance with CEDI's costs"
    return [
        Metric(
            f"{prefix}ged",
            "CEDI GED",
            "cedi",
            path + "ged",
            f"mean graph edit distance between truth and predicted scene graph, {scope}",
            g,
            **dist,
        ),
        Metric(
            f"{prefix}ged_hal",
            "CEDI GED_hal",
            "cedi",
            path + "ged_hal",
            f"the part of the edit cost due to predicted content absent from the truth (hallucination), {scope}",
            g,
            **dist,
        ),
        Metric(
            f"{prefix}ged_miss",
            "CEDI GED_miss",
            "cedi",
            path + "ged_miss",
            f"the rest of the edit cost (lost coverage), {scope}",
            g,
            **dist,
        ),
        Metric(
            f"{prefix}ged_normalized",
            "CEDI GED normalized",
            "cedi",
            path + "ged_normalized",
            f"GED / the configured ged_normalizer, {scope}",
            g,
            **dist,
        ),
        Metric(
            f"{prefix}sg_delta_con",
            "CEDI SG ΔCon",
            "cedi",
            path + "sg_delta_con",
            f"mean number of scene-graph elements whose polarity flips between turns of a conversation, {scope} (defined from the paper, docs/cedi.md)",
            CEDI_REF + ", SG ΔCon",
            0,
            None,
            "lower",
            CEDI_FAILED,
            unit="flips",
        ),
        Metric(
            f"{prefix}hallucination_rate",
            "CEDI hallucination rate",
            "cedi",
            path + "hallucination_rate",
            f"hallucinated turns / judged turns, {scope}",
            CEDI_REF + ", per-turn hallucination rate",
            0,
            1,
            "lower",
            CEDI_FAILED,
        ),
    ]


def _cedi_entries() -> list[Metric]:
    out = _cedi_block("cedi.", "", "CEDI examiner with history (the paper's main setting; `headline` names it)")
    s = "summary.{setting}."
    for key in ("ged", "ged_hal", "ged_miss", "ged_normalized", "sg_delta_con", "hallucination_rate"):
        base = next(e for e in out if e.name == f"cedi.{key}")
        out.append(
            Metric(
                f"cedi.summary.{key}",
                base.label + " (setting)",
                "cedi",
                s + key,
                base.definition.rsplit(",", 1)[0]
                + ", for one examiner/history setting (cedi/with, cedi/without, caption/..., prompt/...)",
                base.reference,
                base.low,
                base.high,
                base.better,
                base.failed,
                base.unit,
            )
        )
    out.append(
        Metric(
            "cedi.summary.exact_fraction",
            "exact graphs",
            "cedi",
            s + "exact_fraction",
            "conversations whose predicted graph equals the truth (GED 0) / conversations",
            CEDI_REF,
            0,
            1,
            "higher",
            CEDI_FAILED,
        )
    )
    out.append(
        _count(
            "cedi.summary.conversations",
            "conversations",
            "cedi",
            s + "conversations",
            "conversations graded in the setting",
            CEDI_REF,
        )
    )
    for block in ("turn_hallucination", "by_question_type.{question_type}", "by_turn.{turn}"):
        name = block.split(".")[0]
        out.append(
            Metric(
                f"cedi.summary.{name}.rate",
                f"CEDI rate ({name})",
                "cedi",
                f"{s}{block}.rate",
                f"hallucinated / judged turns ({name.replace('_', ' ')})",
                CEDI_REF,
                0,
                1,
                "lower",
                CEDI_FAILED,
            )
        )
        for key in ("n", "n_judged", "n_hallucinated"):
            out.append(
                _count(
                    f"cedi.summary.{name}.{key}",
                    key,
                    "cedi",
                    f"{s}{block}.{key}",
                    f"turns: {key} ({name.replace('_', ' ')})",
                    CEDI_REF,
                    CEDI_FAILED,
                )
            )
    for where, prefix in (("error_types", "cedi.error_types"), (s + "error_types", "cedi.summary.error_types")):
        out.append(
            _count(
                f"{prefix}.counts",
                "error type count",
                "cedi",
                where + ".counts.{error_type}",
                "hallucinated turns of one error type (object, attribute, relation, other)",
                CEDI_REF + ", error analysis",
            )
        )
        out.append(
            Metric(
                f"{prefix}.shares",
                "error type share",
                "cedi",
                where + ".shares.{error_type}",
                "hallucinated turns of one error type / hallucinated turns",
                CEDI_REF,
                0,
                1,
                None,
                CEDI_FAILED,
            )
        )
        out.append(
            _count(
                f"{prefix}.n_hallucinated",
                "hallucinated turns",
                "cedi",
                where + ".n_hallucinated",
                "hallucinated turns typed",
                CEDI_REF,
            )
        )
    for key, label, what in (
        (
            "n_failed_turns",
            "failed LLM turns",
            "examiner turns whose context, switch or question request to the "
            "examiner's LLM failed (raised, 503, timed out); each went on with the template / random fallback",
        ),
        (
            "n_max_rounds",
            "conversations at the cap",
            "conversations that reached cedi.max_rounds without an END (the cap, not the examiner's choice)",
        ),
    ):
        out.append(_count(f"cedi.summary.{key}", label, "cedi", s + key, what + ", per setting", CEDI_REF))
    out.append(
        _count(
            "cedi.summary.ended_by",
            "conversations by end",
            "cedi",
            s + "ended_by.{end_reason}",
            "conversations per way they ended: coverage (END: the scene graph's coverage goal met), exhausted (END: "
            "nothing left to ask), switch (the switch chose END), max_rounds (the cap), fixed (a baseline's length)",
            CEDI_REF,
        )
    )
    out.append(
        Metric(
            "cedi.summary.coverage_mean",
            "coverage",
            "cedi",
            s + "coverage_mean",
            "mean share of the truth graph's objects, attributes and related pairs a conversation covered (asked "
            "about or stated in an answer), the examiner's END goal",
            CEDI_REF,
            0,
            1,
            None,
            CEDI_FAILED,
        )
    )
    out.append(
        Metric(
            "cedi.summary.turns_mean",
            "turns per conversation",
            "cedi",
            s + "turns_mean",
            "mean number of turns per conversation",
            CEDI_REF,
            0,
            None,
            None,
            CEDI_FAILED,
            unit="count",
        )
    )
    for key, what in (
        ("n_failed_turns", "examiner turns with a failed LLM request (context, switch, question)"),
        ("n_failed_judge_turns", "turns whose LLM judge request failed (the rule judgement stands)"),
        ("n_failed_parses", "conversations whose LLM parser request failed (the rule parser's graph stands)"),
    ):
        out.append(
            _count(f"cedi.fallbacks.llm_failures.{key}", key, "cedi", f"fallbacks.llm_failures.{key}", what, CEDI_REF)
        )
    out.append(
        _count(
            "cedi.fallbacks.fell_back",
            "fallbacks",
            "cedi",
            "fallbacks.{component}.fell_back",
            "times an LLM component (parser, question_writer, switch) was replaced by its rule/template fallback",
            CEDI_REF,
        )
    )
    out.append(
        _count(
            "cedi.fallbacks.used",
            "components used",
            "cedi",
            "fallbacks.{component}.used.{source}",
            "turns or conversations produced by each source of a component",
            CEDI_REF,
        )
    )
    out.append(
        _count(
            "cedi.settings.parser_used",
            "parser used",
            "cedi",
            "settings.parser_used.{source}",
            "conversations parsed by each parser",
            CEDI_REF,
        )
    )
    out += _cedi_comparison_entries()
    return out


def _cedi_comparison_entries() -> list[Metric]:
    """CEDI's examiners x graders comparison (grades.json `comparison.<examiner>/<history>`, halluflow.cedi.comparison)
    and the premise-rejection rate beside each setting's summary."""
    c = "comparison.{setting}."
    valor_ref = (
        'Qiu, Hu, Dou, Peng, "VALOR-EVAL: Holistic Coverage and Faithfulness Evaluation of Large Vision-Language '
        'Models" (VALOR-style grader on CEDI transcripts)'
    )
    on_answers = "over the answers of one examiner/history setting (one answer = one caption)"
    out = [
        Metric(
            f"cedi.comparison.{k}",
            f"CHAIR_{k[-1]} (CEDI transcripts)",
            "cedi",
            f"{c}chair.{k}",
            what + " " + on_answers + ", CHAIR's COCO vocabulary against the truth graph's objects",
            CHAIR_REF,
            0,
            1,
            "lower",
            CAPTION_FAILED,
        )
        for k, what in (
            ("chair_s", "answers naming >= 1 object outside the truth / answers"),
            ("chair_i", "mentions of objects outside the truth / all object mentions"),
        )
    ]
    out += [
        _count(f"cedi.comparison.chair.{k}", k, "cedi", f"{c}chair.{k}", f"CHAIR on CEDI transcripts: {k}", CHAIR_REF)
        for k in ("n_captions", "n_mentions", "n_hallucinated_mentions", "n_hallucinated_captions", "n_failed")
    ]
    for key, better, what in (
        (
            "faith_i",
            "higher",
            "extracted items the truth graph supports / extracted items, pooled over objects, "
            "attributes and relations (faithfulness = precision)",
        ),
        (
            "coverage_i",
            "higher",
            "truth-graph items the answers matched / truth items, pooled over kinds (coverage = recall)",
        ),
        (
            "faithfulness",
            "higher",
            "extracted items of one kind ({kind}: object, attribute, relation) the truth "
            "supports / extracted items of that kind",
        ),
        ("coverage", "higher", "truth items of one kind matched / truth items of that kind"),
    ):
        path = f"{c}valor.{key}" + (".{kind}" if key in ("faithfulness", "coverage") else "")
        out.append(
            Metric(
                f"cedi.comparison.valor.{key}",
                f"VALOR {key}",
                "cedi",
                path,
                f"{what}, in percent, summed over the conversations of one setting; extraction by the llm backend or "
                "the rule fallback (graders.described.valor, fallbacks.valor_extractor)",
                valor_ref,
                0,
                100,
                better,
                "Failed answers are not extracted; a conversation with no answer extracts nothing.",
                unit="percent",
            )
        )
    out += [
        _count(f"cedi.comparison.valor.{k}", k, "cedi", f"{c}valor.{k}", f"VALOR-style grader: {k}", valor_ref)
        for k in ("n_extracted", "n_matched", "conversations")
    ]
    out.append(
        Metric(
            "cedi.comparison.radar",
            "CEDI radar radius",
            "cedi",
            c + "radar.{axis}",
            "one radar axis as the paper normalises it (axis: chair_s, chair_i = score/100; ged = GED/150; "
            "sg_delta_con = ΔCon/5; valor = (100 − faith_i)/50; hallucination_rate = score/100); larger = more "
            "hallucination exposed",
            CEDI_REF + ", radar (Fig. 3)",
            0,
            None,
            "lower",
            CEDI_FAILED,
            unit="ratio",
        )
    )
    s = "summary.{setting}.premise_rejection."
    out.append(
        Metric(
            "cedi.summary.premise_rejection.rate",
            "premise rejection",
            "cedi",
            s + "rate",
            "judged false-premise (unanswerable) turns whose answer rejects the premise or declines / judged "
            "false-premise turns, for one examiner/history setting",
            CEDI_REF + ", premise rejection or refusal",
            0,
            1,
            "higher",
            CEDI_FAILED,
        )
    )
    out += [
        _count(
            f"cedi.summary.premise_rejection.{k}",
            k,
            "cedi",
            s + k,
            f"false-premise turns: {k}",
            CEDI_REF,
            CEDI_FAILED,
        )
        for k in ("n", "n_judged", "n_rejected", "n_refused")
    ]
    return out


def _samf_entries() -> list[Metric]:
    row = "rows[group={group}]."
    out = []
    meaning = {
        "ghr": (
            "GHR",
            "general hallucination rate: the cascade of eq. 22 per answer (negative-set similarity ≥ τ1, judge, token and semantic similarity to the truth), averaged",
            "eq. 22",
        ),
        "bhr": (
            "BHR",
            "share of atomic claims unsupported or contradicted by the evidence (eqs. 24-28), averaged",
            "eqs. 24-28",
        ),
        "shr": ("SHR", "judge-rated claim severity in [0, 1] (eq. 29), averaged", "eq. 29"),
        "ghs": ("GHS", "judge hallucination score 0-10 normalised to [0, 1] (eq. 30), averaged", "eq. 30"),
    }
    for setting in ("standard", "dynamic", "fuzzed"):
        for m, (label, definition, eq) in meaning.items():
            out.append(
                Metric(
                    f"samf.{m}_{setting}",
                    f"{label} {setting}",
                    "samf",
                    f"{row}{m}_{setting}",
                    f"{definition}, on the {setting} inputs of the held-out split",
                    f"{SAMF_REF}, {eq}",
                    0,
                    1,
                    "lower",
                    SAMF_FAILED,
                )
            )
            out.append(
                Metric(
                    f"samf.{m}_risk_{setting}",
                    f"{label} risk-weighted {setting}",
                    "samf",
                    f"{row}{m}_risk_{setting}",
                    f"Σ r·{label} / Σ r over instances with risk level r (eq. 31), {setting} inputs",
                    f"{SAMF_REF}, eq. 31",
                    0,
                    1,
                    "lower",
                    SAMF_FAILED,
                )
            )
        out.append(
            _count(
                f"samf.n_failed_{setting}",
                f"SAMF failed answers ({setting})",
                "samf",
                f"{row}n_failed_{setting}",
                f"failed answers on the {setting} inputs (left out)",
                SAMF_REF,
                SAMF_FAILED,
            )
        )
        out.append(
            _count(
                f"samf.n_yon_unparsed_{setting}",
                f"GHR unreadable yes/no answers ({setting})",
                "samf",
                f"{row}n_yon_unparsed_{setting}",
                f"yes/no answers on the {setting} inputs with no standalone yes/no word (another language, an emoji, "
                "a refusal): left out of GHR (samf.ghr.yon_unparsed: exclude, the default) or counted as not "
                "hallucinated (not_hallucinated, the paper's 'otherwise' branch)",
                SAMF_REF,
                SAMF_FAILED,
            )
        )
        for m in ("shr", "ghs"):
            out.append(
                _count(
                    f"samf.n_{m}_fallback_{setting}",
                    f"{m.upper()} fallbacks ({setting})",
                    "samf",
                    f"{row}n_{m}_fallback_{setting}",
                    f"{m.upper()} values from the rule fallback because the judge failed ({setting})",
                    SAMF_REF,
                    SAMF_FAILED,
                )
            )
    out.append(
        Metric(
            "samf.ghr_delta",
            "GHR fuzzed − standard",
            "samf",
            row + "ghr_delta",
            "GHR on fuzzed minus GHR on standard inputs (how much the trained policy raises hallucination)",
            SAMF_REF + ", Table 11",
            -1,
            1,
            None,
            SAMF_FAILED,
        )
    )
    out.append(
        _count("samf.n", "instances", "samf", row + "n", "instances of the group in the held-out split", SAMF_REF)
    )
    return out + _samf_controller_entries(meaning) + _samf_agreement_entries()


def _samf_controller_entries(meaning: dict) -> list[Metric]:
    """by_category: every controller of samf.controllers x category (overall, object, instruction, knowledge) x
    setting (static = the unmutated inputs, identical for every controller; fuzzed = that controller's policies)."""
    row = "by_category[controller={controller},category={category},setting={setting}]."
    where = "of one controller, category and setting (static or fuzzed) on the held-out split"
    out = [
        Metric(
            f"samf.by_category.{m}",
            f"{label} by controller × category",
            "samf",
            row + m,
            f"{definition}, {where}",
            f"{SAMF_REF}, {eq}; heuristic vs RL controllers, Appendix C.5",
            0,
            1,
            "lower",
            SAMF_FAILED,
        )
        for m, (label, definition, eq) in meaning.items()
    ]
    out.append(_count("samf.by_category.n", "instances", "samf", row + "n", f"instances {where}", SAMF_REF))
    out.append(
        _count(
            "samf.by_category.n_failed",
            "SAMF failed answers",
            "samf",
            row + "n_failed",
            f"failed answers {where} (left out of the means)",
            SAMF_REF,
            SAMF_FAILED,
        )
    )
    return out


def _samf_agreement_entries() -> list[Metric]:
    """agreement: Table 4 (metric-human alignment) over the static answers with a human label."""
    ref = f"{SAMF_REF}, Table 4 (metric-human alignment)"
    row = "agreement.table[metric={metric},analysis={analysis}]."
    scope = "of one metric's decisions (value > its threshold) against the human labels; analysis original, risk-weighted or one risk level"
    failed = "Failed answers carry no metric value and are left out; labels of instances without a static answer are counted in n_unmatched."
    stats = {
        "accuracy": ("agreement accuracy", "(TP + TN) / n", 0, 1, "higher"),
        "recall": ("agreement recall", "TP / (TP + FN), hallucinated = positive", 0, 1, "higher"),
        "f1": ("agreement F1", "2TP / (2TP + FP + FN)", 0, 1, "higher"),
        "kappa": ("Cohen's kappa", "(p_o − p_e) / (1 − p_e)", -1, 1, "higher"),
        "pearson": ("Pearson r", "Pearson correlation of metric values with human labels", -1, 1, "higher"),
        "spearman": ("Spearman ρ", "Pearson correlation of the mid-ranks", -1, 1, "higher"),
    }
    out = [
        Metric(f"samf.agreement.{k}", label, "samf", row + k, f"{d} {scope}", ref, lo, hi, better, failed)
        for k, (label, d, lo, hi, better) in stats.items()
    ]
    out.append(
        _count(
            "samf.agreement.n",
            "labelled answers",
            "samf",
            row + "n",
            "static answers with a human label and a metric value",
            ref,
            failed,
        )
    )
    for key, text in (
        ("n_labels", "human labels read (of this model)"),
        ("n_hallucinated", "human labels saying hallucinated (> 0)"),
        ("n_unmatched", "human labels whose instance has no static answer"),
    ):
        out.append(_count(f"samf.agreement.{key}", text, "samf", f"agreement.{key}", text, ref, failed))
    out.append(
        Metric(
            "samf.agreement.threshold",
            "decision threshold",
            "samf",
            "agreement.thresholds.{metric}",
            "value above which a metric's answer counts as hallucinated (samf.agreement.thresholds; 0 unless set, 0.5 for the random row)",
            ref,
            None,
            None,
            None,
            failed,
            unit="ratio",
        )
    )
    return out


def _compare_entries() -> list[Metric]:
    out = []
    rates = {**_POPE_RATES, "hallucination_rate": ("hallucination rate", "hallucinated / judged answers", "lower")}
    for key, (label, definition, better) in rates.items():
        out.append(
            Metric(
                f"compare.{key}",
                label,
                "compare",
                f"models.{{model}}.{key}",
                f"{definition}, with its {BOOT_REF.split(';')[0]} interval (value, ci_low, ci_high, n)",
                BOOT_REF,
                0,
                1,
                better,
                POPE_UNKNOWN if key != "hallucination_rate" else FAILED_EXCLUDED,
                shape="interval",
            )
        )
        out.append(
            Metric(
                f"compare.difference.{key}",
                f"{label} difference",
                "compare",
                f"comparisons[a={{a}},b={{b}}].metrics.{key}.difference",
                f"{label}(a) − {label}(b) on the queries both models answered; ci_low/ci_high from the paired bootstrap",
                BOOT_REF,
                -1,
                1,
                None,
                FAILED_EXCLUDED,
            )
        )
    pair = "comparisons[a={a},b={b}].metrics.{metric}."
    for key, (label, definition, low) in {
        "a": ("value of a", "the metric of model a on the shared queries", 0),
        "b": ("value of b", "the metric of model b on the shared queries", 0),
        "ci_low": ("difference low", "lower end of the paired bootstrap interval of a − b", -1),
        "ci_high": ("difference high", "upper end of the paired bootstrap interval of a − b", -1),
        "p_value": ("p value", "two-sided bootstrap p value of a − b = 0", 0),
    }.items():
        out.append(
            Metric(
                f"compare.pair.{key}", label, "compare", pair + key, definition, BOOT_REF, low, 1, None, FAILED_EXCLUDED
            )
        )
    out.append(
        _count("compare.pair.n", "shared queries", "compare", pair + "n", "queries both models answered", BOOT_REF)
    )
    out.append(
        _count(
            "compare.n_resamples", "resamples", "compare", "models.{model}.n_resamples", "bootstrap resamples", BOOT_REF
        )
    )
    out.append(
        Metric(
            "compare.confidence",
            "confidence",
            "compare",
            "models.{model}.confidence",
            "interval level",
            BOOT_REF,
            0,
            1,
            None,
            FAILED_EXCLUDED,
        )
    )
    out.append(
        _count(
            "compare.n_failed",
            "failed answers",
            "compare",
            "models.{model}.n_failed",
            "failed or empty answers (left out)",
            BOOT_REF,
        )
    )
    out.append(
        _count(
            "compare.n_unknown",
            "unknown answers",
            "compare",
            "models.{model}.n_unknown",
            "yes/no answers the parser could not read (left out of the intervals)",
            BOOT_REF,
        )
    )
    return out


CATALOGUE = Catalogue(_metrics_entries() + _caos_entries() + _cedi_entries() + _samf_entries() + _compare_entries())


def entry_for_path(path: str, document: str = "metrics") -> Metric | None:
    """The entry whose location (parameters as wildcards) matches a concrete dotted path, or None."""
    for e in CATALOGUE.in_document(document):
        if _path_regex(e.path).fullmatch(path):
            return e
    return None


def _path_regex(path: str) -> re.Pattern:
    parts = re.split(r"(\{\w+\})", path)
    return re.compile("".join("[^.]+" if re.fullmatch(r"\{\w+\}", p) else re.escape(p) for p in parts))


# ---- docs/metrics.md ---------------------------------------------------------------------------------------------

DOC_TITLES = {
    "metrics": "POPE, CHAIR, AMBER and ODE (metrics/<model>.json)",
    "caos": "CAOS (caos/<model>.json)",
    "cedi": "CEDI (cedi/<model>/grades.json)",
    "samf": "UniHall / SAMF (fuzz/<model>/comparison.json)",
    "compare": "Intervals and model comparisons (compare/models.json)",
}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(catalogue: Catalogue = CATALOGUE) -> str:
    """docs/metrics.md: every entry, grouped by the document that holds it."""
    lines = [
        "# Metrics: every number halluflow reports",
        "",
        "Generated from `src/halluflow/metrics/catalogue.py` by `halluflow docs metrics --out docs/metrics.md`; "
        "do not edit by hand (a test checks this file equals the generated text).",
        "",
        "The scorecard, the radar, the report tables and `halluflow score compare` read every number through this "
        "catalogue: a location is followed exactly; a null or absent value is shown as n/a; a value outside its "
        "range, or a name not listed here, is an error. Locations are dotted paths in the JSON document named in "
        "the section title; `{name}` is a parameter (an embedder, a breakdown group, a setting) and "
        "`rows[group={group}]` is the one row of a list whose `group` is that value.",
        "",
        "Better: which direction is better (— for counts and diagnostics). The radar draws only bounded metrics "
        "with a direction, each as its share of the range, and flips lower-is-better ones (drawn as 1 − value, "
        "named so on the axis) so that outward is better everywhere.",
        "",
    ]
    for document, title in DOC_TITLES.items():
        entries = catalogue.in_document(document)
        lines += [f"## {title}", "", f"Document: {DOCUMENTS[document]}.", ""]
        rules = sorted({e.failed for e in entries})
        lines += ["Failed, empty and unknown answers:", ""]
        key = {rule: chr(ord("A") + i) for i, rule in enumerate(rules)}
        lines += [f"- ({key[r]}) {r}" for r in rules] + [""]
        lines += [
            "| name | label | location | range | better | unit | definition | source | failed |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for e in entries:
            lines.append(
                "| "
                + " | ".join(
                    _cell(x)
                    for x in (
                        f"`{e.name}`",
                        e.label,
                        f"`{e.path}`",
                        e.range_text,
                        e.better or "—",
                        e.unit + (" (interval)" if e.shape == "interval" else ""),
                        e.definition,
                        e.reference,
                        key[e.failed],
                    )
                )
                + " |"
            )
        lines.append("")
    return "\n".join(lines)


def check_markdown(path: str) -> None:
    """Refuse (InputError, one line) when the file at `path` is not the catalogue's Markdown as `markdown()` writes
    it (`halluflow docs metrics --check`)."""
    from pathlib import Path

    current = Path(path).read_text(encoding="utf-8") if Path(path).exists() else None
    if current != markdown():
        raise InputError(f"{path}: out of date with the metric catalogue (run `halluflow docs metrics --out {path}`)")
