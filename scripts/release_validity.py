"""Rule release_validity: this run's scores + the static set's run (validity.results) -> validity/validity.json."""

from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

from halluflow.ode.validity import run_workflow, table

doc = run_workflow(
    Path(snakemake.input.metrics[0]).parents[1],
    snakemake.params.validity,
    snakemake.output.validity,
    seed=snakemake.params.seed,
    release=snakemake.params.release,
)
log.info("validity:\n%s", table(doc))
