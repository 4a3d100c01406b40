"""Rule `ode_finetune_train`: the training release's export (llava for SFT, dpo for DPO) -> a tuned model folder."""

from halluflow.snakemake_glue import setup

log = setup(snakemake)  # noqa: F821

from halluflow.ode.finetune import run_train  # noqa: E402

record = run_train(
    dict(snakemake.params.finetune),  # noqa: F821
    model_dir=snakemake.output.model,  # noqa: F821
    record_out=snakemake.output.record,  # noqa: F821
    data_dir=snakemake.output.data,  # noqa: F821
)
log.info("weights %s -> %s", record["weights_sha256_before"][:12], record["weights_sha256_after"][:12])
