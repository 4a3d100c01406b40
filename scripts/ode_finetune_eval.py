"""Rule `ode_finetune_eval`: the tuned model answers the evaluation release (answer stage) and is scored (ODE scorer)."""

from halluflow.snakemake_glue import setup

log = setup(snakemake)  # noqa: F821

from halluflow.ode.finetune import run_eval  # noqa: E402

metrics = run_eval(
    dict(snakemake.params.finetune),  # noqa: F821
    answers_out=snakemake.output.answers,  # noqa: F821
    scores_out=snakemake.output.scores,  # noqa: F821
    metrics_out=snakemake.output.metrics,  # noqa: F821
)
log.info("scored %d answers: hallucination rate %s", metrics["n_answers"], metrics["hallucination_rate"])
