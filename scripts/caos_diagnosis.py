"""Rule ode_diagnosis: scored answers + CAOS captions -> diagnosis/<model>.{parquet,png,distributions.parquet}."""

from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

from halluflow.ode.diagnosis import run_workflow

run_workflow(
    answers=list(snakemake.input.answers),
    release_dir=str(Path(snakemake.input.release).parent),  # the input is the release's manifest.json
    captions=snakemake.input.captions,
    scores=list(snakemake.input.scores),
    cfg=snakemake.params.diagnosis,
    model=snakemake.wildcards.model,
    out_parquet=snakemake.output.matrix,
    out_png=snakemake.output.heatmap,
    out_distributions=snakemake.output.distributions,
)
