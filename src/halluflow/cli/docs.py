"""`halluflow docs metrics`: docs/metrics.md from the metric catalogue."""

from __future__ import annotations

import argparse

from .command import Command

_METRICS_DESCRIPTION = "Write the metric catalogue as Markdown (docs/metrics.md) or check that a file equals it."


_METRICS_EPILOG = """examples:
  halluflow docs metrics --out docs/metrics.md
  halluflow docs metrics --check docs/metrics.md   # exit 1 when the file is out of date"""


def _configure_metrics(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--out", help="write the Markdown here (default: print it)")
    group.add_argument("--check", help="exit 1 unless this file equals the generated Markdown")


def _run_metrics(args: argparse.Namespace) -> int:
    from halluflow.io import write_text
    from halluflow.metrics.catalogue import check_markdown, markdown

    if args.check:
        check_markdown(args.check)
        return 0
    text = markdown()
    if args.out:
        write_text(args.out, text)
    else:
        print(text, end="")
    return 0


_METRICS = Command(
    "metrics",
    "write docs/metrics.md from the metric catalogue (or --check it)",
    _configure_metrics,
    _run_metrics,
    description=_METRICS_DESCRIPTION,
    epilog=_METRICS_EPILOG,
)

COMMANDS = (_METRICS,)
