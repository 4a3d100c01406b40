"""Progress bars and logging: tqdm bars that stay quiet when stderr is not a terminal (CI, Slurm logs)."""

from __future__ import annotations

import logging
import sys

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def progress(iterable=None, desc: str | None = None, total: int | None = None, **kwargs):
    if iterable is not None and not sys.stderr.isatty():
        return iterable  # no bar would be drawn: iterate plainly, without importing tqdm (15-45 ms)
    from tqdm.auto import tqdm  # imported on first use: tqdm.auto costs ~45 ms at CLI start-up

    return tqdm(iterable, desc=desc, total=total, disable=not sys.stderr.isatty(), **kwargs)


def get_logger(name: str) -> logging.Logger:
    """A module logger. Libraries never configure the root logger (that would double Snakemake's own lines);
    the CLI (`configure_logging`) and Snakemake scripts (`snakemake_glue.setup`) do."""
    return logging.getLogger(name)


def configure_logging(level: int = logging.INFO) -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
