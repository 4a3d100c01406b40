"""Results that move: a finished results folder copied into another clone of the same commit plans nothing.

A fresh clone gives every file the checkout time. For a `script:` rule Snakemake's code trigger is only "an output
is older than the script file", so before profiles/default dropped that trigger, every job of a moved run was
planned again ("Code has changed since last execution"). Cheap: one build_graph job (a few seconds)."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from workflow_utils import RUN_RECORDS, copy_workflow, jobs_run, run_snakemake

TARGET = "results/ode-demo/graph/nodes.parquet"


def fresh_checkout_times(root) -> None:
    """What `git clone` / `git checkout` does to a tree: every file gets the time of the checkout (now)."""
    now = time.time() + 5  # later than every output of the finished run
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.utime(path, (now, now))


@pytest.mark.slow  # runs Snakemake: one build_graph job, then two dry runs
def test_results_copied_into_another_clone_plan_nothing(tmp_path):
    first = copy_workflow(tmp_path / "login-node")
    run_snakemake(first, "--cores", "1", TARGET)
    assert run_snakemake(first, "-n", TARGET).stdout.count("Nothing to be done") == 1

    second = copy_workflow(tmp_path / "scratch")
    fresh_checkout_times(second)
    for part in RUN_RECORDS:  # the results folder and Snakemake's records, moved with their times (cp -a, rsync -a)
        if (first / part).exists():
            shutil.copytree(first / part, second / part, symlinks=True)
    assert (second / "scripts" / "rule.py").stat().st_mtime > (second / TARGET).stat().st_mtime

    plan = run_snakemake(second, "-n", TARGET)
    assert "Nothing to be done" in plan.stdout, plan.stdout[-3000:]
    assert not jobs_run(plan)

    # the cause, shown: without the workflow profile Snakemake's own triggers re-plan the job for its "code"
    bare = run_snakemake(second, "-n", "--workflow-profile", "none", TARGET)
    assert "Code has changed since last execution" in bare.stdout
    assert jobs_run(bare) == {"build_graph": 1}
