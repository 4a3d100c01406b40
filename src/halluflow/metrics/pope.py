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


def confusion_counts(parsed: pl.Series, truth: pl.Series, positive: str = YES) -> dict[str, int]:
    """Counts of the confusion matrix; `parsed` is yes/no/null, `truth` yes/no; unknown answers are never right."""
    if positive not in (YES, NO):
        raise InputError(f"positive class must be 'yes' or 'no', got {positive!r}")
    negative = NO if positive == YES else YES
    p = parsed.to_numpy(allow_copy=True)
    t = truth.to_numpy(allow_copy=True)
    pred_pos, pred_neg = p == positive, p == negative
    truth_pos = t == positive
    return {
        "n": int(len(t)),
        "tp": int(np.count_nonzero(pred_pos & truth_pos)),
        "fp": int(np.count_nonzero(pred_pos & ~truth_pos)),
        "tn": int(np.count_nonzero(pred_neg & ~truth_pos)),
        # every truth-positive that was not answered positive (an unknown answer is a miss)
        "fn": int(np.count_nonzero(truth_pos & ~pred_pos)),
        "unknown": int(np.count_nonzero(~(pred_pos | pred_neg))),
        "pred_yes": int(np.count_nonzero(p == YES)),
        "pred_no": int(np.count_nonzero(p == NO)),
        "truth_yes": int(np.count_nonzero(t == YES)),
        "truth_no": int(np.count_nonzero(t == NO)),
        # lmms-eval's recall only counts misses that were answered with the negative word
        "fn_answered": int(np.count_nonzero(truth_pos & pred_neg)),
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


def pope_metrics(answers, truth, parser: str = "pope", positive: str = YES) -> dict:
    """Score answers (strings, aligned with `truth`, a sequence of "yes"/"no") with the named parser."""
    truth_s = truth if isinstance(truth, pl.Series) else pl.Series("truth", list(truth), dtype=pl.String)
    bad = truth_s.is_null() | ~truth_s.is_in([YES, NO])
    if bad.any():
        i = int(bad.arg_max())
        raise InputError(f"label #{i} is {truth_s[i]!r}; labels must be 'yes' or 'no'")
    parsed = parse_answers(answers, parser)
    if len(parsed) != len(truth_s):
        raise InputError(f"{len(parsed)} answers but {len(truth_s)} labels")
    out = metrics_from_counts(confusion_counts(parsed, truth_s, positive), aggregation_for(parser), positive)
    out["parser"] = parser
    return out


# ---------------------------------------------------------------- files
def _read_records(path: str | Path) -> pl.DataFrame:
    """JSONL (fast path: polars) or a JSON array; malformed files get the line-numbered error of io.read_jsonl."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: file not found")
    with open(path, "rb") as fh:
        head = fh.read(64).lstrip()
    if head[:1] != b"[":
        try:
            return pl.read_ndjson(path, infer_schema_length=None)
        except Exception:  # noqa: BLE001 — re-read slowly only to name the offending line
            pass
    rows = read_jsonl(path)
    if not rows:
        raise InputError(f"{path}: no records")
    return pl.DataFrame(rows, infer_schema_length=None)


def _id_column(df: pl.DataFrame, path: Path) -> pl.Series:
    if "question_id" not in df.columns:
        raise InputError(f"{path}: records lack 'question_id' (columns: {', '.join(df.columns)})")
    ids = df["question_id"].cast(pl.String)
    if ids.is_null().any():
        raise InputError(f"{path}: record #{int(ids.is_null().arg_max())} has a null question_id")
    dup = ids.is_duplicated()
    if dup.any():
        raise InputError(f"{path}: question_id {ids.filter(dup)[0]!r} appears more than once")
    return ids


def load_labels(path: str | Path) -> pl.DataFrame:
    """POPE label file → DataFrame[question_id (str), truth ("yes"/"no")]."""
    path = Path(path)
    df = _read_records(path)
    ids = _id_column(df, path)
    if "label" not in df.columns:
        raise InputError(f"{path}: records lack 'label'")
    truth = df["label"].cast(pl.String).str.strip_chars().str.to_lowercase()
    bad = truth.is_null() | ~truth.is_in([YES, NO])
    if bad.any():
        i = int(bad.arg_max())
        raise InputError(f"{path}: question_id {ids[i]!r} has label {df['label'][i]!r} (expected yes/no)")
    return pl.DataFrame({"question_id": ids, "truth": truth})


def load_answers(path: str | Path) -> pl.DataFrame:
    """Answer file → DataFrame[question_id (str), answer]; the text is in "answer" or (LLaVA style) "text"."""
    path = Path(path)
    df = _read_records(path)
    ids = _id_column(df, path)
    key = "answer" if "answer" in df.columns else "text" if "text" in df.columns else None
    if key is None:
        raise InputError(f"{path}: records need an 'answer' or 'text' field (columns: {', '.join(df.columns)})")
    if df[key].dtype != pl.String:
        raise InputError(f"{path}: field {key!r} must hold strings, found {df[key].dtype}")
    return pl.DataFrame({"question_id": ids, "answer": df[key]})


def align(answers: pl.DataFrame, labels: pl.DataFrame) -> pl.DataFrame:
    """Join by question_id in label order; any label without an answer (or answer without label) is an error."""
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
