"""The report: release audit, per-model tables and figures, and the standalone HTML summary.

`halluflow report build results/<release> --out summary.html` reads a finished (or partly finished) result folder;
Snakemake's `--report` picks up the same figures through rules/report.smk.
"""
