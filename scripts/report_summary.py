"""Rule report_summary: the standalone HTML summary (same page as `halluflow report build`)."""

from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

from halluflow.report.summary import ReportOptions, build_summary

# The release folder is the parent of report/.
root = Path(snakemake.output.summary).parents[1]
out = build_summary(root, snakemake.output.summary, ReportOptions(**snakemake.params.options))
log.info("wrote %s", out)
