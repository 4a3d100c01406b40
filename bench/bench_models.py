"""Throughput of the model stages (synthesize, detect) on this machine: images per second by batch size.

Runs the real backends on the offline stand-ins by default (tiny random FLUX + OWLv2), or on real weights with
--flux / --detector (a hub id or folder). Use it to size `shards.images`, `synthesis.batch_size` and the Slurm
runtime of the GPU rules; speed is measured here and never asserted in tests.

    python bench/bench_models.py [--images 16] [--size 128] [--steps 4] [--batch 1 4 8] [--out bench_models.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from halluflow.backends.base import ImagePrompt
from halluflow.models.registry import create
from halluflow.models.standins import build_standin


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=16)
    ap.add_argument("--size", type=int, default=128, help="image height = width (multiple of 16)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--flux", default=None, help="pipeline hub id or folder (default: a tiny random FLUX)")
    ap.add_argument("--detector", default=None, help="zero-shot detector hub id or folder (default: tiny OWLv2)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", default=None, help="also write the results as JSON here")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        flux = args.flux or str(build_standin("flux", Path(tmp) / "flux"))
        detector = args.detector or str(build_standin("owlv2", Path(tmp) / "owl"))
        synth = create(
            "synthesizer",
            {
                "backend": "diffusers",
                "model": flux,
                "device": args.device,
                "steps": args.steps,
                "height": args.size,
                "width": args.size,
            },
        )
        det = create("detector", {"backend": "transformers", "model": detector, "device": args.device})
        prompts = [ImagePrompt(f"i{i}", f"a red dog and a cat, photo {i}", "", i) for i in range(args.images)]
        results = {"synthesizer": synth.describe().as_dict(), "detector": det.describe().as_dict(), "runs": []}
        synth.generate(prompts[:1])  # warm-up: first call pays for lazy init and kernel selection
        for batch in args.batch:
            start = time.perf_counter()
            images = []
            for i in range(0, len(prompts), batch):
                images += synth.generate(prompts[i : i + batch])
            synth_s = time.perf_counter() - start
            start = time.perf_counter()
            for i in range(0, len(images), batch):
                det.detect(images[i : i + batch], [["dog", "cat"]] * len(images[i : i + batch]))
            detect_s = time.perf_counter() - start
            row = {
                "batch": batch,
                "images": len(images),
                "synthesize_img_per_s": len(images) / synth_s,
                "detect_img_per_s": len(images) / detect_s,
            }
            results["runs"].append(row)
            print(json.dumps(row))
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
