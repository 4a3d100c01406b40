"""AMBER (Wang et al., "AMBER: An LLM-free Multi-dimensional Benchmark for MLLMs Hallucination Evaluation").

Queries: query_*.json ({id, image, query}); with annotations.json the truth, query type and truth objects are filled
in. Answers are written as AMBER's JSON array [{id, response}] and scored by `halluflow score amber`'s code.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from . import Benchmark, records

# "Is there a {object} in this image?" (AMBER's existence template): the asked object
_EXISTENCE = r"(?i)^is there (?:a |an |any )?(.+?) in (?:this|the) (?:image|picture)\??$"


class AMBER(Benchmark):
    name = "amber"
    label = "AMBER"
    scores_key = "amber"
    answer_suffix = "json"
    yes_no = True
    parser = "amber"
    breakdowns = ("query_type",)

    def queries(self, source, release=None):
        from ..sources import amber_queries

        images = self._require(source, "images", "the folder holding its images")
        return amber_queries(source["path"], source.get("annotations")), Path(images)

    def write_answers(self, rows, source, out):
        from ..io import write_json

        write_json(out, records(rows, "id", "response", int))

    def score(self, answers_file, answered, source, scoring):
        from ..metrics import amber

        data = amber.load_amber(Path(source["annotations"]).parent)
        return amber.amber_scores(amber.load_responses(answers_file, data.n), data)

    def existence(self, source):
        import polars as pl

        from ..sources import amber_queries

        if not source.get("annotations"):
            raise InputError("--annotations: an AMBER source needs its annotations.json (the truth of every query)")
        table = amber_queries(source["path"], source["annotations"]).filter(pl.col("query_type") == "existence")
        return table.with_columns(pl.col("question").str.strip_chars().str.extract(_EXISTENCE, 1).alias("concept"))


BENCHMARK = AMBER()
