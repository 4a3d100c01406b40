# Rules report_release_audit / report_models: write each named output (<figure> PNG or <table>_table TSV).
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow import jobs

jobs.report_files(outputs=dict(snakemake.output.items()), options=snakemake.params.options)
