from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.samf.workflow import run_compare

run_compare(
    snakemake.input.standard,
    snakemake.input.fuzzed,
    snakemake.wildcards.model,
    snakemake.output.table,
    snakemake.output.summary,
    snakemake.input.dynamic,
)
