"""Time `snakemake -n` (DAG construction) for a 100,000-scene ODE release; target < 30 s on a laptop. Then time
make_queries on 100,000 accepted images (target < 5 s) against the per-image loop it replaced
(tests/legacy_ode_queries.py), checking that both give the same table.

Shards are static wildcards, so the DAG grows with the shard counts, not with the number of scenes or images:
this bench checks that claim at paper-plus scale. Nothing is built (dry run), so no model is needed.

    python bench/bench_dag.py [--scenes 100000] [--image-shards 100] [--answer-shards 100] [--repeat 3]
                              [--query-images 100000] [--skip-dag]
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


def dry_run_cmd(overlay: Path) -> list[str]:
    """`snakemake -n` of the default config with a size overlay, printing only the rule counts."""
    return [
        sys.executable,
        "-m",
        "snakemake",
        "-n",
        "--nolock",
        "--cores",
        "2",
        "--configfile",
        "config.yaml",
        str(overlay),
        "--quiet",
        "rules",
    ]


def bench_config(scenes: int, image_shards: int, answer_shards: int) -> dict:
    per_list = scenes // (len(DISTRIBUTIONS) * 2)
    return {
        "release": "bench-dag",
        "shards": {"images": image_shards, "answers": answer_shards},
        "ode": {
            "sampling": {
                "sizes": {d: {"entity_entity": per_list, "entity_environment": per_list} for d in DISTRIBUTIONS}
            }
        },
    }


def query_inputs(n_images: int, seed: int = 0):
    """The shipped graph, ODE's paper-size scene lists (640 scenes) and n accepted images spread over them, each
    with about a third of its detector labels (objects + top graph neighbours) detected."""
    import numpy as np
    import polars as pl

    from halluflow.ode.graph import DEFAULT_SEED_DIR, read_seed
    from halluflow.ode.queries import detector_candidates
    from halluflow.ode.sampling import sample_scenes

    nodes, edges = read_seed(DEFAULT_SEED_DIR)
    scenes = sample_scenes(
        nodes, edges, {d: {"entity_entity": 40, "entity_environment": 40} for d in DISTRIBUTIONS}, seed, variants=2
    )
    candidates = detector_candidates(scenes, nodes, edges, 4)
    rng = np.random.default_rng(seed)
    rows = scenes.select("scene_id", "object_a", "object_b").rows()
    ids, scene_ids, detected = [], [], []
    for i in range(n_images):
        scene_id, a, b = rows[i % len(rows)]
        ids.append(f"{scene_id}-i{i // len(rows):03d}")
        scene_ids.append(scene_id)
        detected.append(sorted(x for x in [a, b, *candidates[scene_id]] if rng.random() < 0.3))
    counts = rng.integers(1, 4, size=(n_images, 2))
    return (
        pl.DataFrame(
            {
                "image_id": ids,
                "scene_id": scene_ids,
                "detected": detected,
                "count_a": counts[:, 0],
                "count_b": counts[:, 1],
            }
        ),
        scenes,
        nodes,
        edges,
    )


def bench_queries(n_images: int, repeat: int) -> None:
    sys.path.insert(0, str(REPO / "tests"))
    from legacy_ode_queries import make_queries as per_image_loop

    from halluflow.ode.queries import make_queries

    inputs = query_inputs(n_images)
    runs = (
        ("per-image loop", per_image_loop, {}),
        ("vectorised", make_queries, {"question_style": "ode_code"}),
        ("vectorised, grammatical", make_queries, {}),
    )
    timings = {}
    for name, fn, options in runs:
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            table = fn(*inputs, seed=3, **options)
            times.append(time.perf_counter() - start)
        timings[name] = (min(times), table)
    (old, old_table), (new, new_table) = timings["per-image loop"], timings["vectorised"]
    same = old_table.equals(new_table.drop("detected"))  # the column the loop did not write
    print(
        f"make_queries, {n_images:,} images, {new_table.height:,} queries (ODE's wording): per-image loop "
        f"{old:.2f} s, vectorised {new:.2f} s, {old / new:.1f}x faster (best of {repeat}; target < 5 s); "
        f"identical tables: {same}"
    )
    grammatical, table = timings["vectorised, grammatical"]
    print(f"make_queries, grammatical questions with detector counts: {table.height:,} queries in {grammatical:.2f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenes", type=int, default=100_000)
    ap.add_argument("--image-shards", type=int, default=100)
    ap.add_argument("--answer-shards", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--query-images", type=int, default=100_000, help="0 skips the make_queries bench")
    ap.add_argument("--skip-dag", action="store_true", help="only the make_queries bench")
    args = ap.parse_args(argv)
    if not args.skip_dag:
        code = bench_dag(args)
        if code:
            return code
    if args.query_images:
        bench_queries(args.query_images, args.repeat)
    return 0


def bench_dag(args) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        overlay = Path(tmp) / "bench.yaml"
        overlay.write_text(yaml.safe_dump(bench_config(args.scenes, args.image_shards, args.answer_shards)))
        cmd = dry_run_cmd(overlay)
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
    print(
        f"snakemake -n, {args.scenes:,} scenes, {args.image_shards} image shards, {args.answer_shards} answer "
        f"shards: {jobs} jobs; best {min(times):.2f} s, median {sorted(times)[len(times) // 2]:.2f} s "
        f"over {args.repeat} runs (target < 30 s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
