"""Progress and logging: a tqdm bar on a terminal; where stderr is not one (Slurm logs, CI), a plain log line with
counts, rate and ETA every HALLUFLOW_PROGRESS_SECONDS seconds (default 60; 0 = none), so a cluster log shows how
far a long job is without a bar's carriage returns."""

from __future__ import annotations

import logging
import os
import sys
import time

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
PROGRESS_ENV = "HALLUFLOW_PROGRESS_SECONDS"
DEFAULT_EVERY_S = 60.0

log = logging.getLogger("halluflow.progress")


def progress_every() -> float:
    """Seconds between progress lines when stderr is not a terminal (HALLUFLOW_PROGRESS_SECONDS; 0 = none)."""
    text = os.environ.get(PROGRESS_ENV, "")
    try:
        value = float(text) if text else DEFAULT_EVERY_S
    except ValueError:
        value = DEFAULT_EVERY_S  # a typo in an environment variable must not stop a cluster job
    return value if value >= 0 and value == value else DEFAULT_EVERY_S


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def progress_line(desc: str | None, done: int, total: int | None, elapsed: float, unit: str = "it") -> str:
    """`answer m 003: 1,200/7,920 it (15.2%), 3.10 it/s, elapsed 6m27s, ETA 36m05s` (no ETA without a total)."""
    rate = done / elapsed if elapsed > 0 else 0.0
    count = f"{done:,}/{total:,} {unit} ({100 * done / total:.1f}%)" if total else f"{done:,} {unit}"
    eta = ""
    if total and rate > 0:
        eta = f", ETA {_duration(max(total - done, 0) / rate)}"
    return f"{desc or 'progress'}: {count}, {rate:.2f} {unit}/s, elapsed {_duration(elapsed)}{eta}"


def _logged(iterable, desc, total, unit, every, clock=time.monotonic):
    """Yield from `iterable`, logging a progress line every `every` seconds and a last one at the end when any
    was logged (a loop shorter than `every` stays silent)."""
    start = last = now = clock()
    done = 0
    logged = False
    for item in iterable:
        yield item
        done += 1
        now = clock()
        if now - last >= every:
            log.info(progress_line(desc, done, total, now - start, unit))
            last, logged = now, True
    if logged:
        log.info(progress_line(desc, done, total, now - start, unit) + " (done)")


def progress(iterable=None, desc: str | None = None, total: int | None = None, **kwargs):
    if iterable is not None and not sys.stderr.isatty():
        # no bar would be drawn: plain iteration (without importing tqdm, 15-45 ms) plus a timed log line
        every = progress_every()
        if not every:
            return iterable
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)
        return _logged(iterable, desc, total, kwargs.get("unit", "it"), every)
    from tqdm.auto import tqdm  # imported on first use: tqdm.auto costs ~45 ms at CLI start-up

    return tqdm(iterable, desc=desc, total=total, disable=not sys.stderr.isatty(), **kwargs)


def get_logger(name: str) -> logging.Logger:
    """A module logger. Libraries never configure the root logger (that would double Snakemake's own lines);
    the CLI (`configure_logging`) and Snakemake scripts (`snakemake_glue.setup`) do."""
    return logging.getLogger(name)


def configure_logging(level: int = logging.INFO) -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
