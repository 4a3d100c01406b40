"""`halluflow report ...`: the HTML summary of result folders and each paper's page."""

from __future__ import annotations

import argparse
from pathlib import Path

from .command import Command

_BUILD_DESCRIPTION = (
    "Build the standalone HTML summary of a result folder (results/<release>/): release audit galleries and counts, "
    "per-model metrics, radar, hallucination rate by distribution, diagnosis heatmaps, CEDI curves, SAMF bars. "
    "Sections whose stage did not run say so."
)


_BUILD_EPILOG = """examples:
  halluflow report build results/ode-demo --out summary.html
  halluflow report build results/ode-demo --out site/index.html --link-images   # PNGs beside the page
  halluflow report build results/ode-demo --out summary.html --gallery-size 24 --max-boxes 6"""


def _configure_build(parser: argparse.ArgumentParser) -> None:
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


def _run_build(args: argparse.Namespace) -> int:
    from halluflow.errors import InputError, visible
    from halluflow.report.summary import ReportOptions, build_summary

    for key, low in (("gallery_size", 1), ("max_boxes", 0), ("dpi", 30)):
        if getattr(args, key) < low:
            raise InputError(f"--{key.replace('_', '-')} must be at least {low}, got {getattr(args, key)}")
    opts = ReportOptions(gallery_size=args.gallery_size, max_boxes=args.max_boxes, dpi=args.dpi)
    out = build_summary(Path(args.results), Path(args.out), opts, embed=not args.link_images)
    print(visible(out))
    return 0


_PAPER_DESCRIPTION = (
    "Render one paper's standalone page (ODE, CAOS, CEDI or SAMF layout) from paper-section JSON files: {paper, "
    "section, title, caption (models, judges, sizes), stand_ins [...], tables [{id, title, columns, rows, metrics "
    "[catalogue keys], note?}], figures [{id, title, file (PNG beside the JSON), caption, metrics}]}. A bad shape, a "
    "missing figure or an unknown catalogue key is refused in one line naming the file and the key."
)


_PAPER_EPILOG = """examples:
  halluflow report paper caos results/caos/caos/paper/*.json --out results/caos/report/paper_caos.html
  snakemake paper_caos --configfile configs/caos.yaml   # the same page, its sections computed first"""


def _configure_paper(parser) -> None:
    from halluflow.report.papers import PAPERS

    parser.add_argument("paper", choices=sorted(PAPERS), help="which paper's page")
    parser.add_argument("sections", nargs="+", help="paper-section JSON files (figures beside them)")
    parser.add_argument("--out", required=True, help="HTML file to write")


def _run_paper(args) -> int:
    from halluflow.errors import visible
    from halluflow.report.papers import render_paper

    render_paper(args.paper, args.sections, args.out)
    print(visible(args.out))
    return 0


_BUILD = Command(
    "build",
    "build the HTML summary for existing result folders",
    _configure_build,
    _run_build,
    description=_BUILD_DESCRIPTION,
    epilog=_BUILD_EPILOG,
)

_PAPER = Command(
    "paper",
    "render one paper's page (ODE, CAOS, CEDI, SAMF layout) from its paper-section JSON files",
    _configure_paper,
    _run_paper,
    description=_PAPER_DESCRIPTION,
    epilog=_PAPER_EPILOG,
)

COMMANDS = (
    _BUILD,
    _PAPER,
)
