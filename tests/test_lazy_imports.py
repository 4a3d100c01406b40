"""A job pays for the libraries of its work only: an answer job whose every request is in the request cache runs in a
fresh process (as Snakemake runs it, through halluflow.workflow.run) without importing torch, transformers or
diffusers, and writes the same bytes as the job that asked the model; a job with a request to send imports torch
and gives it the job's thread count."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import make_release

HEAVY = ("torch", "transformers", "diffusers")

# The job as Snakemake runs it: scripts/rule.py hands halluflow.workflow.run a snakemake object.
JOB = """
import json, sys, types
from snakemake.iocontainers import InputFiles, OutputFiles, Params, Wildcards
from halluflow.workflow import run
a = json.loads(sys.argv[1])
smk = types.SimpleNamespace(
    rule="answer",
    input=InputFiles(fromdict={"source": [a["manifest"]], "weights": [], "graph": []}),
    output=OutputFiles(fromdict={"answers": a["out"]}),
    params=Params(fromdict={"spec": a["spec"], "answer": {"source": {"kind": "ode", "path": None}}, "shards": 1,
                            "cache": a["cache"]}),
    wildcards=Wildcards(fromdict={"model": a["spec"]["name"], "shard": "000"}),
    log=[a["log"]],
    threads=a["threads"],
)
stats = run(smk)
torch = sys.modules.get("torch")
print(json.dumps({"stats": stats, "heavy": sorted(m for m in a["heavy"] if m in sys.modules),
                  "torch_threads": torch.get_num_threads() if torch else None}))
"""


def _job(tmp_path: Path, name: str, spec: dict, threads: int = 1) -> tuple[dict, Path]:
    out = tmp_path / f"{name}.parquet"
    args = {
        "manifest": str(tmp_path / "release" / "manifest.json"),
        "out": str(out),
        "spec": spec,
        "cache": str(tmp_path / "cache" / spec["name"]),
        "log": str(tmp_path / f"{name}.log"),
        "threads": threads,
        "heavy": HEAVY,
    }
    proc = subprocess.run(
        [sys.executable, "-c", JOB, json.dumps(args)], capture_output=True, text=True, cwd=tmp_path, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:] + (tmp_path / f"{name}.log").read_text(encoding="utf-8")[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), out


def _entries(cache: Path) -> dict[str, bytes]:
    return {str(p.relative_to(cache)): p.read_bytes() for p in sorted(cache.rglob("*")) if p.is_file()}


def test_a_cache_only_answer_job_imports_no_model_library(tmp_path):
    pytest.importorskip("torch")
    from halluflow.backends.transformers_vlm import build_tiny_smolvlm
    from halluflow.models.standins import build_standin, register_builder

    make_release(tmp_path / "release")
    (tmp_path / "release" / "manifest.json").write_text("{}", encoding="utf-8")
    register_builder("smolvlm", build_tiny_smolvlm)
    folder = build_standin("smolvlm", tmp_path / "models" / "tiny-smolvlm", seed=0)
    spec = {
        "name": "tiny-smolvlm",
        "backend": "transformers",
        "stand_in": True,
        "build": {"builder": "smolvlm"},
        "args": {"model": str(folder), "batch_size": 4},
    }
    # The first job asks the model every query: it imports torch and runs it on the job's threads.
    first, out1 = _job(tmp_path, "first", spec, threads=2)
    assert first["stats"]["new"] == 6 and first["stats"]["cache_hits"] == 0
    assert "torch" in first["heavy"] and first["torch_threads"] == 2
    cache = tmp_path / "cache" / spec["name"]
    filled = _entries(cache)
    assert filled

    # The second finds every request cached: no model library is imported, and nothing it writes differs.
    second, out2 = _job(tmp_path, "second", spec)
    assert second["stats"]["cache_hits"] == 6 and second["stats"]["new"] == 0
    assert second["heavy"] == [], f"a cache-only answer job imported {second['heavy']}"
    assert out2.read_bytes() == out1.read_bytes()
    assert _entries(cache) == filled
