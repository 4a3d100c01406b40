"""Rules report_release_audit / report_models: write each named output (`<figure>` PNG or `<table>_table` TSV)."""
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

from halluflow.report.summary import ReportOptions, write_figure_files, write_table_files

opts = ReportOptions(**snakemake.params.options)
outputs = dict(snakemake.output.items())
tables = {key[: -len("_table")]: path for key, path in outputs.items() if key.endswith("_table")}
figures = {key: path for key, path in outputs.items() if not key.endswith("_table")}
# The release folder is the parent of report/: derived from the outputs so no path is hardcoded in the rule.
root = Path(next(iter(outputs.values()))).parents[1]
write_table_files(root, tables)
write_figure_files(root, figures, opts)
log.info("wrote %d tables and %d figures under %s/report", len(tables), len(figures), root)
