"""UniHall metric suite (seed 003, Sec. 4.1 and Appendix D): GHR cascade (eq. 22), BHR claim verification
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

from ..errors import InputError
from ..io import dumps_json, read_jsonl
from .schema import group_of, load_instances, negative_answers, truth_answers

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
_YES_NO = re.compile(r"\b(yes|no)\b")


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


def parse_yes_no(text: str) -> str | None:
    """The first standalone yes/no word of the response (regex match, eq. 22's binary branch)."""
    m = _YES_NO.search(text.lower())
    return m.group(1) if m else None


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


class EmbedderSimilarity:
    """Cosine of sentence embeddings from a registry embedder (e.g. MiniLM) as Sim_NLP."""

    name = "embedder"

    def __init__(self, embedder):
        self.embedder = embedder

    def __call__(self, a: str, bs: Sequence[str]) -> float:
        if not bs:
            return 0.0
        vecs = np.asarray(self.embedder.embed([a, *bs]), dtype=np.float64)
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        return float(np.max(vecs[1:] @ vecs[0]))


# ---------------------------------------------------------------------------------------------- judges
def _chat(llm, prompt: str) -> str:
    return llm.chat([{"role": "user", "content": prompt}])


class RuleJudge:
    """Deterministic stand-in for Judge_GPT: the response states a negative answer (not negated) and no truth."""

    name = "rule"

    def matches_negative(self, response: str, truths: Sequence[str], negatives: Sequence[str]) -> tuple[bool, str]:
        hit = any(contains_phrase(response, n) and not negated_phrase(response, n) for n in negatives)
        truth = any(contains_phrase(response, g) and not negated_phrase(response, g) for g in truths)
        return hit and not truth, "rule"


class LLMJudge(RuleJudge):
    """Asks the `llm` backend; falls back to the rule judge when the reply has no TRUE/FALSE."""

    name = "llm"
    TEMPLATE = (
        "You check answers for hallucination.\nCorrect answers: {truths}\nKnown wrong answers: {negatives}\n"
        "Response: {response}\nDoes the response give one of the known wrong answers? Reply TRUE or FALSE."
    )

    def __init__(self, llm):
        self.llm = llm

    def matches_negative(self, response, truths, negatives):
        reply = _chat(self.llm, self.TEMPLATE.format(truths="; ".join(truths), negatives="; ".join(negatives), response=response))
        m = re.search(r"\b(true|false)\b", reply.lower())
        if m is None:
            return super().matches_negative(response, truths, negatives)
        return m.group(1) == "true", "llm"


# ---------------------------------------------------------------------------------------------- GHR
@dataclass
class GHRScorer:
    """h_GHR of eq. (22). `stage` says which branch decided (auditable, and how the cascade is tested)."""

    tau1: float = TAU_DEFAULTS["tau1"]
    tau2: float = TAU_DEFAULTS["tau2"]
    tau3: float = TAU_DEFAULTS["tau3"]
    similarity: Any = field(default_factory=LexicalSimilarity)
    judge: Any = field(default_factory=RuleJudge)

    def score(self, instance: dict, response: str) -> tuple[int, str]:
        truths, negatives = truth_answers(instance), negative_answers(instance)
        if instance["seed_data"]["type"] == "YON":
            said = parse_yes_no(response)
            if said is None:
                return 0, "yon_unparsed"  # matches neither side: not a hallucination (design.md)
            return (1, "yon_negative") if any(said == n.strip().lower() for n in negatives) else (0, "yon_match")
        if negatives and self.similarity(response, negatives) >= self.tau1:
            return 1, "neg_similarity"
        if negatives:
            hit, source = self.judge.matches_negative(response, truths, negatives)
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


def evidence_sets(instance: dict) -> dict[str, list[str]]:
    """E = {A, C, E, V} (eq. 24) plus N, the negatives used to detect contradictions."""
    seed = instance["seed_data"]
    return {
        "A": truth_answers(instance),
        "C": [seed["question"]],
        "E": list(instance.get("evidence", [])),
        "V": list(instance.get("visual_facts", [])),
        "N": negative_answers(instance),
    }


class RuleVerifier:
    """phi(c, E) of eq. (27) by matching: yes/no against the truth, negatives, then word coverage of evidence."""

    name = "rule"

    def __init__(self, support: float = SUPPORT_DEFAULT, tau3: float = TAU_DEFAULTS["tau3"]):
        self.support, self.tau3 = support, tau3

    def verify(self, claim: Claim, evidence: dict[str, list[str]], qtype: str) -> tuple[str, str]:
        span = claim.span
        if qtype == "YON" and claim.frame == "yes_no":
            said = parse_yes_no(span)
            truth = evidence["A"][0].strip().lower()
            return ("Entailed" if said == truth else "Contradicted"), "rule"
        negs = [n for n in evidence["N"] if n.strip().lower() not in ("yes", "no")]
        if any(contains_phrase(span, n) and not negated_phrase(span, n) for n in negs):
            if not any(contains_phrase(span, a) for a in evidence["A"]):
                return "Contradicted", "rule"
        if any(contains_phrase(span, a) or token_f1(span, a) >= self.tau3 for a in evidence["A"]):
            return "Entailed", "rule"
        content = [t for t in tokens(span) if t not in STOPWORDS]
        if not content:
            return "Unverifiable", "rule"
        vocab = {t for key in ("A", "C", "E", "V") for text in evidence[key] for t in tokens(text)}
        covered = sum(t in vocab for t in content) / len(content)
        return ("Entailed" if covered >= self.support else "Unsupported"), "rule"


class LLMVerifier(RuleVerifier):
    """NLI-style verification by the `llm` judge; the rule verifier decides when the reply does not parse."""

    name = "llm"
    TEMPLATE = (
        "Evidence (reference answers): {A}\nEvidence (instructions): {C}\nEvidence (knowledge): {E}\n"
        "Evidence (visual facts): {V}\nClaim: {claim}\n"
        "Is the claim ENTAILED, CONTRADICTED, UNSUPPORTED or UNVERIFIABLE given the evidence? Reply with one word."
    )

    def __init__(self, llm, **kwargs):
        super().__init__(**kwargs)
        self.llm = llm

    def verify(self, claim, evidence, qtype):
        reply = _chat(self.llm, self.TEMPLATE.format(claim=claim.span, **{k: "; ".join(v) or "-" for k, v in evidence.items()}))
        m = re.search(r"\b(entailed|contradicted|unsupported|unverifiable)\b", reply.lower())
        if m is None:
            return super().verify(claim, evidence, qtype)
        return m.group(1).capitalize(), "llm"


def bhr(instance: dict, response: str, verifier=None) -> tuple[float, list[dict]]:
    """Eq. (28): share of claims judged Unsupported or Contradicted (0 for a response with no claims)."""
    verifier = verifier or RuleVerifier()
    evidence = evidence_sets(instance)
    rows = []
    for c in decompose_claims(instance, response):
        verdict, source = verifier.verify(c, evidence, instance["seed_data"]["type"])
        rows.append({"type": c.type, "frame": c.frame, "span": c.span, "verdict": verdict, "source": source})
    value = sum(r["verdict"] in HALLUCINATED for r in rows) / len(rows) if rows else 0.0
    return value, rows


# ---------------------------------------------------------------------------------------------- SHR / GHS
SEVERITY_FALLBACK = {"Contradicted": 1.0, "Unsupported": 0.5, "Unverifiable": 0.0, "Entailed": 0.0}

SHR_TEMPLATE = (
    "Question: {question}\nCorrect answers: {truths}\nWrong answers: {negatives}\nResponse: {response}\n"
    "Split the response into atomic claims. For each claim write one line: <severity 0-10> | <claim>, where 0 means "
    "supported and 10 a severe hallucination."
)
GHS_TEMPLATE = (
    "Question: {question}\nCorrect answers: {truths}\nWrong answers: {negatives}\nResponse: {response}\n"
    "Rate how severely the response hallucinates, from 0 (faithful) to 10 (completely hallucinated). "
    "Reply with the number only."
)


def _prompt_fields(instance: dict, response: str) -> dict[str, str]:
    return {
        "question": instance["seed_data"]["question"],
        "truths": "; ".join(truth_answers(instance)),
        "negatives": "; ".join(negative_answers(instance)) or "-",
        "response": response,
    }


def shr(instance: dict, response: str, llm=None, verifier=None) -> tuple[float, str]:
    """Eq. (29): mean claim severity in [0,1]; the LLM both splits and grades, else rule claims + verdict severity."""
    if llm is not None:
        reply = _chat(llm, SHR_TEMPLATE.format(**_prompt_fields(instance, response)))
        scores = [float(m.group(1)) for m in re.finditer(r"^\s*[-*]?\s*(\d+(?:\.\d+)?)\s*\|\s*\S.*$", reply, re.M)]
        scores = [s for s in scores if 0 <= s <= 10]
        if scores:
            return float(np.mean(scores) / 10.0), "llm"
    _, rows = bhr(instance, response, verifier)
    if not rows:
        return 0.0, "rule"
    return float(np.mean([SEVERITY_FALLBACK[r["verdict"]] for r in rows])), "rule"


def ghs(instance: dict, response: str, llm=None, ghr_value: int | None = None, verifier=None) -> tuple[float, str]:
    """Eq. (30): judge score 0-10 normalised to [0,1]; the rule fallback is max(h_GHR, BHR)."""
    if llm is not None:
        reply = _chat(llm, GHS_TEMPLATE.format(**_prompt_fields(instance, response)))
        m = re.search(r"\b(10|[0-9])(?:\.\d+)?\b", reply)
        if m is not None:
            return float(m.group(0)) / 10.0 if float(m.group(0)) <= 10 else 1.0, "llm"
    h = ghr_value if ghr_value is not None else GHRScorer().score(instance, response)[0]
    return max(float(h), bhr(instance, response, verifier)[0]), "rule"


# ---------------------------------------------------------------------------------------------- aggregation
def risk_weighted(values: Sequence[float], risks: Sequence[int]) -> float:
    """M_risk = sum(r * M) / sum(r) (eq. 31 / 5)."""
    values, risks = np.asarray(values, dtype=float), np.asarray(risks, dtype=float)
    if len(values) != len(risks):
        raise ValueError("values and risks differ in length")
    if len(values) == 0 or risks.sum() == 0:
        return float("nan")
    return float((risks * values).sum() / risks.sum())


def scorer_from_config(cfg: dict | None = None, llm=None, embedder=None) -> GHRScorer:
    cfg = dict(cfg or {})
    sim = EmbedderSimilarity(embedder) if embedder is not None else LexicalSimilarity()
    judge = LLMJudge(llm) if llm is not None else RuleJudge()
    return GHRScorer(
        tau1=cfg.get("tau1", TAU_DEFAULTS["tau1"]),
        tau2=cfg.get("tau2", TAU_DEFAULTS["tau2"]),
        tau3=cfg.get("tau3", TAU_DEFAULTS["tau3"]),
        similarity=sim,
        judge=judge,
    )


def score_rows(
    instances: Sequence[dict],
    answers: dict[str, str],
    scorer: GHRScorer | None = None,
    metrics: Sequence[str] = ("ghr",),
    llm=None,
    verifier=None,
) -> list[dict]:
    """One row per answered instance: ids, group, risk, and the requested per-item metric values."""
    scorer = scorer or GHRScorer()
    rows = []
    for inst in instances:
        iid = inst["instance_id"]
        if iid not in answers:
            continue
        response = answers[iid]
        h, stage = scorer.score(inst, response)
        row = {
            "instance_id": iid,
            "category": inst["meta_inf"]["category"],
            "subtype": inst["meta_inf"]["subtype"],
            "qtype": inst["seed_data"]["type"],
            "group": group_of(inst),
            "risk_level": int(inst["meta_inf"]["risk_level"]),
            "ghr": int(h),
            "ghr_stage": stage,
        }
        if "bhr" in metrics:
            row["bhr"] = bhr(inst, response, verifier)[0]
        if "shr" in metrics:
            row["shr"], row["shr_source"] = shr(inst, response, llm, verifier)
        if "ghs" in metrics:
            row["ghs"], row["ghs_source"] = ghs(inst, response, llm, h, verifier)
        rows.append(row)
    return rows


def summarize(rows: Sequence[dict], metrics: Sequence[str] = ("ghr",)) -> dict:
    """Means and risk-weighted means overall and per group/category/question type."""

    def block(sub: Sequence[dict]) -> dict:
        out: dict[str, Any] = {"n": len(sub)}
        for m in metrics:
            vals = [r[m] for r in sub]
            # None, not NaN, for an empty set: NaN is not valid JSON.
            out[m] = float(np.mean(vals)) if vals else None
            out[f"{m}_risk"] = risk_weighted(vals, [r["risk_level"] for r in sub]) if vals else None
        return out

    summary = block(rows)
    for key, name in (("group", "per_group"), ("category", "per_category"), ("qtype", "per_qtype")):
        summary[name] = {v: block([r for r in rows if r[key] == v]) for v in sorted({r[key] for r in rows})}
    return summary


def read_answers(path, known: set[str]) -> dict[str, str]:
    """Answers JSONL: {"instance_id", "answer"} ("text"/"response" accepted); unknown or duplicated ids fail."""
    out: dict[str, str] = {}
    for i, row in enumerate(read_jsonl(path), 1):
        if "instance_id" not in row:
            raise InputError(f"{path}: answer #{i} has no 'instance_id'")
        iid = str(row["instance_id"])
        text = next((row[k] for k in ("answer", "text", "response") if k in row), None)
        if not isinstance(text, str):
            raise InputError(f"{path}: answer for instance {iid} has no string 'answer'")
        if iid not in known:
            raise InputError(f"{path}: answer for instance {iid}, which is not in the instance file")
        if iid in out:
            raise InputError(f"{path}: instance {iid} answered twice")
        out[iid] = text
    return out


# ---------------------------------------------------------------------------------------------- CLI
CLI_DESCRIPTION = (
    "Generic Hallucination Rate (seed 003, eq. 22-23) and its risk-weighted form (eq. 31) of answers to UniHall "
    "instances; optionally BHR (rule verifier) and the LLM-judged SHR/GHS."
)
CLI_EPILOG = """examples:
  halluflow score ghr --instances unihall.json --answers answers.jsonl
  halluflow score ghr --instances unihall.json --answers answers.jsonl --metrics ghr,bhr --tau3 0.6"""


def configure(parser) -> None:
    parser.add_argument("--instances", required=True, help="UniHall instances: a JSON array (Appendix B.1 schema)")
    parser.add_argument("--answers", required=True, help='JSONL lines {"instance_id", "answer"}')
    for key, value in TAU_DEFAULTS.items():
        parser.add_argument(f"--{key}", type=float, default=value, help=f"GHR threshold {key} (default {value})")
    parser.add_argument("--metrics", default="ghr", help="comma list of ghr,bhr,shr,ghs (shr/ghs use the rule fallback)")
    parser.add_argument("--per-item", action="store_true", help="include one row per answered instance")


def run(args) -> int:
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    bad = [m for m in metrics if m not in ("ghr", "bhr", "shr", "ghs")]
    if bad:
        raise InputError(f"--metrics: unknown metric {bad[0]!r}; known: ghr, bhr, shr, ghs")
    if "ghr" not in metrics:
        metrics.insert(0, "ghr")
    instances = load_instances(args.instances)
    answers = read_answers(args.answers, {i["instance_id"] for i in instances})
    scorer = GHRScorer(tau1=args.tau1, tau2=args.tau2, tau3=args.tau3)
    rows = score_rows(instances, answers, scorer, metrics)
    out = summarize(rows, metrics)
    out["n_instances"] = len(instances)
    out["n_missing"] = len(instances) - len(rows)
    out["thresholds"] = {"tau1": args.tau1, "tau2": args.tau2, "tau3": args.tau3}
    if args.per_item:
        out["items"] = rows
    print(dumps_json(out), end="")
    return 0
