# Rule release_audit: the release -> audit/{audit.json, verifiers.parquet, sample.parquet, annotate.html}.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

from halluflow.ode.audit import run_workflow

summary = run_workflow(
    Path(snakemake.input.release).parent,
    Path(snakemake.output.summary).parent,
    snakemake.params.config,
    models_cache=snakemake.params.models_cache,
)
if summary["warning"]:
    log.warning(summary["warning"])
log.info("audit: %d yes/no items, %s", summary["items"], summary["totals"])
