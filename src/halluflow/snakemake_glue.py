"""Glue for `script:` files: send stderr and logging to the rule's log, expose params as plain dicts."""

from __future__ import annotations

import logging
import os
import sys

from .progress import LOG_FORMAT


def _one_line_for_user_errors(kind, exc, tb) -> None:
    """A bad input (HalluflowError: it names the file or key) is one line in the job's log, as in the CLI; a bug
    keeps its traceback."""
    from .errors import HalluflowError, visible

    if isinstance(exc, HalluflowError):
        print(f"halluflow: error: {visible(exc)}", file=sys.stderr, flush=True)
    else:
        sys.__excepthook__(kind, exc, tb)


def setup(smk) -> logging.Logger:
    """Call first in every Snakemake script: logs go to `log[0]` when the rule declares one."""
    if smk.log:
        fh = open(str(smk.log[0]), "w", buffering=1, encoding="utf-8")
        sys.stderr = fh
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, stream=sys.stderr, force=True)
    sys.excepthook = _one_line_for_user_errors
    # Every job uses exactly its Snakemake `threads:` for BLAS/torch (set before torch is imported, and again
    # through torch if a script imported it already): parallel jobs must not oversubscribe a shared CPU.
    threads = str(max(1, int(getattr(smk, "threads", 1) or 1)))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = threads
    if "torch" in sys.modules:
        from .devices import set_threads

        set_threads(int(threads))
    return logging.getLogger(f"halluflow.rule.{smk.rule}")
