"""Rules of the report (rules/report.smk): the figure and table files flagged for `snakemake --report`, and the
standalone HTML summary (the page `halluflow report build` writes). The logic is in halluflow.report.summary; every
output lies in results/<release>/report/, so the results folder is the parent of report/."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("halluflow.workflow.report")


def _write(options: dict, **outputs: str) -> None:
    """Each named output of the rule: `<figure>` PNG, or `<table>_table` TSV."""
    from ..report.summary import ReportOptions, write_figure_files, write_table_files

    tables = {key[: -len("_table")]: path for key, path in outputs.items() if key.endswith("_table")}
    figures = {key: path for key, path in outputs.items() if not key.endswith("_table")}
    root = Path(next(iter(outputs.values()))).parents[1]
    write_table_files(root, tables)
    write_figure_files(root, figures, ReportOptions(**options))
    log.info("wrote %d tables and %d figures under %s/report", len(tables), len(figures), root)


def report_release_audit(
    gallery_accepted: str, gallery_rejected: str, counts_table: str, rejections_table: str, options: dict
) -> None:
    """Rule report_release_audit: the accepted / rejected galleries, counts and rejection reasons."""
    _write(**locals())


def report_models(
    scorecard_table: str,
    metrics_table: str,
    radar: str,
    rates: str,
    rates_table: str,
    diagnosis: str,
    cedi: str,
    samf: str,
    options: dict,
) -> None:
    """Rule report_models: per-model tables and figures, and one figure per method (a placeholder when its stage
    did not run)."""
    _write(**locals())


def report_summary(summary: str, options: dict) -> None:
    """Rule report_summary: the standalone HTML summary of the results folder."""
    from ..report.summary import ReportOptions, build_summary

    log.info("wrote %s", build_summary(Path(summary).parents[1], summary, ReportOptions(**options)))
