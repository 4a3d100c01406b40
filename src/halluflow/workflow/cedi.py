"""Rules of rules/cedi.smk: CEDI's multi-turn examiner over each image's scene graph (one job per model), the
scene-graph edit-distance grader, and the examiners x graders comparison of the paper page. The method is
halluflow.cedi (pipeline, examiner, grader, comparison); these functions hand it the rule's files and sections."""

from __future__ import annotations

from pathlib import Path

from ..config_types import Cedi
from ..io import read_json
from ..progress import get_logger
from . import release_dir

log = get_logger("halluflow.workflow.cedi")


def _config(cedi: Cedi, llm: dict | None, seed: int) -> dict:
    # the shape halluflow.cedi.pipeline reads: the section, the top-level `llm:` block (cedi.llm null) and the seed
    return {"seed": seed, "cedi": Cedi.from_dict(cedi).to_dict(), "llm": llm}


def examine(
    *,
    cedi: Cedi,
    llm: dict | None,
    seed: int,
    spec: dict,
    cache: str,
    transcripts: str,
    truth: str,
    release: str | None = None,
    nodes: str | None = None,
    accepted: str | None = None,
) -> int:
    """Rule cedi_examine -> cedi/<model>/{transcripts.parquet,truth_graphs.json}. cedi.source ode: the release (its
    manifest), concept graph and detector labels; visual_genome / coco: none of them (the annotation file and image
    folder come from the section). The evaluatee and the LLM ask through the request cache under `cache`."""
    from ..cedi.pipeline import examine_model

    return examine_model(
        _config(cedi, llm, seed),
        spec,
        release_dir=release_dir(release) if release else None,
        graph_dir=Path(nodes).parent if nodes else None,
        out_transcripts=transcripts,
        out_truth=truth,
        accepted=accepted,
        requests_cache=cache,
    )


def grade(
    *,
    cedi: Cedi,
    llm: dict | None,
    seed: int,
    cache: str,
    transcripts: str,
    truth: str,
    grades: str,
    per_turn: str,
    pred: str,
    nodes: str | None = None,
) -> None:
    """Rule cedi_grade -> cedi/<model>/{grades.json,per_turn.parquet,pred_graphs.json}; the concept graph's nodes
    are the vocabulary for cedi.source ode."""
    from ..cedi.pipeline import grade_model

    result = grade_model(
        _config(cedi, llm, seed),
        transcripts=transcripts,
        truth_graphs=truth,
        graph_dir=Path(nodes).parent if nodes else None,
        out_grades=grades,
        out_per_turn=per_turn,
        out_pred=pred,
        requests_cache=cache,
    )
    log.info("cedi grades: ged %s, hallucination rate %s", result.get("ged"), result.get("hallucination_rate"))


def comparison(*, grades: list[str], models: list[str], section: str) -> None:
    """Rule cedi_comparison -> cedi/paper/section.json + figures: every model's grades.json, in `models` order."""
    from ..report.cedi_comparison import write_section

    by_model = {m: read_json(p) for m, p in zip(models, grades)}
    result = write_section(by_model, section)
    log.info("cedi comparison: %d radar axes rows for %d model(s)", len(result["tables"][0]["rows"]), len(by_model))
