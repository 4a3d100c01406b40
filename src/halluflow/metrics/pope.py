"""POPE metrics (RUCAIBox/POPE evaluate.py; anchors.md "POPE"): accuracy, precision, recall, F1, yes-ratio.

Vectorised (polars/numpy) and exact: on any answer file it returns the same floats as a plain port of the
official loop (bench/official_ports.py; property-tested). The lmms-eval aggregation bugs are only reachable
through `aggregation="lmms_eval"` (parser `lmms_eval`); every other parser uses the fixed definitions.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import polars as pl

from ..errors import InputError
from ..io import dumps_json, read_jsonl, write_text
from .parsers import NO, PARSERS, YES, parse_answers

CLI_DESCRIPTION = (
    "POPE scores of yes/no answers against POPE label files. Answers are matched to labels by question_id.\n"
    "Parsers: pope (official evaluate.py), exact (exact yes/no match, fixed aggregation), lmms_eval (exact match\n"
    "with lmms-eval's bugs: yes_ratio counts ground truth, unparsed answers left out of recall), vlmevalkit\n"
    "(yes/no/unknown), amber (strict 'Yes'/'No'). Undefined ratios (0/0) are null."
)
CLI_EPILOG = """examples:
  halluflow score pope --answers answers.jsonl --labels ../shared/data/pope-rucaibox/coco/coco_pope_popular.json
  halluflow score pope --answers llava.jsonl --labels gqa_pope_seem_random.json --parser vlmevalkit --out m.json
  halluflow score pope --answers a.jsonl --labels l.json --positive no     # 'no' as the positive class (AMBER)
answers: JSONL {"question_id", "answer"} or {"question_id", "text"}; labels: JSONL or a JSON array of
{"question_id", "image", "text", "label"} (POPE's COCO / A-OKVQA / GQA files)."""

METRIC_KEYS = ("accuracy", "precision", "recall", "f1", "yes_ratio")
COUNT_KEYS = ("n", "tp", "fp", "tn", "fn", "unknown", "pred_yes", "pred_no", "truth_yes", "truth_no")


def _ratio(num: int, den: int) -> float | None:
    # float(a)/float(b) exactly as evaluate.py computes it, so results are bit-identical to the official script.
    return float(num) / float(den) if den else None


def confusion_counts(parsed: pl.Series, truth: pl.Series, positive: str = YES,
                     weights: pl.Series | None = None) -> dict[str, int]:
    """Counts of the confusion matrix; `parsed` is yes/no/null, `truth` yes/no; unknown answers are never right.
    `weights` (row multiplicities) lets callers count distinct (answer, truth) pairs once."""
    if positive not in (YES, NO):
        raise InputError(f"positive class must be 'yes' or 'no', got {positive!r}")
    negative = NO if positive == YES else YES
    p = parsed.fill_null("").to_numpy()
    t = truth.fill_null("").to_numpy()
    w = np.ones(len(t), dtype=np.int64) if weights is None else weights.cast(pl.Int64).to_numpy()
    pred_pos, pred_neg = p == positive, p == negative
    truth_pos = t == positive

    def count(mask) -> int:
        return int(w[mask].sum())

    return {
        "n": int(w.sum()),
        "tp": count(pred_pos & truth_pos),
        "fp": count(pred_pos & ~truth_pos),
        "tn": count(pred_neg & ~truth_pos),
        # every truth-positive that was not answered positive (an unknown answer is a miss)
        "fn": count(truth_pos & ~pred_pos),
        "unknown": count(~(pred_pos | pred_neg)),
        "pred_yes": count(p == YES),
        "pred_no": count(p == NO),
        "truth_yes": count(t == YES),
        "truth_no": count(t == NO),
        # lmms-eval's recall only counts misses that were answered with the negative word
        "fn_answered": count(truth_pos & pred_neg),
    }


def metrics_from_counts(c: dict[str, int], aggregation: str = "standard", positive: str = YES) -> dict:
    """The five POPE numbers from confusion counts. `lmms_eval` reproduces lmms-eval's aggregation bugs."""
    tp, fp, tn, fn, n = c["tp"], c["fp"], c["tn"], c["fn"], c["n"]
    if aggregation == "lmms_eval":
        # pope_aggregate_*: 0 instead of undefined, recall ignores unparsed answers, yes_ratio counts GROUND TRUTH.
        precision = tp / (tp + fp) if tp + fp > 0 else 0
        recall = tp / (tp + c["fn_answered"]) if tp + c["fn_answered"] > 0 else 0
        f1 = 2 * (precision * recall) / (precision + recall) if precision + recall > 0 else 0
        accuracy = (tp + tn) / n if n else 0
        yes_ratio = c["truth_yes"] / (c["truth_yes"] + c["truth_no"]) if c["truth_yes"] + c["truth_no"] else 0
    elif aggregation == "standard":
        precision = _ratio(tp, tp + fp)
        recall = _ratio(tp, tp + fn)
        if precision is None or recall is None:
            f1 = None
        else:
            # POPE divides by zero here; 0 is the limit (and sklearn's convention).
            f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
        accuracy = (tp + tn) / n if n else None
        yes_ratio = c["pred_yes"] / n if n else None
    else:
        raise InputError(f"unknown aggregation {aggregation!r} (known: standard, lmms_eval)")
    out = {"accuracy": accuracy, "precision": precision, "recall": recall, "f1": f1, "yes_ratio": yes_ratio}
    out.update({k: c[k] for k in COUNT_KEYS})
    out["positive"] = positive
    out["aggregation"] = aggregation
    return out


def aggregation_for(parser: str) -> str:
    return "lmms_eval" if parser == "lmms_eval" else "standard"


def _distinct_pairs(answers: pl.Series, truth: pl.Series) -> tuple[pl.Series, pl.Series, pl.Series]:
    """Distinct (answer, truth) pairs with their multiplicities: categorical codes + one numpy bincount (a
    string group_by is several times slower at 10^6 rows)."""
    codes = answers.cast(pl.Categorical).to_physical()
    null_slot = int(codes.max() or 0) + 1
    c = codes.fill_null(null_slot).cast(pl.Int64).to_numpy()
    t = (truth == YES).cast(pl.Int64).to_numpy()
    counts = np.bincount(c * 2 + t, minlength=2 * (null_slot + 1)).reshape(-1, 2)
    first = np.full(null_slot + 1, -1, dtype=np.int64)
    first[c[::-1]] = np.arange(len(c) - 1, -1, -1)  # first row of each code: its answer string
    slots, tv = np.nonzero(counts)
    texts = answers.gather(pl.Series(first[slots]))
    return (texts, pl.Series("truth", np.where(tv == 1, YES, NO), dtype=pl.String),
            pl.Series("w", counts[slots, tv]))


def pope_metrics(answers, truth, parser: str = "pope", positive: str = YES) -> dict:
    """Score answers (strings, aligned with `truth`, a sequence of "yes"/"no") with the named parser.

    Vectorised over DISTINCT (answer, truth) pairs: model answers repeat a lot (10^6 POPE answers hold a few
    hundred distinct strings), so each string is parsed once and counted with its multiplicity."""
    answers_s = answers if isinstance(answers, pl.Series) else pl.Series("answer", list(answers), dtype=pl.String)
    truth_s = truth if isinstance(truth, pl.Series) else pl.Series("truth", list(truth), dtype=pl.String)
    if len(answers_s) != len(truth_s):
        raise InputError(f"{len(answers_s)} answers but {len(truth_s)} labels")
    truth_s = truth_s.cast(pl.String)
    bad = ~((truth_s == YES) | (truth_s == NO)).fill_null(False)  # two equality passes: 5x cheaper than is_in
    if bad.any():
        i = int(bad.arg_max())
        raise InputError(f"label #{i} is {truth_s[i]!r}; labels must be 'yes' or 'no'")
    answers_d, truth_d, weights = _distinct_pairs(answers_s.cast(pl.String), truth_s)
    parsed = parse_answers(answers_d, parser)
    out = metrics_from_counts(confusion_counts(parsed, truth_d, positive, weights), aggregation_for(parser), positive)
    out["parser"] = parser
    return out


# ---------------------------------------------------------------- files
def _read_records(path: str | Path, fields: tuple[str, ...]) -> pl.DataFrame:
    """`fields` of every record, as strings (ids are strings everywhere in halluflow), from JSONL (fast path:
    polars, other fields skipped) or a JSON array; a malformed file gets io.read_jsonl's line-numbered error."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: file not found")
    with open(path, "rb") as fh:
        head = fh.read(64).lstrip()
    schema = {f: pl.String for f in fields}
    if head[:1] != b"[":
        try:
            return pl.read_ndjson(path, schema=schema)
        except Exception:  # noqa: BLE001 — re-read slowly only to name the offending line
            pass
    rows = read_jsonl(path)
    if not rows:
        raise InputError(f"{path}: no records")
    return pl.DataFrame({f: [None if r.get(f) is None else str(r[f]) for r in rows] for f in fields}, schema=schema)


def _check_ids(ids: pl.Series, path: Path) -> pl.Series:
    if ids.is_null().all():
        raise InputError(f"{path}: records lack 'question_id'")
    if ids.is_null().any():
        raise InputError(f"{path}: record #{int(ids.is_null().arg_max())} has no question_id")
    if ids.n_unique() < len(ids):  # cheap test first; locate the duplicate only when there is one
        dup = ids.is_duplicated()
        raise InputError(f"{path}: question_id {ids.filter(dup)[0]!r} appears more than once")
    return ids


def load_labels(path: str | Path) -> pl.DataFrame:
    """POPE label file → DataFrame[question_id (str), truth ("yes"/"no")]."""
    path = Path(path)
    df = _read_records(path, ("question_id", "label"))
    ids = _check_ids(df["question_id"], path)
    truth = df["label"]
    if not ((truth == YES) | (truth == NO)).fill_null(False).all():  # normalise only files that need it
        truth = truth.str.strip_chars().str.to_lowercase()
    bad = truth.is_null() | ~truth.is_in([YES, NO])
    if bad.any():
        i = int(bad.arg_max())
        raise InputError(f"{path}: question_id {ids[i]!r} has label {df['label'][i]!r} (expected yes/no)")
    return pl.DataFrame({"question_id": ids, "truth": truth})


def load_answers(path: str | Path) -> pl.DataFrame:
    """Answer file → DataFrame[question_id (str), answer]; the text is in "answer" or (LLaVA style) "text"."""
    path = Path(path)
    df = _read_records(path, ("question_id", "answer", "text"))
    ids = _check_ids(df["question_id"], path)
    key = "answer" if df["answer"].is_not_null().any() else "text" if df["text"].is_not_null().any() else None
    if key is None:
        raise InputError(f"{path}: records need an 'answer' or 'text' field")
    return pl.DataFrame({"question_id": ids, "answer": df[key]})


def align(answers: pl.DataFrame, labels: pl.DataFrame) -> pl.DataFrame:
    """Join by question_id in label order; any label without an answer (or answer without label) is an error."""
    if answers.height == labels.height and (answers["question_id"] == labels["question_id"]).all():
        return labels.with_columns(answers["answer"])  # already aligned (the usual case): no join needed
    joined = labels.join(answers.with_columns(_answered=pl.lit(True)), on="question_id", how="left",
                         maintain_order="left")
    missing = joined.filter(pl.col("_answered").is_null())
    if missing.height:
        raise InputError(f"no answer for question_id {missing['question_id'][0]!r} ({missing.height} labels unanswered)")
    extra = answers.join(labels, on="question_id", how="anti")
    if extra.height:
        raise InputError(f"answer for unknown question_id {extra['question_id'][0]!r} ({extra.height} not in labels)")
    return joined.drop("_answered")


def score_files(answers_path, labels_path, parser: str = "pope", positive: str = YES) -> dict:
    joined = align(load_answers(answers_path), load_labels(labels_path))
    return pope_metrics(joined["answer"], joined["truth"], parser=parser, positive=positive)


# ---------------------------------------------------------------- CLI
def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--answers", required=True, help="JSONL of {question_id, answer|text}")
    parser.add_argument("--labels", required=True, help="POPE label file (JSONL or JSON array)")
    parser.add_argument("--parser", default="pope", choices=sorted(PARSERS), help="yes/no parser (default: pope)")
    parser.add_argument("--positive", default=YES, choices=[YES, NO], help="positive class (default: yes)")
    parser.add_argument("--out", help="also write the JSON to this file")


def emit(result: dict, out: str | None) -> None:
    """Print the JSON result; with --out also write it atomically."""
    text = dumps_json(result)
    if out:
        write_text(out, text)
    print(text, end="")


def run(args: argparse.Namespace) -> int:
    emit(score_files(args.answers, args.labels, parser=args.parser, positive=args.positive), args.out)
    return 0
