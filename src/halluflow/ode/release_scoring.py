"""`halluflow score release`: any tool's answers to an ODE release scored by the release scorer
(halluflow.ode.scoring.score_answers + ode_metrics), per distribution, pair kind and query kind.

The answers may come from halluflow's answer stage (answers/<model>/*.parquet, or `answer run --source ode`'s
JSONL), from `halluflow import lmms-eval` or `halluflow import vlmevalkit`: one record per query, keyed by query_id
(or question_id), with the text in `answer` (or `text`). They may cover part of the release (one distribution's
subtask): the queries left unanswered are counted (`n_unanswered`), not scored. The yes/no reader is the one the
release's task declares unless `parser` overrides it; the metrics' `task` block says how the answers were asked and
read and what differs from the release's declaration (halluflow.ode.task).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ..errors import InputError
from ..io import read_jsonl, read_parquet
from ..metrics.parsers import DEFAULT_MAX_FAILED_FRACTION, check_failed
from .scoring import _groups, default_synonyms, ode_metrics, score_answers
from .task import answers_task, release_task

THREE_WAY = ("distribution", "pair_kind", "query_type")


def read_answers(path: str | Path, model: str | None = None) -> pl.DataFrame:
    """An answers file (JSONL or parquet) as the release scorer's table: query_id, model, answer, status and,
    when recorded, the task (task_definition from the answer stage, task_hash from an export's samples)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"answers {path}: not found")
    if path.suffix == ".parquet":
        rows = read_parquet(path).to_dicts()
    else:
        rows = list(read_jsonl(path))
    out = []
    for i, row in enumerate(rows, 1):
        where = f"{path}: record {i}"
        if not isinstance(row, dict):
            raise InputError(f"{where}: expected an object with query_id and answer")
        qid = row.get("query_id", row.get("question_id"))
        if qid is None:
            raise InputError(f"{where}: no query_id or question_id")
        text = row.get("answer", row.get("text"))
        if text is not None and not isinstance(text, str):
            raise InputError(f"{where}: answer is {type(text).__name__}, expected text")
        out.append(
            {
                "query_id": str(qid),
                "model": str(model or row.get("model") or path.parent.name or "model"),
                "answer": text,
                "status": str(row.get("status") or "ok"),
                "task_definition": row.get("task_definition"),
                "task_hash": None if row.get("task_hash") is None else str(row["task_hash"]),
            }
        )
    if not out:
        raise InputError(f"answers {path}: no records")
    schema = {k: pl.String for k in ("query_id", "model", "answer", "status", "task_definition", "task_hash")}
    return pl.DataFrame(out, schema=schema)


def score_release(
    answers_path: str | Path,
    release_dir: str | Path,
    *,
    parser: str | None = None,
    positive: str = "yes",
    generative_truth: str = "detected",
    model: str | None = None,
    max_failed_fraction: float | None = DEFAULT_MAX_FAILED_FRACTION,
) -> tuple[dict, pl.DataFrame]:
    """(metrics, scored table) of one model's answers to a release."""
    release_dir = Path(release_dir)
    if not (release_dir / "queries.parquet").is_file():
        raise InputError(f"--release {release_dir}: not a release folder (queries.parquet missing)")
    queries = read_parquet(release_dir / "queries.parquet")
    if "attribute_kind" not in queries.columns:
        queries = queries.with_columns(attribute_kind=pl.lit(None, pl.String))
    answers = read_answers(answers_path, model)
    models = sorted(set(answers["model"].to_list()))
    if len(models) > 1:
        raise InputError(
            f"answers {answers_path}: answers of {len(models)} models ({', '.join(models[:3])}); give --model"
        )
    declared = release_task(release_dir)
    used, task = answers_task(answers, declared, parser, f"answers {answers_path}")
    reader = used["kinds"]["discriminative"]["reader"]
    # the release's concept vocabulary: every object and target its queries name (the concept graph is not part of
    # a release; the workflow's scorer also knows the graph's other nodes)
    vocabulary = set(queries["objects"].explode().drop_nulls().to_list())
    if "target" in queries.columns:
        vocabulary |= set(queries["target"].drop_nulls().to_list())
    scored = score_answers(
        queries,
        answers.select("query_id", "model", "answer", "status"),
        sorted(vocabulary),
        reader,
        positive,
        synonyms=default_synonyms(),
        generative_truth=generative_truth,
    )
    check_failed(int(scored["failed"].sum()), scored.height, max_failed_fraction, f"score release {answers_path}")
    metrics = ode_metrics(scored, models[0], reader, positive)
    metrics["by_distribution_pair_kind_query_type"] = _groups(scored, list(THREE_WAY), reader, positive)
    metrics["release"] = str(release_dir)
    metrics["n_queries"] = queries.height
    metrics["n_unanswered"] = queries.height - scored.height
    metrics["task"] = task
    from .support import release_support

    support = release_support(release_dir)  # how many "yes" labels rest on the prompt alone (the DATACARD's line)
    if support:
        metrics["label_support"] = support
    return metrics, scored.with_columns(pl.lit(task["hash"]).alias("task_hash"))


def summary_lines(metrics: dict, what: str) -> list[str]:
    """The notes `score release` prints on stderr: overrides, assumptions, answers read only by a default rule."""
    from ..metrics.parsers import default_rule_line, excludes_unknown

    lines = [f"{what}: task override: {line}" for line in metrics["task"]["overrides"]]
    if (metrics.get("label_support") or {}).get("line"):
        lines.append(f"{what}: release labels: {metrics['label_support']['line']}")
    if metrics["task"].get("note"):
        lines.append(f"{what}: {metrics['task']['note']}")
    if metrics.get("n_default_rule"):
        pope = metrics.get("pope") or {}
        n_read = pope.get("n", 0) + (metrics["n_unknown"] if excludes_unknown(metrics["parser"]) else 0)
        lines.append(
            default_rule_line(
                what, metrics["parser"], metrics["n_default_rule"], n_read, metrics.get("default_rule_reasons")
            )
        )
    return lines
