"""UniHall metric suite (UniHall/SAMF paper, Sec. 4.1 and Appendix D): GHR cascade (eq. 22), BHR claim verification
(eqs. 24-28), SHR (eq. 29) and GHS (eq. 30) through the `llm` judge, and risk-aware aggregation (eq. 31 / 5).

The paper does not publish its thresholds: tau1/tau2/tau3 are options with documented defaults (TAU_DEFAULTS).
Every LLM step has a deterministic rule-based fallback used when no judge is configured or its reply does
not parse, so the offline default is reproducible; each row records which path decided.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

import numpy as np

from ..errors import ConfigError, InputError
from ..io import read_jsonl
from ..metrics.parsers import is_failed, reader
from .judges import EmbedderSimilarity, as_judge, parse_score, parse_true_false, parse_verdict  # noqa: F401 (re-exported)
from .schema import group_of, negative_answers, truth_answers

# tau1: similarity of the response to a NEGATIVE answer that already counts as hallucination (high: near-copy);
# tau3: token F1 to a truth answer that counts as correct; tau2: semantic similarity to a truth answer.
TAU_DEFAULTS = {"tau1": 0.8, "tau2": 0.8, "tau3": 0.5}
# BHR rule verifier: share of a claim's content words that must appear in the evidence to count as entailed.
SUPPORT_DEFAULT = 0.5

_ARTICLES = {"a", "an", "the"}
STOPWORDS = frozenset(
    """a an the is are was were be been being am it its it's this that these those there here of in on at to for
    with by from as and or but if then so than too very can could would should may might will shall do does did
    i you he she we they me him her us them my your his our their what which who whom whose where when why how
    image picture photo shown shows show see seen visible appears appear looks look yes no not also just only
    some any all each one""".split()
)
_NEGATORS = {"no", "not", "without", "never", "none", "isn't", "aren't", "doesn't", "don't", "nor"}
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def normalize(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def tokens(text: str) -> list[str]:
    return [t for t in _WORD.findall(text.lower()) if t not in _ARTICLES]


def token_f1(a: str, b: str) -> float:
    """SQuAD-style token F1: the token-level similarity Sim_tok of eq. (22)."""
    ta, tb = tokens(a), tokens(b)
    if not ta or not tb:
        return 0.0
    common = sum(min(ta.count(t), tb.count(t)) for t in set(ta) & set(tb))
    if common == 0:
        return 0.0
    p, r = common / len(ta), common / len(tb)
    return 2 * p * r / (p + r)


# The first standalone yes/no word of the response (regex match, eq. 22's binary branch): the shared module's
# `unihall` variant.
ghr_yes_no = reader("unihall")


def contains_phrase(text: str, phrase: str) -> bool:
    p = normalize(phrase)
    return bool(p) and f" {p} " in f" {normalize(text)} "


def negated_phrase(text: str, phrase: str) -> bool:
    """`not red` / `no dog`: the phrase appears but only right after a negator."""
    words, target = normalize(text).split(), normalize(phrase).split()
    hits = [i for i in range(len(words) - len(target) + 1) if words[i : i + len(target)] == target]
    return bool(hits) and all(any(w in _NEGATORS for w in words[max(0, i - 2) : i]) for i in hits)


# ---------------------------------------------------------------------------------------------- similarity
class Similarity(Protocol):
    def __call__(self, a: str, b: Sequence[str]) -> float: ...


class LexicalSimilarity:
    """Cosine of character 3-gram counts: a deterministic, model-free Sim_NLP for the offline default."""

    name = "lexical"

    def describe(self) -> dict:
        return {"kind": "trigram", "model": None}  # model-free: nothing to name

    @staticmethod
    def _grams(text: str) -> dict[str, int]:
        t = f"  {normalize(text)}  "
        out: dict[str, int] = {}
        for i in range(len(t) - 2):
            out[t[i : i + 3]] = out.get(t[i : i + 3], 0) + 1
        return out

    def __call__(self, a: str, bs: Sequence[str]) -> float:
        ga = self._grams(a)
        na = sum(v * v for v in ga.values()) ** 0.5
        best = 0.0
        for b in bs:
            gb = self._grams(b)
            nb = sum(v * v for v in gb.values()) ** 0.5
            if na and nb:
                best = max(best, sum(v * gb.get(k, 0) for k, v in ga.items()) / (na * nb))
        return best


# ---------------------------------------------------------------------------------------------- judges
class RuleJudge:
    """Deterministic stand-in for Judge_GPT: the response states a negative answer (not negated) and no truth."""

    name = "rule"

    def matches_negative(
        self, response: str, truths: Sequence[str], negatives: Sequence[str], image_path=None, question: str = "-"
    ) -> tuple[bool, str]:
        hit = any(contains_phrase(response, n) and not negated_phrase(response, n) for n in negatives)
        truth = any(contains_phrase(response, g) and not negated_phrase(response, g) for g in truths)
        return hit and not truth, "rule"


class LLMJudge(RuleJudge):
    """Judge_GPT of eq. (22) asked through any `llm` or `vlm` backend (a vlm judge also sees the image); when the
    reply has no TRUE/FALSE the rule judge decides and the stage says `judge_fallback`."""

    name = "llm"
    TEMPLATE = (
        "You check answers for hallucination.\nQuestion: {question}\nCorrect answers: {truths}\n"
        "Known wrong answers: {negatives}\nResponse: {response}\n"
        "Does the response give one of the known wrong answers? Reply TRUE or FALSE."
    )

    def __init__(self, judge):
        self.judge = as_judge(judge)
        self.name = self.judge.kind

    def matches_negative(self, response, truths, negatives, image_path=None, question: str = "-"):
        prompt = self.TEMPLATE.format(
            question=question, truths="; ".join(truths), negatives="; ".join(negatives), response=response
        )
        said = self.judge.decide(prompt, parse_true_false, image_path)
        if said is None:
            return super().matches_negative(response, truths, negatives)[0], "fallback"
        return said, self.judge.kind


# ---------------------------------------------------------------------------------------------- GHR
# What GHR does with a yes/no answer it cannot read (no standalone yes/no word): exclude it (halluflow's default,
# counted as yon_unparsed) or count it as not hallucinated (the paper's "otherwise" branch of eq. 22).
YON_UNPARSED = ("exclude", "not_hallucinated")


@dataclass
class GHRScorer:
    """h_GHR of eq. (22). `stage` says which branch decided (auditable, and how the cascade is tested)."""

    tau1: float = TAU_DEFAULTS["tau1"]
    tau2: float = TAU_DEFAULTS["tau2"]
    tau3: float = TAU_DEFAULTS["tau3"]
    similarity: Any = field(default_factory=LexicalSimilarity)
    judge: Any = field(default_factory=RuleJudge)
    # A yes/no answer with no yes/no word in it ("Nein", an emoji, a refusal): "exclude" (default: h is None, left
    # out of every mean and counted as yon_unparsed) or "not_hallucinated" (the paper's "otherwise" branch: h = 0).
    yon_unparsed: str = "exclude"

    def __post_init__(self):
        if self.yon_unparsed not in YON_UNPARSED:
            raise ConfigError(
                f"config key 'samf.ghr.yon_unparsed': {self.yon_unparsed!r}; known: {', '.join(YON_UNPARSED)}"
            )

    def score(self, instance: dict, response: str, image_path: str | None = None) -> tuple[int | None, str]:
        """(h, stage); h is None for a yes/no answer GHR cannot read when yon_unparsed is "exclude"."""
        truths, negatives = truth_answers(instance), negative_answers(instance)
        if instance["seed_data"]["type"] == "YON":
            said = ghr_yes_no(response)
            if said is None:
                # matches neither side: excluded and counted (default), or not a hallucination (the paper's rule)
                return (None if self.yon_unparsed == "exclude" else 0), "yon_unparsed"
            return (1, "yon_negative") if any(said == n.strip().lower() for n in negatives) else (0, "yon_match")
        if negatives and self.similarity(response, negatives) >= self.tau1:
            return 1, "neg_similarity"
        if negatives:
            hit, source = self.judge.matches_negative(
                response, truths, negatives, image_path, instance["seed_data"]["question"]
            )
            if hit:
                return 1, f"judge_{source}"
        if max((token_f1(response, g) for g in truths), default=0.0) >= self.tau3:
            return 0, "tok_truth"
        if self.similarity(response, truths) >= self.tau2:
            return 0, "sem_truth"
        return 0, "otherwise"


# ---------------------------------------------------------------------------------------------- BHR
CLAIM_TYPES = {"object": "Object", "instruction": "Instruction", "knowledge": "Knowledge"}
VERDICTS = ("Entailed", "Contradicted", "Unsupported", "Unverifiable")
HALLUCINATED = frozenset({"Contradicted", "Unsupported"})
# Attribute values (B.2's color / number / size attributes): one in a claim that no truth, knowledge or visual
# fact states is a made-up attribute, however many of the claim's other words the evidence covers.
ATTRIBUTE_WORDS = frozenset(
    """red orange yellow green blue purple violet pink brown black white gray grey silver gold golden beige
    maroon navy teal turquoise cyan magenta tan cream ivory
    zero two three four five six seven eight nine ten eleven twelve dozen several many few single
    big small large tiny huge giant little tall short long wide narrow thick thin round square""".split()
)


@dataclass(frozen=True)
class Claim:
    type: str
    frame: str
    span: str


def decompose_claims(instance: dict, response: str) -> list[Claim]:
    """Rule-based C(y) (eq. 25): sentences, split again at coordinating conjunctions."""
    ctype = CLAIM_TYPES[instance["meta_inf"]["category"]]
    claims = []
    for sentence in re.split(r"[.!?;\n]+", response):
        for part in re.split(r",\s*(?:and|but)\s+|\s+but\s+|,\s+while\s+", sentence):
            span = part.strip(" ,:-\t")
            if re.search(r"[A-Za-z0-9]", span):
                # "No, there is not": a clause opening with yes/no is the binary answer itself.
                frame = "yes_no" if tokens(span)[:1] in (["yes"], ["no"]) else "statement"
                claims.append(Claim(ctype, frame, span))
    return claims


def evidence_sets(instance: dict, detected: dict | None = None) -> dict[str, list[str]]:
    """E = {A, C, E, V} (eq. 24) plus N, the negatives used to detect contradictions, and `absent`, the object
    names a detector oracle looked for and did not find (they contradict a claim stating them)."""
    seed = instance["seed_data"]
    visual = list(instance.get("visual_facts", []))
    if detected:
        visual += [f"There is a {label} in the image." for label, _ in detected["present"]]
    return {
        "A": truth_answers(instance),
        "C": [seed["question"]],
        "E": list(instance.get("evidence", [])),
        "V": visual,
        "N": negative_answers(instance),
        "absent": list(detected["absent"]) if detected else [],
    }


def candidate_objects(instance: dict, response: str) -> list[str]:
    """Object names to ask the detector about: content words of the question, answers and response, in that order.

    Only alphabetic words of 3-12 letters: open-vocabulary detectors cap a text query at a few tokens (OWL: 16), and
    a longer "word" is no object name (a garbled answer's token soup)."""
    texts = [instance["seed_data"]["question"], *truth_answers(instance), *negative_answers(instance), response]
    words = [t for text in texts for t in tokens(text)]
    return list(
        dict.fromkeys(
            w
            for w in words
            if w not in STOPWORDS and w not in ATTRIBUTE_WORDS and w.isascii() and w.isalpha() and 3 <= len(w) <= 12
        )
    )


class RuleVerifier:
    """phi(c, E) of eq. (27) by matching: yes/no against the truth, negatives, then word coverage of evidence.

    Words the claim repeats from the question are context, not evidence: "The car is purple." asked "What color is
    the car?" rests on "purple" alone. An attribute value no evidence states makes the claim Unsupported."""

    name = "rule"

    def __init__(self, support: float = SUPPORT_DEFAULT, tau3: float = TAU_DEFAULTS["tau3"]):
        self.support, self.tau3 = support, tau3

    def verify(
        self, claim: Claim, evidence: dict[str, list[str]], qtype: str, image_path: str | None = None
    ) -> tuple[str, str]:
        span = claim.span
        if qtype == "YON" and claim.frame == "yes_no":
            said = ghr_yes_no(span)
            truth = evidence["A"][0].strip().lower()
            return ("Entailed" if said == truth else "Contradicted"), "rule"
        negs = [n for n in evidence["N"] if n.strip().lower() not in ("yes", "no")]
        if any(contains_phrase(span, n) and not negated_phrase(span, n) for n in negs):
            if not any(contains_phrase(span, a) for a in evidence["A"]):
                return "Contradicted", "rule"
        if any(contains_phrase(span, a) or token_f1(span, a) >= self.tau3 for a in evidence["A"]):
            return "Entailed", "rule"
        if any(contains_phrase(span, obj) and not negated_phrase(span, obj) for obj in evidence.get("absent", [])):
            return "Contradicted", "rule"
        asked = {t for text in evidence["C"] for t in tokens(text)}
        content = [t for t in tokens(span) if t not in STOPWORDS and t not in asked]
        if not content:
            return "Unverifiable", "rule"
        vocab = {t for key in ("A", "E", "V") for text in evidence[key] for t in tokens(text)}
        if any(t in ATTRIBUTE_WORDS and t not in vocab for t in content):
            return "Unsupported", "rule"
        covered = sum(t in vocab for t in content) / len(content)
        return ("Entailed" if covered >= self.support else "Unsupported"), "rule"


class LLMVerifier(RuleVerifier):
    """NLI-style phi(c, E) by the judge (an `llm`, or a `vlm` that also sees the image); when the reply names no
    verdict the rule verifier decides and the claim's source says `fallback`."""

    name = "llm"
    TEMPLATE = (
        "Evidence (reference answers): {A}\nEvidence (instructions): {C}\nEvidence (knowledge): {E}\n"
        "Evidence (visual facts): {V}\nClaim: {claim}\n"
        "Is the claim ENTAILED, CONTRADICTED, UNSUPPORTED or UNVERIFIABLE given the evidence? Reply with one word."
    )

    def __init__(self, judge, **kwargs):
        super().__init__(**kwargs)
        self.judge = as_judge(judge)
        self.name = self.judge.kind

    def verify(self, claim, evidence, qtype, image_path=None):
        fields = {k: "; ".join(evidence[k]) or "-" for k in ("A", "C", "E", "V")}
        verdict = self.judge.decide(self.TEMPLATE.format(claim=claim.span, **fields), parse_verdict, image_path)
        if verdict is None:
            return super().verify(claim, evidence, qtype)[0], "fallback"
        return verdict, self.judge.kind


def bhr(
    instance: dict, response: str, verifier=None, image_path: str | None = None, detected: dict | None = None
) -> tuple[float, list[dict]]:
    """Eq. (28): share of claims judged Unsupported or Contradicted (0 for a response with no claims)."""
    verifier = verifier or RuleVerifier()
    evidence = evidence_sets(instance, detected)
    rows = []
    for c in decompose_claims(instance, response):
        verdict, source = verifier.verify(c, evidence, instance["seed_data"]["type"], image_path)
        rows.append({"type": c.type, "frame": c.frame, "span": c.span, "verdict": verdict, "source": source})
    value = sum(r["verdict"] in HALLUCINATED for r in rows) / len(rows) if rows else 0.0
    return value, rows


# ---------------------------------------------------------------------------------------------- SHR / GHS
SEVERITY_FALLBACK = {"Contradicted": 1.0, "Unsupported": 0.5, "Unverifiable": 0.0, "Entailed": 0.0}
# Where an SHR / GHS value came from: the judge's parsed reply, the rule path because the judge failed, or the
# rule path because no judge is configured.
SOURCES = ("judge", "fallback", "rule")

SHR_TEMPLATE = (
    "Question: {question}\nCorrect answers: {truths}\nWrong answers: {negatives}\n{detector}Response: {response}\n"
    "Split the response into atomic claims. For each claim write one line: <severity 0-10> | <claim>, where 0 means "
    "supported and 10 a severe hallucination."
)
GHS_TEMPLATE = (
    "Question: {question}\nCorrect answers: {truths}\nWrong answers: {negatives}\n{detector}Response: {response}\n"
    "Rate how severely the response hallucinates, from 0 (faithful) to 10 (completely hallucinated). "
    "Reply in the form: Score: <0-10>"
)


def _prompt_fields(instance: dict, response: str, detected: dict | None = None) -> dict[str, str]:
    detector = ""
    if detected and (detected["present"] or detected["absent"]):
        found = "; ".join(f"{label} ({score:.2f})" for label, score in detected["present"]) or "-"
        detector = f"Object detector found: {found}; did not find: {'; '.join(detected['absent']) or '-'}\n"
    return {
        "question": instance["seed_data"]["question"],
        "truths": "; ".join(truth_answers(instance)),
        "negatives": "; ".join(negative_answers(instance)) or "-",
        "response": response,
        "detector": detector,
    }


def parse_claim_severities(reply: str | None) -> list[float] | None:
    scores = [float(m.group(1)) for m in re.finditer(r"^\s*[-*]?\s*(\d+(?:\.\d+)?)\s*\|\s*\S.*$", reply or "", re.M)]
    scores = [s for s in scores if 0 <= s <= 10]
    return scores or None


def shr(
    instance: dict,
    response: str,
    judge=None,
    verifier=None,
    image_path: str | None = None,
    detected: dict | None = None,
) -> tuple[float, str]:
    """Eq. (29): mean claim severity in [0,1]; the judge both splits and grades (with the detector's findings in
    its prompt), else rule claims + verdict severities (detector findings as visual evidence)."""
    judge = as_judge(judge)
    if judge is not None:
        scores = judge.decide(
            SHR_TEMPLATE.format(**_prompt_fields(instance, response, detected)), parse_claim_severities, image_path
        )
        if scores is not None:
            return float(np.mean(scores) / 10.0), "judge"
    _, rows = bhr(instance, response, verifier, image_path, detected)
    value = float(np.mean([SEVERITY_FALLBACK[r["verdict"]] for r in rows])) if rows else 0.0
    return value, "rule" if judge is None else "fallback"


def ghs(
    instance: dict,
    response: str,
    judge=None,
    ghr_value: int | None = None,
    verifier=None,
    image_path: str | None = None,
    detected: dict | None = None,
) -> tuple[float, str]:
    """Eq. (30): judge score 0-10 normalised to [0,1]; the rule path is max(h_GHR, BHR)."""
    judge = as_judge(judge)
    if judge is not None:
        score = judge.decide(
            GHS_TEMPLATE.format(**_prompt_fields(instance, response, detected)), parse_score, image_path
        )
        if score is not None:
            return score / 10.0, "judge"
    h = ghr_value if ghr_value is not None else GHRScorer().score(instance, response)[0]
    if h is None:  # GHR could not read a yes/no answer and excludes it: so does the rule path of GHS
        return None, "rule" if judge is None else "fallback"
    return max(
        float(h), bhr(instance, response, verifier, image_path, detected)[0]
    ), "rule" if judge is None else "fallback"


# ---------------------------------------------------------------------------------------------- aggregation
def risk_weighted(values: Sequence[float], risks: Sequence[int]) -> float:
    """M_risk = sum(r * M) / sum(r) (eq. 31 / 5)."""
    values, risks = np.asarray(values, dtype=float), np.asarray(risks, dtype=float)
    if len(values) != len(risks):
        raise ValueError("values and risks differ in length")
    if len(values) == 0 or risks.sum() == 0:
        return float("nan")
    return float((risks * values).sum() / risks.sum())


SIMILARITIES = ("trigram", "embedder")


def similarity_from_config(spec) -> Similarity:
    """Sim_NLP: "trigram" (character 3-gram cosine, model-free) or an `embedder` registry spec such as
    {"backend": "minilm"} (loaded on first use)."""
    if spec in (None, "trigram", "lexical"):
        return LexicalSimilarity()
    if isinstance(spec, dict) and "backend" in spec:
        from ..models import registry

        return EmbedderSimilarity(lambda: registry.create("embedder", spec), spec)
    if hasattr(spec, "embed"):
        return EmbedderSimilarity(spec)
    raise ConfigError(
        f"config key 'samf.similarity': {spec!r}; give 'trigram' or an embedder block such as {{backend: minilm}}"
    )


def scorer_from_config(cfg: dict | None = None, judge=None, similarity=None) -> GHRScorer:
    """GHR's scorer: thresholds from `cfg` (samf.ghr), Judge_GPT = `judge` (any llm/vlm backend) or the rule judge."""
    cfg = dict(cfg or {})
    return GHRScorer(
        tau1=cfg.get("tau1", TAU_DEFAULTS["tau1"]),
        tau2=cfg.get("tau2", TAU_DEFAULTS["tau2"]),
        tau3=cfg.get("tau3", TAU_DEFAULTS["tau3"]),
        yon_unparsed=cfg.get("yon_unparsed", "exclude"),
        similarity=similarity
        if similarity is not None and not isinstance(similarity, (str, dict))
        else similarity_from_config(similarity),
        judge=LLMJudge(judge) if judge is not None else RuleJudge(),
    )


def _claims_source(claims: list[dict]) -> str:
    sources = {c["source"] for c in claims}
    if not sources or sources == {"rule"}:
        return "rule"
    return "fallback" if "fallback" in sources else "judge"


@dataclass
class MetricSuite:
    """Every per-answer UniHall metric of a run and which path decided each: GHR's cascade, BHR's verifier, the
    judge of SHR/GHS (an llm, or a vlm that sees the image) and the detector oracle of SHR.

    A failed answer (None, or nothing but whitespace) is no prediction: every metric stays null and `failed` is
    true, so means, risk-weighted means and rewards leave it out and count it as n_failed."""

    scorer: GHRScorer = field(default_factory=GHRScorer)
    metrics: Sequence[str] = ("ghr", "bhr")
    judge: Any = None
    verifier: Any = field(default_factory=RuleVerifier)
    detector: Any = None

    def __post_init__(self):
        self.judge = as_judge(self.judge)

    def score(self, instance: dict, answer: str | None, image_path: str | None = None) -> dict:
        row: dict[str, Any] = {"failed": False, "ghr": None, "ghr_stage": None}
        for m in ("bhr", "shr", "ghs"):
            row[m] = row[f"{m}_source"] = None
        if is_failed(answer):
            return {**row, "failed": True, "ghr_stage": "failed"}
        h, stage = self.scorer.score(instance, answer, image_path)
        row.update(ghr=None if h is None else int(h), ghr_stage=stage)
        if "bhr" in self.metrics:
            value, claims = bhr(instance, answer, self.verifier, image_path)
            row.update(bhr=float(value), bhr_source=_claims_source(claims))
        detected = None
        if self.detector is not None and image_path and ("shr" in self.metrics or "ghs" in self.metrics):
            detected = self.detector.evidence(image_path, candidate_objects(instance, answer))
        if "shr" in self.metrics:
            row["shr"], row["shr_source"] = shr(instance, answer, self.judge, self.verifier, image_path, detected)
        if "ghs" in self.metrics:
            row["ghs"], row["ghs_source"] = ghs(instance, answer, self.judge, h, self.verifier, image_path, detected)
        return row

    def describe(self) -> dict:
        """What judged this run (recorded next to the numbers)."""
        judges = self._judges()
        return {
            "similarity": getattr(self.scorer.similarity, "name", type(self.scorer.similarity).__name__),
            "ghr_judge": getattr(self.scorer.judge, "name", "rule"),
            "verifier": getattr(self.verifier, "name", "rule"),
            "judge": self.judge.kind if self.judge is not None else "rule",
            "judge_calls": sum(j.asked for j in judges),
            "judge_failures": sum(j.failed for j in judges),
            "models": self.models(),
        }

    def _judges(self) -> list:
        found = (self.judge, getattr(self.scorer.judge, "judge", None), getattr(self.verifier, "judge", None))
        return list({id(j): j for j in found if j is not None}.values())

    def reset_counts(self) -> None:
        """Zero the judges' and the detector's call counts: the next describe() counts one setting's calls only."""
        for j in self._judges():
            j.asked = j.failed = 0
        if self.detector is not None:
            self.detector.calls = self.detector.failed = 0

    def models(self) -> dict:
        """The model behind each role (backend, model id, revision, stand_in; None for a rule path): the judge of
        SHR/GHS, GHR's judge branch, BHR's verifier, Sim_NLP and the detector oracle. One judge may fill several
        roles; its asked/failed counts are all its calls."""

        def of(judge) -> dict | None:
            return judge.describe() if judge is not None else None

        similarity = self.scorer.similarity
        return {
            "judge": of(self.judge),
            "ghr_judge": of(getattr(self.scorer.judge, "judge", None)),
            "verifier": of(getattr(self.verifier, "judge", None)),
            "similarity": similarity.describe()
            if hasattr(similarity, "describe")
            else {"kind": "custom", "model": None},
            "detector": self.detector.describe() if self.detector is not None else None,
        }


def score_rows(
    instances: Sequence[dict],
    answers: dict[str, str | None],
    scorer: GHRScorer | None = None,
    metrics: Sequence[str] = ("ghr",),
    llm=None,
    verifier=None,
) -> list[dict]:
    """One row per answered instance: ids, group, risk, and the requested per-item metric values."""
    suite = MetricSuite(scorer or GHRScorer(), tuple(metrics), llm, verifier or RuleVerifier())
    rows = []
    for inst in instances:
        iid = inst["instance_id"]
        if iid not in answers:
            continue
        row = {
            "instance_id": iid,
            "category": inst["meta_inf"]["category"],
            "subtype": inst["meta_inf"]["subtype"],
            "qtype": inst["seed_data"]["type"],
            "group": group_of(inst),
            "risk_level": int(inst["meta_inf"]["risk_level"]),
        }
        scored = suite.score(inst, answers[iid])
        row.update({k: v for k, v in scored.items() if k.split("_")[0] in metrics or k == "failed"})
        rows.append(row)
    return rows


def summarize(rows: Sequence[dict], metrics: Sequence[str] = ("ghr",)) -> dict:
    """Means and risk-weighted means overall and per group/category/question type, and per metric how many
    values the judge, its rule fallback or the rule path decided (`<metric>_source`)."""

    def block(sub: Sequence[dict]) -> dict:
        scored = [r for r in sub if not r.get("failed")]
        out: dict[str, Any] = {"n": len(scored), "n_failed": len(sub) - len(scored)}
        # yes/no answers GHR could not read (no yes/no word): excluded from the means by default, always counted
        out["yon_unparsed"] = sum(r.get("ghr_stage") == "yon_unparsed" for r in scored)
        for m in metrics:
            valued = [r for r in scored if r.get(m) is not None]
            vals = [r[m] for r in valued]
            # None, not NaN, for an empty set: NaN is not valid JSON.
            out[m] = float(np.mean(vals)) if vals else None
            out[f"{m}_risk"] = risk_weighted(vals, [r["risk_level"] for r in valued]) if vals else None
        return out

    summary = block(rows)
    for m in metrics:
        if any(f"{m}_source" in r for r in rows):
            summary[f"{m}_source"] = {s: sum(r.get(f"{m}_source") == s for r in rows) for s in SOURCES}
    for key, name in (("group", "per_group"), ("category", "per_category"), ("qtype", "per_qtype")):
        summary[name] = {v: block([r for r in rows if r[key] == v]) for v in sorted({r[key] for r in rows})}
    return summary


def read_answers(path, known: set[str]) -> dict[str, str | None]:
    """Answers JSONL: {"instance_id", "answer"} ("text"/"response" accepted, one per record), optional "status";
    a failed (status other than ok) or empty answer maps to None. Unknown or duplicated ids fail."""
    out: dict[str, str | None] = {}
    for i, row in enumerate(read_jsonl(path), 1):
        if "instance_id" not in row:
            raise InputError(f"{path}: answer #{i} has no 'instance_id'")
        iid = str(row["instance_id"])
        keys = [k for k in ("answer", "text", "response") if k in row]
        if len(keys) > 1:
            raise InputError(f"{path}: answer for instance {iid} mixes {' and '.join(repr(k) for k in keys)}; use one")
        text = row[keys[0]] if keys else None
        failed = row.get("status", "ok") != "ok"
        if not failed and not isinstance(text, str):
            raise InputError(f"{path}: answer for instance {iid} has no string 'answer'")
        text = None if failed or is_failed(text) else text
        if iid not in known:
            raise InputError(f"{path}: answer for instance {iid}, which is not in the instance file")
        if iid in out:
            raise InputError(f"{path}: instance {iid} answered twice")
        out[iid] = text
    return out


def score_ghr_files(
    instances_path: str,
    answers_path: str,
    *,
    metrics: str,
    tau1: float,
    tau2: float,
    tau3: float,
    similarity: str,
    per_item: bool,
    max_failed_fraction: float | None,
    yon_unparsed: str = "exclude",
) -> dict:
    """`halluflow score ghr`: GHR (and the other `metrics`, a comma list of ghr,bhr,shr,ghs) of the answers of one
    JSONL file to the UniHall instances of another; `similarity` is an embedder backend or 'trigram'."""
    from ..metrics.parsers import check_failed
    from .schema import load_instances

    names = [m.strip() for m in metrics.split(",") if m.strip()]
    bad = [m for m in names if m not in ("ghr", "bhr", "shr", "ghs")]
    if bad:
        raise InputError(f"--metrics: unknown metric {bad[0]!r}; known: ghr, bhr, shr, ghs")
    if "ghr" not in names:
        names.insert(0, "ghr")
    instances = load_instances(instances_path)
    answers = read_answers(answers_path, {i["instance_id"] for i in instances})
    check_failed(  # an instance with no answer line counts against the limit too (it was not scored)
        sum(a is None for a in answers.values()),
        len(instances),
        max_failed_fraction,
        f"score ghr {answers_path}",
        n_missing=len(instances) - len(answers),
    )
    sim = similarity_from_config("trigram" if similarity == "trigram" else {"backend": similarity})
    scorer = GHRScorer(tau1=tau1, tau2=tau2, tau3=tau3, similarity=sim, yon_unparsed=yon_unparsed)
    rows = score_rows(instances, answers, scorer, names)
    out = summarize(rows, names)
    out["yon_unparsed_rule"] = yon_unparsed
    out["n_instances"] = len(instances)
    out["n_missing"] = len(instances) - len(rows)
    out["thresholds"] = {"tau1": tau1, "tau2": tau2, "tau3": tau3}
    out["similarity"] = similarity
    # What scored these numbers (Sim_NLP named with its model; the rule judge and verifier need no model).
    out["judges"] = MetricSuite(scorer, tuple(names)).describe()
    if per_item:
        out["items"] = rows
    return out
