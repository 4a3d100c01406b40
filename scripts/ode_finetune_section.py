"""Rule `ode_finetune`: the before/after table, weight hashes and Fig. 10/11-style figure as an ODE paper section."""

from halluflow.snakemake_glue import setup

log = setup(snakemake)  # noqa: F821

from halluflow.ode.finetune import finetune_section  # noqa: E402

p = snakemake.params  # noqa: F821
section = finetune_section(
    base_metrics=snakemake.input.base,  # noqa: F821
    tuned_metrics=dict(zip(p.methods, snakemake.input.tuned)),  # noqa: F821
    records=dict(zip(p.methods, snakemake.input.records)),  # noqa: F821
    out=snakemake.output.section,  # noqa: F821
    model=p.model,
    dpi=p.dpi,
)
log.info("%s", section["caption"])
