"""bench/bench_scoring.py at toy sizes: it still runs end to end, runs the installed `halluflow` script, and finds
identical numbers on both sides (its own assertions). Speed is never asserted."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import REPO, shared_data


def test_bench_scoring_runs_at_toy_sizes(tmp_path):
    amber = shared_data("amber", "data", "annotations.json").parent  # skips with a reason without ../shared
    out = tmp_path / "bench.json"
    cmd = [sys.executable, str(REPO / "bench" / "bench_scoring.py"), "--pope", "3000", "--chair", "0"]
    cmd += ["--amber", "400", "--runs", "1", "--amber-data", str(amber), "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["pope"]["identical"] and result["pope_processes"]["identical"] and result["amber"]["identical"]
    assert result["pope_processes"]["metrics"]["tp"] + result["pope_processes"]["metrics"]["fn"] > 0
    assert "whole process" in done.stdout and "identical numbers" in done.stdout
