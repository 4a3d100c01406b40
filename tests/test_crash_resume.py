"""Crash-resume proof: kill -9 the whole workflow, then single GPU-stage jobs, and rerun.

One scratch clone lives through the story (module fixture `story`):
  A. `snakemake` to the release manifest; once one synthesize shard is finished and the other is mid-shard (its
     resume sidecar holds a batch), SIGKILL the whole process group (and any job that outlived it: a power cut).
  B. `snakemake --unlock`, then rerun with `--rerun-incomplete` (Snakemake requires it after a kill: the killed
     jobs' outputs are marked incomplete); SIGKILL the first `detect` job alone as soon as it starts.
  C. rerun to the manifest: it completes.
  D. `snakemake` to one answer shard of the tiny stand-in VLM; SIGKILL that job once some answers are cached.
  E. rerun to that answer shard.
Checks: the manifest and the answer table are byte-identical to the uninterrupted `default_run`'s; no finished
shard or cached request is recomputed (job counts, inode + mtime, the cache's hit count); after every kill no final
path holds a partial file (every parquet / PNG / JSON / JSONL there parses) and temporaries are only `.part` names.

A second story (module fixture `regen`) runs regeneration rounds on a copy of the finished default run: with a keep
threshold that rejects images, SIGKILL the workflow in the middle of round 1 (one round job finished, the other
mid-job), rerun, and check that every round ran exactly the jobs its plan asked for, each with images, and that
nothing finished before the kill was redone.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
import yaml
from PIL import Image
from workflow_utils import copy_run, copy_workflow, jobs_run, run_snakemake, snakemake_cmd

pytestmark = pytest.mark.slow

POLL_S = 0.05
PHASE_TIMEOUT_S = 1200
MODEL = "tiny-smolvlm"


def processes_in(workdir: Path) -> dict[int, str]:
    """pid -> command line of every process whose working directory is inside workdir (Snakemake and its jobs)."""
    found = {}
    root = str(workdir.resolve())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cwd == root or cwd.startswith(root + os.sep):
            found[int(entry.name)] = cmd
    return found


def start(workdir: Path, *args: str) -> subprocess.Popen:
    # Own session = own process group, so killpg reaches Snakemake and the jobs it spawned, never pytest.
    return subprocess.Popen(
        snakemake_cmd(*args),
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def wait_for(proc: subprocess.Popen, condition, what: str):
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc.poll() is not None:
            raise AssertionError(f"snakemake ended before {what}:\n{proc.stdout.read()[-4000:]}")
        time.sleep(POLL_S)
    raise AssertionError(f"timed out waiting for {what}")


def kill_everything(proc: subprocess.Popen, workdir: Path) -> str:
    os.killpg(proc.pid, signal.SIGKILL)
    out = proc.communicate()[0]
    for pid in processes_in(workdir):  # a job in another group would outlive the group kill; a crash takes it too
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return out


def job_processes(workdir: Path, rule: str) -> list[int]:
    """The processes of a running `rule` job: every rule runs scripts/rule.py, so a job is told by the log it holds
    open (logs/<release>/<rule>/..., opened by the job's first line, halluflow.snakemake_glue.setup)."""
    logs = str((workdir / "logs").resolve()) + os.sep
    found = []
    for pid in processes_in(workdir):
        fd_dir = Path(f"/proc/{pid}/fd")
        with contextlib.suppress(OSError):
            targets = [os.readlink(fd_dir / fd) for fd in os.listdir(fd_dir)]
            if any(t.startswith(logs) and f"{os.sep}{rule}{os.sep}" in t for t in targets):
                found.append(pid)
    return found


def kill_job(proc: subprocess.Popen, workdir: Path, rule: str) -> str:
    """SIGKILL the running job of `rule`; Snakemake itself sees the job die."""
    pids = wait_for(proc, lambda: job_processes(workdir, rule), f"a running {rule} job")
    for pid in pids:  # the job's interpreter (the process holding its log)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    out = proc.communicate(timeout=PHASE_TIMEOUT_S)[0]
    assert proc.returncode != 0, out[-3000:]
    return out


def stamp(paths) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_ino, p.stat().st_mtime_ns) for p in paths}


def unreadable_final_files(results: Path) -> list[str]:
    """Files at final paths that do not parse (a truncated write would show here). `.part` temporaries excluded."""
    bad = []
    for path in results.rglob("*"):
        if not path.is_file() or path.name.endswith(".part"):
            continue
        try:
            if path.suffix == ".parquet":
                pl.read_parquet(path)
            elif path.suffix == ".png":
                with Image.open(path) as im:
                    im.load()
            elif path.suffix == ".json":
                json.loads(path.read_text())
            elif path.suffix == ".jsonl":
                [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        except Exception as exc:  # noqa: BLE001 - any parse failure is the finding
            bad.append(f"{path.relative_to(results)}: {exc}")
    return bad


def partial_names(results: Path) -> list[str]:
    """Temporaries left by killed writers: they must be hidden `.<name>.<random>.part` files, never final names."""
    return sorted(p.name for p in results.rglob("*.part"))


@pytest.fixture(scope="module")
def story(default_run, tmp_path_factory):
    base = default_run["dir"]
    release = yaml.safe_load((base / "config.yaml").read_text())["release"]
    # A clone of its own, stand-ins included: they are built afresh here, so the resumed release matching the
    # default run's byte for byte also shows that two runs (and two builds of the stand-ins) agree.
    work = copy_workflow(tmp_path_factory.mktemp("crash"))
    out = work / "results" / release
    manifest = f"results/{release}/release/manifest.json"
    answers = f"results/{release}/answers/{MODEL}/000.parquet"
    facts: dict = {"base": base, "work": work, "release": release, "manifest": manifest, "answers": answers}

    # A: kill the whole workflow while one synthesize shard is done and the other is mid-shard.
    def one_done_one_mid():
        for done, mid in (("000", "001"), ("001", "000")):
            if (
                (out / f"images/{done}.parquet").exists()
                and (out / f"images/{mid}.resume.jsonl").exists()
                and not (out / f"images/{mid}.parquet").exists()
            ):
                return done, mid
        return None

    proc = start(work, "--cores", "2", manifest)
    done, mid = wait_for(proc, one_done_one_mid, "one finished and one started synthesize shard")
    facts["a_out"] = kill_everything(proc, work)
    facts["a_unreadable"] = unreadable_final_files(work / "results")
    facts["a_parts"] = partial_names(work / "results")
    finished = [out / f"images/{done}.parquet", *sorted((out / f"images/{done}").glob("*.png"))]
    mid_ids = [json.loads(line)["image_id"] for line in (out / f"images/{mid}.resume.jsonl").read_text().splitlines()]
    resumed = [out / f"images/{mid}/{i}.png" for i in mid_ids]
    facts["finished_stamp"], facts["resumed_stamp"] = stamp(finished), stamp(resumed)
    facts["mid"], facts["mid_ids"] = mid, mid_ids

    # B: Snakemake refuses a locked, incomplete folder; unlock + --rerun-incomplete, then kill one detect job.
    locked = run_snakemake(work, "--cores", "2", manifest, check=False)
    facts["b_locked"] = locked.returncode != 0 and "lock" in (locked.stdout + locked.stderr).lower()
    run_snakemake(work, "--unlock", manifest)
    proc = start(work, "--cores", "2", "--rerun-incomplete", manifest)
    facts["b_out"] = kill_job(proc, work, "detect")
    facts["b_unreadable"] = unreadable_final_files(work / "results")

    # C: the rerun completes the release.
    rerun = run_snakemake(work, "--cores", "2", "--rerun-incomplete", manifest)
    facts["c_out"] = rerun.stdout + rerun.stderr
    facts["synthesize_jobs"] = [
        jobs_run_text(facts["b_out"]).get("synthesize", 0),
        jobs_run(rerun).get("synthesize", 0),
    ]

    # D: kill one answer job mid-shard once it has cached answers.
    cache = out / "cache" / MODEL
    proc = start(work, "--cores", "1", answers)
    wait_for(proc, lambda: len(list(cache.glob("??/*.json"))) >= 2, "cached answers")
    facts["d_out"] = kill_job(proc, work, "answer")
    facts["d_unreadable"] = unreadable_final_files(work / "results")
    facts["cached_stamp"] = stamp(sorted(cache.glob("??/*.json")))
    facts["answers_after_kill"] = (work / answers).exists()

    # E: rerun the answer shard.
    rerun = run_snakemake(work, "--cores", "1", "--rerun-incomplete", answers)
    facts["e_jobs"] = jobs_run(rerun)
    facts["e_log"] = work / "logs" / release / "answer" / MODEL / "000.log"
    return facts


def jobs_run_text(text: str) -> dict[str, int]:
    return jobs_run(subprocess.CompletedProcess([], 0, text, ""))


def test_whole_workflow_kill_leaves_no_partial_final_file(story):
    assert story["a_unreadable"] == [] and story["b_unreadable"] == [] and story["d_unreadable"] == []
    assert all(re.fullmatch(r"\..+\.part", name) for name in story["a_parts"]), story["a_parts"]
    assert story["b_locked"], "Snakemake should refuse the killed run's locked folder until --unlock"


def test_rerun_gives_the_uninterrupted_release(story):
    # Same manifest (the sha256 of every image, table and file) as the default run, which ran without a kill in
    # another clone with its own stand-in builds: deterministic across runs, builds and kills.
    base = (story["base"] / story["manifest"]).read_bytes()
    assert (story["work"] / story["manifest"]).read_bytes() == base


def test_finished_shards_and_images_are_not_recomputed(story):
    # Only the shard that was mid-run when the workflow died is synthesized again (once, across both reruns).
    assert sum(story["synthesize_jobs"]) == 1, story["synthesize_jobs"]
    assert stamp(Path(p) for p in story["finished_stamp"]) == story["finished_stamp"]
    # Inside the restarted shard, the batches recorded before the kill are reused, not rewritten.
    assert story["mid_ids"] and stamp(Path(p) for p in story["resumed_stamp"]) == story["resumed_stamp"]
    synth_log = (story["work"] / "logs" / story["release"] / "synthesize" / f"{story['mid']}.log").read_text()
    assert f"({len(story['mid_ids'])} reused from a previous run)" in synth_log, synth_log[-2000:]


def test_killed_answer_job_repeats_no_finished_request(story):
    assert not story["answers_after_kill"]
    assert story["e_jobs"].get("answer") == 1
    # Every answer cached before the kill is served from the cache, its file untouched.
    assert stamp(Path(p) for p in story["cached_stamp"]) == story["cached_stamp"]
    log = story["e_log"].read_text()
    hits = int(re.search(r"(\d+) cache hits, (\d+) to request", log).group(1))
    assert hits == len(story["cached_stamp"]), log[-2000:]
    base = (story["base"] / story["answers"]).read_bytes()
    assert (story["work"] / story["answers"]).read_bytes() == base


@pytest.fixture(scope="module")
def regen(default_run, tmp_path_factory):
    """Regeneration rounds (max_attempts 3, keep threshold 0.2: the noise detector fails most images) on a copy of
    the finished default run, killed in the middle of round 1 and rerun."""
    work = copy_run(default_run["dir"], tmp_path_factory.mktemp("regen"))
    release = yaml.safe_load((work / "config.yaml").read_text())["release"]
    out = work / "results" / release
    overlay = work / "regen.yaml"
    overlay.write_text("synthesis: {max_attempts: 3}\node: {filter: {keep_threshold: 0.2}}\n")
    args = ("--cores", "2", "--configfile", "config.yaml", str(overlay), "--")
    target = f"results/{release}/filtered/accepted.parquet"
    facts: dict = {"work": work, "out": out, "release": release}

    def round_one_mid():
        plan = out / "prompts/retry/a1.parquet"
        if not plan.exists():
            return None
        jobs = sorted(set(pl.read_parquet(plan)["shard"]))
        done = [j for j in jobs if (out / f"images/{j}.parquet").exists()]
        mid = [j for j in jobs if (out / f"images/{j}.resume.jsonl").exists() and j not in done]
        return (done, mid[0]) if mid and (done or len(jobs) == 1) else None

    proc = start(work, *args, target)
    facts["done"], facts["mid"] = wait_for(proc, round_one_mid, "a round-1 job in the middle of its images")
    facts["kill_out"] = kill_everything(proc, work)
    facts["unreadable"] = unreadable_final_files(work / "results")
    facts["plan_stamp"] = stamp([out / "prompts/retry/a1.parquet"])
    facts["done_stamp"] = stamp([out / f"images/{j}.parquet" for j in facts["done"]])
    sidecar = out / f"images/{facts['mid']}.resume.jsonl"
    facts["mid_ids"] = [json.loads(line)["image_id"] for line in sidecar.read_text().splitlines() if line.strip()]

    run_snakemake(work, "--unlock", *args, target)
    rerun = run_snakemake(work, "--rerun-incomplete", *args, target)
    facts["rerun_jobs"] = jobs_run(rerun)
    again = run_snakemake(work, *args, target)
    facts["again_out"] = again.stdout + again.stderr
    return facts


def test_regeneration_rounds_run_the_jobs_their_plans_ask_for(regen):
    out = regen["out"]
    rejected = pl.read_parquet(out / "filtered/rejected.parquet")
    accepted = pl.read_parquet(out / "filtered/accepted.parquet")
    previous = rejected.filter(pl.col("attempt") == 0)
    assert previous.height > 0, "keep threshold 0.2 should reject images of the noise detector"
    rounds = 0
    judged = pl.concat([accepted.select("image_id", "attempt"), rejected.select("image_id", "attempt")])
    for attempt in (1, 2):
        plan = pl.read_parquet(out / f"prompts/retry/a{attempt}.parquet")
        # every regenerated image is judged again by the filter, on its attempt
        assert set(plan["image_id"]) <= set(judged.filter(pl.col("attempt") == attempt)["image_id"]), attempt
        # a round regenerates exactly the previous round's rejects, each in one planned job
        assert sorted(plan["image_id"]) == sorted(previous["image_id"]), attempt
        assert set(plan["attempt"]) <= {attempt}
        jobs = sorted(set(plan["shard"]))
        tables = sorted(p.name.removesuffix(".parquet") for p in (out / "images").glob(f"*-a{attempt}.parquet"))
        assert tables == jobs, (attempt, tables, jobs)  # no job the plan did not ask for, none empty
        for job in jobs:
            images = pl.read_parquet(out / f"images/{job}.parquet")
            assert sorted(images["image_id"]) == sorted(plan.filter(pl.col("shard") == job)["image_id"])
            assert (out / f"detections/{job}.parquet").exists()
        rounds += bool(jobs)
        previous = rejected.filter(pl.col("attempt") == attempt)
    assert rounds == 2
    assert accepted["image_id"].n_unique() == accepted.height  # one row per image id in the release
    assert "Nothing to be done" in regen["again_out"]


def test_crash_in_the_middle_of_a_round_resumes_it(regen):
    assert regen["unreadable"] == []
    jobs = regen["rerun_jobs"]
    # the round's plan and its finished job are kept (only round 2 is planned after the kill); the killed job and
    # the round's jobs not yet started run once, then round 2's
    assert jobs.get("retry_prompts") == 1 and stamp(Path(p) for p in regen["plan_stamp"]) == regen["plan_stamp"]
    assert stamp(Path(p) for p in regen["done_stamp"]) == regen["done_stamp"]
    planned = {a: set(pl.read_parquet(regen["out"] / f"prompts/retry/a{a}.parquet")["shard"]) for a in (1, 2)}
    assert jobs.get("synthesize_retry") == len(planned[1]) - len(regen["done"]) + len(planned[2]), jobs
    assert "synthesize" not in jobs and "detect" not in jobs, jobs  # first-round images are never redone
    log = (regen["work"] / "logs" / regen["release"] / "synthesize" / f"{regen['mid']}.log").read_text()
    assert regen["mid_ids"] and f"({len(regen['mid_ids'])} reused from a previous run)" in log, log[-2000:]
