"""RePOPE (Neuhaus & Hein, "RePOPE: Impact of Annotation Errors on the POPE Benchmark"): POPE's COCO questions with
corrected labels and the ambiguous questions removed, read from a user-supplied label file in POPE's own format
(the authors publish coco_repope_{random,popular,adversarial}.json).

`path`: the RePOPE label file (its questions are the ones asked, its labels the truth); `annotations` (optional): the
original POPE file, to count what the relabelling changed. Answers are POPE's JSONL, scored by POPE's scorer.
"""

from __future__ import annotations

from .pope import POPE


class RePOPE(POPE):
    name = "repope"
    label = "RePOPE"

    def score(self, answers_file, answered, source, scoring):
        from ..metrics.formats import read_pope_labels

        scores = super().score(answers_file, answered, source, scoring)
        if source.get("annotations"):
            fixed = dict(read_pope_labels(source["path"], questions=False).rows())
            original = dict(read_pope_labels(source["annotations"], questions=False).rows())
            scores["relabelled"] = {
                "n_changed": sum(1 for q, t in fixed.items() if q in original and original[q] != t),
                "n_removed": sum(1 for q in original if q not in fixed),
                "n_original": len(original),
            }
        return scores


BENCHMARK = RePOPE()
