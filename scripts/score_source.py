"""Rule score on a POPE / AMBER source: answers in the benchmark's format + the same scores as `halluflow score`."""

from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.sources import score_source

metrics = score_source(
    kind=snakemake.params.source["kind"],
    answer_paths=list(snakemake.input.answers),
    source=snakemake.params.source,
    out_answers=snakemake.output.scores,
    out_metrics=snakemake.output.metrics,
    model=snakemake.wildcards.model,
    scoring=snakemake.params.scoring,
)
log.info("scored %d answers of %s (%d failed, left out)", metrics["n_answers"], metrics["model"], metrics["n_failed"])
