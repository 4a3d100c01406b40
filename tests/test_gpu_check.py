"""bench/gpu_check.sh in its dry mode (CPU, smallest sizes): every stage runs through the real job functions and a
raw loop on the same model, outputs agree, and the script says its numbers are not GPU numbers. No GPU in CI."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from helpers import REPO


@pytest.mark.slow  # three offline stand-in builds and four stages: ~40 s on an idle 2-core machine
def test_gpu_check_dry_run_measures_every_stage_against_its_raw_loop(tmp_path):
    out = tmp_path / "gpu_check.json"
    env = {**os.environ, "TMPDIR": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        ["bash", str(REPO / "bench" / "gpu_check.sh"), "--dry", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "DRY RUN on the CPU" in proc.stdout and "NOT GPU numbers" in proc.stdout
    assert "halluflow/s" in proc.stdout  # the table was printed
    result = json.loads(out.read_text())
    assert result["dry"] is True and result["device"] == "cpu"
    rows = {r["stage"]: r for r in result["rows"]}
    assert set(rows) == {"synthesize", "answer", "vllm", "detect"}
    for stage in ("synthesize", "answer", "detect"):
        r = rows[stage]
        # same PNG bytes / answer texts / boxes per image from the job and from the raw loop on the same model
        assert r["identical"] is True, r
        assert r["halluflow_per_s"] > 0 and r["raw_per_s"] > 0 and r["items"] >= 2
        assert r["ratio"] == pytest.approx(r["halluflow_per_s"] / r["raw_per_s"], rel=0.02)
        assert r["halluflow_peak_mb"] is None and r["raw_peak_mb"] is None  # no GPU memory on the CPU
    assert rows["answer"]["dtype"] == "float32" and rows["answer"]["attn_implementation"] in ("sdpa", "eager")
    try:
        import vllm  # noqa: F401
    except ModuleNotFoundError:
        assert "not installed" in rows["vllm"]["skipped"]
    else:
        assert "GPU" in rows["vllm"]["skipped"]
    # the stand-ins' temporary folder is removed on exit
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("halluflow-gpu-check")]
