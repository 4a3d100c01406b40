"""Scoring speed: our vectorised POPE / CHAIR / AMBER scorers vs plain ports of the official scripts, same run.

POPE: 1,000,000 answers (LLaVA-style verbose answers + short ones) against POPE-style labels, (a) from in-memory
lists (best of 3), (b) end to end from JSONL files in this process (JSON parsing dominates both sides there) and
(c) whole processes, `halluflow score pope` vs `python bench/official_ports.py pope` (evaluate.py), median of 3
interleaved runs with the peak memory of each.
CHAIR: 100,000 captions (one run each: the port takes ~40 s) and AMBER: 100,000 responses (median of --runs
interleaved runs), each whole-process from files: `halluflow score chair|amber` vs `python bench/official_ports.py
chair|amber` (the ports, with nltk's tokenizer and pattern's singularize as the originals use), each in its own
process, imports included, with the peak memory of each side. "ours" is the installed `halluflow` script, as a user
runs it. Prints the speed-ups and asserts the numbers are identical; speed itself is never asserted.

    python bench/bench_scoring.py [--pope 1000000] [--chair 100000] [--amber 100000] [--runs 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from official_ports import pope_evaluate  # noqa: E402

from halluflow.io import dumps_json  # noqa: E402
from halluflow.metrics.pope import pope_metrics, score_files  # noqa: E402

BENCH = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("HALLUFLOW_SHARED", BENCH.parents[1] / "shared"))

OBJECTS = [
    "dog",
    "cat",
    "person",
    "car",
    "chair",
    "dining table",
    "cup",
    "bottle",
    "bench",
    "traffic light",
    "umbrella",
    "handbag",
    "tie",
    "sink",
    "toilet",
    "pizza",
    "cake",
    "bed",
    "laptop",
    "clock",
]
TEMPLATES_YES = [
    "Yes, there is a {o} in the image.",
    "Yes",
    "yes",
    "Yes.",
    "There is a {o} in the image.",
    "Yes, a {o} is visible, but it is not in focus.",
]
TEMPLATES_NO = [
    "No, there is no {o} in the image.",
    "No",
    "no",
    "No.",
    "There is not a {o} in the image.",
    "I do not see a {o}.",
]
FILLER = [
    "a",
    "the",
    "with",
    "on",
    "near",
    "of",
    "and",
    "is",
    "two",
    "standing",
    "sitting",
    "large",
    "small",
    "next",
    "to",
    "in",
    "front",
    "white",
    "red",
    "some",
    ".",
    ",",
]
CAPTION_WORDS = [
    "man",
    "men",
    "woman",
    "people",
    "dog",
    "dogs",
    "cat",
    "cats",
    "car",
    "cars",
    "bus",
    "buses",
    "pizza",
    "pizzas",
    "table",
    "tables",
    "chair",
    "chairs",
    "toilet",
    "seat",
    "hot",
    "wine",
    "glass",
    "glasses",
    "teddy",
    "bear",
    "bears",
    "baby",
    "elephant",
    "giraffes",
    "zebra",
    "kite",
    "kites",
    "surfboard",
    "skis",
    "bench",
    "benches",
    "clock",
    "umbrella",
    "sandwich",
    "sandwiches",
    "cup",
    "knives",
    "fork",
    "spoon",
    "bowl",
    "bananas",
    "apple",
    "oranges",
    "broccoli",
    "laptop",
    "phone",
    "cell",
    "train",
    "track",
    "passenger",
    "plate",
    "home",
    "stop",
    "sign",
    "traffic",
    "light",
]
COCO = [
    "person",
    "dog",
    "cat",
    "car",
    "bus",
    "pizza",
    "dining table",
    "chair",
    "toilet",
    "wine glass",
    "teddy bear",
    "elephant",
    "giraffe",
    "zebra",
    "kite",
    "surfboard",
    "skis",
    "bench",
    "clock",
    "umbrella",
    "sandwich",
    "cup",
    "knife",
    "fork",
    "spoon",
    "bowl",
    "banana",
    "apple",
    "orange",
    "broccoli",
    "laptop",
    "cell phone",
    "train",
]


def timed(fn, *args, **kwargs):
    """(result, wall seconds, CPU seconds of all threads). On a shared, loaded machine the CPU time is the
    steadier measure of work; both are reported."""
    t, c = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t, time.process_time() - c


def _side(official, ours) -> dict:
    return {
        "official_s": round(official[0], 3),
        "ours_s": round(ours[0], 3),
        "speedup": round(official[0] / ours[0], 1),
        "official_cpu_s": round(official[1], 3),
        "ours_cpu_s": round(ours[1], 3),
        "cpu_speedup": round(official[1] / ours[1], 1),
    }


def _fmt(name: str, r: dict) -> str:
    peak = f"  peak RSS {r['official_max_rss_mib']} vs {r['ours_max_rss_mib']} MiB" if "ours_max_rss_mib" in r else ""
    return (
        f"{name}: official {r['official_s']:.2f}s  ours {r['ours_s']:.3f}s  x{r['speedup']} wall"
        f"  (CPU {r['official_cpu_s']:.2f}s vs {r['ours_cpu_s']:.3f}s  x{r['cpu_speedup']}){peak}"
    )


def _both_sides(official_cmd: list[str], ours_cmd: list[str], runs: int) -> tuple[dict, dict, dict]:
    """`runs` whole-process runs of each side, interleaved so both see the same machine load: (the official side's
    printed JSON, ours, timings) with the median wall and CPU seconds (_side) and the largest peak RSS of each side
    (a forked helper's counts too: GNU time reports the largest of a process and the children it waited for)."""
    side: dict[str, list] = {"official": [], "ours": []}
    for _ in range(runs):
        side["official"].append(_process(official_cmd))
        side["ours"].append(_process(ours_cmd))
    median = {k: [statistics.median(r[i] for r in v) for i in (1, 2)] for k, v in side.items()}
    peaks = {f"{k}_max_rss_mib": max(r[3] for r in v) for k, v in side.items()}
    return side["official"][0][0], side["ours"][0][0], peaks | _side(median["official"], median["ours"])


def pope_data(n: int, seed: int = 0):
    rnd = random.Random(seed)
    labels, answers = [], []
    for _ in range(n):
        lab = rnd.choice(("yes", "no"))
        agree = rnd.random() < 0.85
        said = lab if agree else ("no" if lab == "yes" else "yes")
        tpl = rnd.choice(TEMPLATES_YES if said == "yes" else TEMPLATES_NO)
        labels.append(lab)
        answers.append(tpl.format(o=rnd.choice(OBJECTS)))
    return answers, labels


def bench_pope(n: int) -> dict:
    answers, labels = pope_data(n)
    # in memory: best of 3 runs each (both take seconds at most); evaluate.py overwrites its answer dicts, so
    # every official run gets fresh ones, built outside the timing
    runs_ref, runs_ours = [], []
    a_series, l_series = pl.Series(answers, dtype=pl.String), pl.Series(labels, dtype=pl.String)
    for _ in range(3):
        fresh = [{"answer": a} for a in answers]
        ref, *t = timed(pope_evaluate, fresh, labels)
        runs_ref.append(t)
        ours, *t = timed(pope_metrics, a_series, l_series)
        runs_ours.append(t)
    t_ref = [min(r[0] for r in runs_ref), min(r[1] for r in runs_ref)]
    t_ours = [min(r[0] for r in runs_ours), min(r[1] for r in runs_ours)]
    keys = ("accuracy", "precision", "recall", "f1", "yes_ratio", "tp", "fp", "tn", "fn")
    assert all(ours[k] == ref[k] for k in keys), ({k: ours[k] for k in keys}, ref)

    with tempfile.TemporaryDirectory() as tmp:
        a_path, l_path = Path(tmp) / "answers.jsonl", Path(tmp) / "labels.json"
        with open(a_path, "w") as fa, open(l_path, "w") as fl:
            for i, (a, lab) in enumerate(zip(answers, labels)):
                fa.write(json.dumps({"question_id": i, "answer": a}) + "\n")
                fl.write(
                    json.dumps({"question_id": i, "image": "x.jpg", "text": "Is there a dog?", "label": lab}) + "\n"
                )

        def official_from_files():
            # evaluate.py: json.loads per line, answers and labels zipped by position
            ans = [json.loads(q) for q in open(a_path)]
            lab = [json.loads(q)["label"] for q in open(l_path)]
            return pope_evaluate(ans, lab)

        ref_f, *t_ref_f = timed(official_from_files)
        ours_f, *t_ours_f = timed(score_files, a_path, l_path)
    assert all(ours_f[k] == ref_f[k] for k in keys)
    return {
        "n": n,
        "identical": True,
        "metrics": {k: ours[k] for k in keys},
        "in_memory": _side(t_ref, t_ours),
        "from_files": _side(t_ref_f, t_ours_f),
    }


def _process(cmd: list[str]) -> tuple[dict, float, float, int]:
    """(printed JSON, wall seconds, CPU seconds of the child, its peak RSS in MiB) of one whole process. GNU time
    reports the peak: a child forked from this (large) process would otherwise count this process's pages."""
    before = os.times()
    t = time.perf_counter()
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, *cmd], capture_output=True, text=True)
        peak_kb = int((rss.read().split() or ["0"])[-1])
    wall = time.perf_counter() - t
    after = os.times()
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd[:4])} failed:\n{proc.stderr[-2000:]}")
    return (
        json.loads(proc.stdout),
        wall,
        (after.children_user - before.children_user) + (after.children_system - before.children_system),
        peak_kb // 1024,
    )


# what a user runs: the installed `halluflow` script (halluflow.cli:entry, with its fast start and exit for `score`)
_SCRIPT = Path(sys.executable).with_name("halluflow")
_OURS = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-c", "from halluflow.cli import entry; entry()"]
_PORTS = [sys.executable, str(BENCH / "official_ports.py")]


def bench_pope_processes(n: int, tmp: Path, runs: int = 3) -> dict:
    """Whole-process POPE scoring of n answers from JSONL: `halluflow score pope` vs the official evaluate.py (the
    port run as a script), runs interleaved so both sides see the same machine load; medians and peak memory."""
    answers, labels = pope_data(n, seed=1)
    a_path, l_path = tmp / "pope_answers.jsonl", tmp / "pope_labels.jsonl"
    with open(a_path, "w") as fa, open(l_path, "w") as fl:
        for i, (a, lab) in enumerate(zip(answers, labels)):
            fa.write(json.dumps({"question_id": i, "answer": a}) + "\n")
            fl.write(json.dumps({"question_id": i, "image": "x.jpg", "text": "Is there a dog?", "label": lab}) + "\n")
    del answers, labels
    ref, ours, timings = _both_sides(
        _PORTS + ["pope", "--answers", str(a_path), "--labels", str(l_path)],
        _OURS + ["score", "pope", "--answers", str(a_path), "--labels", str(l_path)],
        runs,
    )
    keys = ("accuracy", "precision", "recall", "f1", "yes_ratio", "tp", "fp", "tn", "fn")
    assert all(ours[k] == ref[k] for k in keys), ({k: ours[k] for k in keys}, ref)
    return {"n": n, "runs": runs, "identical": True, "metrics": {k: ours[k] for k in keys}} | timings


def bench_chair(n: int, synonyms_path: Path, tmp: Path, seed: int = 0) -> dict:
    rnd = random.Random(seed)
    n_images = max(1, n // 5)
    cap_path, truth_path = tmp / "captions.jsonl", tmp / "truth.jsonl"
    with open(truth_path, "w") as fh:
        for i in range(n_images):
            fh.write(json.dumps({"image_id": i, "objects": sorted(set(rnd.sample(COCO, rnd.randint(1, 6))))}) + "\n")
    with open(cap_path, "w") as fh:
        for i in range(n):
            words = [
                rnd.choice(CAPTION_WORDS) if rnd.random() < 0.3 else rnd.choice(FILLER)
                for _ in range(rnd.randint(6, 18))
            ]
            fh.write(json.dumps({"image_id": i % n_images, "caption": " ".join(words).capitalize() + "."}) + "\n")
    ref, ours, timings = _both_sides(
        _PORTS + ["chair", "--captions", str(cap_path), "--truth", str(truth_path), "--synonyms", str(synonyms_path)],
        _OURS + ["score", "chair", "--captions", str(cap_path), "--truth", str(truth_path)],
        runs=1,
    )
    assert {k: ours[k] for k in ref} == ref and ours["n_failed"] == 0, (ours, ref)
    return {"n": n, "identical": True, "metrics": ours} | timings


def bench_amber(n: int, amber_dir: Path, tmp: Path, seed: int = 0, runs: int = 1) -> dict:
    """AMBER has 15,220 items: the bench folder repeats them (new ids) until `n` responses fit. `runs` interleaved
    whole-process runs per side; medians."""
    rnd = random.Random(seed)
    base = json.loads((amber_dir / "annotations.json").read_text())
    relation = json.loads((amber_dir / "relation.json").read_text())
    vocab = sorted(set(relation) | {w for ws in relation.values() for w in ws})
    ann_dir = tmp / "amber"
    ann_dir.mkdir()
    annotations = [dict(base[i % len(base)], id=i + 1) for i in range(n)]
    (ann_dir / "annotations.json").write_text(json.dumps(annotations))
    for name in ("relation.json", "safe_words.txt", "metrics.txt"):
        (ann_dir / name).write_bytes((amber_dir / name).read_bytes())
    responses = []
    for a in annotations:
        if a["type"] == "generative":
            words = rnd.sample(a["truth"], min(3, len(a["truth"])))
            words += [w + rnd.choice(["", "s"]) for w in rnd.sample(vocab, 4)]
            words += rnd.sample(FILLER, 8)
            rnd.shuffle(words)
            text = "In this image, " + " ".join(words) + "."
        else:
            text = rnd.choice(["Yes", "No", "No", "Yes", "yes", "No."])
        responses.append({"id": a["id"], "response": text})
    resp_path = tmp / "responses.json"
    resp_path.write_text(json.dumps(responses))
    ref, ours, timings = _both_sides(
        _PORTS + ["amber", "--responses", str(resp_path), "--annotations", str(ann_dir)],
        _OURS + ["score", "amber", "--responses", str(resp_path), "--annotations", str(ann_dir)],
        runs,
    )
    # a section with no items has no numbers in halluflow (the original prints 0.0 there): compared where n > 0
    scored = [section for section in ref if ours[section].get("n", 1) > 0]
    got = {section: {k: ours[section][k] for k in ref[section]} for section in scored}
    assert got == {section: ref[section] for section in scored}, (got, ref)
    n_gen = sum(a["type"] == "generative" for a in annotations)
    return {
        "n": n,
        "runs": runs,
        "n_generative": n_gen,
        "identical": True,
        "noun_extractor": ours.get("noun_extractor"),
        "metrics": ref,
    } | timings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pope", type=int, default=1_000_000, help="POPE answers (default 1,000,000; 0 skips)")
    ap.add_argument("--chair", type=int, default=100_000, help="CHAIR captions (default 100,000; 0 skips)")
    ap.add_argument("--amber", type=int, default=100_000, help="AMBER responses (default 100,000; 0 skips)")
    ap.add_argument(
        "--synonyms",
        type=Path,
        default=SHARED / "data" / "chair-lisaanne-hallucination" / "synonyms.txt",
        help="CHAIR's synonyms.txt for the port (ours uses the list shipped with halluflow)",
    )
    ap.add_argument("--amber-data", type=Path, default=SHARED / "data" / "amber" / "data", help="AMBER's data folder")
    ap.add_argument("--runs", type=int, default=3, help="whole-process POPE / AMBER runs per side (median; default 3)")
    ap.add_argument("--out", help="also write the results JSON here")
    args = ap.parse_args()
    result = {}
    if args.pope:
        result["pope"] = p = bench_pope(args.pope)
        print(_fmt(f"POPE {args.pope:,} answers, in memory ", p["in_memory"]), "— identical numbers", flush=True)
        print(_fmt(f"POPE {args.pope:,} answers, from files", p["from_files"]), "— identical numbers", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        if args.pope:
            result["pope_processes"] = w = bench_pope_processes(args.pope, Path(tmp), args.runs)
            print(
                _fmt(f"POPE {args.pope:,} answers, whole process (median of {w['runs']})", w),
                "— identical numbers",
                flush=True,
            )
        if args.chair and args.synonyms.exists():
            result["chair"] = c = bench_chair(args.chair, args.synonyms, Path(tmp))
            print(_fmt(f"CHAIR {args.chair:,} captions, whole process", c), "— identical numbers", flush=True)
        elif args.chair:
            print(f"CHAIR skipped: {args.synonyms} not found (pass --synonyms)")
        if args.amber and args.amber_data.exists():
            result["amber"] = a = bench_amber(args.amber, args.amber_data, Path(tmp), runs=args.runs)
            print(
                _fmt(
                    f"AMBER {args.amber:,} responses ({a['n_generative']:,} generative, nouns: "
                    f"{a['noun_extractor']}), whole process (median of {a['runs']})",
                    a,
                ),
                "— identical numbers",
                flush=True,
            )
        elif args.amber:
            print(f"AMBER skipped: {args.amber_data} not found (pass --amber-data)")
    if args.out:
        Path(args.out).write_text(dumps_json(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
