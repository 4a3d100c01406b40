"""The report: release audit, per-model tables and figures, and the standalone HTML summary.

`halluflow report build results/<release> --out summary.html` reads a finished (or partly finished) result folder;
Snakemake's `--report` picks up the same figures through rules/report.smk.
"""

from __future__ import annotations

import argparse
from pathlib import Path

CLI_DESCRIPTION = (
    "Build the standalone HTML summary of a result folder (results/<release>/): release audit galleries and counts, "
    "per-model metrics, radar, hallucination rate by distribution, diagnosis heatmaps, CEDI curves, SAMF bars. "
    "Sections whose stage did not run say so."
)
CLI_EPILOG = """examples:
  halluflow report build results/ode-demo --out summary.html
  halluflow report build results/ode-demo --out site/index.html --link-images   # PNGs beside the page
  halluflow report build results/ode-demo --out summary.html --gallery-size 24 --max-boxes 6"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", help="result folder of one release, e.g. results/ode-demo")
    parser.add_argument("--out", required=True, help="HTML file to write")
    parser.add_argument(
        "--link-images",
        action="store_true",
        help="write figures into <out-stem>_files/ and link them instead of embedding (smaller page)",
    )
    parser.add_argument("--gallery-size", type=int, default=12, help="images per gallery (default 12)")
    parser.add_argument("--max-boxes", type=int, default=4, help="detector boxes drawn per image (default 4)")
    parser.add_argument("--dpi", type=int, default=110, help="figure resolution (default 110)")


def run(args: argparse.Namespace) -> int:
    from ..errors import InputError
    from .summary import ReportOptions, build_summary

    for key, low in (("gallery_size", 1), ("max_boxes", 0), ("dpi", 30)):
        if getattr(args, key) < low:
            raise InputError(f"--{key.replace('_', '-')} must be at least {low}, got {getattr(args, key)}")
    opts = ReportOptions(gallery_size=args.gallery_size, max_boxes=args.max_boxes, dpi=args.dpi)
    out = build_summary(Path(args.results), Path(args.out), opts, embed=not args.link_images)
    print(out)
    return 0
