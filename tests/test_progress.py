"""Progress where no terminal shows a bar (Slurm logs, CI): a log line with counts, rate and ETA every N seconds,
silent for loops shorter than N, and the answer job's first line saying what it will do."""

from __future__ import annotations

import logging
import re

import pytest
from helpers import make_graph, make_release

from halluflow import progress as progress_module
from halluflow.answer import answer_shard
from halluflow.models.model import ModelUnderTest


def test_line_by_hand():
    # 30 of 120 in 10 s: 3 per second, 90 left -> 30 s
    line = progress_module.progress_line("answer m 003", 30, 120, 10.0)
    assert line == "answer m 003: 30/120 it (25.0%), 3.00 it/s, elapsed 10s, ETA 30s"
    assert progress_module.progress_line("x", 5, None, 2.0, "batch") == "x: 5 batch, 2.50 batch/s, elapsed 2s"
    # 1 of 3,601 per second: an hour left
    assert progress_module.progress_line("x", 1, 3601, 1.0).endswith("ETA 1h00m00s")


def test_lines_every_n_seconds_and_silent_when_short(caplog):
    ticks = iter(range(0, 1000, 2))  # each item takes 2 s on this clock
    clock = lambda: float(next(ticks))  # noqa: E731
    with caplog.at_level(logging.INFO, logger="halluflow.progress"):
        assert list(progress_module._logged(range(7), "job", 7, "it", 5.0, clock)) == list(range(7))
    lines = [r.getMessage() for r in caplog.records]
    # a line after items 3 (6 s) and 6 (12 s), then the closing one at 14 s
    assert lines == [
        "job: 3/7 it (42.9%), 0.50 it/s, elapsed 6s, ETA 8s",
        "job: 6/7 it (85.7%), 0.50 it/s, elapsed 12s, ETA 2s",
        "job: 7/7 it (100.0%), 0.50 it/s, elapsed 14s, ETA 0s (done)",
    ]
    caplog.clear()
    ticks = iter(range(0, 1000, 2))
    with caplog.at_level(logging.INFO, logger="halluflow.progress"):
        list(progress_module._logged(range(2), "short", 2, "it", 60.0, clock))
    assert caplog.records == []


@pytest.mark.parametrize("value, every", [("0", 0.0), ("2.5", 2.5), ("", 60.0), ("soon", 60.0), ("-1", 60.0)])
def test_interval_from_the_environment(monkeypatch, value, every):
    monkeypatch.setenv("HALLUFLOW_PROGRESS_SECONDS", value)
    assert progress_module.progress_every() == every


def test_off_returns_the_iterable_itself(monkeypatch):
    monkeypatch.setenv("HALLUFLOW_PROGRESS_SECONDS", "0")
    items = [1, 2, 3]
    assert progress_module.progress(items, desc="x") is items  # pytest's captured stderr is not a terminal


def test_answer_job_starts_with_what_it_will_do(tmp_path, monkeypatch, caplog):
    queries = make_release(tmp_path / "release")
    spec = {"name": "prior", "backend": "prior", "args": {"graph": str(make_graph(tmp_path)), "threshold": 0.3}}
    monkeypatch.setenv("HALLUFLOW_PROGRESS_SECONDS", "0.000001")
    with caplog.at_level(logging.INFO):
        answer_shard(queries, tmp_path / "release", ModelUnderTest(spec), tmp_path / "c", tmp_path / "a.parquet")
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("halluflow")]
    n = queries.height
    assert lines[0] == f"model prior (backend prior) shard 0/1: {n} queries, 0 cache hits, {n} to request"
    assert any(re.fullmatch(rf"answer prior 000: {n}/{n} it \(100\.0%\), .* \(done\)", line) for line in lines)
    caplog.clear()
    with caplog.at_level(logging.INFO):  # rerun: everything from the cache, said up front
        answer_shard(queries, tmp_path / "release", ModelUnderTest(spec), tmp_path / "c", tmp_path / "b.parquet")
    first = next(r.getMessage() for r in caplog.records if r.name.startswith("halluflow"))
    assert first.endswith(f"{n} queries, {n} cache hits, 0 to request")
