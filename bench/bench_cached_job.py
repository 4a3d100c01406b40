"""Start-up of an answer job that has nothing to ask: every request already in the request cache.

Builds the tiny random SmolVLM stand-in (the default model under test's kind, `backend: transformers`) and a
release of --queries yes/no and generative queries over small images, runs the answer job once to fill the cache,
then runs it --repeat more times, each in a fresh Python process through halluflow.workflow.run (the entry every
rule's script calls, with a stand-in `snakemake` object), with this tree's `src/` and, with --before SRC, another
tree's (e.g. an older checkout's src/). Prints per run: wall seconds of the job, CPU seconds and peak RSS of the
process, the model libraries it imported (torch, transformers, diffusers), and the machine's load (wall time moves
with it on a shared machine; CPU time and RSS hardly do). Checks that every run wrote the bytes of the first job.

    python bench/bench_cached_job.py [--before /path/to/other/src] [--queries 85] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

JOB = """
import json, resource, sys, time, types
t0 = time.perf_counter()
from snakemake.iocontainers import InputFiles, OutputFiles, Params, Wildcards
from halluflow.workflow import run
a = json.loads(sys.argv[1])
smk = types.SimpleNamespace(
    rule="answer",
    input=InputFiles(fromdict={"source": [a["manifest"]], "weights": [], "graph": []}),
    output=OutputFiles(fromdict={"answers": a["out"]}),
    params=Params(fromdict={"spec": a["spec"], "answer": {"source": {"kind": "ode", "path": None}}, "shards": 1,
                            "cache": a["cache"]}),
    wildcards=Wildcards(fromdict={"model": a["spec"]["name"], "shard": "000"}),
    log=[a["log"]],
    threads=1,
)
stats = run(smk)
use = resource.getrusage(resource.RUSAGE_SELF)
# the peak of this process's own memory (VmHWM: ru_maxrss would carry the bench's own peak across exec)
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"stats": stats, "wall_s": round(time.perf_counter() - t0, 3), "cpu_s": round(use[0] + use[1], 2),
                  "max_rss_mb": hwm // 1024,
                  "heavy": sorted(m for m in ("torch", "transformers", "diffusers") if m in sys.modules)}))
"""


def make_release(folder: Path, n: int) -> None:
    import polars as pl
    from PIL import Image

    from halluflow.io import write_parquet

    (folder / "images").mkdir(parents=True)
    objects = ["dog", "cat", "car", "tree", "cup"]
    rows = []
    for i in range(n):
        image = f"images/img{i % 8}.png"
        if i < 8:
            Image.new("RGB", (64, 48), (30 * i, 90, 200)).save(folder / image)
        generative = i % 5 == 4
        rows.append(
            {
                "query_id": f"q{i:03d}",
                "image_id": f"img{i % 8}",
                "image": image,
                "question": "Describe the image." if generative else f"Is there a {objects[i % 5]} in the image?",
                "task": "generative" if generative else "discriminative",
            }
        )
    write_parquet(folder / "queries.parquet", pl.DataFrame(rows))
    (folder / "manifest.json").write_text("{}", encoding="utf-8")


def job(args: dict, src: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.run([sys.executable, "-c", JOB, json.dumps(args)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:] + Path(args["log"]).read_text(encoding="utf-8")[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, help="another tree's src/ to time side by side")
    ap.add_argument("--queries", type=int, default=85, help="queries in the shard (the default run's: 85)")
    ap.add_argument("--repeat", type=int, default=3)
    opts = ap.parse_args()
    from halluflow.backends.transformers_vlm import build_tiny_smolvlm
    from halluflow.models.standins import build_standin, register_builder

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_release(root / "release", opts.queries)
        register_builder("smolvlm", build_tiny_smolvlm)
        folder = build_standin("smolvlm", root / "tiny-smolvlm", seed=0)
        spec = {
            "name": "tiny-smolvlm",
            "backend": "transformers",
            "stand_in": True,
            "build": {"builder": "smolvlm"},
            "args": {"model": str(folder), "batch_size": 8},
        }
        base = {"manifest": str(root / "release" / "manifest.json"), "spec": spec, "cache": str(root / "cache")}
        first = job({**base, "out": str(root / "first.parquet"), "log": str(root / "first.log")}, REPO / "src")
        print(f"fill: {json.dumps(first)}")
        trees = [("after", REPO / "src")] + ([("before", opts.before)] if opts.before else [])
        for i in range(opts.repeat):
            for name, src in trees:
                out = root / f"{name}{i}.parquet"
                res = job({**base, "out": str(out), "log": str(root / f"{name}{i}.log")}, src)
                same = out.read_bytes() == (root / "first.parquet").read_bytes()
                load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
                print(
                    f"{name:6s} hits {res['stats']['cache_hits']}/{res['stats']['queries']}  wall {res['wall_s']:.2f} s"
                    f"  cpu {res['cpu_s']:.2f} s  max rss {res['max_rss_mb']} MB  imported {res['heavy'] or 'none'}"
                    f"  same bytes {same}  load {load}"
                )


if __name__ == "__main__":
    main()
