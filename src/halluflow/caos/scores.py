"""CAOS — Context-Aware Object Similarities ("Evaluating Hallucination in Large Vision-Language Models based on
Context-Aware Object Similarities"; no public code, this is the reference implementation).

Notation (per caption c with ordered, de-duplicated objects O_c = (o_0, o_1, ...), ground truth G_c, and the training
vocabulary's objects sorted by frequency F = (f_1, f_2, ...); e(·) is an embedding, cos the cosine similarity):

  H_c          = { o_i : o_i ∉ G_c }                    in-domain objects (in the vocabulary) are judged against G_c;
                                                        out-of-domain ones by the oracle (majority vote of VLMs asked
                                                        "Is there a {o} in the image?"; ties per the `tie` rule)
  CAOS_T(h)    = max_{g ∈ G_c}          cos(e(h), e(g))
  CAOS_X(h)    = max_{j < i}            cos(e(h), e(o_j))   for h = o_i; undefined at i = 0 (excluded from the mean)
  CAOS_K(h; k) = max_{f ∈ {f_1..f_k}}   cos(e(h), e(f))     k = 1..10 reported as a sweep; `k` picks the headline
  CAOS_T, CAOS_X, CAOS_K = means of the per-object scores over all hallucinated objects h of all captions
                           (over those where the score is defined)
  CAOS_{T/X}   = CAOS_T / CAOS_X          CAOS_{X/K} = CAOS_X / CAOS_K
  CAOS_avg     = (CAOS_T + CAOS_X + CAOS_K) / 3   (mean of the defined ones when X is undefined everywhere)

  subsets (paper Fig. 5): the same means over in-domain h, out-of-domain h, and h ∉ {f_1, f_2, f_3}

Side by side, over the same object lists (micro-averaged over captions c; undecided oracle ties left out):
  precision = Σ|O_c ∖ H_c| / Σ|O_c|      recall = Σ|G_c ∩ O_c| / Σ|G_c|      objects per caption = Σ|O_c| / #c
  CHAIR_i   = Σ|H_c| / Σ|O_c|            CHAIR_s = #{c : H_c ≠ ∅} / #c
  rate(p)   = #{hallucinated objects at position p} / #{objects at position p}   (sequential analysis)
POPE-F1 (over existence questions, as POPE defines it) and the scoring stage's CHAIR are read from
metrics/<model>.json, not recomputed. F = MSCOCO train2014 objects by image count by default (the paper's training
set; resources/caos/coco_train2014_frequency.tsv), or the release graph's node frequencies (`frequent: graph`).
Out-of-domain objects without an oracle are judged against the truth (or left undecided with
`ood_without_oracle: exclude`) and the summary carries a warning saying so.

A cosine with a zero vector (a GloVe phrase with no known word) is undefined, never 0; a max over only undefined
cosines is undefined. No hallucinated object → every score is null with n = 0 (never NaN).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from ..backends.base import VLM
from ..errors import ConfigError, InputError
from ..metrics.parsers import failed_mask, reader
from ..models.model import Model, vlm_request
from ..progress import get_logger, progress
from .extract import (
    COCO_FREQUENCY,
    ExtractedObject,
    ObjectExtractor,
    Vocabulary,
    build_vocabulary,
    read_frequency,
    tokens,
)

log = get_logger(__name__)

K_SWEEP = tuple(range(1, 11))
ORACLE_QUESTION = "Is there a {obj} in the image?"


# ---- similarities -------------------------------------------------------------------------------------------------


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(n, m) cosines; NaN where either vector has zero norm (undefined rather than a misleading 0)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        sims = (a @ b.T) / np.outer(na, nb)
    sims[(na == 0)[:, None] | (nb == 0)[None, :]] = np.nan
    return np.clip(sims, -1.0, 1.0)


def max_cosine(vec: np.ndarray, others: np.ndarray, names: Sequence[str]) -> tuple[float | None, str | None]:
    """Max cosine of `vec` to the rows of `others` and the name of the argmax; (None, None) when undefined."""
    if len(names) == 0:
        return None, None
    return _prefix_max(cosine_matrix(vec[None, :], others)[0], names)


def _prefix_max(sims: np.ndarray, names: Sequence[str]) -> tuple[float | None, str | None]:
    if sims.size == 0 or np.all(np.isnan(sims)):
        return None, None
    best = int(np.nanargmax(sims))
    return float(sims[best]), names[best]


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(sum(vals) / len(vals)) if vals else None


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den == 0:
        return None
    return float(num / den)


def _r(x: float | None) -> float | None:
    # Rounded in JSON so tiny platform differences in BLAS summation do not change the file.
    return None if x is None else round(float(x), 6)


# ---- the oracle ---------------------------------------------------------------------------------------------------


# "yes" / "no" / None from an oracle member's free answer: the shared module's `lenient` variant (the first word
# when it is yes/no, else the only one of the two present); a failed or empty answer abstains.
oracle_yes_no = reader("lenient")


@dataclass
class OracleVerdict:
    yes: int
    no: int
    abstain: int
    tie: bool
    present: bool | None  # None: undecided (a tie under tie rule "exclude")


VOTE_RULES = ("majority", "unanimous", "any")
TIE_RULES = ("absent", "present", "exclude")


def vote(answers: Sequence[str | None], rule: str = "majority", tie: str = "absent") -> OracleVerdict:
    """Combine the members' parsed answers. majority: yes > no → present, no > yes → absent, equal → tie (all
    abstaining is a tie too); unanimous: present only if every member says yes; any: present if one says yes."""
    if rule not in VOTE_RULES:
        raise ConfigError(f"config key 'caos.oracle.vote': {rule!r} is not one of {list(VOTE_RULES)}")
    if tie not in TIE_RULES:
        raise ConfigError(f"config key 'caos.oracle.tie': {tie!r} is not one of {list(TIE_RULES)}")
    yes = sum(a == "yes" for a in answers)
    no = sum(a == "no" for a in answers)
    abstain = len(answers) - yes - no
    is_tie = False
    if rule == "unanimous":
        present: bool | None = bool(answers) and yes == len(answers)
    elif rule == "any":
        present = yes > 0
    else:
        if yes == no:
            is_tie = True
            present = {"absent": False, "present": True, "exclude": None}[tie]
        else:
            present = yes > no
    return OracleVerdict(yes=yes, no=no, abstain=abstain, tie=is_tie, present=present)


class Oracle:
    """Ensemble of VLM backends judging out-of-domain objects (CAOS: "an ensemble LVLM oracle")."""

    def __init__(
        self,
        members: Sequence[tuple[str, Model | VLM]],
        rule: str = "majority",
        tie: str = "absent",
        question: str = ORACLE_QUESTION,
    ):
        if not members:
            raise ConfigError("config key 'caos.oracle.members': the oracle needs at least one VLM")
        vote([], rule, tie)  # validates the rule names up front
        # Every member answers through a Model: the one call path (cache, failure records) of all model roles.
        self.members = [
            (n, m if isinstance(m, Model) else Model("vlm", m, name=n, method="caos oracle")) for n, m in members
        ]
        self.rule, self.tie, self.question = rule, tie, question

    def judge(self, items: Sequence[tuple[str, str | None, str]]) -> list[OracleVerdict]:
        """items: (request_id, image_path, object). One batch per member, so a model is loaded once; a failed
        answer abstains."""
        if not items:
            return []
        requests = [vlm_request(f"{rid}:{obj}", self.question.format(obj=obj), path) for rid, path, obj in items]
        parsed: list[list[str | None]] = [[] for _ in items]
        for name, vlm in self.members:
            texts = vlm.answer(requests)
            if len(texts) != len(requests):
                raise InputError(f"oracle member {name!r} returned {len(texts)} answers for {len(requests)} questions")
            for row, text in zip(parsed, texts):
                row.append(oracle_yes_no(text))
        return [vote(p, self.rule, self.tie) for p in parsed]


# ---- judging and scoring ------------------------------------------------------------------------------------------


@dataclass
class Caption:
    """One caption's ordered objects after judging. `hallucinated[i]` is None when the object is undecided."""

    caption_id: str
    image_id: str
    truth: list[str]
    objects: list[ExtractedObject]
    hallucinated: list[bool | None]
    judged_by: list[str]
    verdicts: list[OracleVerdict | None] = field(default_factory=list)
    # synonym classes (CHAIR's table) of the truth objects / of the extracted objects found in the truth
    truth_classes: frozenset[str] = frozenset()
    named_classes: frozenset[str] = frozenset()


OOD_WITHOUT_ORACLE = ("hallucinated", "exclude")


def judge_caption(
    caption_id: str,
    image_id: str,
    objects: Sequence[ExtractedObject],
    truth: Iterable[str],
    vocabulary: Vocabulary,
    verdicts: Mapping[str, OracleVerdict] | None = None,
    ood_without_oracle: str = "hallucinated",
) -> Caption:
    """In-domain objects against the truth; out-of-domain against the oracle verdicts when an oracle ran, else
    against the truth (`hallucinated`) or left undecided (`exclude`). An object and a truth object match when their
    synonym classes (CHAIR's synonym table: "woman" → "person") are equal, as CHAIR compares them."""
    truth_norm = sorted({vocabulary.normalise(t) for t in truth if tokens(t)})
    truth_set = {vocabulary.synonym_class(t) for t in truth_norm}
    hallucinated, judged_by, used = [], [], []
    for obj in objects:
        v = (verdicts or {}).get(obj.name)
        named = vocabulary.synonym_class(obj.name) in truth_set
        if v is None and not obj.in_domain and not named and ood_without_oracle == "exclude":
            hallucinated.append(None)
            judged_by.append("none")
            used.append(None)
        elif obj.in_domain or named or v is None:
            hallucinated.append(not named)
            judged_by.append("truth")
            used.append(None)
        else:
            hallucinated.append(None if v.present is None else not v.present)
            judged_by.append("oracle")
            used.append(v)
    named = frozenset(vocabulary.synonym_class(o.name) for o in objects) & truth_set
    return Caption(
        caption_id, image_id, truth_norm, list(objects), hallucinated, judged_by, used, frozenset(truth_set), named
    )


class _Embeddings:
    """Embeds each distinct phrase once per embedder."""

    def __init__(self, embedder, phrases: Iterable[str]):
        self.phrases = sorted(set(phrases))
        vecs = embedder.embed(self.phrases) if self.phrases else np.zeros((0, 1))
        self.row = {p: i for i, p in enumerate(self.phrases)}
        self.vecs = np.asarray(vecs, dtype=np.float64)

    def __call__(self, names: Sequence[str]) -> np.ndarray:
        if not names:
            return np.zeros((0, self.vecs.shape[1] if self.vecs.ndim == 2 else 1))
        return self.vecs[[self.row[n] for n in names]]


def object_rows(
    captions: Sequence[Caption],
    frequent: Sequence[str],
    embedders: Mapping[str, object],
    k: int = 3,
    ks: Sequence[int] = K_SWEEP,
) -> list[dict]:
    """One row per extracted object; CAOS columns `<embedder>_caos_*` are filled for hallucinated objects."""
    if k < 1:
        raise ConfigError(f"config key 'caos.k': must be ≥ 1, got {k}")
    top = list(dict.fromkeys(frequent))[: max(max(ks, default=k), k)]
    rows = []
    for cap in captions:
        for i, obj in enumerate(cap.objects):
            v = cap.verdicts[i] if cap.verdicts else None
            rows.append(
                {
                    "caption_id": cap.caption_id,
                    "image_id": cap.image_id,
                    "position": i,
                    "object": obj.name,
                    "surface": obj.surface,
                    "extractor": obj.extractor,
                    "in_domain": obj.in_domain,
                    "judged_by": cap.judged_by[i],
                    "hallucinated": cap.hallucinated[i],
                    "oracle_yes": v.yes if v else None,
                    "oracle_no": v.no if v else None,
                    "oracle_tie": v.tie if v else None,
                }
            )
    for emb_name, embedder in embedders.items():
        phrases = [o.name for c in captions for o in c.objects] + [t for c in captions for t in c.truth] + top
        table = _Embeddings(embedder, phrases)
        top_vecs = table(top)
        r = 0
        for cap in captions:
            names = [o.name for o in cap.objects]
            obj_vecs, truth_vecs = table(names), table(cap.truth)
            for i in range(len(names)):
                row = rows[r]
                r += 1
                scores: dict[str, object] = {}
                if cap.hallucinated[i]:
                    h = obj_vecs[i]
                    scores["caos_t"], scores["caos_t_nearest"] = max_cosine(h, truth_vecs, cap.truth)
                    scores["caos_x"], scores["caos_x_nearest"] = max_cosine(h, obj_vecs[:i], names[:i])
                    # One cosine row against the top objects; each k of the sweep is a prefix maximum of it.
                    top_sims = cosine_matrix(h[None, :], top_vecs)[0] if top else np.zeros(0)
                    for kk in sorted(set(ks) | {k}):
                        val, near = _prefix_max(top_sims[:kk], top)
                        scores[f"caos_k{kk}"] = val
                        if kk == k:
                            scores["caos_k"], scores["caos_k_nearest"] = val, near
                for key in [
                    "caos_t",
                    "caos_t_nearest",
                    "caos_x",
                    "caos_x_nearest",
                    "caos_k",
                    "caos_k_nearest",
                    *[f"caos_k{kk}" for kk in sorted(set(ks) | {k})],
                ]:
                    row[f"{emb_name}_{key}"] = scores.get(key)
    return rows


def caos_summary(rows: Sequence[dict], emb_name: str, k: int = 3, ks: Sequence[int] = K_SWEEP) -> dict:
    """The CAOS means and ratios for one embedder from `object_rows` output."""
    hal = [r for r in rows if r["hallucinated"]]
    t = _mean(r[f"{emb_name}_caos_t"] for r in hal)
    x = _mean(r[f"{emb_name}_caos_x"] for r in hal)
    kk = _mean(r[f"{emb_name}_caos_k"] for r in hal)
    defined = [v for v in (t, x, kk) if v is not None]
    return {
        "caos_t": _r(t),
        "caos_x": _r(x),
        "caos_k": _r(kk),
        "k": k,
        "caos_k_sweep": {str(j): _r(_mean(r[f"{emb_name}_caos_k{j}"] for r in hal)) for j in ks},
        "caos_t_over_x": _r(_ratio(t, x)),
        "caos_x_over_k": _r(_ratio(x, kk)),
        "caos_avg": _r(sum(defined) / len(defined)) if defined else None,
        "n_hallucinated": len(hal),
        "n_t": sum(r[f"{emb_name}_caos_t"] is not None for r in hal),
        "n_x": sum(r[f"{emb_name}_caos_x"] is not None for r in hal),
        "n_k": sum(r[f"{emb_name}_caos_k"] is not None for r in hal),
    }


def caos_subsets(rows: Sequence[dict], emb_name: str, frequent_top3: Sequence[str], k: int = 3) -> dict:
    """Paper Fig. 5: CAOS_T/X/K over in-domain, out-of-domain, and all hallucinated objects but the top-3 frequent."""
    top3 = set(frequent_top3[:3])
    groups = {
        "in_domain": [r for r in rows if r["in_domain"]],
        "out_of_domain": [r for r in rows if not r["in_domain"]],
        "without_top3_frequent": [r for r in rows if r["object"] not in top3],
    }
    keep = ("caos_t", "caos_x", "caos_k", "n_hallucinated")
    return {name: {key: caos_summary(g, emb_name, k=k, ks=())[key] for key in keep} for name, g in groups.items()}


def object_statistics(captions: Sequence[Caption]) -> dict:
    """Object precision/recall, objects per caption and CHAIR over the same object lists (micro-averaged)."""
    n_caps = len(captions)
    decided = [(h, o) for c in captions for h, o in zip(c.hallucinated, c.objects) if h is not None]
    n_obj = sum(len(c.objects) for c in captions)
    n_hal = sum(1 for h, _ in decided if h)
    # recall over the truth's synonym classes ("woman" names the truth "person"); a caption judged without a
    # vocabulary (a hand-made Caption) compares names
    n_truth = sum(len(c.truth_classes) if c.truth_classes else len(c.truth) for c in captions)
    n_truth_hit = sum(
        len(c.named_classes) if c.truth_classes else len(set(c.truth) & {o.name for o in c.objects}) for c in captions
    )
    return {
        "n_captions": n_caps,
        "n_objects": n_obj,
        "n_in_domain": sum(o.in_domain for c in captions for o in c.objects),
        "n_out_of_domain": sum(not o.in_domain for c in captions for o in c.objects),
        "n_oracle_judged": sum(j == "oracle" for c in captions for j in c.judged_by),
        "n_oracle_ties": sum(bool(v and v.tie) for c in captions for v in c.verdicts),
        "n_undecided": sum(h is None for c in captions for h in c.hallucinated),
        "n_hallucinated": n_hal,
        "precision": _r(_ratio(len(decided) - n_hal, len(decided))),
        "recall": _r(_ratio(n_truth_hit, n_truth)),
        "objects_per_caption": _r(_ratio(n_obj, n_caps)),
        "chair_i": _r(_ratio(n_hal, len(decided))),
        "chair_s": _r(_ratio(sum(any(h for h in c.hallucinated if h) for c in captions), n_caps)),
    }


def sequential(rows: Sequence[dict]) -> list[dict]:
    """Hallucination rate by position in the caption (0 = first object)."""
    by_pos: dict[int, list[int]] = {}
    for r in rows:
        if r["hallucinated"] is None:
            continue
        n = by_pos.setdefault(r["position"], [0, 0])
        n[0] += 1
        n[1] += bool(r["hallucinated"])
    return [
        {"position": p, "n_objects": n, "n_hallucinated": h, "rate": _r(h / n)} for p, (n, h) in sorted(by_pos.items())
    ]


def score(
    captions: Sequence[Caption],
    frequent: Sequence[str],
    embedders: Mapping[str, object],
    k: int = 3,
    ks: Sequence[int] = K_SWEEP,
) -> tuple[dict, list[dict]]:
    """Everything CAOS reports: ({"embedders": {name: summary}, "objects": stats, "sequential": [...]}, rows)."""
    rows = object_rows(captions, frequent, embedders, k=k, ks=ks)
    top = list(dict.fromkeys(frequent))
    summary = {
        "embedders": {
            name: {**caos_summary(rows, name, k=k, ks=ks), "subsets": caos_subsets(rows, name, top, k=k)}
            for name in embedders
        },
        "objects": object_statistics(captions),
        "sequential": sequential(rows),
        "frequent_top": list(dict.fromkeys(frequent))[: max(max(ks, default=k), k)],
    }
    return summary, rows


def run_oracle(
    captions_objects: Sequence[tuple[str, str | None, Sequence[ExtractedObject]]], oracle: Oracle | None
) -> list[dict[str, OracleVerdict]]:
    """Ask the oracle about every out-of-domain object (one batch); returns verdicts per caption by object name."""
    out: list[dict[str, OracleVerdict]] = [{} for _ in captions_objects]
    if oracle is None:
        return out
    items, where = [], []
    for ci, (cid, path, objs) in enumerate(captions_objects):
        for o in objs:
            if not o.in_domain:
                items.append((cid, path, o.name))
                where.append((ci, o.name))
    for (ci, name), verdict in zip(where, oracle.judge(items)):
        out[ci][name] = verdict
    return out


# ---- the workflow entry point -------------------------------------------------------------------------------------


def resolve_frequent(spec: str, nodes=None) -> list[str]:
    """`coco` = MSCOCO train2014 objects by image count (shipped); `graph` = the release graph; else a file path."""
    if spec == "coco":
        return read_frequency(COCO_FREQUENCY)
    if spec == "graph":
        if nodes is None:
            raise ConfigError("config key 'caos.frequent': 'graph' needs the release's graph nodes")
        return frequent_from_nodes(nodes)
    return read_frequency(spec)


def frequent_from_nodes(nodes) -> list[str]:
    """Graph nodes by image frequency, most frequent first (ties by name, so the order is deterministic)."""
    rows = sorted(zip(nodes["node"].to_list(), nodes["frequency"].to_list()), key=lambda r: (-int(r[1] or 0), r[0]))
    return [n for n, _ in rows]


def ood_warning(captions: Sequence[Caption], oracle_ran: bool, policy: str) -> str | None:
    """The loud line CAOS prints (log, JSON, report) when out-of-domain objects were judged without an oracle."""
    n = sum(
        1
        for c in captions
        for o, j, h in zip(c.objects, c.judged_by, c.hallucinated)
        if not o.in_domain and j != "oracle" and h is not False
    )
    if oracle_ran or n == 0:
        return None
    how = (
        "counted as hallucinated because the truth does not list them"
        if policy == "hallucinated"
        else "left undecided (excluded)"
    )
    return (
        f"{n} out-of-domain object mention(s) were judged WITHOUT an oracle: {how}. CAOS judges out-of-domain "
        f"objects with an ensemble of VLMs (set caos.oracle.members)"
    )


def score_release_answers(
    answers,
    queries,
    nodes,
    *,
    release_dir: str | Path | None,
    extractor: ObjectExtractor,
    embedders: Mapping[str, object],
    oracle: Oracle | None = None,
    k: int = 3,
    ks: Sequence[int] = K_SWEEP,
    frequent: Sequence[str] | None = None,
    ood_without_oracle: str = "hallucinated",
) -> tuple[dict, "object", "object"]:
    """CAOS on the generative answers of an ODE release for one model → (summary JSON dict, per-object DataFrame,
    per-caption DataFrame).

    answers: answers/<model>/*.parquet concatenated; queries: release/queries.parquet; nodes: graph/nodes.parquet.
    Failed answers (the shared rule, parsers.failed_mask: a failed request or a blank caption) are counted and
    skipped.
    """
    import polars as pl

    for col in ("query_id", "answer", "status"):
        if col not in answers.columns:
            raise InputError(f"answers table: missing column {col!r} (have {answers.columns})")
    for col in ("query_id", "image_id", "query_type", "objects"):
        if col not in queries.columns:
            raise InputError(f"queries table: missing column {col!r} (have {queries.columns})")
    gen = queries.filter(pl.col("query_type") == "generative")
    joined = gen.join(answers, on="query_id", how="inner").sort("query_id")
    ok = joined.filter(~failed_mask(joined["answer"], joined["status"]))
    recs = ok.to_dicts()
    log.info("CAOS: %d generative answers (%d failed skipped)", len(recs), joined.height - ok.height)
    extractions = extractor.extract_many([r["answer"] or "" for r in recs])
    root = Path(release_dir) if release_dir is not None else None
    paths = [str(root / r["image"]) if root is not None and r.get("image") else None for r in recs]
    verdicts = run_oracle([(r["query_id"], p, e.objects) for r, p, e in zip(recs, paths, extractions)], oracle)
    captions = [
        judge_caption(
            r["query_id"],
            r["image_id"],
            e.objects,
            r["objects"] or [],
            extractor.vocabulary,
            v,
            ood_without_oracle=ood_without_oracle,
        )
        for r, e, v in zip(progress(recs, desc="judge captions"), extractions, verdicts)
    ]
    if frequent is None:
        frequent = frequent_from_nodes(nodes)
    summary, rows = score(captions, [extractor.vocabulary.normalise(f) for f in frequent], embedders, k=k, ks=ks)
    warning = ood_warning(captions, oracle is not None, ood_without_oracle)
    summary["warnings"] = [warning] if warning else []
    if warning:
        log.warning("CAOS: %s", warning)
    summary["n_generative_queries"] = gen.height
    summary["n_answers_failed"] = joined.height - ok.height
    summary["n_answers_missing"] = gen.height - joined.height
    summary["extraction"] = {
        "llm_status": {s: sum(e.llm_status == s for e in extractions) for s in ("not_used", "ok", "unparsed")},
        "llm_dropped": sum(len(e.llm_dropped) for e in extractions),
        "negated_mentions_left_out": sum(len(e.negated) for e in extractions),
        "negation": extractor.negation,
        "meta_words_left_out": sum(len(e.meta) for e in extractions),
        "meta_words": extractor.meta_words,
    }
    # the settings every caption and note of the CAOS page is written from (report/paper_sections.py)
    summary["settings"] = {
        "ood_without_oracle": ood_without_oracle,
        "oracle": oracle is not None,
        "negation": extractor.negation,
        "meta_words": extractor.meta_words,
        "synonym_classes": bool(extractor.vocabulary.synonym_of),
        "open_vocabulary": any(src == "open" for src in extractor.vocabulary.source_of.values()),
    }
    stand_in = bool(ok["stand_in"].any()) if "stand_in" in ok.columns and ok.height else False
    summary["stand_in"] = stand_in
    df = rows_frame(rows, list(embedders), k=k, ks=ks).with_columns(pl.lit(stand_in).alias("stand_in"))
    caps = pl.DataFrame(
        {
            "caption_id": [c.caption_id for c in captions],
            "image_id": [c.image_id for c in captions],
            "n_objects": [len(c.objects) for c in captions],
            "n_hallucinated": [sum(bool(h) for h in c.hallucinated) for c in captions],
            "n_undecided": [sum(h is None for h in c.hallucinated) for c in captions],
            "llm_status": [e.llm_status for e in extractions],
            "stand_in": [stand_in] * len(captions),
        },
        schema={
            "caption_id": pl.String,
            "image_id": pl.String,
            "n_objects": pl.Int64,
            "n_hallucinated": pl.Int64,
            "n_undecided": pl.Int64,
            "llm_status": pl.String,
            "stand_in": pl.Boolean,
        },
    )
    return summary, df, caps


def rows_frame(rows: Sequence[dict], emb_names: Sequence[str], k: int = 3, ks: Sequence[int] = K_SWEEP):
    """Per-object rows as a DataFrame with an explicit schema (an empty table keeps its columns and types)."""
    import polars as pl

    schema: dict[str, object] = {
        "caption_id": pl.String,
        "image_id": pl.String,
        "position": pl.Int64,
        "object": pl.String,
        "surface": pl.String,
        "extractor": pl.String,
        "in_domain": pl.Boolean,
        "judged_by": pl.String,
        "hallucinated": pl.Boolean,
        "oracle_yes": pl.Int64,
        "oracle_no": pl.Int64,
        "oracle_tie": pl.Boolean,
    }
    for e in emb_names:
        for key in ("caos_t", "caos_x", "caos_k"):
            schema[f"{e}_{key}"] = pl.Float64
            schema[f"{e}_{key}_nearest"] = pl.String
        for kk in sorted(set(ks) | {k}):
            schema[f"{e}_caos_k{kk}"] = pl.Float64
    return pl.DataFrame([{c: r.get(c) for c in schema} for r in rows], schema=schema, orient="row")


# Where the scoring stage's metrics JSON holds the numbers CAOS shows beside its own (docs/data-contracts.md):
# exact locations, never "the least nested key named f1" (that picked one distribution's existence slice).
EXISTENCE_F1 = ("by_query_type", "existence", "pope", "f1")  # ODE: every existence question, all distributions
ALL_YES_NO_F1 = ("pope", "f1")  # ODE: every yes/no question; a POPE source: every question (all are existence)
CHAIR_BLOCKS = ("generative", "chair")  # ODE's generative block; a COCO source's CHAIR block


def _at(node, steps: Sequence[str]):
    for step in steps:
        if not isinstance(node, Mapping) or step not in node:
            return None
        node = node[step]
    return node


def _number(value, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: expected a number, got {json.dumps(value)[:60]}")
    return _r(float(value))


def metrics_side_by_side(metrics: Mapping | None, source: str | None = None) -> dict:
    """POPE-F1 / CHAIR_s / CHAIR_i from the scoring stage's metrics JSON (not recomputed here), each with the dotted
    path it was read from (`paths`) and, for POPE-F1, the questions it covers (`scope`).

    POPE-F1 is F1 over existence questions (POPE asks only about object existence): for an ODE release the F1 over
    ALL its existence questions (`by_query_type.existence`, every distribution pooled); null when the release has
    none. Only metrics without the query-type breakdown (scoring.breakdowns leaves it out) or from a POPE source fall
    back to the overall `pope.f1`, and the scope says which questions that is. CHAIR: ODE's `generative` block or a
    COCO source's `chair` block."""
    out: dict = {"source": source, "pope_f1": None, "chair_s": None, "chair_i": None, "paths": {}, "scope": {}}
    if not metrics:
        return out
    where = source or "metrics"
    if isinstance(metrics.get("by_query_type"), Mapping):
        path, scope = EXISTENCE_F1, "every existence question (all distributions)"
        if "existence" not in metrics["by_query_type"]:
            path, scope = None, "no existence questions in these metrics"
    elif metrics.get("source") == "pope":
        path, scope = ALL_YES_NO_F1, "every POPE question (all ask about existence)"
    else:
        path, scope = ALL_YES_NO_F1, "every yes/no question (the metrics have no by_query_type breakdown)"
    if path is not None and _at(metrics, path[:-1]) is not None:
        dotted = ".".join(path)
        out["pope_f1"], out["paths"]["pope_f1"] = _number(_at(metrics, path), f"{where}: {dotted}"), dotted
    out["scope"]["pope_f1"] = scope
    block = next((b for b in CHAIR_BLOCKS if isinstance(metrics.get(b), Mapping)), None)
    if block is not None:
        for key in ("chair_s", "chair_i"):
            dotted = f"{block}.{key}"
            out[key], out["paths"][key] = _number(metrics[block].get(key), f"{where}: {dotted}"), dotted
    return out


def _by_image(rows: list[dict], path: str, keys: Sequence[str]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for n, row in enumerate(rows, 1):
        if "image_id" not in row:
            raise InputError(f"{path}: line {n} has no 'image_id'")
        if not any(k in row for k in keys):
            raise InputError(f"{path}: line {n} (image_id {row['image_id']!r}) needs one of {list(keys)}")
        iid = str(row["image_id"])
        for k in ("objects", "truth"):
            if k in row and (not isinstance(row[k], list) or not all(isinstance(o, str) for o in row[k])):
                raise InputError(
                    f"{path}: line {n} (image_id {iid!r}): '{k}' must be a list of object names, "
                    f"got {json.dumps(row[k])[:60]}"
                )
        if iid in out:
            raise InputError(f"{path}: image_id {iid!r} appears twice")
        out[iid] = row
    return out


def score_files(
    objects_path: str,
    truth_path: str,
    *,
    frequent: str,
    embedder: str,
    vectors: str | None,
    k: int,
    synonyms: str,
    negation: str,
    per_object: bool,
    max_failed_fraction: float | None,
    meta_words: str = "skip",
) -> dict:
    """CAOS of the objects (or captions) of one JSONL file against the truth of another (`halluflow score caos`):
    the `embedder`'s summary with n_failed, object and sequential statistics and, with `per_object`, one row per
    hallucinated object. `frequent` is 'coco' or a file; `synonyms` 'default', 'none' or a TSV; `meta_words` skip
    (picture, image, scene... in a caption are no objects) or keep (matters only with an open vocabulary, which
    this vocabulary has not). A given object list is taken as it is."""
    import re

    from ..io import read_jsonl
    from ..metrics.parsers import check_failed, is_failed
    from ..models import registry

    objects = _by_image(read_jsonl(objects_path), objects_path, ("objects", "caption"))
    truth = _by_image(read_jsonl(truth_path), truth_path, ("objects", "truth"))
    frequent_objects = resolve_frequent(frequent)
    spec: dict = {"backend": embedder}
    if vectors:
        spec["path"] = vectors
    model = registry.create("embedder", spec)
    use_synonyms = {"default": True, "none": False}.get(synonyms, synonyms)
    truth_lists = {}
    for iid, row in truth.items():
        t = row.get("objects", row.get("truth"))
        if not isinstance(t, list):
            raise InputError(f"{truth_path}: image_id {iid!r}: truth must be a list of object names")
        truth_lists[iid] = [str(x) for x in t]
    vocab = build_vocabulary(
        extra_terms=sorted({x for t in truth_lists.values() for x in t} | set(frequent_objects)),
        synonyms=use_synonyms,
    )
    extractor = ObjectExtractor(vocab, negation=negation, meta_words=meta_words)
    captions = []
    n_failed = 0
    for iid, row in objects.items():
        if iid not in truth_lists:
            raise InputError(f"{truth_path}: no truth for image_id {iid!r} (listed in {objects_path})")
        # the shared failed-answer rule: a "status" other than ok, or a blank caption (given objects have none)
        if is_failed(row.get("caption") if "objects" not in row else "objects given", row.get("status")):
            n_failed += 1
            continue
        if "objects" in row:
            if not isinstance(row["objects"], list):
                raise InputError(f"{objects_path}: image_id {iid!r}: 'objects' must be a list")
            names = list(dict.fromkeys(vocab.normalise(str(o)) for o in row["objects"] if tokens(str(o))))
            objs = [ExtractedObject(n, n, i, "given", n in vocab) for i, n in enumerate(names)]
        else:
            objs = extractor.extract(str(row["caption"] or "")).objects
        captions.append(judge_caption(iid, iid, objs, truth_lists[iid], vocab))
    check_failed(n_failed, len(objects), max_failed_fraction, f"score caos {objects_path}")
    summary, rows = score(captions, [vocab.normalise(f) for f in frequent_objects], {embedder: model}, k=k)
    result = dict(summary["embedders"][embedder])
    result["n_failed"] = n_failed
    result.update(objects=summary["objects"], sequential=summary["sequential"], embedder=model.describe().as_dict())
    if per_object:
        prefix = f"{embedder}_"
        result["per_object"] = [
            {
                "image_id": r["image_id"],
                "position": r["position"],
                "object": r["object"],
                **{
                    key[len(prefix) :]: (_r(v) if isinstance(v, float) else v)
                    for key, v in r.items()
                    if key.startswith(prefix) and not re.search(r"_k\d+$", key)
                },
            }
            for r in rows
            if r["hallucinated"]
        ]
    return result


__all__ = [
    "cosine_matrix",
    "max_cosine",
    "oracle_yes_no",
    "vote",
    "Oracle",
    "OracleVerdict",
    "Caption",
    "judge_caption",
    "object_rows",
    "caos_summary",
    "caos_subsets",
    "object_statistics",
    "sequential",
    "score",
    "score_release_answers",
    "frequent_from_nodes",
    "resolve_frequent",
    "ood_warning",
    "rows_frame",
    "score_files",
    "K_SWEEP",
    "metrics_side_by_side",
]
