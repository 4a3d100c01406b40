"""argparse value types and shared options of the commands' `configure()` (halluflow/cli/<group>.py).

Only the CLI parses arguments: the domain modules take plain values and check them with their own errors.
"""

from __future__ import annotations

import argparse
import math


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (a timeout of -1 or nan would hang or never start)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be ≥ 1, got {value}")
    return value


def fraction(text: str) -> float:
    """argparse type: a number between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:  # also false for nan
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def add_max_failed_argument(parser: argparse.ArgumentParser) -> None:
    """--max-failed-fraction of every scorer (the limit halluflow.metrics.parsers.check_failed applies)."""
    from ..metrics.parsers import DEFAULT_MAX_FAILED_FRACTION

    parser.add_argument(
        "--max-failed-fraction",
        type=fraction,
        default=DEFAULT_MAX_FAILED_FRACTION,
        metavar="F",
        help="refuse to score when more than this share of answers failed or are empty "
        f"(default {DEFAULT_MAX_FAILED_FRACTION}; they are always excluded and counted as n_failed)",
    )
