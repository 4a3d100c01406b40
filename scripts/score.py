"""Rule `score`: per model, answers/<model>/*.parquet + queries → scores/<model>/answers.parquet + metrics/<model>.json."""

from halluflow.snakemake_glue import setup

log = setup(snakemake)  # noqa: F821

from halluflow.ode.scoring import run_score  # noqa: E402

metrics = run_score(
    answer_paths=list(snakemake.input.answers),  # noqa: F821
    queries_path=snakemake.input.queries,  # noqa: F821
    nodes_path=snakemake.input.nodes,  # noqa: F821
    scores_out=snakemake.output.scores,  # noqa: F821
    metrics_out=snakemake.output.metrics,  # noqa: F821
    model=snakemake.wildcards.model,  # noqa: F821
    scoring=dict(snakemake.params.scoring),  # noqa: F821
    hallu_path=snakemake.input.hallu,  # noqa: F821
    edges_path=snakemake.input.edges,  # noqa: F821
)
log.info(
    "scored %d answers of %s: hallucination rate %s",
    metrics["n_answers"],
    metrics["model"],
    metrics["hallucination_rate"],
)
