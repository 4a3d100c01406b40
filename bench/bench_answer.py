"""Throughput of the answer stage's backends on this machine: requests per second by batch size and torch threads.

Runs the default models under test (tiny random SmolVLM stand-in, blind SmolLM2-135M, co-occurrence prior is not
worth timing) on synthetic yes/no and generative requests, through the same backend classes the answer rule uses.
Use it to size `answer.batch_size`, `shards.answers` and the rule's runtime; speed is never asserted in tests.

    python bench/bench_answer.py [--requests 16] [--batch 1 4 8 16] [--threads 1 2] [--out bench_answer.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from PIL import Image

from halluflow.devices import set_threads
from halluflow.backends.base import VLMRequest
from halluflow.backends.llm import DEFAULT_LLM_DIR
from halluflow.backends.transformers_vlm import build_tiny_smolvlm
from halluflow.registry import create
from halluflow.standins import build_standin, builder_kinds, register_builder


def requests(n: int, image: str | None) -> list[VLMRequest]:
    objects = ["dog", "cat", "tree", "car", "egg", "lamp", "sky", "chair"]
    return [VLMRequest(str(i), f"Is there a {objects[i % len(objects)]} in the picture? Answer yes or no.", image)
            for i in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 4, 8, 16])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--max-new-tokens", type=int, default=6)
    ap.add_argument("--llm", default=DEFAULT_LLM_DIR, help="blind model folder (default: the converted SmolLM2)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if "smolvlm" not in builder_kinds():
            register_builder("smolvlm", build_tiny_smolvlm)
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
                    backend.answer(reqs[:1], max_new_tokens=1)  # warm-up
                    start = time.perf_counter()
                    backend.answer(reqs, max_new_tokens=args.max_new_tokens)
                    seconds = time.perf_counter() - start
                    row = {"model": name, "threads": threads, "batch": batch, "requests": args.requests,
                           "seconds": round(seconds, 3), "requests_per_s": round(args.requests / seconds, 2)}
                    rows.append(row)
                    print(json.dumps(row))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
