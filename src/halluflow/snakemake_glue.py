"""Glue for `script:` files: send stderr and logging to the rule's log, expose params as plain dicts."""

from __future__ import annotations

import logging
import sys

from .progress import LOG_FORMAT


def setup(smk) -> logging.Logger:
    """Call first in every Snakemake script: logs go to `log[0]` when the rule declares one."""
    if smk.log:
        fh = open(str(smk.log[0]), "w", buffering=1, encoding="utf-8")
        sys.stderr = fh
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, stream=sys.stderr, force=True)
    return logging.getLogger(f"halluflow.rule.{smk.rule}")
