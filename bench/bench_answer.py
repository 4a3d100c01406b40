"""Throughput of the answer stage's backends on this machine: requests per second by batch size and torch threads.

Local models: runs the default models under test (tiny random SmolVLM stand-in, blind SmolLM2-135M, co-occurrence
prior is not worth timing) on synthetic yes/no and generative requests, through the same backend classes the answer
rule uses. Use it to size `answer.batch_size`, `shards.answers` and the rule's runtime; speed is never asserted in
tests.

    python bench/bench_answer.py [--requests 16] [--batch 1 4 8 16] [--threads 1 2] [--out bench_answer.json]

--vs-raw instead times the transformers backend against the plain loop a user would write around the same
model (per batch: chat template, open images, processor(text, images, padding), generate, decode) on the SAME
batches, checks the answers are identical, and prints raw / backend time (1.0 = no overhead; the goal is ≥ 0.95),
plus the same loop on unsorted batches in request order (what sorting by prompt length saves):

    python bench/bench_answer.py --vs-raw [--kinds llava llava_next qwen2_vl gemma3 smolvlm] [--requests 48]

Served models (`--openai`): the answer stage's `openai` backend (answer_shard: cache, batches, retries) against the
official `openai` client driving the same server with `concurrency` threads and no batches at all, the ideal
pipeline. Prints the throughput ratio (stage / direct; 1.0 = no idle gap at batch ends) and, for comparison, the
batch-at-a-time schedule (each batch waits for its slowest request). Without --base-url a local server with
random 20-80 ms latency stands in for a real one, so the number measures scheduling, not a model.

    python bench/bench_answer.py --openai [--requests 400] [--concurrency 8] [--batch 8] \
        [--base-url http://127.0.0.1:8000/v1 --model resources/models/tiny-smolvlm]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path

from PIL import Image

from halluflow.backends.base import VLMRequest
from halluflow.devices import set_threads
from halluflow.models import LOCAL_LLM
from halluflow.models.registry import create
from halluflow.models.standins import build_standin


def requests(n: int, image: str | None) -> list[VLMRequest]:
    objects = ["dog", "cat", "tree", "car", "egg", "lamp", "sky", "chair"]
    return [
        VLMRequest(str(i), f"Is there a {objects[i % len(objects)]} in the picture? Answer yes or no.", image)
        for i in range(n)
    ]


def mixed_requests(n: int, folder: Path, max_new_tokens: int) -> list[VLMRequest]:
    """Yes/no questions of different lengths over images of different sizes and aspect ratios."""
    sizes = [(80, 60), (64, 64), (50, 190), (200, 120), (33, 47), (256, 256)]
    paths = []
    for i, size in enumerate(sizes):
        path = folder / f"mixed{i}.png"
        Image.new("RGB", size, (40 * i, 200 - 30 * i, 90)).save(path)
        paths.append(str(path))
    objects = ["dog", "red cat sitting on a wooden chair", "tree", "car parked beside a tall lamp post", "egg", "sky"]
    return [
        VLMRequest(
            str(i),
            f"Is there a {objects[i % len(objects)]} in the picture? Answer yes or no.",
            paths[(i * 5) % len(paths)],
            max_new_tokens=max_new_tokens,
        )
        for i in range(n)
    ]


def raw_loop(backend, requests: list[VLMRequest], batches: list[list[int]]) -> list[str]:
    """What a user writes around processor + model by hand, on the given batches of request indices."""
    import torch

    from halluflow.io import open_rgb

    processor, model = backend.processor, backend.model
    answers = [""] * len(requests)
    for idx in batches:
        messages = [
            [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": requests[i].prompt}]}]
            for i in idx
        ]
        texts = [processor.apply_chat_template(m, add_generation_prompt=True) for m in messages]
        images = [[open_rgb(requests[i].image_path)] for i in idx]
        enc = processor(text=texts, images=images, return_tensors="pt", padding=True)
        torch.manual_seed(0)
        with torch.inference_mode():
            out = model.generate(
                **enc,
                max_new_tokens=requests[idx[0]].max_new_tokens,
                do_sample=False,
                pad_token_id=processor.tokenizer.pad_token_id,
            )
        for i, text in zip(idx, processor.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)):
            answers[i] = text.strip()
    return answers


def paired_times(repeats: int, fns: dict) -> tuple[dict, list[dict], dict]:
    """Run each fn once per round, in alternating order; per round, process CPU time and wall time of each.

    Comparing the two runs of the same round cancels the slow drift of other jobs' load on a shared machine
    (wall time swung ±40% here under load 7 on 2 cores); with one torch thread, CPU time is what this process
    itself spent, which other jobs barely move."""
    rounds, results = [], {}
    names = list(fns)
    for i in range(repeats):
        row = {}
        for name in names if i % 2 == 0 else names[::-1]:
            c, w = time.process_time(), time.perf_counter()
            results[name] = fns[name]()
            row[name] = (time.process_time() - c, time.perf_counter() - w)
        rounds.append(row)
    best = {name: min(r[name][0] for r in rounds) for name in names}
    return best, rounds, results


def vs_raw(args) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        reqs = mixed_requests(args.requests, Path(tmp), args.max_new_tokens)
        for kind in args.kinds:
            folder = build_standin(kind, Path(tmp) / kind, seed=0)
            backend = create("vlm", {"backend": "transformers", "model": str(folder), "batch_size": args.batch[-1]})
            batches = [idx for _, idx, _ in backend.batches(reqs)]  # the backend's own batches, given to both
            backend.answer(reqs[:2]), raw_loop(backend, reqs, batches[:1])  # warm-up
            in_order = [list(range(i, min(i + args.batch[-1], len(reqs)))) for i in range(0, len(reqs), args.batch[-1])]
            best, rounds, out = paired_times(
                args.repeats,
                {
                    "raw": lambda b=backend, ix=batches: raw_loop(b, reqs, ix),
                    "backend": lambda b=backend: b.answer(reqs),
                    "raw_in_order": lambda b=backend, ix=in_order: raw_loop(b, reqs, ix),
                },
            )
            ratio_cpu = statistics.median(r["raw"][0] / r["backend"][0] for r in rounds)
            ratio_wall = statistics.median(r["raw"][1] / r["backend"][1] for r in rounds)
            row = {
                "kind": kind,
                "architecture": type(backend.model).__name__,
                "requests": len(reqs),
                "batch": args.batch[-1],
                "raw_cpu_s": round(best["raw"], 4),
                "backend_cpu_s": round(best["backend"], 4),
                "ratio_cpu_median": round(ratio_cpu, 3),
                "ratio_wall_median": round(ratio_wall, 3),
                # the same loop on batches in request order, unsorted: what sorting by length saves
                "raw_in_order_cpu_s": round(best["raw_in_order"], 4),
                "identical_outputs": [a.strip() for a in out["backend"]] == out["raw"],
            }
            rows.append(row)
            print(json.dumps(row))


def latency_server(low_ms: float = 20, high_ms: float = 80, seed: int = 0):
    """A chat-completions server on 127.0.0.1 whose replies take a random 20-80 ms (threads: requests overlap)."""
    import random
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    rng, lock = random.Random(seed), threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            with lock:
                delay = rng.uniform(low_ms, high_ms) / 1000
            time.sleep(delay)
            data = json.dumps(
                {
                    "id": "b",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": " Yes"}}
                    ],
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            data = json.dumps({"object": "list", "data": [{"id": "bench", "object": "model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/v1"


def bench_openai(args) -> list[dict]:
    from concurrent.futures import ThreadPoolExecutor

    import polars as pl

    from halluflow.answer import answer_shard
    from halluflow.models.model import ModelUnderTest

    httpd = None
    base_url, model = args.base_url, args.model
    if base_url is None:
        httpd, base_url = latency_server()
        model = "bench"
    questions = [r.prompt for r in requests(args.requests, None)]
    queries = pl.DataFrame(
        {
            "query_id": [f"q{i:05d}" for i in range(len(questions))],
            "question": questions,
            "task": ["discriminative"] * len(questions),
            "image": [None] * len(questions),
        },
        schema={"query_id": pl.String, "question": pl.String, "task": pl.String, "image": pl.String},
    )
    spec = {
        "name": "bench",
        "backend": "openai",
        "args": {
            "base_url": base_url,
            "model": model,
            "api_key_env": None,
            "concurrency": args.concurrency,
            "max_retries": 0,
            "timeout_s": 120,
        },
    }
    settings = {"yes_no_suffix": "", "batch_size": args.batch[0], "max_new_tokens": {"discriminative": 6}}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        warm = ModelUnderTest(spec)
        warm.run([dataclasses.replace(requests(1, None)[0], max_new_tokens=1)])  # connect + GET /models, unclocked

        import openai

        direct = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)

        def ask(q):
            return (
                direct.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": q}], max_tokens=6, temperature=0
                )
                .choices[0]
                .message.content
            )

        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            list(pool.map(ask, questions))
        direct_s = time.perf_counter() - start

        start = time.perf_counter()
        stats = answer_shard(
            queries, tmp, ModelUnderTest(spec), Path(tmp) / "cache", Path(tmp) / "a.parquet", settings=settings
        )
        stage_s = time.perf_counter() - start
        assert stats["new"] == len(questions), stats

        mut = ModelUnderTest(spec)  # the batch-at-a-time schedule the stage used before, for comparison
        reqs = [dataclasses.replace(r, max_new_tokens=6) for r in requests(args.requests, None)]
        start = time.perf_counter()
        for i in range(0, len(reqs), args.batch[0]):
            mut.run(reqs[i : i + args.batch[0]])
        batched_s = time.perf_counter() - start
    if httpd is not None:
        httpd.shutdown()
    n = len(questions)
    row = {
        "mode": "openai",
        "server": args.base_url or "latency 20-80 ms",
        "requests": n,
        "concurrency": args.concurrency,
        "batch": args.batch[0],
        "direct_openai_rps": round(n / direct_s, 1),
        "answer_stage_rps": round(n / stage_s, 1),
        "batch_at_a_time_rps": round(n / batched_s, 1),
        "ratio_stage_over_direct": round(direct_s / stage_s, 3),
        "ratio_batch_at_a_time_over_direct": round(direct_s / batched_s, 3),
    }
    rows.append(row)
    print(json.dumps(row))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 4, 8, 16])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--max-new-tokens", type=int, default=6)
    ap.add_argument("--llm", default=LOCAL_LLM, help="blind model folder (default: the converted SmolLM2)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--vs-raw", action="store_true", help="transformers backend vs a plain generate loop (see above)")
    ap.add_argument("--kinds", nargs="+", default=["llava", "llava_next", "qwen2_vl", "gemma3", "smolvlm"])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--openai", action="store_true", help="bench the openai backend against the openai client")
    ap.add_argument("--concurrency", type=int, default=8, help="--openai: requests in flight")
    ap.add_argument("--base-url", default=None, help="--openai: a running server (default: a local latency server)")
    ap.add_argument("--model", default=None, help="--openai: the served model id (with --base-url)")
    args = ap.parse_args()
    if args.vs_raw:
        set_threads(args.threads[0])
        rows = vs_raw(args)
        if args.out:
            Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")
        return
    if args.openai:
        if args.requests == 16:
            args.requests = 400
        if args.batch == [1, 4, 8, 16]:
            args.batch = [8]
        rows = bench_openai(args)
        if args.out:
            Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        vlm_dir = build_standin("smolvlm", Path(tmp) / "tiny-smolvlm", seed=0)
        image = str(Path(tmp) / "img.png")
        Image.new("RGB", (256, 256), (120, 30, 200)).save(image)
        for name, spec, img in [
            ("tiny-smolvlm", {"backend": "transformers", "model": str(vlm_dir)}, image),
            ("blind-smollm2", {"backend": "blind", "model": args.llm}, None),
        ]:
            for threads in args.threads:
                set_threads(threads)
                for batch in args.batch:
                    backend = create("vlm", {**spec, "batch_size": batch})
                    reqs = requests(args.requests, img)
                    backend.answer([dataclasses.replace(r, max_new_tokens=1) for r in reqs[:1]])  # warm-up
                    start = time.perf_counter()
                    backend.answer([dataclasses.replace(r, max_new_tokens=args.max_new_tokens) for r in reqs])
                    seconds = time.perf_counter() - start
                    row = {
                        "model": name,
                        "threads": threads,
                        "batch": batch,
                        "requests": args.requests,
                        "seconds": round(seconds, 3),
                        "requests_per_s": round(args.requests / seconds, 2),
                    }
                    rows.append(row)
                    print(json.dumps(row))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
