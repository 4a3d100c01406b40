"""`halluflow import lmms-eval`: lmms-eval's `--log_samples` JSONL files -> halluflow answers JSONL.

lmms-eval writes `<output_path>/<model>/<date>_samples_<task>.jsonl`, one line per document: doc_id, target,
filtered_resps (the text process_results saw; a one-element list is flattened to the text), and every per-sample
metric process_results returned. Since lmms-eval 0.4 the `doc` itself is dropped, so the question's id must travel
in a per-sample metric: the tasks `halluflow release export --format lmms-eval` writes put `query_id` in every
one, and lmms-eval's own POPE task puts `question_id` there. An older file's `doc` is read when present.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import InputError
from ..io import read_jsonl

ID_KEYS = ("query_id", "question_id")
SAMPLES_NAME = re.compile(r"_samples_(?P<task>.+)\.jsonl$")


def _text(value, where: str) -> str:
    # filtered_resps: the text, or (several requests per doc, or an unflattened file) a nested list of texts
    while isinstance(value, list):
        value = value[0] if value else ""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"{where}: filtered_resps holds {type(value).__name__} {value!r}, expected the model's text")
    return value


def _task_hash(record: dict) -> str | None:
    """The release task's hash an exported task's process_results puts in every per-sample metric."""
    for value in record.values():
        if isinstance(value, dict) and isinstance(value.get("task_hash"), str):
            return value["task_hash"]
    return None


def _question_id(record: dict, where: str) -> str:
    for value in record.values():
        if isinstance(value, dict):
            for key in ID_KEYS:
                if value.get(key) is not None:
                    return str(value[key])
    doc = record.get("doc")
    if isinstance(doc, dict):
        for key in ID_KEYS:
            if doc.get(key) is not None:
                return str(doc[key])
    raise InputError(
        f"{where}: no query_id or question_id in the sample's metrics or doc (a task written by "
        "`halluflow release export --format lmms-eval` records one in every sample)"
    )


def read_samples(paths: list[str]) -> list[tuple[str, str, str, str, str | None]]:
    records = []
    for path in paths:
        match = SAMPLES_NAME.search(Path(path).name)
        task = match["task"] if match else ""
        for i, record in enumerate(read_jsonl(path), 1):
            where = f"{path}: line {i}"
            if not isinstance(record, dict):
                raise InputError(f"{where}: expected a JSON object (one lmms-eval sample)")
            if "filtered_resps" in record:
                value = record["filtered_resps"]
            elif "resps" in record:
                value = record["resps"]
            else:
                raise InputError(f"{where}: no filtered_resps or resps (not an lmms-eval samples file?)")
            records.append((_question_id(record, where), _text(value, where), task, where, _task_hash(record)))
    return records
