"""Run the real workflow in a scratch copy of the repository, as a user's clone would (tests only)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import REPO

# What a clone holds that the workflow needs; never results/, logs/, caches or built stand-in models.
WORKFLOW_PARTS = (
    "Snakefile",
    "config.yaml",
    "rules",
    "scripts",
    "schemas",
    "resources",
    "configs",
    "profiles",
    "report",
    "envs",
)
IGNORE = shutil.ignore_patterns("models", "__pycache__", ".snakemake", "results", "logs")

# Every rule of the ODE data pipeline and of the methods that read its release.
ODE_AND_METHOD_RULES = {
    "build_graph",
    "sample_scenes",
    "make_prompts",
    "synthesize",
    "detect",
    "filter_images",
    "make_queries",
    "package_release",
    "build_standin_synthesizer",
    "build_standin_detector",
    "caos_score",
    "ode_diagnosis",
    "cedi_examine",
    "cedi_grade",
    "samf_instances",
    "samf_standard_eval",
    "samf_train",
    "samf_fuzzed_eval",
    "samf_compare",
    "report_release_audit",
    "report_models",
    "report_summary",
}


def copy_workflow(dst: Path, share_models_from: Path | None = None) -> Path:
    """Copy the workflow into `dst`. `share_models_from` symlinks an existing resources/models (built stand-ins)."""
    dst.mkdir(parents=True, exist_ok=True)
    for part in WORKFLOW_PARTS:
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, dst / part, ignore=IGNORE, dirs_exist_ok=True)
        elif src.exists():
            shutil.copy2(src, dst / part)
    if share_models_from is not None and (share_models_from / "resources" / "models").exists():
        (dst / "resources" / "models").symlink_to((share_models_from / "resources" / "models").resolve())
    return dst


# What a finished run adds to a clone and Snakemake needs to see its jobs as done (outputs, benchmark files, logs,
# each job's recorded params and code); never its locks or incomplete markers.
RUN_RECORDS = ("results", "benchmarks", "logs", ".snakemake/metadata")


def copy_run(src: Path, dst: Path) -> Path:
    """A clone (copy_workflow) holding the finished run in `src`, its stand-ins shared: Snakemake in the copy reruns
    only what a new config or target changes."""
    copy_workflow(dst, share_models_from=src)
    for part in RUN_RECORDS:
        if (src / part).exists():
            shutil.copytree(src / part, dst / part, symlinks=True)
    return dst


def snakemake_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", *args]


def run_snakemake(
    workdir: Path, *args: str, env: dict | None = None, timeout: int = 1500, check: bool = True
) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(
        snakemake_cmd(*args), cwd=workdir, capture_output=True, text=True, timeout=timeout, env=full_env
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
    return proc


def jobs_run(proc: subprocess.CompletedProcess) -> dict[str, int]:
    """Count finished jobs per rule from Snakemake's log ("rule NAME:" headers of executed jobs, "checkpoint NAME:"
    for checkpoints)."""
    counts: dict[str, int] = {}
    for line in (proc.stdout + proc.stderr).splitlines():
        line = line.strip()
        if line.startswith(("rule ", "localrule ", "checkpoint ", "localcheckpoint ")) and line.endswith(":"):
            name = line.split()[1].rstrip(":")
            counts[name] = counts.get(name, 0) + 1
    return counts
