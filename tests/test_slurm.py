"""The default workflow through profiles/slurm on a REAL one-node Slurm cluster (issue 7, item 1).

The test starts the cluster itself (tools/slurm/local-cluster.sh: Debian slurm-wlm, one fake GPU as gres gpu:1), adapts
the shipped profile only where a site must (account, partition, no conda, squeue status without slurmdbd) and runs
the workflow with the slurm executor plugin. GPU rules must be submitted with --gpus=1.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import yaml

from workflow_utils import REPO, copy_workflow, run_snakemake

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

GPU_RULES = {"synthesize", "detect"}  # answer asks for a GPU only for models on a GPU device


@pytest.fixture(scope="module")
def slurm_cluster():
    if os.environ.get("HALLUFLOW_SKIP_SLURM"):
        pytest.skip("HALLUFLOW_SKIP_SLURM is set")
    if os.geteuid() != 0:
        pytest.skip("starting a local Slurm cluster needs root (apt-get, munge, slurmctld)")
    if not shutil.which("apt-get") and not shutil.which("slurmctld"):
        pytest.skip("no apt-get to install Debian's slurm-wlm and no slurmctld on PATH")
    proc = subprocess.run([str(REPO / "tools" / "slurm" / "local-cluster.sh"), "start"], capture_output=True,
                          text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"local Slurm cluster did not start:\n{proc.stdout}\n{proc.stderr}")
    yield
    subprocess.run([str(REPO / "tools" / "slurm" / "local-cluster.sh"), "stop"], capture_output=True, timeout=120)


def local_profile(workdir) -> str:
    """profiles/slurm with this site's values: what a user edits before a first run on their cluster."""
    profile = yaml.safe_load((workdir / "profiles" / "slurm" / "config.yaml").read_text())
    profile["default-resources"]["slurm_account"] = "local"
    profile["default-resources"]["slurm_partition"] = "debug"
    for resources in (profile.get("set-resources") or {}).values():
        if "slurm_partition" in resources:
            resources["slurm_partition"] = "debug"
        if "mem_mb" in resources:
            resources["mem_mb"] = min(resources["mem_mb"], 8000)  # the local node has ~19 GB
        if "cpus_per_task" in resources:
            resources["cpus_per_task"] = min(resources["cpus_per_task"], os.cpu_count() or 1)
    profile.pop("software-deployment-method", None)  # jobs inherit the venv (sbatch --export=ALL)
    profile.pop("conda-prefix", None)
    profile["slurm-status-command"] = "squeue"  # no slurmdbd here, so no sacct
    profile["slurm-init-seconds-before-status-checks"] = 5
    profile["jobs"] = 4
    profile["latency-wait"] = 5
    out = workdir / "profiles" / "slurm-local"
    out.mkdir()
    (out / "config.yaml").write_text(yaml.safe_dump(profile))
    return "profiles/slurm-local"


def test_default_workflow_on_slurm(slurm_cluster, tmp_path):
    workdir = copy_workflow(tmp_path / "wf")
    profile = local_profile(workdir)
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    out = f"results/{config['release']}"
    # The default config, through the release (stand-in builds, both GPU rules) and two models answered and scored.
    # The whole default target list is the same workflow with more CPU-bound jobs: on CI's 2 cores it would double
    # the suite's time, so it is left to `snakemake --profile profiles/slurm` by hand (see the README).
    targets = [f"{out}/release/manifest.json", f"{out}/metrics/prior.json", f"{out}/metrics/tiny-smolvlm.json"]
    proc = run_snakemake(workdir, "--profile", profile, "--verbose", *targets, timeout=1500)
    log = proc.stdout + proc.stderr
    calls = [line for line in log.splitlines() if "sbatch call:" in line]
    assert calls, "no sbatch call logged"
    by_rule: dict[str, list[str]] = {}
    for call in calls:
        # the plugin puts "rule_<name>" or "rule_<name>_wildcards_<...>" in each job's --comment
        match = re.search(r"rule_([A-Za-z0-9_]+?)(?:_wildcards_|[\s'\"])", call)
        by_rule.setdefault(match.group(1) if match else "?", []).append(call)
    for rule in GPU_RULES:
        assert by_rule.get(rule), f"no sbatch call for GPU rule {rule}: {list(by_rule)}"
        for call in by_rule[rule]:
            assert "--gpus=1" in call, call
    assert (workdir / "results" / config["release"] / "release" / "manifest.json").exists()
    verify = subprocess.run(["halluflow", "release", "verify", str(workdir / "results" / config["release"] / "release")],
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
