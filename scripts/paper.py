"""Rules paper_<paper>: the paper's own sections from this run's results, then its page (halluflow.report.papers)."""

from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

from halluflow.report.paper_sections import build_paper

# The release folder is the parent of report/.
root = Path(snakemake.output.page).parents[1]
sections = [str(p) for p in snakemake.input.get("sections", [])]
build_paper(
    snakemake.params.paper,
    root,
    snakemake.output.sections,
    sections,
    snakemake.output.page,
    models=snakemake.params.get("models"),
)
log.info("wrote %s", snakemake.output.page)
