"""CEDI grader (Li et al., CEDI paper, "the grader: compare scene graphs, not strings") and the `halluflow sg ged` command.

Turns each transcript into a predicted scene graph (halluflow.cedi.parser), compares it with the truth graph by GED
(halluflow.cedi.ged: GED, GED_hal, GED_miss, exact/upper-bound flag) and reports SG ΔCon and per-turn
hallucination rates by question type and turn index, with and without history (see `grade_transcripts`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping, Sequence

from ..progress import progress
from .ged import scene_graph_ged
from .parser import (
    Vocabulary,
    delta_con,
    expected_answer,
    failure_of,
    judge_messages,
    llm_parse_batch,
    parse_judgement,
    predicted_graph,
    safe_chat_batch,
    turn_claims,
)
from .scene_graph import SceneGraph

PER_TURN_SCHEMA = {
    "examiner": "str",
    "history": "str",
    "turn": "int",
    "question_type": "str",
    "n": "int",
    "n_judged": "int",
    "n_hallucinated": "int",
    "n_unparseable": "int",
    "rate": "float",
    "stand_in": "bool",
}


# ---- grading a model's transcripts --------------------------------------------------------------------------------


# The paper's error analysis ("What the errors look like"): hallucinated object / wrong attribute / wrong relation /
# others (e.g. hallucinated reasoning: the rule judge's accepted false premise that the answer only reasons about,
# or the LLM judge's own "other").
ERROR_TYPES = ("object", "attribute", "relation", "other")


def _rate(turns: Sequence[Mapping[str, Any]]) -> dict:
    """Hallucination rate over judged turns; empty, unparseable and refused answers are counted beside it."""
    judged = [t["hallucinated"] for t in turns if t["hallucinated"] is not None]
    n_h = sum(1 for h in judged if h)
    labels = [t.get("answer_label") for t in turns]
    return {
        "n": len(turns),
        "n_judged": len(judged),
        "n_hallucinated": n_h,
        "n_unparseable": labels.count("unparseable"),
        "n_empty": labels.count("empty"),
        "n_refused": labels.count("refuse"),
        "rate": round(n_h / len(judged), 6) if judged else None,
    }


def error_types(turns: Sequence[Mapping[str, Any]]) -> dict:
    """Hallucinated turns by the paper's error categories: counts and shares."""
    counts = dict.fromkeys(ERROR_TYPES, 0)
    for t in turns:
        if t["hallucinated"]:
            kind = t.get("hallucination_kind")
            counts[kind if kind in counts else "other"] += 1
    total = sum(counts.values())
    return {
        "counts": counts,
        "shares": {k: round(v / total, 6) if total else None for k, v in counts.items()},
        "n_hallucinated": total,
    }


def premise_rejection(turns: Sequence[Mapping[str, Any]]) -> dict:
    """The paper's "premise rejection or refusal" on questions with a false premise (the unanswerable type): judged
    false-premise turns whose answer rejected the premise or declined (not hallucinated) / judged false-premise
    turns; `n_refused` counts the declines among them."""
    fp = [t for t in turns if t.get("false_premise")]
    judged = [t for t in fp if t["hallucinated"] is not None]
    rejected = [t for t in judged if not t["hallucinated"]]
    return {
        "n": len(fp),
        "n_judged": len(judged),
        "n_rejected": len(rejected),
        "n_refused": sum(1 for t in rejected if t.get("answer_label") == "refuse"),
        "rate": round(len(rejected) / len(judged), 6) if judged else None,
    }


def _sources(turns: Sequence[Mapping[str, Any]], column: str) -> dict:
    out: dict[str, int] = {}
    for t in turns:
        if t.get(column):
            out[t[column]] = out.get(t[column], 0) + 1
    return dict(sorted(out.items()))


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 6) if values else None


def _judged_by(configured: str, counts: Mapping[str, int], unit: str) -> dict:
    """Which judge produced a number: `judge` = llm | rule | mixed (| none: nothing judged), with the count of
    `unit`s per judge."""
    used = {k: v for k, v in sorted(counts.items()) if v}
    kinds = {"llm" if k == "llm" else "rule" for k in used if k != "none"}
    judge = kinds.pop() if len(kinds) == 1 else ("mixed" if kinds else "none")  # none: nothing was judged
    return {"judge": judge, "configured": configured, "used": used, "unit": unit}


def _judges_of(rows: Sequence[Mapping[str, Any]], turns: Sequence[Mapping[str, Any]], configured: str) -> dict:
    graph = _judged_by(configured, _sources(rows, "parser"), "conversation")
    per_turn = _judged_by(configured, _sources(turns, "judge"), "turn")
    return {
        **{k: graph for k in ("ged", "ged_hal", "ged_miss")},
        **{k: per_turn for k in ("sg_delta_con", "hallucination_rate", "error_types")},
    }


def _turn_claims(t: Mapping[str, Any], vocab: Vocabulary):
    return turn_claims(t["answer"] or "", list(t["premise"] or []), t["probe"], vocab)


def _rule_claims(t: Mapping[str, Any], vocab: Vocabulary) -> list:
    return _turn_claims(t, vocab).claims


def judge_turns(
    convos: Mapping[str, Sequence[Mapping[str, Any]]],
    truths: Mapping[str, SceneGraph],
    vocab: Vocabulary,
    llm=None,
) -> dict[str, list[tuple[dict, list]]]:
    """Per conversation, each turn with its judgement (`hallucinated`, `hallucination_kind`, `judge`) and claims.

    Rule (no `llm`): the examiner's rule judgement recorded in the transcript and the rule parser's claims. LLM: one
    judge request per answered turn (truth graph, the examiner's correct answer, question, answer; one chat_batch
    for all), validated by `parse_judgement`; a reply that does not follow the format falls back to the rule
    judgement (`judge: rule_fallback`). An empty answer is never sent to a judge (`judge: none`, not judged)."""
    out: dict[str, list[tuple[dict, list]]] = {}
    asks: list[tuple[str, int, list[dict]]] = []
    for cid, ts in convos.items():
        rows = []
        for t in ts:
            tc = _turn_claims(t, vocab)
            row = {**t, "judge": "rule"}
            if tc.label == "empty":
                row.update(hallucinated=None, hallucination_kind=None, judge="none")
            elif llm is not None:
                expected = expected_answer(t.get("truth"), bool(t.get("false_premise")))
                asks.append(
                    (cid, len(rows), judge_messages(truths[str(t["image_id"])], t["question"], t["answer"], expected))
                )
                row["judge"] = "rule_fallback"  # until a valid reply replaces it
            rows.append((row, tc.claims))
        out[cid] = rows
    if asks:
        replies = safe_chat_batch(llm, [m for _, _, m in asks])
        for (cid, i, _), reply in zip(asks, replies):
            if failure_of(reply):  # the request failed: the rule judgement stands, with the reason
                out[cid][i][0]["judge_failure"] = failure_of(reply)
            got = parse_judgement(reply, vocab.synonyms, ERROR_TYPES)
            if got is not None:
                row, _ = out[cid][i]
                hal, kind, claims = got
                row.update(hallucinated=hal, hallucination_kind=kind, judge="llm")
                out[cid][i] = (row, claims)
    return out


def grade_transcripts(
    turns: Sequence[Mapping[str, Any]],
    truths: Mapping[str, SceneGraph],
    vocab: Vocabulary,
    settings: Mapping[str, Any],
    llm=None,
) -> tuple[dict, list[dict], dict]:
    """Grade every conversation: predicted graph (LLM parser or rule parser), GED split, SG ΔCon; aggregate per
    (examiner, history) and per-turn hallucination rates by question type and by turn index.

    Returns (grades, per_turn rows, {"stand_in", "graphs": predicted graph by conversation id}). Rates ignore turns
    that cannot be judged (empty or unparseable answers; yes/no probes answered with neither), so `n_judged` and the
    excluded counts are reported beside each rate. Every LLM step that fell back to rules or templates is counted in
    `fallbacks`, so the summary never reports a configured LLM component that did not do the work.
    """
    from ..errors import InputError

    policy = settings.get("claim_policy", "any")
    timeout = float(settings.get("ged_timeout_s", 30))
    solver = settings.get("ged_solver", "milp")
    instances = settings.get("ged_instances", "keep")
    norm = settings.get("ged_normalizer")
    configured_parser = settings.get("parser", "rule")
    use_llm = configured_parser == "llm" and llm is not None
    convos: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for t in turns:
        convos[str(t["conversation_id"])].append(t)
    for cid, ts in convos.items():
        ts.sort(key=lambda t: int(t["turn"]))
        if str(ts[0]["image_id"]) not in truths:
            raise InputError(f"conversation {cid!r}: no truth graph for image {ts[0]['image_id']!r}")
    judged = judge_turns(convos, truths, vocab, llm if use_llm else None)
    turns = [row for cid in sorted(judged) for row, _ in judged[cid]]
    rows, preds = [], {}
    ids = sorted(convos)
    parse_failures: list[str | None] = []
    parsed = (
        dict(
            zip(
                ids,
                llm_parse_batch(
                    llm, [[(t["question"], t["answer"] or "") for t, _ in judged[c]] for c in ids], parse_failures
                ),
            )
        )
        if use_llm
        else {}
    )
    parse_failed = {cid: why for cid, why in zip(ids, parse_failures) if why}
    for cid in progress(ids, desc="cedi grade"):
        ts = [row for row, _ in judged[cid]]
        claims = [c for _, c in judged[cid]]
        image_id = str(ts[0]["image_id"])
        pred, parser_used = None, "rule"
        if use_llm:
            pred = parsed[cid]
            parser_used = "llm" if pred is not None else "rule_fallback"
        if pred is None:
            # the rule parser's graph (its claims, not the LLM judge's), so `parser` says truthfully who built it
            pred = predicted_graph([_rule_claims(t, vocab) for t in ts] if use_llm else claims, policy)
        ged = scene_graph_ged(
            truths[image_id], pred, synonyms=vocab.synonyms, timeout=timeout, solver=solver, instances=instances
        )
        preds[cid] = {**pred.to_dict(), "parser": parser_used}
        rows.append(
            {
                "conversation_id": cid,
                "image_id": image_id,
                "examiner": ts[0]["examiner"],
                "history": ts[0]["history"],
                "turns": len(ts),
                # how it ended (CEDI: END on coverage / nothing left, the switch's END, or the max_rounds cap)
                "end_reason": ts[-1].get("end_reason"),
                "coverage": ts[-1].get("coverage"),
                "n_failed_turns": sum(1 for t in ts if t.get("llm_failures")),
                "parser": parser_used,
                **({"parser_failure": parse_failed[cid]} if cid in parse_failed else {}),
                "delta_con": delta_con(claims),
                **ged.as_dict(),
                "turn_hallucination": _rate(ts),
            }
        )
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["examiner"], r["history"])].append(r)
    by_turn: dict[tuple, list] = defaultdict(list)
    for t in turns:
        by_turn[(t["examiner"], t["history"], int(t["turn"]), t["question_type"])].append(t)
    summary = {}
    for (examiner, history), rs in sorted(groups.items()):
        sel = [t for t in turns if t["examiner"] == examiner and t["history"] == history]
        by_type: dict[str, list] = defaultdict(list)
        by_index: dict[int, list] = defaultdict(list)
        for t in sel:
            by_type[t["question_type"]].append(t)
            by_index[int(t["turn"])].append(t)
        g = summary[f"{examiner}/{history}"] = {
            "examiner": examiner,
            "history": history,
            "conversations": len(rs),
            "ged": _mean([r["ged"] for r in rs]),
            "ged_hal": _mean([r["ged_hal"] for r in rs]),
            "ged_miss": _mean([r["ged_miss"] for r in rs]),
            "exact_fraction": _mean([float(r["exact"]) for r in rs]),
            "sg_delta_con": _mean([r["delta_con"] for r in rs]),
            "turns_mean": _mean([r["turns"] for r in rs]),
            "ended_by": _sources(rs, "end_reason"),
            "n_max_rounds": sum(1 for r in rs if r.get("end_reason") == "max_rounds"),
            "coverage_mean": _mean([r["coverage"] for r in rs if r.get("coverage") is not None]),
            "n_failed_turns": sum(r["n_failed_turns"] for r in rs),
            "turn_hallucination": _rate(sel),
            "by_question_type": {k: _rate(v) for k, v in sorted(by_type.items())},
            "by_turn": {str(k): _rate(v) for k, v in sorted(by_index.items())},
            "error_types": error_types(sel),
            "premise_rejection": premise_rejection(sel),
            "judged_by": _judges_of(rs, sel, configured_parser),
        }
        if norm:
            for k in ("ged", "ged_hal", "ged_miss"):
                g[f"{k}_normalized"] = round(g[k] / float(norm), 6) if g[k] is not None else None
        g["hallucination_rate"] = g["turn_hallucination"]["rate"]
    # per_turn.parquet holds the CEDI examiner's turns (the curves of the paper); baselines' per-turn rates are in
    # grades.json (summary.<examiner>/<history>.by_turn), so a plot of this table never mixes examiners.
    stand_in = any(bool(t.get("stand_in")) for t in turns)
    per_turn = [
        {
            "examiner": e,
            "history": h,
            "turn": i,
            "question_type": q,
            **{k: v for k, v in _rate(ts).items() if k in PER_TURN_SCHEMA},
            "stand_in": stand_in,
        }
        for (e, h, i, q), ts in sorted(by_turn.items())
        if e == "cedi"
    ]
    headline_key = next((k for k in ("cedi/with", "cedi/without") if k in summary), next(iter(summary), None))
    headline = summary.get(headline_key, {}) if headline_key else {}
    parsers = _sources(rows, "parser")
    cedi_turns = [t for t in turns if t["examiner"] == "cedi"]
    fallbacks = {
        # "configured" is what the config asked for; the counts say what actually produced each piece
        "parser": {
            "configured": configured_parser,
            "used": parsers,
            "fell_back": parsers.get("rule_fallback", 0)
            + (len(rows) if configured_parser == "llm" and not use_llm else 0),
        },
        # the LLM writes CEDI's questions and the prompt-only examiner's (caption and POPE prompts are fixed)
        "question_writer": {
            "configured": settings.get("question_writer", "template"),
            "used": _sources([t for t in turns if t["examiner"] in ("cedi", "prompt_only")], "question_source"),
        },
        "switch": {"configured": settings.get("switch", "random"), "used": _sources(cedi_turns, "switch_source")},
        "turn_judge": {"configured": configured_parser, "used": _sources(turns, "judge")},
    }
    for key in ("question_writer", "switch"):
        used = fallbacks[key]["used"]
        fallbacks[key]["fell_back"] = (
            sum(v for k, v in used.items() if k not in ("llm", "llm_generated"))
            if fallbacks[key]["configured"] == "llm"
            else 0
        )
    judges = fallbacks["turn_judge"]["used"]
    fallbacks["turn_judge"]["fell_back"] = (
        sum(v for k, v in judges.items() if k not in ("llm", "none")) if configured_parser == "llm" else 0
    )
    # a switch choice the examiner could not honour (e.g. adversarial with no absent object left): asked as a
    # regular question, counted here by what was chosen
    unhonoured = [t for t in cedi_turns if t.get("switch_honoured") is False]
    fallbacks["switch"]["unhonoured"] = len(unhonoured)
    fallbacks["switch"]["unhonoured_choices"] = _sources(unhonoured, "switch_choice")
    # LLM requests that failed (raised, 503, timed out): each turn / conversation went on with the fallback
    failed_turns = [t for t in turns if t.get("llm_failures")]
    reasons: dict[str, int] = {}
    for why in (
        [w for t in failed_turns for w in t["llm_failures"]]
        + [f"judge: {t['judge_failure']}" for t in turns if t.get("judge_failure")]
        + [f"parser: {w}" for w in parse_failed.values()]
    ):
        reasons[why] = reasons.get(why, 0) + 1
    fallbacks["llm_failures"] = {
        "n_failed_turns": len(failed_turns),  # examiner turns with a failed context / switch / question request
        "n_failed_judge_turns": sum(1 for t in turns if t.get("judge_failure")),
        "n_failed_parses": len(parse_failed),
        "reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:20]),
    }
    judged_by = dict(headline.get("judged_by", {}))
    judged_by["error_types"] = _judged_by(configured_parser, _sources(cedi_turns, "judge"), "turn")
    grades = {
        # headline numbers = the CEDI examiner with history (the paper's main setting), top level for scorecards
        "headline": headline_key,
        **{k: headline.get(k) for k in ("ged", "ged_hal", "ged_miss", "sg_delta_con", "hallucination_rate")},
        "settings": {
            "parser": configured_parser,
            "parser_used": parsers,
            "claim_policy": policy,
            "ged_timeout_s": timeout,
            "ged_solver": solver,
            "ged_instances": instances,
            "ged_instances_rule": settings.get("ged_instances_rule", "configured"),
            "name_synonyms": vocab.synonyms.name_source,
            "ged_normalizer": norm,
            "source": settings.get("source", "ode"),
            "switch": settings.get("switch", "random"),
            "question_writer": settings.get("question_writer", "template"),
        },
        # which judge produced each headline number (ged*: the scene-graph parser; the rest: the per-turn judge)
        "judged_by": judged_by,
        "fallbacks": fallbacks,
        "error_types": error_types(cedi_turns),
        "stand_in": stand_in,
        "summary": summary,
        "conversations": rows,
    }
    if norm:
        grades["ged_normalized"] = headline.get("ged_normalized")
    return grades, per_turn, {"stand_in": stand_in, "graphs": preds}
