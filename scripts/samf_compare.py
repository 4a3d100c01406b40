# Rule samf_compare: the standard / dynamic / fuzzed table of one model (first controller), the controller x category
# x static/fuzzed table of every controller, and Table 4's metric-human agreement when samf.agreement.labels is set.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.samf.workflow import run_compare

run_compare(
    standard_path=snakemake.input.standard,
    fuzzed=dict(zip(snakemake.params.controllers, snakemake.input.fuzzed)),
    model=snakemake.wildcards.model,
    out_parquet=snakemake.output.table,
    out_json=snakemake.output.summary,
    dynamic_path=snakemake.input.dynamic,
    out_categories=snakemake.output.controllers,
    agreement=snakemake.params.agreement,
)
