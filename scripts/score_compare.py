"""Rule `score_compare`: bootstrap 95% intervals per model and paired comparisons -> compare/models.json."""

from halluflow.snakemake_glue import setup

log = setup(snakemake)  # noqa: F821

from halluflow.metrics.uncertainty import compare_score_files  # noqa: E402

result = compare_score_files(
    scores=list(snakemake.input.scores),  # noqa: F821
    out=snakemake.output.comparison,  # noqa: F821
    **dict(snakemake.params.bootstrap),  # noqa: F821
)
log.info("compared %d model(s) in %d pair(s)", len(result["models"]), len(result["comparisons"]))
