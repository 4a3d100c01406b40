"""GPU check: halluflow's GPU stages against the raw loop a user would write around the same model, on one GPU.

For each stage it times the halluflow job (the functions the workflow's rules call) and a hand-written loop on the
SAME model object and the same batches, and reads the peak GPU memory of each (torch.cuda.max_memory_allocated):

- synthesize: `ode.synthesis.synthesize_shard` (PNG files, resume sidecar) vs a raw `FluxPipeline` loop that saves
  the same PNGs; images/s.
- answer: `answer.answer_shard` (request cache, answer table) vs `bench_answer.raw_loop` (chat template,
  processor, `generate`, decode); answers/s.
- detect: `ode.detection.detect_shard` vs a raw processor → model → post-process loop; detections (images)/s.
- vllm: the `vllm` backend on the same requests, where vLLM is installed (answers/s, ratio to the transformers
  backend).

Ratio = halluflow rate / raw rate (1.0 = halluflow adds nothing). Each stage also says whether both produced the same
output (PNG bytes, answer texts, box counts). `bench/gpu_check.sh` builds the tiny stand-ins offline and calls this;
pass --flux/--detector/--vlm folders to measure real weights instead. Without CUDA (or with --dry) the same code
runs on the CPU at the smallest sizes, to prove the check works: those numbers are not GPU numbers, and it says so.

    python bench/gpu_check.py --flux DIR --detector DIR --vlm DIR [--dry] [--out gpu_check.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
from bench_answer import mixed_requests, raw_loop
from PIL import Image

from halluflow.answer import answer_shard
from halluflow.devices import set_threads
from halluflow.models.model import ModelUnderTest
from halluflow.models.registry import create
from halluflow.ode.detection import detect_shard
from halluflow.ode.synthesis import synthesize_shard

# Per mode: (images to synthesise, steps, side in px, images to detect, answers, new tokens, batch size, repeats)
SIZES = {
    "gpu": dict(images=32, steps=4, side=256, detect=64, answers=64, new_tokens=16, batch=8, repeats=2),
    "dry": dict(images=2, steps=1, side=32, detect=4, answers=4, new_tokens=2, batch=2, repeats=1),
}


def cuda_device(dry: bool) -> str:
    import torch

    return "cuda" if torch.cuda.is_available() and not dry else "cpu"


def timed(fn, device: str) -> tuple[float, float | None, object]:
    """(seconds, peak GPU MiB or None on the CPU, result) of one call, the GPU drained before and after."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    result = fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        return time.perf_counter() - start, torch.cuda.max_memory_allocated() / 2**20, result
    return time.perf_counter() - start, None, result


def best_of(repeats: int, fns: dict, device: str) -> dict:
    """Alternating runs of each fn; per fn the fastest (seconds, its peak, its result)."""
    best: dict = {}
    names = list(fns)
    for i in range(repeats):
        for name in names if i % 2 == 0 else names[::-1]:
            run = timed(fns[name], device)
            if name not in best or run[0] < best[name][0]:
                best[name] = run
    return best


def row(stage: str, unit: str, n: int, best: dict, identical: bool | None, ours="halluflow", theirs="raw") -> dict:
    ours_s, ours_peak, _ = best[ours]
    theirs_s, theirs_peak, _ = best[theirs]

    def mb(x):
        return None if x is None else round(x)

    return {
        "stage": stage,
        "unit": unit,
        "items": n,
        "halluflow_per_s": round(n / ours_s, 3),
        "raw_per_s": round(n / theirs_s, 3),
        "ratio": round(theirs_s / ours_s, 3),
        "halluflow_peak_mb": mb(ours_peak),
        "raw_peak_mb": mb(theirs_peak),
        "identical": identical,
    }


# ---- synthesis ---------------------------------------------------------------------------------------------------


def raw_flux(pipe, prompts: pl.DataFrame, out: Path, batch: int, size: dict) -> dict[str, bytes]:
    """The loop a user writes around FluxPipeline: batches of prompts, one seeded generator per image, PNGs saved."""
    import io

    import torch

    out.mkdir(parents=True, exist_ok=True)
    rows, pngs = prompts.to_dicts(), {}
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        with torch.inference_mode():
            images = pipe(
                prompt=[r["prompt"] for r in chunk],
                generator=[torch.Generator("cpu").manual_seed(int(r["seed"])) for r in chunk],
                num_inference_steps=size["steps"],
                guidance_scale=3.5,
                height=size["side"],
                width=size["side"],
                max_sequence_length=256,
                output_type="pil",
            ).images
        for r, im in zip(chunk, images):
            buf = io.BytesIO()
            im.save(buf, format="PNG")
            pngs[r["image_id"]] = buf.getvalue()
            (out / f"{r['image_id']}.png").write_bytes(pngs[r["image_id"]])
    return pngs


def check_synthesis(flux: str, device: str, size: dict, tmp: Path) -> dict:
    from diffusers import FluxPipeline

    n = size["images"]
    prompts = pl.DataFrame(
        {
            "image_id": [f"img{i:04d}" for i in range(n)],
            "scene_id": [f"s{i}" for i in range(n)],
            "shard": ["000"] * n,
            "prompt": [f"a photo of a dog and a {w}" for w in ("cat", "frisbee", "tree", "car") * (n // 4 + 1)][:n],
            "negative_prompt": [""] * n,
            "seed": list(range(100, 100 + n)),
        }
    )
    synth = create(
        "synthesizer",
        {
            "backend": "diffusers",
            "model": flux,
            "device": device,
            "steps": size["steps"],
            "height": size["side"],
            "width": size["side"],
            "call_args": {"max_sequence_length": 256},
        },
    )
    batch = synth.fit_batch_size(size["batch"])  # loads the pipeline; on CUDA cut to the memory budget
    pipe = synth.pipe
    if not isinstance(pipe, FluxPipeline):
        raise SystemExit(f"--flux {flux}: a {type(pipe).__name__}, not a FluxPipeline")
    runs = iter(range(10**6))

    def job():
        root = tmp / f"synth{next(runs)}"  # a fresh release folder: nothing to resume
        synthesize_shard(prompts, root, "000", synth, batch)
        return {p.stem: p.read_bytes() for p in sorted((root / "images" / "000").glob("*.png"))}

    raw_flux(pipe, prompts.head(1), tmp / "warm", 1, size)  # warm-up: kernels, allocator
    best = best_of(
        size["repeats"], {"halluflow": job, "raw": lambda: raw_flux(pipe, prompts, tmp / "raw", batch, size)}, device
    )
    out = row("synthesize", "images", n, best, best["halluflow"][2] == best["raw"][2])
    out["batch"] = batch
    out["attn_implementation"] = synth.attn_implementation
    return out


# ---- answering ---------------------------------------------------------------------------------------------------


def check_answers(vlm: str, device: str, size: dict, tmp: Path) -> tuple[dict, list, object]:
    reqs = mixed_requests(size["answers"], tmp, size["new_tokens"])
    queries = pl.DataFrame(
        {
            "query_id": [r.request_id for r in reqs],
            "image": [Path(r.image_path).name for r in reqs],
            "question": [r.prompt for r in reqs],  # already "… Answer yes or no.": the stage adds no suffix
            "task": ["discriminative"] * len(reqs),
        }
    )
    spec = {
        "name": "check",
        "backend": "transformers",
        "args": {"model": vlm, "device": device, "batch_size": size["batch"]},
    }
    model = ModelUnderTest(spec)
    settings = {
        "batch_size": size["batch"],
        "yes_no_suffix": "",
        "max_new_tokens": {"discriminative": size["new_tokens"]},
    }
    backend = model.backend
    batches = [idx for _, idx, _ in backend.batches(reqs)]  # the backend's own batches, given to both
    runs = iter(range(10**6))

    def stage():
        k = next(runs)  # a fresh cache each run: every request is answered
        answer_shard(queries, tmp, model, tmp / f"cache{k}", tmp / f"answers{k}.parquet", settings=settings)
        table = pl.read_parquet(tmp / f"answers{k}.parquet")
        return dict(zip(table["query_id"], table["answer"]))

    raw_loop(backend, reqs, batches[:1])  # warm-up
    best = best_of(size["repeats"], {"halluflow": stage, "raw": lambda: raw_loop(backend, reqs, batches)}, device)
    raw_answers = dict(zip((r.request_id for r in reqs), best["raw"][2]))
    out = row("answer", "answers", len(reqs), best, best["halluflow"][2] == raw_answers)
    out["architecture"] = type(backend.model).__name__
    out.update({k: backend.describe().extra[k] for k in ("dtype", "attn_implementation")})
    return out, reqs, backend


def check_vllm(vlm: str, reqs: list, backend, device: str, size: dict) -> dict:
    try:
        import vllm  # noqa: F401
    except ModuleNotFoundError:
        return {"stage": "vllm", "skipped": "vLLM is not installed (pip install 'halluflow[vllm]' on a GPU machine)"}
    if not device.startswith("cuda"):
        return {"stage": "vllm", "skipped": "vLLM needs a GPU"}
    engine = create("vlm", {"backend": "vllm", "model": vlm, "max_new_tokens": size["new_tokens"]})
    engine.answer(reqs[:1])  # warm-up
    best = best_of(
        size["repeats"], {"halluflow": lambda: engine.answer(reqs), "raw": lambda: backend.answer(reqs)}, device
    )
    out = row("vllm", "answers", len(reqs), best, None, theirs="raw")
    # here "raw" is the transformers backend: the ratio says how much faster the vLLM engine answers
    out["raw_is"] = "transformers backend"
    return out


# ---- detection ---------------------------------------------------------------------------------------------------


def raw_detect(detector, paths: list[Path], labels: list[list[str]], batch: int) -> list[int]:
    """Open the files, processor → model → post_process_object_detection per batch, as the OWL model cards show;
    boxes per image."""
    import torch

    processor, model = detector.processor, detector.model
    counts = []
    for start in range(0, len(paths), batch):
        ims = [Image.open(p).convert("RGB") for p in paths[start : start + batch]]
        ls = labels[start : start + batch]
        inputs = processor(text=ls, images=ims, return_tensors="pt").to(detector.device)
        inputs["pixel_values"] = inputs["pixel_values"].to(detector.dtype)
        with torch.inference_mode():
            outputs = model(**inputs)
        sizes = [(max(im.height, im.width),) * 2 for im in ims]
        results = processor.image_processor.post_process_object_detection(
            outputs, threshold=detector.box_threshold, target_sizes=sizes
        )
        counts += [min(len(r["scores"]), detector.max_detections) for r in results]
    return counts


def check_detection(owl: str, device: str, size: dict, tmp: Path) -> dict:
    n = size["detect"]
    folder = tmp / "det"
    folder.mkdir()
    paths = []
    for i in range(n):
        paths.append(f"det/{i:04d}.png")
        Image.new("RGB", (size["side"] * 2, size["side"]), (37 * i % 256, 90, 160)).save(tmp / paths[-1])
    files = [tmp / p for p in paths]
    words = ["dog", "cat", "frisbee", "tree", "car", "chair", "cup", "person"]
    labels = [[words[(i + j) % len(words)] for j in range(4)] for i in range(n)]
    table = pl.DataFrame({"image_id": [f"i{i:04d}" for i in range(n)], "path": paths})
    detector = create(
        "detector",
        {"backend": "transformers", "model": owl, "device": device, "box_threshold": 0.0, "max_detections": 20},
    )
    if detector.model_type not in detector.OWL:
        raise SystemExit(f"--detector {owl}: the raw loop is OWL's; got a {detector.model_type} model")
    batch = detector.fit_batch_size(size["batch"])
    by_id = dict(zip(table["image_id"], labels))

    def job():
        boxes = detect_shard(table, by_id, tmp, detector, batch)
        per_image = boxes.filter(pl.col("label").is_not_null()).group_by("image_id").len()
        found = dict(zip(per_image["image_id"], per_image["len"]))
        return [found.get(i, 0) for i in table["image_id"]]

    raw_detect(detector, files[:1], labels[:1], 1)  # warm-up
    best = best_of(
        size["repeats"], {"halluflow": job, "raw": lambda: raw_detect(detector, files, labels, batch)}, device
    )
    out = row("detect", "images", n, best, best["halluflow"][2] == best["raw"][2])
    out.update(batch=batch, **{k: detector.describe().extra[k] for k in ("dtype", "attn_implementation")})
    return out


# ---- report ------------------------------------------------------------------------------------------------------


def table(rows: list[dict]) -> str:
    head = f"{'stage':<11}{'halluflow/s':>12}{'raw/s':>10}{'ratio':>7}{'peak MB':>9}{'raw MB':>8}  identical"
    lines = [head, "-" * len(head)]
    for r in rows:
        if "skipped" in r:
            lines.append(f"{r['stage']:<11}skipped: {r['skipped']}")
            continue
        peak = "-" if r["halluflow_peak_mb"] is None else r["halluflow_peak_mb"]
        raw_peak = "-" if r["raw_peak_mb"] is None else r["raw_peak_mb"]
        lines.append(
            f"{r['stage']:<11}{r['halluflow_per_s']:>12}{r['raw_per_s']:>10}{r['ratio']:>7}{peak:>9}{raw_peak:>8}"
            f"  {r['identical']}"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flux", required=True, help="FLUX pipeline folder (stand-in or real weights)")
    ap.add_argument("--detector", required=True, help="OWLv2 / OWL-ViT folder")
    ap.add_argument("--vlm", required=True, help="transformers VLM folder (AutoModelForImageTextToText)")
    ap.add_argument(
        "--dry", action="store_true", help="CPU, smallest sizes: proves the check runs (automatic without CUDA)"
    )
    ap.add_argument("--stages", nargs="+", default=["synthesize", "answer", "detect", "vllm"])
    ap.add_argument("--out", help="also write the rows as JSON here")
    args = ap.parse_args(argv)

    device = cuda_device(args.dry)
    dry = args.dry or device == "cpu"
    size = SIZES["dry" if dry else "gpu"]
    set_threads(1 if dry else 4)
    if dry:
        why = "--dry" if args.dry else "no CUDA GPU is visible on this machine"
        print(f"DRY RUN on the CPU ({why}): smallest sizes, to prove the check runs. These are NOT GPU numbers;")
        print("run bench/gpu_check.sh on a CUDA machine for the GPU table.")
    else:
        import torch

        print(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="halluflow-gpu-check-") as tmp:
        tmp = Path(tmp)
        if "synthesize" in args.stages:
            rows.append(check_synthesis(args.flux, device, size, tmp))
        if "answer" in args.stages or "vllm" in args.stages:
            answer_row, reqs, backend = check_answers(args.vlm, device, size, tmp)
            if "answer" in args.stages:
                rows.append(answer_row)
            if "vllm" in args.stages:
                rows.append(check_vllm(args.vlm, reqs, backend, device, size))
        if "detect" in args.stages:
            rows.append(check_detection(args.detector, device, size, tmp))
    print(table(rows))
    print("ratio = halluflow rate / raw rate (1.0 = no overhead); peak MB = torch.cuda.max_memory_allocated")
    if dry:
        print("(dry run: CPU times of tiny stand-ins, no GPU memory; not GPU numbers)")
    result = {"device": device, "dry": dry, "sizes": size, "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
