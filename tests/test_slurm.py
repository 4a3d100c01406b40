"""The default workflow through profiles/slurm on a REAL one-node Slurm cluster.

Opt-in: starting the cluster changes the machine (tools/slurm/local-cluster.sh installs Debian's slurm-wlm, writes
/etc/slurm/slurm.conf and starts munge/slurmctld/slurmd, as root), so the test runs only with HALLUFLOW_TEST_SLURM=1
(.ci/run sets it) and then FAILS, rather than skips, when the cluster cannot start. It adapts the shipped profile only
where a site must (account, partitions, no conda, squeue status without slurmdbd) and checks that every GPU job
(synthesize, detect, and the answer job of a model configured for a GPU) is submitted with --gpus=1, and that the
answer job of a CPU model is not.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import yaml
from workflow_utils import REPO, copy_workflow, run_snakemake

GPU_RULES = {"synthesize", "detect"}  # always on a GPU; answer only for models the resolver puts on one
OPT_IN = "HALLUFLOW_TEST_SLURM"


@pytest.fixture(scope="module")
def slurm_cluster():
    if os.environ.get(OPT_IN) != "1":
        pytest.skip(f"set {OPT_IN}=1 to start a local Slurm cluster (installs slurm-wlm, writes /etc/slurm, as root)")
    if os.geteuid() != 0:
        pytest.fail(f"{OPT_IN}=1 but not root: starting a local Slurm cluster needs root (apt-get, munge, slurmctld)")
    if not shutil.which("apt-get") and not shutil.which("slurmctld"):
        pytest.fail(f"{OPT_IN}=1 but no apt-get to install Debian's slurm-wlm and no slurmctld on PATH")
    if cluster_answers():
        yield  # started before the suite (.ci/run does): used as it is and left running
        return
    proc = subprocess.run(
        [str(REPO / "tools" / "slurm" / "local-cluster.sh"), "start"], capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0:
        pytest.fail(f"local Slurm cluster did not start:\n{proc.stdout}\n{proc.stderr}")
    yield
    subprocess.run([str(REPO / "tools" / "slurm" / "local-cluster.sh"), "stop"], capture_output=True, timeout=120)


def cluster_answers() -> bool:
    """A Slurm controller answers on this machine (one node idle or busy)."""
    if not shutil.which("sinfo"):
        return False
    try:
        proc = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=5)
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0 and any(s in proc.stdout for s in ("idle", "mixed", "allocated"))


def local_profile(workdir) -> str:
    """profiles/slurm with this site's values: what a user edits before a first run on their cluster."""
    profile = yaml.safe_load((workdir / "profiles" / "slurm" / "config.yaml").read_text())
    profile["default-resources"]["slurm_account"] = "local"
    # The one local partition has the fake GPU; GPU and CPU jobs alike are placed there by the plugin.
    (workdir / "profiles" / "slurm-local").mkdir()
    (workdir / "profiles" / "slurm-local" / "partitions.yaml").write_text(
        yaml.safe_dump({"partitions": {"debug": {"max_gpu": 1}}})
    )
    profile["slurm-partition-config"] = "profiles/slurm-local/partitions.yaml"
    for resources in (profile.get("set-resources") or {}).values():
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
    (workdir / "profiles" / "slurm-local" / "config.yaml").write_text(yaml.safe_dump(profile))
    return "profiles/slurm-local"


def _gpu_site(workdir, **extra) -> list[dict]:
    """A site with GPUs (`gpu: true`) where the stand-in VLM runs on device auto: the resolver puts it on the GPU."""
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    models = [dict(m) for m in config["models"]]
    for m in models:
        if m["name"] == "tiny-smolvlm":
            m["args"] = {**m["args"], "device": "auto"}
    (workdir / "gpu-site.yaml").write_text(yaml.safe_dump({"gpu": True, "models": models, **extra}))
    return models


def test_gpu_requests_follow_the_resolver(tmp_path):
    """Without a cluster: every model rule's planned `gpu` resource is 1 exactly for the model on a GPU."""
    workdir = copy_workflow(tmp_path / "wf")
    # The VLM also judges CAOS's out-of-domain objects: every caos_score job then needs its GPU.
    _gpu_site(workdir, caos={"oracle": {"members": ["tiny-smolvlm"]}})
    proc = run_snakemake(workdir, "-n", "--configfile", "config.yaml", "gpu-site.yaml")
    jobs = re.split(r"\n(?=(?:local)?(?:rule|checkpoint) )", proc.stdout + proc.stderr)
    seen = set()
    for job in jobs:
        rule = re.match(r"(?:local)?(?:rule|checkpoint) (\w+):", job)
        model = re.search(r"wildcards: .*?model=([^,\s]+)", job)
        gpu = re.search(r"resources: .*?\bgpu=(\d)", job)
        if not (rule and model and gpu):
            continue
        seen.add(rule.group(1))
        on_gpu = model.group(1) == "tiny-smolvlm" or rule.group(1) == "caos_score"
        assert gpu.group(1) == ("1" if on_gpu else "0"), job
    assert {"answer", "caos_score", "cedi_examine", "samf_standard_eval", "samf_train", "samf_fuzzed_eval"} <= seen


@pytest.mark.slow
@pytest.mark.slurm
def test_default_workflow_on_slurm(slurm_cluster, tmp_path):
    workdir = copy_workflow(tmp_path / "wf")
    profile = local_profile(workdir)
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    out = f"results/{config['release']}"
    # The stand-in VLM on a GPU site: its answer jobs must ask for a GPU; the prior's stay on the CPU partition.
    _gpu_site(workdir)
    # The default config, through the release (stand-in builds, both GPU rules) and two models answered and scored.
    # The whole default target list is the same workflow with more CPU-bound jobs: on CI's 2 cores it would double
    # the suite's time, so it is left to `snakemake --profile profiles/slurm` by hand (see the README).
    targets = [f"{out}/release/manifest.json", f"{out}/metrics/prior.json", f"{out}/metrics/tiny-smolvlm.json"]
    proc = run_snakemake(
        workdir,
        "--profile",
        profile,
        "--verbose",
        "--configfile",
        "config.yaml",
        "gpu-site.yaml",
        "--",
        *targets,
        timeout=1500,
    )
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
    answers = {
        model: [c for c in by_rule.get("answer", []) if f"_wildcards_{model}_" in c]
        for model in ("tiny-smolvlm", "prior")
    }
    assert answers["tiny-smolvlm"] and all("--gpus=1" in c for c in answers["tiny-smolvlm"]), answers
    assert answers["prior"] and not any("--gpus" in c for c in answers["prior"]), answers
    assert (workdir / "results" / config["release"] / "release" / "manifest.json").exists()
    verify = subprocess.run(
        ["halluflow", "release", "verify", str(workdir / "results" / config["release"] / "release")],
        capture_output=True,
        text=True,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_helper_llm_on_gpu_moves_its_jobs_to_a_gpu(tmp_path):
    """A CEDI parser LLM on a GPU makes every cedi_examine job ask for one; the CPU models' answer jobs do not."""
    workdir = copy_workflow(tmp_path / "wf")
    (workdir / "llm-gpu.yaml").write_text(yaml.safe_dump({"llm": {"device": "cuda"}, "cedi": {"parser": "llm"}}))
    proc = run_snakemake(workdir, "-n", "--configfile", "config.yaml", "llm-gpu.yaml")
    gpus: dict[str, set[str]] = {}
    for job in re.split(r"\n(?=(?:local)?(?:rule|checkpoint) )", proc.stdout + proc.stderr):
        rule = re.match(r"(?:local)?(?:rule|checkpoint) (\w+):", job)
        gpu = re.search(r"resources: .*?\bgpu=(\d)", job)
        if rule and gpu:
            gpus.setdefault(rule.group(1), set()).add(gpu.group(1))
    assert gpus["cedi_examine"] == {"1"} and gpus["answer"] == {"0"}, gpus


def _path_without_conda() -> str:
    """PATH with every folder holding a `conda` executable left out: a login node without conda."""
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(d for d in dirs if d and not os.access(os.path.join(d, "conda"), os.X_OK))


@pytest.fixture(scope="module")
def paper_dry_run(tmp_path_factory):
    """`snakemake -n --profile profiles/slurm --configfile configs/ode-paper.yaml` in a copy, conda off PATH."""
    workdir = copy_workflow(tmp_path_factory.mktemp("paper") / "wf")
    env = {"PATH": _path_without_conda()}
    args = ("-n", "--profile", "profiles/slurm", "--configfile", "configs/ode-paper.yaml")
    return workdir, env, args, run_snakemake(workdir, *args, env=env)


def test_profile_dry_runs_without_conda(paper_dry_run):
    """`snakemake -n --profile profiles/slurm` plans the paper config where no conda is installed (the workflow
    profile profiles/default is read as well); conda stays an opt-in (`--sdm conda`), which then needs conda."""
    workdir, env, args, proc = paper_dry_run
    assert "conda" not in proc.stderr.lower().replace("conda-prefix", ""), proc.stderr[-3000:]
    assert re.search(r"^synthesize\s+\d+", proc.stdout + proc.stderr, re.M), proc.stdout[-3000:]
    opted = run_snakemake(workdir, *args, "--sdm", "conda", env=env, check=False)
    assert opted.returncode != 0 and "conda" in (opted.stdout + opted.stderr), opted.stderr[-3000:]


def test_slurm_resources_are_the_plans(paper_dry_run):
    """Every job of the paper config's DAG that `plan` prices asks Slurm for the runtime and memory the plan derives
    from its counts, per-item seconds and model sizes; caos_score's runtime covers the plan's estimate."""
    from halluflow.plan import job_resources, merged_config, plan_rows

    workdir, _, args, proc = paper_dry_run
    config = merged_config(["configs/ode-paper.yaml"], base=workdir / "config.yaml")
    derived = job_resources(config)
    seen = set()
    for job in re.split(r"\n(?=(?:local)?(?:rule|checkpoint) )", proc.stdout + proc.stderr):
        rule = re.match(r"(?:local)?(?:rule|checkpoint) (\w+):", job)
        resources = re.search(r"resources: (.*)", job)
        if not (rule and resources):
            continue
        model = re.search(r"wildcards: .*?model=([^,\s]+)", job)
        key = (rule.group(1), model.group(1) if model else None)
        if key not in derived:
            continue
        asked = dict(re.findall(r"(\w+)=([^,\s]+)", resources.group(1)))
        for name, value in derived[key].items():
            assert int(asked[name]) == value, (key, name, asked)
        seen.add(key)
    rules = {rule for rule, _ in seen}
    assert {"synthesize", "detect", "answer", "caos_score", "cedi_examine", "samf_train"} <= rules, rules
    assert ("answer", "llava-1.5-7b") in seen and derived[("answer", "llava-1.5-7b")]["mem_mb"] > 7 * 2048
    rows, _ = plan_rows(config)
    caos = next(r for r in rows if r.stage == "caos llava-1.5-7b")
    assert derived[("caos_score", "llava-1.5-7b")]["runtime"] > caos.gpu_s / 60
