"""Fixed start-up cost of every workflow job that loads no model, against that job's whole wall time.

Snakemake runs each `script:` in a fresh Python process, so every job pays Python start-up, Snakemake's preamble
(unpickling the `snakemake` object imports Snakemake itself) and the script's own imports before doing any work.
For each rule of the default workflow whose script loads no model this bench times

  * fixed cost: `python -c "<Snakemake's preamble>; <the script's top-level imports>; setup(<stand-in snakemake
    object>)"`, best of --repeat runs: CPU seconds with this tree's `src/` and (with --before SRC) another tree's,
    e.g. main's (CPU time hardly moves with other load on a shared machine), and wall seconds with this tree's;
  * the heaviest imports behind it (`python -X importtime` self times summed per top-level package);
  * job time: the median wall time of that rule's jobs in a finished run (--run DIR, from `.snakemake/metadata`);

and prints rule, fixed cost before/after, job time and the fixed (wall) / job share. It also times what the
`snakemake` process itself pays once per invocation: Python, Snakemake's preamble import, the config load with
`halluflow.config.validate_config` and its schema, the imports of `rules/common.smk`, and a dry run of the finished
run (DAG build, nothing to do).

    python bench/bench_startup.py [--before /work/main/src] [--run <finished run dir>] [--repeat 5]

A finished run: a copy of the repository where `snakemake --cores 1` completed with that copy's own config.yaml
(this bench calls snakemake there without --configfile; e.g. shards set to 1). --forcerun reruns jobs there.
Without --run the job-time columns are left empty.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Rules whose job loads a model (a diffusers/transformers/ultralytics pipeline, a VLM under test, an embedder or an
# LLM): their start-up is dominated by the model, which they load once per shard, so they are not measured here.
MODEL_RULES = {
    "answer",
    "synthesize",
    "detect",
    "build_standin_synthesizer",
    "build_standin_detector",
    "build_standin_vlm",
    "build_local_llm",
    "cedi_examine",
    "caos_score",
    "samf_standard_eval",
    "samf_train",
    "samf_fuzzed_eval",
}
# Executed by every job before the script body: what unpickling the `snakemake` object needs (Snakemake's preamble).
PREAMBLE = "from snakemake.logging import logger; from snakemake.iocontainers import Snakemake"


def rule_scripts(rules_dir: Path) -> dict[str, Path]:
    """rule name -> its script, read from `rules/*.smk` (every rule names its script a few lines below `rule x:`)."""
    found: dict[str, Path] = {}
    for smk in sorted(rules_dir.glob("*.smk")):
        rule = None
        for line in smk.read_text(encoding="utf-8").splitlines():
            if m := re.match(r"\s*(?:rule|checkpoint) (\w+):", line):
                rule = m.group(1)
            elif rule and (m := re.search(r'"\.\./(scripts/\w+\.py)"', line)):
                script = rules_dir.parent / m.group(1)
                # a rule defined per answer source (score) is listed once per script, the first under its name
                found[rule if rule not in found else f"{rule}/{script.stem}"] = script
                rule = None
    return found


def startup_code(script: Path, rule: str) -> str:
    """The script's top-level imports, then `setup()` on a stand-in snakemake object (no log file, one thread)."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    imports = [ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    fake = f"types.SimpleNamespace(log=[], threads=1, rule={rule!r})"
    return "; ".join(["import types", *imports, f"setup({fake})"])


def run_python(code: str, src: Path, extra: list[str] = ()) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *extra, "-c", code], env=env, capture_output=True, text=True)


def cost(code: str, src: Path, repeat: int) -> tuple[float, float]:
    """(wall, CPU) seconds of `python -c code`, each the best of `repeat` runs (the minimum is the cost itself, the
    rest is other load). CPU time (user + sys of the child)
    hardly moves with other load, so it is the number to compare before/after on a shared machine."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = run_python(code, src)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if proc.returncode != 0:
            raise SystemExit(f"bench_startup: `{code}` failed with {src}:\n{proc.stderr[-2000:]}")
    return min(walls), min(cpus)


def heaviest_imports(code: str, src: Path, top: int = 4) -> str:
    """Top-level packages by the import time of their own modules (`-X importtime` self times summed per package,
    so a package is charged for itself, not for what it imports), e.g. 'polars 0.21, numpy 0.09'."""
    proc = run_python(code, src, ["-X", "importtime"])
    own: dict[str, float] = defaultdict(float)
    for line in proc.stderr.splitlines():
        if m := re.match(r"import time:\s+(\d+) \|\s+\d+ \| *(\S+)", line):
            own[m.group(2).split(".")[0]] += int(m.group(1)) / 1e6
    heavy = sorted(own.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{name} {secs:.2f}" for name, secs in heavy if secs >= 0.02)


def job_times(run: Path, since: float = 0.0) -> dict[str, list[float]]:
    """rule -> wall seconds of each of its jobs in a finished run. Snakemake's per-output metadata records the job's
    start (per output, a few microseconds apart) and the output's mtime as its end: a job is its rule + job hash,
    from its first start to its last output. `since`: only jobs started from then on (epoch seconds)."""
    spans: dict[tuple[str, int], tuple[float, float]] = {}
    for meta in (run / ".snakemake" / "metadata").rglob("*"):  # long output paths are split into folders
        if not meta.is_file():
            continue
        try:
            record = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if record.get("rule") and record.get("endtime") and (record.get("starttime") or 0) >= since:
            key = (record["rule"], record.get("job_hash"))
            start, end = spans.get(key, (record["starttime"], record["endtime"]))
            spans[key] = (min(start, record["starttime"]), max(end, record["endtime"]))
    jobs: dict[str, list[float]] = defaultdict(list)
    for (rule, _), (start, end) in spans.items():
        if end - start > 0.01:  # `snakemake --touch` records zero-length jobs
            jobs[rule].append(end - start)
    return dict(jobs)


def snakemake_overhead(src: Path, run: Path | None, repeat: int) -> list[tuple[str, tuple[float, float]]]:
    """What the `snakemake` process pays per invocation before and around its jobs: (wall, CPU) seconds."""
    rows = [
        ("python -c pass", cost("pass", src, repeat)),
        ("Snakemake preamble (every script job)", cost(PREAMBLE, src, repeat)),
        (
            "config load + schema + validate_config",
            cost(
                "import yaml; from halluflow.config import validate_config; "
                f"validate_config(yaml.safe_load(open({str(REPO / 'config.yaml')!r})))",
                src,
                repeat,
            ),
        ),
        ("imports of rules/common.smk", cost(_common_imports(), src, repeat)),
    ]
    if run is not None:
        env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
        walls, cpus = [], []
        for _ in range(repeat):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "snakemake",
                    "-n",
                    "--nolock",
                    "--quiet",
                    "rules",
                    "--cores",
                    "1",
                    "--rerun-triggers=mtime",
                ],
                cwd=run,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            walls.append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        rows.append(("snakemake -n on the finished run (DAG, nothing to do)", (min(walls), min(cpus))))
    return rows


def forcerun(run: Path, rule: str, src: Path) -> tuple[float, float, int]:
    """(whole `snakemake` call, sum of the rule's job spans) wall seconds and the job count: rerun one rule's jobs of
    a finished run and nothing else (--allowed-rules: an earlier rerun upstream must not rerun the jobs between)."""
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--cores",
        "1",
        "--forcerun",
        rule,
        "--until",
        rule,
        "--allowed-rules",
        rule,
        "--rerun-triggers=mtime",
    ]
    called = time.time()
    start = time.perf_counter()
    subprocess.run(cmd, cwd=run, env=env, capture_output=True, text=True, check=True)
    whole = time.perf_counter() - start
    spans = job_times(run, since=called).get(rule, [])
    return whole, sum(spans), len(spans)


def _common_imports() -> str:
    text = (REPO / "rules" / "common.smk").read_text(encoding="utf-8")
    lines = [ln.strip() for ln in text.splitlines() if re.match(r"(from halluflow\S* import|import halluflow)", ln)]
    return "; ".join(lines) or "pass"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, help="another tree's src/ to compare against (e.g. /work/main/src)")
    ap.add_argument("--run", type=Path, help="a finished run directory, for job wall times")
    ap.add_argument("--repeat", type=int, default=5, help="runs per measurement (the fastest is reported)")
    ap.add_argument("--rules", nargs="*", help="only these rules")
    ap.add_argument(
        "--forcerun",
        nargs="*",
        default=[],
        metavar="RULE",
        help="with --run: rerun these rules' jobs there and compare the whole snakemake call to the jobs",
    )
    args = ap.parse_args(argv)
    after_src = REPO / "src"
    scripts = {
        r: s
        for r, s in rule_scripts(REPO / "rules").items()
        if r not in MODEL_RULES and (not args.rules or r in args.rules)
    }
    forced = {}
    if args.run:  # first, so the job times below are those of these reruns
        forced = {rule: forcerun(args.run, rule, after_src) for rule in args.forcerun}
    times = job_times(args.run) if args.run else {}

    print(
        f"{'rule':<22} {'CPU before':>10} {'CPU after':>9} {'wall after':>10} {'job wall':>8} {'share':>6}  "
        f"heaviest imports after (s)"
    )
    for rule, script in scripts.items():
        code = startup_code(script, rule)
        full = f"{PREAMBLE}; {code}"
        after_wall, after_cpu = cost(full, after_src, args.repeat)
        before_cpu = cost(full, args.before, args.repeat)[1] if args.before else float("nan")
        job = statistics.median(times[rule]) if times.get(rule) else float("nan")
        share = f"{after_wall / job:6.0%}" if times.get(rule) else f"{'':>6}"
        print(
            f"{rule:<22} {before_cpu:10.2f} {after_cpu:9.2f} {after_wall:10.2f} {job:8.2f} {share}  "
            f"{heaviest_imports(code, after_src)}"
        )

    print("\nper invocation of snakemake (best of --repeat): wall s, CPU s")
    before_rows = dict(snakemake_overhead(args.before, args.run, args.repeat)) if args.before else {}
    for label, (secs, cpu) in snakemake_overhead(after_src, args.run, args.repeat):
        line = f"  {label:<55} {secs:6.2f} {cpu:6.2f}"
        if label in before_rows:
            line += f"   before {before_rows[label][0]:6.2f} {before_rows[label][1]:6.2f}"
        print(line)
    for rule, (whole, jobs, n) in forced.items():
        print(
            f"  snakemake --forcerun {rule} ({n} jobs, --cores 1): whole call {whole:.2f} s, the jobs {jobs:.2f} s "
            f"({jobs / whole:.0%} of the call)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
