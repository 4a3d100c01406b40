"""COCO captions: one "Describe this image." request per image of an instances_*.json, scored by CHAIR (Rohrbach et
al., "Object Hallucination in Image Captioning") against the image's annotated categories.

`path` is the image folder, `annotations` the instances file (the truth); answers are written as JSONL
{image_id, caption} and scored by `halluflow score chair`'s code.
"""

from __future__ import annotations

from pathlib import Path

from . import Benchmark, records


class COCOCaptions(Benchmark):
    name = "coco"
    label = "COCO captions"
    scores_key = "chair"
    caption_truth = True

    def inputs(self, source):
        return [source["annotations"]]  # `path` is the image folder: the answer job checks every image it reads

    def queries(self, source, release=None):
        from ..sources import COCO_PROMPT, coco_queries

        annotations = self._require(source, "annotations", "its instances_*.json")
        table = coco_queries(
            annotations, source.get("prompt") or COCO_PROMPT, source.get("limit"), int(source.get("seed") or 0)
        )
        return table, Path(source.get("images") or source["path"])

    def write_answers(self, rows, source, out):
        from ..io import write_jsonl

        write_jsonl(out, records(rows, "image_id", "caption"))

    def score(self, answers_file, answered, source, scoring):
        from ..metrics import chair

        synonyms = chair.shipped_synonyms()
        queries, _ = self.queries(source)
        truth = {
            q: chair.normalise_truth(objs, synonyms) for q, objs in queries.select("image_id", "objects").iter_rows()
        }
        scores, _ = chair.score_captions(chair.load_captions(answers_file), truth, synonyms)
        return scores


BENCHMARK = COCOCaptions()
