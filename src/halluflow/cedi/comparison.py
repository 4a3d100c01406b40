"""CEDI's comparison of examiners across graders (Li et al., CEDI paper, "CEDI elicits more hallucinations than
static examiners"): the SAME transcripts of every examiner (cedi, caption, prompt_only, pope) scored by every grader,
the radar with the paper's normalisation, and the tables of the CEDI paper section (halluflow.report.cedi_comparison
draws the figures and writes the section for the paper page).

Graders (`cedi.graders`): `sg` = CEDI's scene-graph grader (GED, SG ΔCon; grader.py), `cedi` = its per-turn
hallucination score, `chair` = CHAIR_s / CHAIR_i (Rohrbach et al., "Object Hallucination in Image Captioning") over
the answers, one answer = one caption, with CHAIR's COCO vocabulary; `valor` = VALOR-Eval style (Qiu, Hu, Dou, Peng,
"VALOR-EVAL: Holistic Coverage and Faithfulness Evaluation of Large Vision-Language Models"): the objects,
attributes and relations the answers assert are extracted (the `llm` backend, strict JSON; the rule parser's
mentions when the reply does not validate or `valor_extractor: rule`, said in `graders.valor`) and matched to the
truth graph: faithfulness = matched / extracted (precision), coverage = truth items matched / truth items (recall),
per kind and pooled over all extracted items (faith_i, coverage_i), in percent.
Radar radii (the paper's caption): score/100 for percentage metrics, GED/150, SG ΔCon/5, (100 − VALOR faith_i)/50.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping, Sequence

from ..config_types import Cedi
from ..errors import ConfigError
from ..metrics.parsers import is_failed
from ..progress import get_logger
from .parser import TruthView, Vocabulary, extract, parse_json_reply, safe_chat_batch, split_el
from .scene_graph import SceneGraph

log = get_logger(__name__)

GRADERS = ("sg", "cedi", "chair", "valor")
VALOR_KINDS = ("object", "attribute", "relation")
# (axis, grader, metric catalogue entry read from grades.json, normalisation said on the radar, radius from value)
RADAR_AXES: tuple[tuple[str, str, str, str], ...] = (
    ("chair_s", "chair", "cedi.comparison.chair_s", "CHAIR_s % / 100"),
    ("chair_i", "chair", "cedi.comparison.chair_i", "CHAIR_i % / 100"),
    ("valor", "valor", "cedi.comparison.valor.faith_i", "(100 − VALOR faith_i) / 50"),
    ("ged", "sg", "cedi.summary.ged", "GED / 150"),
    ("sg_delta_con", "sg", "cedi.summary.sg_delta_con", "SG ΔCon / 5"),
    ("hallucination_rate", "cedi", "cedi.summary.hallucination_rate", "hallucination rate % / 100"),
)


def radius(axis: str, value: float | None) -> float | None:
    """The paper's radar normalisation of one grader value (fractions are the paper's percent / 100)."""
    if value is None:
        return None
    if axis == "ged":
        return round(value / 150, 6)
    if axis == "sg_delta_con":
        return round(value / 5, 6)
    if axis == "valor":
        return round((100 - value) / 50, 6)
    return round(value, 6)


def graders_of(settings: Mapping[str, Any]) -> list[str]:
    graders = list(settings.get("graders") or GRADERS)
    unknown = [g for g in graders if g not in GRADERS]
    if unknown:
        raise ConfigError(f"config key 'cedi.graders': unknown grader {unknown[0]!r} (known: {', '.join(GRADERS)})")
    return graders


# ---- CHAIR on transcripts -----------------------------------------------------------------------------------------


def chair_on_answers(turns: Sequence[Mapping[str, Any]], truths: Mapping[str, SceneGraph]) -> dict:
    """CHAIR over the answers of `turns` (one answer = one caption; truth = the image's truth-graph object names
    mapped to CHAIR's COCO categories). Failed answers are left out and counted (n_failed)."""
    import polars as pl

    from ..metrics.chair import chair_scores, normalise_truth, shipped_synonyms

    syn = shipped_synonyms()
    ok = [t for t in turns if not is_failed(t.get("answer") or "")]
    captions = pl.DataFrame(
        {"image_id": [str(t["image_id"]) for t in ok], "caption": [t["answer"] for t in ok]},
        schema={"image_id": pl.String, "caption": pl.String},
    )
    images = {str(t["image_id"]) for t in turns}
    truth = {i: normalise_truth([o.name for o in truths[i].objects], syn) for i in images}
    metrics, _ = chair_scores(captions, truth, syn)
    return {
        **{k: (round(v, 6) if isinstance(v, float) else v) for k, v in metrics.items()},
        "n_failed": len(turns) - len(ok),
    }


# ---- VALOR-style grader -------------------------------------------------------------------------------------------

VALOR_SYSTEM = (
    "You read an assistant's answers about one image. List every object, attribute and relation the answers STATE "
    "as being in the image (not what they deny, doubt or only repeat from a question). Reply with JSON only: "
    '{"objects":[{"id":"o1","name":"dog","attributes":["brown"]}],'
    '"relations":[{"subject":"o1","predicate":"on","object":"o2"}]}'
)


def valor_messages(answers: Sequence[str]) -> list[dict]:
    text = "\n".join(f"- {a}" for a in answers)
    return [{"role": "system", "content": VALOR_SYSTEM}, {"role": "user", "content": f"Answers:\n{text}"}]


def _items(view: TruthView) -> dict[str, set[tuple[str, ...]]]:
    """Canonical (object,), (object, attribute), (subject, predicate, object) items of a graph view."""
    return {
        "object": {(n,) for n in view.names},
        "attribute": {(n, a) for n, attrs in view.attrs.items() for a in attrs},
        "relation": {(s, p, o) for (s, o), preds in view.relations.items() for p in preds},
    }


def rule_items(answers: Sequence[str], vocab: Vocabulary) -> dict[str, set[tuple[str, ...]]]:
    """The rule fallback: what the rule parser reads each answer to assert (positive mentions only)."""
    out: dict[str, set[tuple[str, ...]]] = {k: set() for k in VALOR_KINDS}
    for a in answers:
        for el, positive in extract(a, vocab):
            if positive:
                parts = split_el(el)
                out[parts[0]].add(tuple(parts[1:]))
    return out


def match_items(items: Mapping[str, set[tuple[str, ...]]], truth: TruthView) -> dict[str, dict[str, int]]:
    """Per kind: extracted, matched (extracted items the truth supports) and covered (truth items matched) of one
    conversation, against `truth` (names by synonym, as the GED grader matches them)."""
    truth_items = _items(truth)
    out = {}
    for kind in VALOR_KINDS:
        hits: set[tuple[str, ...]] = set()
        matched = 0
        for item in items.get(kind, set()):
            names = [truth.resolve(item[0])] + ([truth.resolve(item[2])] if kind == "relation" else [])
            if any(n is None for n in names):
                continue
            if kind == "relation":
                s, p, o = names[0], item[1], names[1]
                # "next to" is symmetric, as the per-turn judge reads it
                canon = (o, p, s) if p == "next to" and (o, p, s) in truth_items[kind] else (s, p, o)
            else:
                canon = (names[0], *item[1:])
            if canon in truth_items[kind]:
                matched += 1
                hits.add(canon)
        out[kind] = {"extracted": len(items.get(kind, set())), "matched": matched, "covered": len(hits)}
        out[kind]["truth"] = len(truth_items[kind])
    return out


def _pct(num: int, den: int) -> float | None:
    return round(100 * num / den, 4) if den else None


def valor_scores(per_conversation: Sequence[Mapping[str, Mapping[str, int]]]) -> dict:
    """Faithfulness and coverage (percent) per kind and pooled (faith_i, coverage_i), summed over conversations."""
    tot = {k: defaultdict(int) for k in VALOR_KINDS}
    for counts in per_conversation:
        for kind in VALOR_KINDS:
            for key, v in counts[kind].items():
                tot[kind][key] += v
    allsum = {key: sum(tot[k][key] for k in VALOR_KINDS) for key in ("extracted", "matched", "covered", "truth")}
    return {
        "faith_i": _pct(allsum["matched"], allsum["extracted"]),
        "coverage_i": _pct(allsum["covered"], allsum["truth"]),
        "faithfulness": {k: _pct(tot[k]["matched"], tot[k]["extracted"]) for k in VALOR_KINDS},
        "coverage": {k: _pct(tot[k]["covered"], tot[k]["truth"]) for k in VALOR_KINDS},
        "n_extracted": allsum["extracted"],
        "n_matched": allsum["matched"],
        "conversations": len(per_conversation),
    }


def valor_on_conversations(
    convos: Mapping[str, Sequence[Mapping[str, Any]]],
    truths: Mapping[str, SceneGraph],
    vocab: Vocabulary,
    llm=None,
) -> tuple[dict[str, dict], dict[str, str]]:
    """(per conversation: matched counts by kind, per conversation: the extractor that produced it). With `llm`, one
    extraction request per conversation (one chat_batch for all); a reply that is not a valid scene graph falls back
    to the rule extraction (`rule_fallback`). Failed answers are never sent (nothing to extract)."""
    answers = {cid: [t["answer"] for t in ts if not is_failed(t.get("answer") or "")] for cid, ts in convos.items()}
    graphs: dict[str, SceneGraph | None] = {}
    if llm is not None:
        ask = [cid for cid in sorted(answers) if answers[cid]]
        # a failed request (raised, 503) gives no reply: the rule extraction stands in, counted as a fallback
        replies = safe_chat_batch(llm, [valor_messages(answers[cid]) for cid in ask])
        for cid, reply in zip(ask, replies):
            data = parse_json_reply(reply)
            try:
                graphs[cid] = SceneGraph.from_dict(data, source="valor extraction reply")
            except Exception:  # any invalid shape: the rule extraction stands in, counted
                graphs[cid] = None
    counts, used = {}, {}
    for cid, ts in convos.items():
        truth = TruthView.of(truths[str(ts[0]["image_id"])], vocab.synonyms)
        graph = graphs.get(cid)
        if graph is not None:
            items = _items(TruthView.of(graph, vocab.synonyms))
            used[cid] = "llm"
        else:
            items = rule_items(answers[cid], vocab)
            used[cid] = "rule_fallback" if llm is not None and answers[cid] else "rule"
        counts[cid] = match_items(items, truth)
    return counts, used


# ---- all graders per setting --------------------------------------------------------------------------------------


def compare_graders(
    turns: Sequence[Mapping[str, Any]],
    truths: Mapping[str, SceneGraph],
    vocab: Vocabulary,
    summary: Mapping[str, Mapping[str, Any]],
    settings: Mapping[str, Any],
    llm=None,
    llm_info: Mapping[str, Any] | None = None,
) -> tuple[dict, dict, dict]:
    """(comparison by setting "<examiner>/<history>", grader descriptions, valor fallback counts).

    Each setting gets chair / valor blocks (when configured) beside the scene-graph and per-turn numbers that
    grade_transcripts put in `summary`, and `radar` = the paper's normalised radius of every axis whose grader ran."""
    graders = graders_of(settings)
    extractor = Cedi.from_dict(settings).valor_extractor
    if extractor not in ("llm", "rule"):
        raise ConfigError(f"config key 'cedi.valor_extractor': {extractor!r} is not llm or rule")
    convos: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for t in turns:
        convos[str(t["conversation_id"])].append(t)
    valor_counts, valor_used = (
        valor_on_conversations(convos, truths, vocab, llm if extractor == "llm" else None)
        if "valor" in graders
        else ({}, {})
    )
    out = {}
    for setting in sorted(summary):
        examiner, history = setting.split("/", 1)
        sel = [t for t in turns if t["examiner"] == examiner and t["history"] == history]
        ids = sorted({str(t["conversation_id"]) for t in sel})
        block: dict[str, Any] = {"examiner": examiner, "history": history, "graders": graders}
        if "chair" in graders:
            block["chair"] = chair_on_answers(sel, truths)
        if "valor" in graders:
            block["valor"] = valor_scores([valor_counts[c] for c in ids])
        g = summary[setting]
        values = {
            "chair_s": (block.get("chair") or {}).get("chair_s"),
            "chair_i": (block.get("chair") or {}).get("chair_i"),
            "valor": (block.get("valor") or {}).get("faith_i"),
            "ged": g.get("ged") if "sg" in graders else None,
            "sg_delta_con": g.get("sg_delta_con") if "sg" in graders else None,
            "hallucination_rate": g.get("hallucination_rate") if "cedi" in graders else None,
        }
        block["radar"] = {axis: radius(axis, values[axis]) for axis, *_ in RADAR_AXES}
        out[setting] = block
    used: dict[str, int] = {}
    for v in valor_used.values():
        used[v] = used.get(v, 0) + 1
    valor_fb = {
        "configured": extractor,
        "used": dict(sorted(used.items())),
        "fell_back": used.get("rule_fallback", 0) + (used.get("rule", 0) if extractor == "llm" else 0),
    }
    described = {
        "sg": "CEDI's scene-graph grader: GED and SG ΔCon of the predicted graph (parser: cedi.parser)",
        "cedi": "CEDI's per-turn hallucination judge (cedi.parser: rule or llm)",
        "chair": "CHAIR (Rohrbach et al.) over the answers, CHAIR's COCO synonym vocabulary",
        "valor": f"VALOR-Eval style extraction ({extractor}"
        + (f": {llm_info.get('model')}" if extractor == "llm" and llm_info else "")
        + ") matched to the truth graph"
        + (f"; rule fallback for {valor_fb['fell_back']} conversation(s)" if valor_fb["fell_back"] else ""),
    }
    return out, {g: described[g] for g in graders}, valor_fb


# ---- the paper section --------------------------------------------------------------------------------------------


def _radar_setting(summary_keys: Sequence[str], examiner: str) -> str | None:
    """The setting an examiner's polygon shows: with history where it ran with history (the paper's main setting)."""
    for key in (f"{examiner}/with", f"{examiner}/without"):
        if key in summary_keys:
            return key
    return next((k for k in summary_keys if k.startswith(examiner + "/")), None)


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)  # the catalogue reads counts as numbers; a table shows them whole


def section_tables(grades: Mapping[str, Mapping[str, Any]]) -> tuple[list[dict], dict]:
    """The section's tables from each model's grades.json (numbers read through the metric catalogue), and the data
    the figures draw."""
    from ..metrics.catalogue import CATALOGUE

    radar_rows, turn_rows, premise_rows, error_rows, valor_rows = [], [], [], [], []
    fig: dict[str, Any] = {"radar": {}, "errors": {}}
    for model, doc in sorted(grades.items()):
        where = f"cedi/{model}/grades.json"
        settings = list((doc.get("summary") or {}).keys())
        examiners = list(dict.fromkeys(k.split("/")[0] for k in settings))
        for examiner in examiners:
            setting = _radar_setting(settings, examiner)
            if setting is None or setting not in (doc.get("comparison") or {}):
                continue
            for axis, grader, metric, norm in RADAR_AXES:
                value = CATALOGUE.read(doc, metric, where, setting=setting)
                r = CATALOGUE.read(doc, "cedi.comparison.radar", where, setting=setting, axis=axis)
                radar_rows.append([model, examiner, setting, grader, axis, value, norm, r])
                fig["radar"].setdefault(model, {}).setdefault(examiner, {})[axis] = r
        for setting in settings:
            examiner, history = setting.split("/", 1)
            g = doc["summary"][setting]
            for turn in sorted(g.get("by_turn") or {}, key=int):
                rate = CATALOGUE.read(doc, "cedi.summary.by_turn.rate", where, setting=setting, turn=turn)
                n = _int(CATALOGUE.read(doc, "cedi.summary.by_turn.n_judged", where, setting=setting, turn=turn))
                turn_rows.append([model, examiner, history, int(turn), n, rate])
            pr = [
                _int(CATALOGUE.read(doc, f"cedi.summary.premise_rejection.{k}", where, setting=setting))
                for k in ("n", "n_judged", "n_rejected", "n_refused")
            ] + [CATALOGUE.read(doc, "cedi.summary.premise_rejection.rate", where, setting=setting)]
            premise_rows.append([model, examiner, history, *pr])
            shares = [
                CATALOGUE.read(doc, "cedi.summary.error_types.shares", where, setting=setting, error_type=k)
                for k in ("object", "attribute", "relation", "other")
            ]
            n_hal = _int(CATALOGUE.read(doc, "cedi.summary.error_types.n_hallucinated", where, setting=setting))
            error_rows.append([model, examiner, history, *shares, n_hal])
            fig["errors"].setdefault(model, {})[setting] = (shares, n_hal)
            if "valor" in ((doc.get("comparison") or {}).get(setting) or {}):
                valor_rows.append(
                    [model, examiner, history]
                    + [
                        CATALOGUE.read(doc, f"cedi.comparison.valor.{m}", where, setting=setting, kind=k)
                        for m in ("faithfulness", "coverage")
                        for k in VALOR_KINDS
                    ]
                )
    tables = [
        {
            "id": "radar_axes",
            "title": "Examiners × graders: raw value and radar radius (CEDI's radar)",
            "columns": ["model", "examiner", "setting", "grader", "axis", "value", "normalisation", "radius"],
            "rows": radar_rows,
            "metrics": sorted({m for _, _, m, _ in RADAR_AXES} | {"cedi.comparison.radar"}),
            "note": "radii as the paper normalises them: score/100 for percentage metrics, GED/150, SG ΔCon/5, "
            "(100 − VALOR faith_i)/50; larger = more hallucination exposed",
        },
        {
            "id": "per_turn_rates",
            "title": "Per-turn hallucination rate, with and without conversation history",
            "columns": ["model", "examiner", "history", "turn", "n_judged", "rate"],
            "rows": turn_rows,
            "metrics": ["cedi.summary.by_turn.n_judged", "cedi.summary.by_turn.rate"],
            "note": "paper: with history the rate climbs from about 26% to 30–32%; without it stays at 21–25%",
        },
        {
            "id": "premise_rejection",
            "title": "Premise rejection on questions with a false premise",
            "columns": ["model", "examiner", "history", "n", "n_judged", "n_rejected", "n_refused", "rate"],
            "rows": premise_rows,
            "metrics": [
                f"cedi.summary.premise_rejection.{k}" for k in ("n", "n_judged", "n_rejected", "n_refused", "rate")
            ],
            "note": "rate = judged false-premise turns answered by rejecting the premise or declining / judged ones",
        },
        {
            "id": "error_type_shares",
            "title": "What the errors look like: share of hallucinated turns per error type",
            "columns": ["model", "examiner", "history", "object", "attribute", "relation", "other", "n_hallucinated"],
            "rows": error_rows,
            "metrics": ["cedi.summary.error_types.shares", "cedi.summary.error_types.n_hallucinated"],
            "note": "paper: object 62%, attribute 20%, relation 15%, other 3%",
        },
        {
            "id": "valor",
            "title": "VALOR-style faithfulness and coverage (%) per kind",
            "columns": ["model", "examiner", "history"]
            + [f"{m}_{k}" for m in ("faith", "coverage") for k in VALOR_KINDS],
            "rows": valor_rows,
            "metrics": ["cedi.comparison.valor.faithfulness", "cedi.comparison.valor.coverage"],
        },
    ]
    return tables, fig
