"""Rules of rules/paper.smk: one page per paper in its own layout. This run's sections of the paper
(halluflow.report.paper_sections: ODE, CAOS, UniHall/SAMF) go into the rule's folder, then the page is rendered
(halluflow.report.papers) from them and the section files other rules wrote (CEDI's comparison, ODE's fine-tuning)."""

from __future__ import annotations

from pathlib import Path

from ..progress import get_logger

log = get_logger("halluflow.workflow.paper")


def paper(*, paper: str, page: str, folder: str, sections: list[str], models: list[str] | None = None) -> None:
    """Rules paper_<paper> -> report/paper_<paper>.html + paper/<paper>/. `models`: the config's models of the
    paper's method (results of other configs in the same release folder stay off the page); `sections`: section
    files other rules wrote."""
    from ..report.paper_sections import SECTION_WRITERS
    from ..report.papers import render_paper

    root = Path(page).parents[1]  # results/<release>/report/paper_<paper>.html: the results folder it reads
    Path(folder).mkdir(parents=True, exist_ok=True)
    own = SECTION_WRITERS[paper](root, folder, models) if paper in SECTION_WRITERS else []
    render_paper(paper, [*own, *[str(p) for p in sections]], page)
    log.info("wrote %s", page)
