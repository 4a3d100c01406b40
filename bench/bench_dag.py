"""Time `snakemake -n` (DAG construction) for a 100,000-scene ODE release; target < 30 s on a laptop.

Shards are static wildcards, so the DAG grows with the shard counts, not with the number of scenes or images:
this bench checks that claim at paper-plus scale. Nothing is built (dry run), so no model is needed.

    python bench/bench_dag.py [--scenes 100000] [--image-shards 100] [--answer-shards 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DISTRIBUTIONS = ("standard", "long_tail", "random", "fictional")


def bench_config(scenes: int, image_shards: int, answer_shards: int) -> dict:
    per_list = scenes // (len(DISTRIBUTIONS) * 2)
    return {
        "release": "bench-dag",
        "shards": {"images": image_shards, "answers": answer_shards},
        "ode": {"sampling": {"sizes": {d: {"entity_entity": per_list, "entity_environment": per_list}
                                       for d in DISTRIBUTIONS}}},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenes", type=int, default=100_000)
    ap.add_argument("--image-shards", type=int, default=100)
    ap.add_argument("--answer-shards", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        overlay = Path(tmp) / "bench.yaml"
        overlay.write_text(yaml.safe_dump(bench_config(args.scenes, args.image_shards, args.answer_shards)))
        cmd = [sys.executable, "-m", "snakemake", "-n", "--nolock", "--cores", "2", "--configfile", "config.yaml",
               str(overlay), "--quiet", "rules"]
        times, jobs = [], None
        for _ in range(args.repeat):
            start = time.perf_counter()
            proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
            times.append(time.perf_counter() - start)
            if proc.returncode != 0:
                print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n", file=sys.stderr)
                return proc.returncode
            match = re.search(r"^total\s+(\d+)", proc.stdout + proc.stderr, re.M)
            jobs = int(match.group(1)) if match else None
    print(f"snakemake -n, {args.scenes:,} scenes, {args.image_shards} image shards, {args.answer_shards} answer "
          f"shards: {jobs} jobs; best {min(times):.2f} s, median {sorted(times)[len(times) // 2]:.2f} s "
          f"over {args.repeat} runs (target < 30 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
