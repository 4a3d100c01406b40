"""Scale and overhead of the workflow (printed, never asserted).

1. DAG construction + dry run (`snakemake -n`) for 10,000 and 100,000 scenes (bench_dag's overlay: static shards,
   so the DAG grows with the shard counts, not the scene count).
2. Workflow overhead per shard vs model time: a no-op shard job through the same `script:` + snakemake_glue path as
   every stage (interpreter start, Snakemake's script wrapper, logging setup) against the benchmarks/ files of a
   run (`--run`, e.g. a finished `snakemake --cores 2` folder): job wall time per rule, minus the no-op's.
3. Memory: max_rss per rule from the same benchmark files, biggest step first.
4. Scoring throughput: the score rule's `score_answers` on synthetic answers, and POPE via bench/bench_scoring.py.

    python bench/bench_scale.py --run /path/to/finished/run [--scenes 10000 100000] [--answers 100000]
"""

from __future__ import annotations

import argparse
import csv
import random
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import polars as pl
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_dag import bench_config, dry_run_cmd  # noqa: E402
from bench_scoring import bench_pope  # noqa: E402

from halluflow.ode.scoring import score_answers  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def dry_run(scenes: int, image_shards: int, answer_shards: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        overlay = Path(tmp) / "scale.yaml"
        overlay.write_text(yaml.safe_dump(bench_config(scenes, image_shards, answer_shards)))
        cmd = dry_run_cmd(overlay)
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"snakemake -n failed:\n{proc.stderr[-3000:]}")
    match = re.search(r"^total\s+(\d+)", proc.stdout + proc.stderr, re.M)
    return {
        "scenes": scenes,
        "image_shards": image_shards,
        "answer_shards": answer_shards,
        "jobs": int(match.group(1)) if match else None,
        "seconds": seconds,
    }


NOOP_SNAKEFILE = """
rule all:
    input: expand("out/{shard}.txt", shard=range(%d))

rule noop:
    output: "out/{shard}.txt"
    log: "logs/{shard}.log"
    benchmark: "bench/{shard}.tsv"
    threads: 1
    script: "noop.py"
"""

NOOP_SCRIPT = """
from halluflow.snakemake_glue import setup
log = setup(snakemake)
from halluflow.io import write_text
write_text(snakemake.output[0], "done\\n")
"""


def noop_overhead(jobs: int) -> dict:
    """Per-job cost of the workflow machinery alone: job wall (benchmark s) and the run's wall per job."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "Snakefile").write_text(NOOP_SNAKEFILE % jobs)
        (Path(tmp) / "noop.py").write_text(textwrap.dedent(NOOP_SCRIPT))
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "snakemake", "--cores", "1", "--quiet"], cwd=tmp, capture_output=True, text=True
        )
        total = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"no-op workflow failed:\n{proc.stderr[-3000:]}")
        walls = [read_benchmark(p)["s"] for p in sorted((Path(tmp) / "bench").glob("*.tsv"))]
    return {"jobs": jobs, "job_s": sum(walls) / len(walls), "run_s": total, "outside_jobs_s": total - sum(walls)}


def read_benchmark(path: Path) -> dict:
    with open(path) as fh:
        row = list(csv.DictReader(fh, delimiter="\t"))[-1]
    return {"s": float(row["s"]), "max_rss": float(row["max_rss"]) if row["max_rss"] not in ("", "NA", "-") else None}


def run_benchmarks(run: Path) -> pl.DataFrame:
    """One row per job from <run>/benchmarks/<release>/<rule>[/<wildcards>].tsv."""
    rows = []
    for path in sorted((run / "benchmarks").rglob("*.tsv")):
        parts = path.relative_to(run / "benchmarks").parts
        rule = parts[1] if len(parts) > 2 else Path(parts[1]).stem
        # answer/<model>/<shard>.tsv, score/<model>.tsv: keep the model for the per-model view
        if rule in ("answer", "score") and len(parts) > 2:
            rule = f"{rule} {parts[2].removesuffix('.tsv')}"
        rows.append({"rule": rule, **read_benchmark(path)})
    return pl.DataFrame(rows, schema={"rule": pl.String, "s": pl.Float64, "max_rss": pl.Float64})


def scoring_throughput(n: int, seed: int = 0) -> dict:
    rnd = random.Random(seed)
    objects = ["dog", "cat", "car", "tree", "person", "cup", "chair", "grass", "sky", "bench"]
    disc = int(n * 0.8)
    queries = pl.DataFrame(
        {
            "query_id": [f"q{i:07d}" for i in range(n)],
            "distribution": [rnd.choice(["standard", "long_tail", "random", "fictional"]) for _ in range(n)],
            "pair_kind": [rnd.choice(["entity_entity", "entity_environment"]) for _ in range(n)],
            "task": ["discriminative"] * disc + ["generative"] * (n - disc),
            "query_type": ["existence"] * disc + ["generative"] * (n - disc),
            "attribute_kind": [None] * n,
            "truth": [rnd.choice(["yes", "no"]) for _ in range(disc)] + [None] * (n - disc),
            "objects": [rnd.sample(objects, 2) for _ in range(n)],
        }
    )
    answers = pl.DataFrame(
        {
            "query_id": queries["query_id"],
            "model": ["m"] * n,
            "status": ["ok"] * n,
            "answer": [rnd.choice(["Yes, there is one.", "No.", "no", "yes"]) for _ in range(disc)]
            + [
                f"A {rnd.choice(objects)} next to a {rnd.choice(objects)} on the {rnd.choice(objects)}."
                for _ in range(n - disc)
            ],
        }
    )
    start = time.perf_counter()
    score_answers(queries, answers, objects)
    seconds = time.perf_counter() - start
    return {"answers": n, "generative": n - disc, "seconds": seconds, "per_s": n / seconds}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, help="a finished workflow folder (its benchmarks/ are read)")
    ap.add_argument("--scenes", type=int, nargs="*", default=[10_000, 100_000], help="none: skip the dry runs")
    ap.add_argument("--scenes-per-shard", type=int, default=1_000, help="image and answer shards = scenes / this")
    ap.add_argument("--noop-jobs", type=int, default=8)
    ap.add_argument("--answers", type=int, default=100_000, help="synthetic answers for the scoring throughput")
    args = ap.parse_args(argv)

    print("== DAG construction + dry run (snakemake -n)")
    print(f"{'scenes':>9} {'img shards':>10} {'ans shards':>10} {'jobs':>6} {'seconds':>8}")
    for scenes in args.scenes:
        shards = max(1, scenes // args.scenes_per_shard)
        r = dry_run(scenes, shards, shards)
        print(f"{r['scenes']:>9,} {r['image_shards']:>10} {r['answer_shards']:>10} {r['jobs']:>6} {r['seconds']:>8.1f}")

    noop = noop_overhead(args.noop_jobs)
    print(
        f"\n== Workflow overhead: a no-op shard job (script: + snakemake_glue) costs {noop['job_s']:.2f} s of job wall; "
        f"the {noop['jobs']}-job no-op run took {noop['run_s']:.1f} s, {noop['outside_jobs_s']:.1f} s of it outside "
        "the jobs (Snakemake start, DAG, scheduling; --cores 1)"
    )
    if args.run:
        table = run_benchmarks(args.run)
        per_rule = (
            table.group_by("rule")
            .agg(pl.len().alias("jobs"), pl.col("s").mean().alias("mean_s"), pl.col("max_rss").max())
            .with_columns((pl.col("mean_s") - noop["job_s"]).clip(0).alias("model_s"))
            .with_columns((noop["job_s"] / pl.col("mean_s")).alias("overhead_share"))
            .sort("max_rss", descending=True, nulls_last=True)
        )
        print(f"\n== Per rule, from {args.run}/benchmarks (model_s = mean job wall - no-op job wall)")
        print(f"{'rule':<28} {'jobs':>4} {'mean s':>8} {'model s':>8} {'overhead':>8} {'max_rss MB':>10}")
        for r in per_rule.iter_rows(named=True):
            rss = f"{r['max_rss']:.0f}" if r["max_rss"] is not None else "-"
            print(
                f"{r['rule']:<28} {r['jobs']:>4} {r['mean_s']:>8.1f} {r['model_s']:>8.1f} "
                f"{r['overhead_share']:>8.0%} {rss:>10}"
            )
        top = per_rule.row(0, named=True)
        print(
            f"biggest step by memory: {top['rule']} ({top['max_rss']:.0f} MB max_rss); "
            f"all jobs: {table['s'].sum():.0f} s of job wall in total"
        )

    score = scoring_throughput(args.answers)
    print(
        f"\n== Scoring: score_answers (rule score) on {score['answers']:,} answers "
        f"({score['generative']:,} generative): {score['seconds']:.2f} s = {score['per_s']:,.0f} answers/s"
    )
    pope = bench_pope(args.answers)
    print(
        f"POPE metrics on {args.answers:,} answers (bench/bench_scoring.py): ours {pope['in_memory']['ours_s']:.3f} s "
        f"vs the official script's logic {pope['in_memory']['official_s']:.2f} s (x{pope['in_memory']['speedup']}); "
        "full 1M-answer + CHAIR run: python bench/bench_scoring.py"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
