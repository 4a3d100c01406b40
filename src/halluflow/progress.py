"""Progress bars and logging: tqdm bars that stay quiet when stderr is not a terminal (CI, Slurm logs)."""

from __future__ import annotations

import logging
import sys

from tqdm.auto import tqdm

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def progress(iterable=None, desc: str | None = None, total: int | None = None, **kwargs):
    return tqdm(iterable, desc=desc, total=total, disable=not sys.stderr.isatty(), **kwargs)


def get_logger(name: str) -> logging.Logger:
    logger = logging.getLogger(name)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, stream=sys.stderr)
    return logger
