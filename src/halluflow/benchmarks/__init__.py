"""Benchmarks: every evaluation source of the answer stage behind one protocol, one module per benchmark.

A benchmark says, for the config's `answer.source` section: which files the workflow tracks (`inputs`), the questions
as one queries.parquet-shaped table and the folder its images are relative to (`queries`), how a model's answers are
written in the benchmark's own answer format (`write_answers`: the file its peer scorer reads), how that file is
scored by the code behind `halluflow score ...` (`score`), and which query columns its numbers are broken down by
(`breakdowns`). The workflow (rules/common.smk, rules/score.smk), the answer stage (halluflow.sources) and the release
validity check ask the protocol instead of switching on `answer.source.kind`.

The registry is the package itself: module `halluflow.benchmarks.<kind>` defines `BENCHMARK`, so a new static set
is one new module (and its kind in the config schema's enum, which tests/test_benchmarks.py keeps equal to
`names()`). Modules import their heavy dependencies (polars, the metrics) inside their methods.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from pathlib import Path
from typing import Iterable

from ..errors import ConfigError, InputError

# The benchmarks of the first release, in the order the docs and error messages list them; any other module of the
# package follows in name order (nothing to register).
_LISTED_FIRST = ("ode", "pope", "amber", "coco")


class Benchmark:
    """The protocol, with the defaults a static question set shares. Subclasses set `name` (= their module name,
    the `answer.source.kind`), `scores_key` (the metrics block) and implement `queries`, `write_answers`, `score`."""

    name: str = ""
    label: str = ""  # as printed (POPE, AMBER, ...)
    scores_key: str = ""
    answer_suffix = "jsonl"  # of the peer-format answers file rule score writes (scores/<model>/answers.<suffix>)
    release = False  # an ODE release: scored by halluflow.ode.scoring with its graph files (rule score, ODE branch)
    yes_no = False  # a yes/no existence set (release validity pairs it with an ODE release)
    parser = "pope"  # the yes/no parser its own scorer uses (metrics.parsers)
    caption_truth = False  # captions with instance truth: CAOS scores them without an ODE release
    breakdowns: tuple[str, ...] = ()  # query columns the metrics are broken down by (by_<column> blocks)

    def inputs(self, source: dict) -> list[str]:
        """Files the workflow tracks for this source (rule inputs: editing one reruns the answers and scores)."""
        return [p for p in (source.get("path"), source.get("annotations")) if p]

    def queries(self, source: dict, release: str | os.PathLike | None = None):
        """(queries table, image root) for the `answer.source` section."""
        raise NotImplementedError

    def write_answers(self, rows: list[tuple[str, str, str]], source: dict, out: str | os.PathLike) -> None:
        """Write (query_id, answer, status) rows in the benchmark's answer format; a failed request keeps its text
        and says `"status": "failed"`, so the scorer leaves it out by the shared failed-answer rule."""
        raise NotImplementedError

    def score(self, answers_file: str | os.PathLike, answered: list[str], source: dict, scoring: dict) -> dict:
        """The scores of the answers file `write_answers` wrote (`answered`: the query ids it holds)."""
        raise NotImplementedError

    def existence(self, source: dict):
        """The yes/no existence questions: query_id, concept (the asked object, as written), truth."""
        raise InputError(f"source {self.name!r}: not a yes/no existence set ({', '.join(yes_no_names())})")

    def _require(self, source: dict, key: str, why: str):
        if not source.get(key):
            raise ConfigError(f"answer.source.{key}: a {self.name} source needs {why}")
        return source[key]


def records(rows: Iterable[tuple[str, str, str]], id_key: str, text_key: str, cast=str) -> list[dict]:
    """The benchmark's own answer records; a failed request keeps its (partial or empty) text and says it failed."""
    return [
        {id_key: cast(q), text_key: a} if status == "ok" else {id_key: cast(q), text_key: a, "status": "failed"}
        for q, a, status in rows
    ]


def names() -> tuple[str, ...]:
    """Every benchmark kind: the modules of this package."""
    found = {m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if not m.name.startswith("_")}
    return tuple(k for k in _LISTED_FIRST if k in found) + tuple(sorted(found - set(_LISTED_FIRST)))


def get(kind: str) -> Benchmark:
    """The benchmark of `answer.source.kind`; an unknown kind is one line naming the key and the known kinds."""
    known = names()
    if kind not in known:
        raise ConfigError(f"answer.source.kind {kind!r}: expected one of {', '.join(known)}")
    return importlib.import_module(f"{__name__}.{kind}").BENCHMARK


def yes_no_names() -> tuple[str, ...]:
    return tuple(k for k in names() if get(k).yes_no)
