"""Fixed start-up cost of every workflow job that loads no model, against that job's whole wall time.

Snakemake runs each `script:` in a fresh Python process, so every job pays Python start-up, Snakemake's preamble
(unpickling the `snakemake` object imports Snakemake itself) and the script's own imports before doing any work.
For each rule of the default workflow whose script loads no model this bench times

  * fixed cost: `python -c "<the script's top-level imports>; setup(<stand-in snakemake object>)"`, best of
    --repeat runs, once with this tree's `src/` and (with --before SRC) once with another tree's, e.g. main's;
  * the heaviest imports behind it (`python -X importtime`, cumulative time of top-level packages);
  * job time: the wall time of that rule's jobs in a finished run (--run DIR, from `.snakemake/metadata`);

and prints rule, fixed cost before/after, job time and the fixed/job share. It also times what the `snakemake`
process itself pays once per invocation: Snakemake's preamble import, `halluflow.config.validate_config` with the
schema load, importing the modules `rules/common.smk` needs, and a dry run of the finished run (DAG build).

    python bench/bench_startup.py [--before /work/main/src] [--run <finished run dir>] [--repeat 5]

A finished run: any directory where `snakemake --cores 1` completed (e.g. a copy of the repository run with a
one-shard override config). Without --run the job-time columns are left empty.
"""

from __future__ import annotations

import argparse
import ast
import base64
import json
import os
import re
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
    "answer", "synthesize", "detect", "build_standin_synthesizer", "build_standin_detector", "build_standin_vlm",
    "build_local_llm", "cedi_examine", "caos_score", "samf_standard_eval", "samf_train", "samf_fuzzed_eval",
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


def wall(code: str, src: Path, repeat: int) -> float:
    """Best of `repeat` runs: on a shared machine the minimum is the cost itself, the rest is other load."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        proc = run_python(code, src)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"bench_startup: `{code}` failed with {src}:\n{proc.stderr[-2000:]}")
    return min(times)


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


def job_times(run: Path) -> dict[str, list[float]]:
    """rule -> wall seconds of each of its jobs in a finished run (Snakemake's per-output metadata records them)."""
    jobs: dict[str, dict[tuple, float]] = defaultdict(dict)
    for meta in (run / ".snakemake" / "metadata").glob("*"):
        try:
            record = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if record.get("starttime") and record.get("endtime") and record.get("rule"):
            key = (record["starttime"], record["endtime"])  # one job, many outputs: count it once
            jobs[record["rule"]][key] = record["endtime"] - record["starttime"]
    return {rule: list(spans.values()) for rule, spans in jobs.items()}


def snakemake_overhead(src: Path, run: Path | None, repeat: int) -> list[tuple[str, float]]:
    """What the `snakemake` process pays per invocation before and around its jobs."""
    rows = [
        ("python -c pass", wall("pass", src, repeat)),
        ("Snakemake preamble (every script job)", wall(PREAMBLE, src, repeat)),
        ("config load + schema + validate_config", wall(
            "import yaml; from halluflow.config import validate_config; "
            f"validate_config(yaml.safe_load(open({str(REPO / 'config.yaml')!r})))", src, repeat)),
        ("imports of rules/common.smk", wall(_common_imports(), src, repeat)),
    ]
    if run is not None:
        env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
        times = []
        for _ in range(max(1, repeat // 2)):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "snakemake", "-n", "--nolock", "--quiet", "rules", "--cores", "1"],
                           cwd=run, env=env, capture_output=True, text=True, check=True)
            times.append(time.perf_counter() - start)
        rows.append(("snakemake -n on the finished run (DAG, nothing to do)", min(times)))
    return rows


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
    args = ap.parse_args(argv)
    after_src = REPO / "src"
    times = job_times(args.run) if args.run else {}
    scripts = {r: s for r, s in rule_scripts(REPO / "rules").items()
               if r not in MODEL_RULES and (not args.rules or r in args.rules)}

    print(f"{'rule':<22} {'before s':>8} {'after s':>8} {'job s':>7} {'share':>6}  heaviest imports after (s)")
    for rule, script in scripts.items():
        code = startup_code(script, rule)
        full = f"{PREAMBLE}; {code}"
        after = wall(full, after_src, args.repeat)
        before = wall(full, args.before, args.repeat) if args.before else None
        job = statistics.median(times[rule]) if times.get(rule) else None
        share = f"{after / job:6.0%}" if job else f"{'':>6}"
        print(f"{rule:<22} {before if before is not None else float('nan'):8.2f} {after:8.2f} "
              f"{job if job is not None else float('nan'):7.2f} {share}  {heaviest_imports(code, after_src)}")

    print("\nper invocation of snakemake (best of --repeat, s):")
    before_rows = dict(snakemake_overhead(args.before, None, args.repeat)) if args.before else {}
    for label, secs in snakemake_overhead(after_src, args.run, args.repeat):
        line = f"  {label:<55} {secs:6.2f}"
        if label in before_rows:
            line += f"   before {before_rows[label]:6.2f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
