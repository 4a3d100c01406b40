"""Rules of the score stage (rules/score.smk), one job per model after all its answer shards. An ODE release is
scored by halluflow.ode.scoring (POPE-style metrics with ODE's breakdowns, CHAIR-like generative scores); a static
benchmark (POPE, RePOPE, AMBER, COCO: one module each in halluflow.benchmarks) by its protocol: the answers in the
benchmark's own answer format, scored by the code behind `halluflow score pope|amber|chair`. Then the models'
bootstrap comparison and the validity view against a real-image run."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterable

from ..errors import ConfigError, InputError
from . import release_dir

log = logging.getLogger("halluflow.workflow.score")
# The scale of each static benchmark's block in metrics/<model>.json (the metric catalogue's units): AMBER's own
# percent, POPE's and CHAIR's fractions.
SOURCE_UNITS = {"pope": "fraction", "chair": "fraction", "amber": "percent"}


def score(
    answers: list[str],
    scores: str,
    metrics: str,
    model: str,
    source: dict,
    scoring: dict,
    queries: str | None = None,
    nodes: str | None = None,
    hallu: str | None = None,
    edges: str | None = None,
    release: list[str] = (),
) -> None:
    """Rule score: the model's answer shards -> scores/<model>/answers.* + metrics/<model>.json. A release source
    (the benchmark protocol's `release`) is scored with the release's queries and concept graph, a static one with
    the benchmark's own scorer."""
    from ..benchmarks import get

    if get(source["kind"]).release:
        from ..ode.scoring import run_score

        folder = str(release_dir(release[0])) if release else None  # its manifest declares the task
        doc = run_score(list(answers), queries, nodes, scores, metrics, model, dict(scoring), hallu, edges, folder)
        log.info(
            "scored %d answers of %s: hallucination rate %s", doc["n_answers"], doc["model"], doc["hallucination_rate"]
        )
    else:
        doc = score_source(source["kind"], answers, source, scores, metrics, model, scoring)
        log.info("scored %d answers of %s (%d failed, left out)", doc["n_answers"], doc["model"], doc["n_failed"])


def score_source(
    kind: str,
    answer_paths: Iterable[str],
    source: dict,
    out_answers: str | os.PathLike,
    out_metrics: str | os.PathLike,
    model: str,
    scoring: dict,
) -> dict:
    """A model's answers on a static benchmark (POPE, AMBER, COCO, RePOPE: any halluflow.benchmarks module) in the
    benchmark's answer format, scored with the code behind `halluflow score ...`, so the workflow's numbers are the
    CLI's numbers. Every answer row is written; one whose request failed carries `"status": "failed"`, left out by
    the shared failed-answer rule and counted: `n_failed` (top level and in the scores) counts every answer that rule
    left out, `n_requests_failed` the part of them whose request failed. The metrics envelope (model, source,
    counts, stand-in flag, the models lock the run checked) is written here once for every benchmark."""
    import polars as pl

    from ..benchmarks import get
    from ..io import read_parquet, write_json
    from ..models.fetch import lock_record

    bench = get(kind)
    if bench.release:
        raise ConfigError(f"answer.source.kind {kind!r}: scored by the ODE scorer, not score_source")
    answers = pl.concat([read_parquet(p) for p in answer_paths], how="diagonal_relaxed").sort("query_id")
    wrong = answers.filter(pl.col("model") != model)
    if wrong.height:
        raise InputError(f"answers of model {model!r} contain rows of model {wrong['model'][0]!r}")
    bench.write_answers(answers.select("query_id", "answer", "status").rows(), source, out_answers)
    scores = bench.score(out_answers, answers["query_id"].to_list(), source, scoring)
    metrics = {
        "model": model,
        "source": kind,
        "n_answers": answers.height,
        "n_failed": scores["n_failed"],
        "n_requests_failed": int((answers["status"] != "ok").sum()),
        "stand_in": bool(answers["stand_in"].any()) if "stand_in" in answers.columns else False,
        bench.scores_key: scores,
        "units": {bench.scores_key: SOURCE_UNITS.get(bench.scores_key, "fraction")},  # as the catalogue states
        "models_lock": lock_record(),  # the Hub commits the run loaded, when it checked a lock (models fetch)
    }
    write_json(out_metrics, metrics)
    return metrics


def score_compare(scores: list[str], comparison: str, bootstrap: dict) -> None:
    """Rule score_compare: bootstrap 95% intervals per model and paired comparisons -> compare/models.json."""
    from ..metrics.uncertainty import compare_score_files

    result = compare_score_files(scores=list(scores), out=comparison, **dict(bootstrap))
    log.info("compared %d model(s) in %d pair(s)", len(result["models"]), len(result["comparisons"]))


def release_validity(metrics: list[str], release: list[str], validity: str, settings: dict, seed: int) -> None:
    """Rule release_validity: this run's scores (the results folder of its metrics) + the static set's run
    (`settings` = the validity section, validity.results) -> validity/validity.json."""
    from ..validity import run_workflow, table

    doc = run_workflow(Path(metrics[0]).parents[1], settings, validity, seed=seed, release=str(release_dir(release[0])))
    log.info("validity:\n%s", table(doc))
