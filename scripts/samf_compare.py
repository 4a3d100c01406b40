# Rule samf_compare: the standard / dynamic / fuzzed table of one model.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.samf.workflow import run_compare

run_compare(
    standard_path=snakemake.input.standard,
    fuzzed_path=snakemake.input.fuzzed,
    model=snakemake.wildcards.model,
    out_parquet=snakemake.output.table,
    out_json=snakemake.output.summary,
    dynamic_path=snakemake.input.dynamic,
)
