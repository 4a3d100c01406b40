"""Served models near the server's capacity: the answer stage's `openai` backend against a simulated
continuous-batching server (bench/served_sim.py, its own process), with DEFAULT settings (the adaptive window).

Each row: a server (slots, latency per request; capacity = slots / latency requests/s), the requests answered, and
  throughput / capacity, where throughput = requests answered / the wall clock of the whole `answer_shard` call
  (building the requests, the cache, GET /models, every request with its ramp-up and its tail, the cache writes
  and the parquet): everything `halluflow answer run` does after its imports;
- overloaded: a server that answers 429 to any request beyond its slots; goodput = requests ANSWERED per second /
  capacity (refusals and their retries cost time, never count), and `lost` = requests that did not end answered
  (must be 0: a refused request is retried);
- the old default (`concurrency: 4`) on the first server, for comparison;
- snakemake: a whole answer stage of the repository's Snakefile with 4 answer shards (4 jobs, run at once) against
  one server, through the shared per-server window (HALLUFLOW_SERVER_STATE, set by the workflow). Its ratio uses
  the server's busy window (the first request received to the last answer sent, clocked by the server): job
  start-up (Python imports, ~seconds per job) does not grow with the requests and is reported separately as the
  end-to-end ratio (requests / snakemake's whole wall time / capacity).

Each row asks for `--round-trips` (50) round trips' worth of requests at capacity (slots x 50): the ramp-up (about
two round trips from start_concurrency 16 to 256) and the tail (the last round trip drains) are a fixed number of
round trips, so a row's size is counted in them, not in seconds.

    python bench/bench_served.py [--round-trips 50] [--quick] [--skip-snakemake] [--out bench_served.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
SIM = Path(__file__).resolve().parent / "served_sim.py"


class SimProcess:
    """bench/served_sim.py in its own process (its CPU is not this process's GIL): base_url, stats(), reset()."""

    def __init__(self, slots: int, latency_s: float, *extra: str):
        self.slots, self.latency_s = slots, latency_s
        cmd = [sys.executable, str(SIM), "--slots", str(slots), "--latency", str(latency_s), *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"served_sim did not start: {line!r}")
        self.port = int(line.split()[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stats(self) -> dict:
        return httpx.get(f"http://127.0.0.1:{self.port}/stats", timeout=10).json()

    def reset(self) -> None:
        httpx.post(f"http://127.0.0.1:{self.port}/stats/reset", timeout=10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(10)


def queries(n: int, prefix: str = "q"):
    import polars as pl

    objects = ["dog", "cat", "tree", "car", "egg", "lamp", "sky", "chair"]
    return pl.DataFrame(
        {
            "query_id": [f"{prefix}{i:06d}" for i in range(n)],
            "question": [f"Is there a {objects[i % len(objects)]} number {i} in the picture?" for i in range(n)],
            "task": ["discriminative"] * n,
            "image": [None] * n,
        },
        schema={"query_id": pl.String, "question": pl.String, "task": pl.String, "image": pl.String},
    )


def answer_stage(sim: SimProcess, n: int, args: dict | None = None) -> dict:
    """One `answer_shard` run with the backend's defaults (plus `args`); the clock covers the whole call."""
    from halluflow.answer import ModelUnderTest, answer_shard

    spec = {
        "name": "bench",
        "backend": "openai",
        "args": {"base_url": sim.base_url, "model": "sim", "api_key_env": None, **(args or {})},
    }
    with tempfile.TemporaryDirectory() as tmp:
        model = ModelUnderTest(spec)
        sim.reset()
        cpu, start = time.process_time(), time.perf_counter()
        stats = answer_shard(queries(n), tmp, model, Path(tmp) / "cache", Path(tmp) / "a.parquet")
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu
        window = getattr(model.backend.client, "window", None)
        model.backend.client.close()
    server = sim.stats()
    capacity = sim.slots / sim.latency_s
    return {
        "requests": n,
        "answered": stats["new"],
        "lost": n - stats["new"],
        "seconds": round(seconds, 2),
        "throughput_rps": round(stats["new"] / seconds, 1),
        "capacity_rps": capacity,
        "ratio": round(stats["new"] / seconds / capacity, 3),
        "refused_429": server["rejected"],
        "peak_in_flight_at_server": server["peak_present"],
        "final_window": None if window is None else round(window.limit, 1),
        "client_cpu_ms_per_request": round(cpu / n * 1000, 3),
    }


def snakemake_stage(sim: SimProcess, n: int, shards: int = 4) -> dict:
    """The repository's Snakefile in a scratch copy: `shards` answer jobs of one served model against `sim`."""
    import yaml

    sys.path.insert(0, str(REPO / "tests"))
    from workflow_utils import copy_workflow, run_snakemake

    with tempfile.TemporaryDirectory() as tmp:
        work = copy_workflow(Path(tmp) / "wf")
        static = work / "static"
        (static / "images").mkdir(parents=True)
        from PIL import Image

        Image.new("RGB", (16, 16), (90, 140, 30)).save(static / "images" / "img.png")
        objects = ["dog", "cat", "tree", "car", "egg", "lamp", "sky", "chair"]
        lines = [
            json.dumps(
                {
                    "question_id": i,
                    "image": "img.png",
                    "text": f"Is there a {objects[i % 8]} number {i}?",
                    "label": "no",
                }
            )
            for i in range(n)
        ]
        (static / "pope.jsonl").write_text("\n".join(lines) + "\n")
        release = "bench-served"
        overlay = {
            "release": release,
            "shards": {"answers": shards},
            "models": [
                {
                    "name": "sim",
                    "backend": "openai",
                    "stand_in": False,
                    "args": {"base_url": sim.base_url, "model": "sim", "api_key_env": None},
                }
            ],
            "answer": {"source": {"kind": "pope", "path": "static/pope.jsonl", "images": "static/images"}},
            "samf": {"enabled": False, "models": None},
            "cedi": {"enabled": False, "models": None},
        }
        (work / "overlay.yaml").write_text(yaml.safe_dump(overlay))
        targets = [f"results/{release}/answers/sim/{s:03d}.parquet" for s in range(shards)]
        sim.reset()
        start = time.perf_counter()
        run_snakemake(work, *targets, "--cores", str(shards), "--configfile", "config.yaml", "overlay.yaml")
        wall = time.perf_counter() - start
        import polars as pl

        table = pl.concat([pl.read_parquet(work / t) for t in targets])
        answered = int((table["status"] == "ok").sum())
    server = sim.stats()
    capacity = sim.slots / sim.latency_s
    return {
        "requests": n,
        "shards": shards,
        "answered": answered,
        "lost": n - answered,
        "server_busy_s": round(server["busy_s"], 2),
        "snakemake_wall_s": round(wall, 2),
        "capacity_rps": capacity,
        "ratio": round(answered / server["busy_s"] / capacity, 3),
        "ratio_end_to_end": round(answered / wall / capacity, 3),
        "peak_in_flight_at_server": server["peak_present"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a quarter of the requests (a smoke run; ramp-up weighs more)")
    ap.add_argument("--skip-snakemake", action="store_true")
    ap.add_argument("--round-trips", type=float, default=50.0, help="requests per row = slots x this")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    scale = args.round_trips * (0.25 if args.quick else 1.0)
    rows = []

    def emit(row: dict) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)

    servers = [(64, 0.5, "queue"), (16, 0.25, "queue"), (64, 2.0, "queue"), (256, 1.0, "queue")]
    for slots, latency, kind in servers:
        with SimProcess(slots, latency) as sim:
            n = int(slots * scale)
            emit({"case": "defaults", "slots": slots, "latency_s": latency, "server": kind, **answer_stage(sim, n)})
            if (slots, latency) == (64, 0.5):
                emit(
                    {
                        "case": "old default (concurrency 4)",
                        "slots": slots,
                        "latency_s": latency,
                        "server": kind,
                        **answer_stage(sim, int(n / 32), {"concurrency": 4}),  # 25 round trips of 4
                    }
                )
    with SimProcess(64, 0.5, "--reject-above", "64") as sim:
        emit(
            {
                "case": "overloaded (429 past the slots)",
                "slots": 64,
                "latency_s": 0.5,
                "server": "429 past 64",
                **answer_stage(sim, int(64 * scale)),
            }
        )
    if not args.skip_snakemake:
        with SimProcess(64, 0.5) as sim:
            emit(
                {
                    "case": "snakemake, 4 answer shards",
                    "slots": 64,
                    "latency_s": 0.5,
                    "server": "queue",
                    **snakemake_stage(sim, int(64 * scale * 1.5)),
                }
            )
    print(f"load average while measuring: {os.getloadavg()} on {os.cpu_count()} cores", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
