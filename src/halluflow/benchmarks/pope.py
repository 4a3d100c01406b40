"""POPE (Li et al., "Evaluating Object Hallucination in Large Vision-Language Models"): yes/no existence questions.

Label files: COCO's are JSONL, A-OKVQA's and GQA's JSON arrays of {question_id, image, text, label}. Answers are
written as POPE's JSONL {question_id, answer} with the file's own ids, and scored by `halluflow score pope`'s code.
"""

from __future__ import annotations

from pathlib import Path

from . import Benchmark, records


class POPE(Benchmark):
    name = "pope"
    label = "POPE"
    scores_key = "pope"
    yes_no = True

    def queries(self, source, release=None):
        from ..sources import pope_queries

        images = self._require(source, "images", "the folder holding its images")
        return pope_queries(source["path"]), Path(images)

    def write_answers(self, rows, source, out):
        from ..io import write_jsonl
        from ..metrics.formats import pope_native_ids

        native = pope_native_ids(source["path"])
        write_jsonl(out, records(rows, "question_id", "answer", lambda q: native.get(q, q)))

    def score(self, answers_file, answered, source, scoring):
        import polars as pl

        from ..metrics import pope

        labels = pope.load_labels(source["path"])
        labels = labels.filter(pl.col("question_id").is_in(answered))
        joined = pope.align(pope.load_answers(answers_file), labels)
        return pope.pope_metrics(
            joined["answer"],
            joined["truth"],
            parser=scoring["parser"] or "pope",  # null: POPE's own reading
            positive=scoring["positive"],
            status=joined["status"],
        )

    def existence(self, source):
        from ..sources import pope_queries

        return pope_queries(source["path"]).rename({"target": "concept"})


BENCHMARK = POPE()
