"""Served models near the server's capacity: the answer stage's `openai` backend against simulated servers
(bench/served_sim.py, its own process), with DEFAULT settings (the adaptive window) against the best FIXED
concurrency a sweep finds on the same server.

Four servers (bench/served_sim.py says what each models):
- plain: 64 slots x 0.5 s, a FIFO queue past the slots (throughput flat past the knee);
- flood penalty: the same with `slowdown 1.0` (each request past the slots slows the batch by 1/64: KV-cache
  preemption and recompute; throughput FALLS past the knee);
- batch-dependent latency: an engine of 64 slots whose decode step takes 20 ms + 0.3 ms x batch, answers of a
  token-length mix (4:50,16:30,48:15,160:5 tokens:weight), so latency grows with the batch while throughput rises;
- rate-limited API: a hosted API at 6,000 requests and 120,000 tokens per minute (token buckets of one second's
  worth; 429 with Retry-After and retry-after-ms), 0.3 s + 10 ms per token, whatever the load.
Capacity: slots / latency; the engine's slots / ((a + b x slots) x mean tokens); the API's min(rpm, tpm / mean
tokens per request) / 60, for the requests actually answered. The "slots" of the API are what capacity needs in
flight (capacity x its unqueued latency, Little's law).

Each row: throughput = requests answered / the wall clock of the whole `answer_shard` call (building the requests,
the cache, GET /models, every request with its ramp-up and its tail, the cache writes and the parquet), divided by
capacity; `vs best fixed` = the default's throughput / the best throughput of `concurrency: c` for c in the sweep
(0.75, 1, 1.25, 1.5 x slots) on the same server with the same requests; peak in flight (at the server) / slots; lost
= requests that did not end answered (a refused request is retried, so 0).

`--extra` adds the earlier rows (16 slots / 0.25 s, 64 slots / 2 s, 256 slots / 1 s, 429 past 64 slots, the old
default `concurrency: 4`); without `--skip-snakemake` a whole answer stage of the repository's Snakefile with 4
answer shards (4 jobs at once) against one server, through the shared per-server window (HALLUFLOW_SERVER_STATE,
set by the workflow), its ratio over the server's busy window (first request received to last answer sent) and end
to end (snakemake's whole wall time). Requests per row: slots x `--round-trips` (50).

    python bench/bench_served.py [--round-trips 50] [--quick] [--extra] [--skip-snakemake] [--out bench_served.json]
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
        self.slots, self.latency_s = slots, latency_s  # what the server was started with
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
    capacity = server["capacity_rps"]
    slots = capacity * server["unqueued_latency_s"]
    return {
        "requests": n,
        "answered": stats["new"],
        "lost": n - stats["new"],
        "seconds": round(seconds, 2),
        "throughput_rps": round(stats["new"] / seconds, 1),
        "capacity_rps": round(capacity, 1),
        "ratio": round(stats["new"] / seconds / capacity, 3),
        "refused_429": server["rejected"],
        "peak_in_flight_at_server": server["peak_present"],
        "peak_over_slots": round(server["peak_present"] / slots, 2),
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


SERVERS = [
    ("plain", 64, 0.5, []),
    ("flood penalty", 64, 0.5, ["--slowdown", "1.0"]),
    (
        "batch-dependent latency",
        64,
        0.0,
        ["--step", "0.02", "--step-per-seq", "0.0003", "--tokens", "4:50,16:30,48:15,160:5"],
    ),
    (
        "rate-limited API",
        100000,
        0.3,
        ["--rpm", "6000", "--tpm", "120000", "--token-s", "0.01", "--tokens", "4:50,16:30,48:15,160:5"],
    ),
]
SWEEP = (0.75, 1.0, 1.25, 1.5)


def compare(name: str, slots: int, latency: float, extra: list, round_trips: float, emit) -> None:
    """The default, then the fixed sweep, on one server; the default's row gets its ratio to the best fixed."""
    with SimProcess(slots, latency, *extra) as sim:
        probe = sim.stats()  # capacity and unqueued latency for the mix's mean, before any answer
        eff = probe["capacity_rps"] * probe["unqueued_latency_s"]  # the in-flight count capacity needs
        n = int(eff * round_trips)
        default = answer_stage(sim, n)
        eff = default["capacity_rps"] * sim.stats()["unqueued_latency_s"]
        print(json.dumps({"case": "defaults (before the sweep)", "server": name, **default}), flush=True)
        fixed = []
        for factor in SWEEP:
            c = max(1, round(factor * eff))
            row = answer_stage(sim, n, {"concurrency": c})
            fixed.append(row)
            emit({"case": f"fixed concurrency {c}", "server": name, "slots": round(eff, 1), **row})
        best = max(fixed, key=lambda r: r["throughput_rps"])
        default["vs_best_fixed"] = round(default["throughput_rps"] / best["throughput_rps"], 3)
        default["best_fixed_concurrency"] = max(1, round(SWEEP[fixed.index(best)] * eff))
        emit({"case": "defaults", "server": name, "slots": round(eff, 1), **default})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a quarter of the requests (a smoke run; ramp-up weighs more)")
    ap.add_argument("--extra", action="store_true", help="also the earlier rows (other sizes, 429 past the slots)")
    ap.add_argument("--skip-snakemake", action="store_true")
    ap.add_argument("--only", default=None, help="only the server whose name contains this")
    ap.add_argument("--round-trips", type=float, default=50.0, help="requests per row = slots x this")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    scale = args.round_trips * (0.25 if args.quick else 1.0)
    rows = []

    def emit(row: dict) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)

    print(f"load average before: {os.getloadavg()} on {os.cpu_count()} cores", flush=True)
    for name, slots, latency, extra in SERVERS:
        if args.only is None or args.only in name:
            compare(name, slots, latency, extra, scale, emit)
    servers = [(64, 0.5, "queue"), (16, 0.25, "queue"), (64, 2.0, "queue"), (256, 1.0, "queue")]
    for slots, latency, kind in servers if args.extra else []:
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
    if args.extra:
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
