"""Plain ports of the peers' own POPE scoring: the oracles `halluflow score pope --parser lmms_eval|vlmevalkit` is
checked against (as bench/official_ports.py is for the official scripts).

Nothing here imports halluflow. Each function follows the peer's code as read at the commit named, record by
record, with the peer's own containers (lists of dicts for lmms-eval, numpy arrays and a pandas frame for
VLMEvalKit), so the numbers are the ones the peer prints:
- `lmms_eval_pope` follows EvolvingLMMs-Lab/lmms-eval lmms_eval/tasks/pope/utils.py at 75571cf
  (pope_process_results, then the five pope_aggregate_* functions over the per-document results).
- `vlmevalkit_pope` follows open-compass/VLMEvalKit at e8e78f0: ImageYORNDataset.evaluate
  (vlmeval/dataset/image_yorn.py) with judge "exact_matching" (no judge model: what runs without an API key, or
  with `--judge exact_matching`), YOrN_Extraction and POPE_rating (vlmeval/dataset/utils/yorn.py), and
  process_punctuation (vlmeval/smp/misc.py). VLMEvalKit prints percent; the fractions are returned beside them.
Written from the peers' code, not copied. Inputs: answer strings and labels "yes"/"no" in the same order (the
records a harness would have scored; a record that never got an answer has no place here).
"""

from __future__ import annotations

import re


# ---------------------------------------------------------------- lmms-eval
def lmms_eval_pope(answers: list[str], labels: list[str]) -> dict:
    """lmms-eval's pope task: one result per document, then each metric's aggregation over all of them."""
    results = []
    for question_id, (text, label) in enumerate(zip(answers, labels)):
        # pope_process_results: results[0] is the model's generation, doc["answer"] the label
        pred = text.lower().strip()
        gt_ans = label.lower().strip()
        assert gt_ans in ["yes", "no"]
        score = 1.0 if pred == gt_ans else 0.0
        results.append({"question_id": question_id, "score": score, "prediction": pred, "ground_truth": gt_ans})

    def accuracy(results):
        total_score = 0
        for result in results:
            total_score += result["score"]
        return total_score / len(results)

    def count(results, first, second):
        # pope_aggregate_precision / _recall: one loop with an if/elif over (ground_truth, prediction)
        a = b = 0
        for result in results:
            pair = (result["ground_truth"], result["prediction"])
            if pair == first:
                a += 1
            elif pair == second:
                b += 1
        return a, b

    def precision(results):
        tp, fp = count(results, ("yes", "yes"), ("no", "yes"))
        return tp / (tp + fp) if (tp + fp) > 0 else 0

    def recall(results):
        tp, fn = count(results, ("yes", "yes"), ("yes", "no"))  # a miss only when answered exactly "no"
        return tp / (tp + fn) if (tp + fn) > 0 else 0

    def f1_score(results):
        p, r = precision(results), recall(results)
        return 2 * (p * r) / (p + r) if (p + r) > 0 else 0

    def yes_ratio(results):
        yes_count = no_count = 0
        for result in results:
            gt = result["ground_truth"]
            if gt == "yes":
                yes_count += 1
            elif gt == "no":
                no_count += 1
        return yes_count / (yes_count + no_count) if (yes_count + no_count) > 0 else 0

    return {
        "accuracy": accuracy(results),
        "precision": precision(results),
        "recall": recall(results),
        "f1": f1_score(results),
        "yes_ratio": yes_ratio(results),
    }


# ---------------------------------------------------------------- VLMEvalKit
_PUNCT = [";", r"/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`", ",", "?", "!"]
_COMMA_STRIP = re.compile(r"(\d)(,)(\d)")
_PERIOD_STRIP = re.compile(r"(?<!\d)\.(?!\d)")


def process_punctuation(in_text: str) -> str:
    out_text = in_text
    for p in _PUNCT:
        if (p + " " in in_text or " " + p in in_text) or (re.search(_COMMA_STRIP, in_text) is not None):
            out_text = out_text.replace(p, "")
        else:
            out_text = out_text.replace(p, " ")
    # VLMEvalKit calls periodStrip.sub('', outText, re.UNICODE): the flag lands in `count` (32)
    return _PERIOD_STRIP.sub("", out_text, count=re.UNICODE)


def yorn_extraction(output: str) -> str:
    s = output.lower()
    words = process_punctuation(s).split()
    if "yes" in words and "no" not in words:
        return "Yes"
    if "yes" not in words and "no" in words:
        return "No"
    return "Unknown"


def vlmevalkit_pope(answers: list[str], labels: list[str]) -> dict:
    """VLMEvalKit's POPE evaluation without a judge model. Returns its printed row (percent: Overall = F1, acc,
    precision, recall) and the same numbers as fractions, plus yes_ratio (which VLMEvalKit does not report: the
    share of predictions extracted as Yes)."""
    import numpy as np
    import pandas as pd

    # evaluate(): predictions are str()-ed, then extracted; answers are VLMEvalKit's "Yes"/"No"
    data = pd.DataFrame(
        {
            "index": range(len(answers)),
            "prediction": [str(x) for x in answers],
            "answer": ["Yes" if lab == "yes" else "No" for lab in labels],
        }
    )
    ans_map = {k: yorn_extraction(v) for k, v in zip(data["index"], data["prediction"])}
    data["extracted"] = [ans_map[x] for x in data["index"]]
    data["score"] = data["answer"] == data["extracted"]

    # POPE_rating, the Overall row
    def cal_f1_score(y_true, y_pred):
        tp = sum((y_true == 1) & (y_pred == 1))
        fp = sum((y_true == 0) & (y_pred == 1))
        fn = sum((y_true == 1) & (y_pred == 0))
        precision = tp / (tp + fp) if (tp + fp) != 0 else 0
        recall = tp / (tp + fn) if (tp + fn) != 0 else 0
        f1_score = 2 * (precision * recall) / (precision + recall) if (precision + recall) != 0 else 0
        return f1_score, precision, recall

    y_true = np.array([1 if i == "Yes" else 0 for i in data["answer"]])
    y_pred = np.array([1 if i == "Yes" else 0 for i in data["extracted"]])
    f1_score, precision, recall = cal_f1_score(y_true, y_pred)
    accuracy = np.mean(data["score"])
    return {
        "printed": {
            "Overall": f1_score * 100,
            "acc": accuracy * 100,
            "precision": precision * 100,
            "recall": recall * 100,
        },
        "accuracy": float(accuracy),
        "precision": float(precision),
        "recall": float(recall),
        "f1": float(f1_score),
        "yes_ratio": float(np.mean(y_pred)),
        "extracted": list(data["extracted"]),
    }
