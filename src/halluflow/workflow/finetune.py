"""Rules of rules/finetune.smk: ODE's fine-tuning loop (Tu et al., ODE, Fig. 10/11). One model under test is tuned
with TRL on the exports of a training release (SFT and DPO), the tuned model answers this run's release (a child
sharing no concept pair with it) and is scored, and the before/after paper section is written. The loop is
halluflow.ode.finetune, the answering and scoring those of rules answer + score (answer_and_score), the section
halluflow.report.finetune_section; these functions hand them the rule's files and sections."""

from __future__ import annotations

from pathlib import Path

from ..config_types import Answer, Finetune, Scoring
from ..io import read_json, write_json
from ..models.model import cache_folder
from ..progress import get_logger
from . import release_dir

log = get_logger("halluflow.workflow.finetune")

# finetune: keys that choose what is trained, not how: the rest are the trainer's settings
CHOICE_KEYS = ("enabled", "model", "train_release", "methods")


def _scoring(answer: Answer, scoring: Scoring, nodes: str, hallu: str, edges: str) -> dict:
    """How answer_and_score answers and scores a release: as rules answer + score do."""
    return {
        "answer": Answer.from_dict(answer).to_dict(),
        "scoring": Scoring.from_dict(scoring).to_dict(),
        "graph_dir": str(Path(nodes).parent),
        "nodes": nodes,
        "hallu": hallu,
        "edges": edges,
    }


def answer_and_score(
    spec: dict,
    release: Path,
    cache: Path,
    answers: Path,
    scores: Path,
    metrics: Path,
    *,
    answer: dict,
    scoring: dict,
    graph_dir: str,
    nodes: str,
    hallu: str | None = None,
    edges: str | None = None,
) -> dict:
    """`spec` answers every query of `release` through the answer stage (one shard, `answer` settings, request
    cache `cache`) and the ODE scorer scores it (`scoring`, the concept graph's files), as rules answer + score do
    for the run's own models; returns the metrics."""
    from ..answer import answer_shard
    from ..models.model import ModelUnderTest
    from ..ode.scoring import run_score
    from ..sources import source_queries

    queries, image_root = source_queries({"kind": "ode", "path": str(release)}, str(release))
    model = ModelUnderTest(spec, graph_dir=graph_dir)
    settings = {k: v for k, v in answer.items() if k != "source"}
    answer_shard(queries, image_root, model, cache, answers, settings=settings)
    return run_score(
        [str(answers)],
        str(release / "queries.parquet"),
        nodes,
        str(scores),
        str(metrics),
        spec["name"],
        scoring,
        hallu_path=hallu,
        edges_path=edges,
    )


def train(
    *,
    method: str,
    train: str,
    release: list[str],
    nodes: str,
    hallu: str,
    edges: str,
    model: str,
    record: str,
    data: str,
    spec: dict,
    base: dict,
    finetune: Finetune,
    answer: Answer,
    scoring: Scoring,
    seed: int,
    cache: str,
) -> None:
    """Rule ode_finetune_train -> finetune/<model>/<method>/{model/,train.json,data/}: the export of the training
    release (its manifest `train`) into `data` (answering the release with the base model first for DPO's rejected
    answers, through its request cache folder), checked disjoint from the evaluation release (`release`, its
    manifest), then train_model. `base`: the base model's resolved model, revision, device, dtype and stand_in."""
    from ..ode.export import export_release
    from ..ode.finetune import check_disjoint, dpo_rows, sft_rows, train_model

    settings = {k: v for k, v in Finetune.from_dict(finetune).to_dict().items() if k not in CHOICE_KEYS}
    train_dir, eval_dir = release_dir(train), release_dir(release[0])
    n_pairs = check_disjoint(train_dir, eval_dir)
    work = Path(data)
    answers_path = None
    if method == "dpo":  # DPO's rejected answers: the base model's hallucinations on the training release
        answers_path = work / "train_scores.parquet"
        answer_and_score(
            spec,
            train_dir,
            cache_folder(cache, spec),
            work / "train_answers.parquet",
            answers_path,
            work / "train_metrics.json",
            **_scoring(answer, scoring, nodes, hallu, edges),
        )
    export_dir = work / method
    fmt = "llava" if method == "sft" else "dpo"
    export_release(train_dir, fmt, export_dir, answers=answers_path)
    records = read_json(export_dir / f"{fmt}.json")
    rows = (sft_rows if method == "sft" else dpo_rows)(records, export_dir)
    if settings.get("max_examples"):
        rows = rows[: int(settings["max_examples"])]
    facts = {
        "train_release": str(train_dir),
        "eval_release": str(eval_dir),
        "train_pairs": n_pairs,
        "shared_pairs": 0,  # check_disjoint refused anything else
        "export": str(export_dir),
    }
    result = train_model(method, rows, {**base, "name": spec["name"]}, model, {**settings, "seed": seed}, facts)
    write_json(record, result)
    log.info("weights %s -> %s", result["weights_sha256_before"][:12], result["weights_sha256_after"][:12])


def evaluate(
    *,
    method: str,
    model: str,
    record: str,
    release: list[str],
    nodes: str,
    hallu: str,
    edges: str,
    answers: str,
    scores: str,
    metrics: str,
    spec: dict,
    answer: Answer,
    scoring: Scoring,
    cache: str,
) -> None:
    """Rule ode_finetune_eval -> finetune/<model>/<method>/{answers,scores}.parquet + metrics.json: the tuned model
    (`model`, its folder) answers the evaluation release and is scored, as the base model was."""
    from ..ode.finetune import tuned_spec

    tuned = tuned_spec(spec, method, model)
    # the cache is keyed by the tuned weights' hash: a retrained folder at the same path never reuses old answers
    folder = Path(cache) / f"{tuned['name']}-{read_json(record)['weights_sha256_after'][:16]}"
    result = answer_and_score(
        tuned,
        release_dir(release[0]),
        folder,
        Path(answers),
        Path(scores),
        Path(metrics),
        **_scoring(answer, scoring, nodes, hallu, edges),
    )
    log.info("scored %d answers: hallucination rate %s", result["n_answers"], result["hallucination_rate"])


def paper_section(
    *, base: str, tuned: list[str], records: list[str], section: str, methods: list[str], model: str, dpi: int
) -> None:
    """Rule ode_finetune -> finetune/{section.json,before_after.png}: the before/after table, weight hashes and the
    Fig. 10/11-style figure as an ODE paper section."""
    from ..report.finetune_section import finetune_section

    result = finetune_section(
        base_metrics=base,
        tuned_metrics=dict(zip(methods, tuned)),
        records=dict(zip(methods, records)),
        out=section,
        model=model,
        dpi=dpi,
    )
    log.info("%s", result["caption"])
