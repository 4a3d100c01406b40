"""argparse value types shared by every command's options (the CLI's and each domain module's `configure()`).

Core layer: domain modules import these without importing the CLI dispatcher (halluflow.cli), so the import graph
points from the CLI down to the domain, never back up.
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
