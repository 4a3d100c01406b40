"""Answers from other evaluation tools, brought into halluflow (`halluflow import lmms-eval|vlmevalkit`).

lmms-eval (`--log_samples`) and VLMEvalKit (its prediction xlsx/tsv/csv/json) keep one record per question with the
model's text. Read back as halluflow answers JSONL — {"question_id", "query_id", "model", "answer", "status",
"source", "task"[, "task_hash"]} — they are scored by `halluflow score release` (per distribution, pair kind and
query kind, read by the release's declared reader; task_hash: the release task an exported task or dataset
recorded) and by `halluflow score pope` (with the export's pope_labels.jsonl) with exactly the numbers of answers halluflow collected itself: the text is kept as the tool recorded it and
parsed only by halluflow's parsers. Neither tool records a failed request, so every record is status "ok"; an empty
text is a failed answer under halluflow's parsers, as always.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..io import dumps_json, write_jsonl


def answer_rows(records: list[tuple], model: str, source: str) -> tuple[list[dict], int]:
    """(id, text, task, where[, task_hash]) per record -> answer rows, one per id. The same question answered
    twice with the same text (a query in two subtasks, or two files of one run) is kept once; two different texts
    are refused. `task_hash`: the release task an exported task or dataset records in every sample (the release
    scorer compares it with the release's own)."""
    seen: dict[str, tuple[str, str]] = {}
    rows, duplicates = [], 0
    for qid, text, task, where, *rest in records:
        task_hash = rest[0] if rest else None
        if qid in seen:
            if seen[qid][0] != text:
                raise InputError(
                    f"{where}: question {qid!r} has two different answers (also in {seen[qid][1]}); "
                    "import one run's files at a time"
                )
            duplicates += 1
            continue
        seen[qid] = (text, where)
        rows.append(
            {
                "question_id": qid,
                "query_id": qid,
                "model": model,
                "answer": text,
                "status": "ok",
                "source": source,
                "task": task,
                **({"task_hash": task_hash} if task_hash else {}),
            }
        )
    if not rows:
        raise InputError(f"no records to import from {source}")
    return rows, duplicates


def write_answers(out: str, rows: list[dict], duplicates: int, source: str, files: list[str]) -> dict:
    write_jsonl(out, rows)
    tasks = sorted({r["task"] for r in rows if r["task"]})
    summary = {
        "source": source,
        "files": files,
        "n": len(rows),
        "n_duplicates": duplicates,
        "n_empty": sum(not r["answer"].strip() for r in rows),
        "model": rows[0]["model"],
        "tasks": tasks,
        "out": out,
    }
    print(dumps_json(summary))
    return summary


def default_model(path: str | Path) -> str:
    """lmms-eval and VLMEvalKit write a model's outputs into a folder named after it."""
    return Path(path).resolve().parent.name or "imported"
