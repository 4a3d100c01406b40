"""Training and interchange exports of an ODE release (`halluflow release export`).

ODE ("open-set dynamic evaluation", Tu et al.) argues that a regenerated benchmark also yields
hallucination-targeted fine-tuning data. This module writes a release as conversation-format training sets
(LLaVA, ShareGPT, DPO pairs from a model's hallucinated vs corrected answers) and as an lmms-eval task folder,
each with a data card. It also writes the two files that let `datasets.load_dataset(<release>)` load the release
folder itself (images as an `Image` feature, one row per query): `metadata.jsonl` and a Hugging Face dataset card
`README.md`. Only truths known by construction are used: yes/no truths, and the scene's objects for descriptions.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from ..errors import InputError
from ..io import (
    dumps_json,
    link_or_copy,
    owned_folder,
    read_json,
    read_parquet,
    safe_join,
    safe_name,
    write_json,
    write_jsonl,
    write_text,
)
from ..metrics.parsers import failed_mask
from .nouns import list_phrase

FORMATS = ("llava", "sharegpt", "dpo", "lmms-eval")
HUB_METADATA = "metadata.jsonl"
HUB_CARD = "README.md"
MANIFEST = "manifest.json"

CLI_DESCRIPTION = (
    "Write a release as training data (llava, sharegpt, dpo) or as an lmms-eval task folder. "
    "Every export holds only truths known by construction and a DATACARD.md naming its source "
    "release (and the model whose answers made the DPO pairs)."
)
CLI_EPILOG = """examples:
  halluflow release export results/ode-demo/release --format llava --out exports/llava
  halluflow release export results/ode-demo/release --format dpo \\
      --answers results/ode-demo/scores/tiny-smolvlm/answers.parquet --out exports/dpo
  halluflow release export results/ode-demo/release --format lmms-eval --out exports/lmms_eval_tasks"""


# ---------------------------------------------------------------------------------------------- release folder
def hub_metadata_rows(queries: pl.DataFrame) -> list[dict]:
    """One row per query for the `imagefolder` loader: `file_name` (the image, relative to the release) + query."""
    rows = []
    for row in queries.sort(["image_id", "query_id"]).iter_rows(named=True):
        image = row.pop("image", None) or f"images/{row['image_id']}.png"
        rows.append({"file_name": image, **row})
    return rows


def hub_card(name: str, datacard: str) -> str:
    """A Hugging Face dataset card: YAML front matter telling `datasets` which files form the `test` split."""
    header = [
        "---",
        f"pretty_name: {json.dumps(name)}",
        "task_categories:",
        "- visual-question-answering",
        "tags:",
        "- hallucination",
        "- halluflow",
        "- ode",
        "configs:",
        "- config_name: default",
        "  data_files:",
        "  - split: test",
        "    path:",
        f"    - {HUB_METADATA}",
        "    - images/*.png",
        "---",
        "",
        'Load with `datasets.load_dataset("<this folder>")`: one row per query, the image as an `Image` feature.',
        "",
    ]
    return "\n".join(header) + datacard


def write_hub_files(folder: str | Path, name: str, queries: pl.DataFrame, datacard: str) -> None:
    """Write metadata.jsonl and README.md into a release folder being built (both are listed in its manifest)."""
    folder = Path(folder)
    write_jsonl(folder / HUB_METADATA, hub_metadata_rows(queries))
    write_text(folder / HUB_CARD, hub_card(name, datacard))


# ---------------------------------------------------------------------------------------------- conversations
def _yes_no(truth: str) -> str:
    return "Yes." if truth == "yes" else "No."


def description(objects: list[str]) -> str:
    """A description that names exactly the verified objects of the scene (nothing else is known to be there)."""
    objects = [o for o in objects if o]
    # the question templates' noun lexicon words it: "a drawing and an egg", "a dog and grass"
    return f"The image shows {list_phrase(objects)}." if objects else ""


def _read_release(release_dir: Path) -> tuple[pl.DataFrame, dict]:
    if not (release_dir / "queries.parquet").is_file():
        raise InputError(f"{release_dir}: not a release folder (queries.parquet missing)")
    manifest = read_json(release_dir / MANIFEST) if (release_dir / MANIFEST).is_file() else {}
    queries = read_parquet(release_dir / "queries.parquet")
    missing = {"query_id", "image_id", "question", "truth", "task", "objects"} - set(queries.columns)
    if missing:
        raise InputError(f"{release_dir / 'queries.parquet'}: lacks column(s) {sorted(missing)}")
    return queries.sort(["image_id", "query_id"]), manifest


def _turns(queries: pl.DataFrame) -> dict[str, list[tuple[str, str]]]:
    """(question, verified answer) turns per image, in query order; open questions answered by the description."""
    turns: dict[str, list[tuple[str, str]]] = {}
    for row in queries.iter_rows(named=True):
        if row["truth"] in ("yes", "no"):
            answer = _yes_no(row["truth"])
        elif row["task"] == "generative":
            answer = description(list(row["objects"] or []))
        else:
            continue
        if answer:
            turns.setdefault(row["image_id"], []).append((row["question"], answer))
    return turns


def _image_path(image_id: str) -> str:
    return f"images/{image_id}.png"


def _link_images(release_dir: Path, out: Path, image_ids: list[str]) -> None:
    """Hard-link (or copy) the images an export refers to, so the export folder stands on its own."""
    for image_id in image_ids:
        rel = _image_path(image_id)
        src = safe_join(release_dir, rel)
        dst = safe_join(out, rel)  # an image id from the table must not name a place outside --out
        if dst.exists():
            continue
        link_or_copy(src, dst)


def llava_records(release_dir: Path, queries: pl.DataFrame) -> list[dict]:
    records = []
    for image_id, turns in sorted(_turns(queries).items()):
        conversation = []
        for i, (question, answer) in enumerate(turns):
            conversation.append({"from": "human", "value": f"<image>\n{question}" if i == 0 else question})
            conversation.append({"from": "gpt", "value": answer})
        records.append({"id": image_id, "image": _image_path(image_id), "conversations": conversation})
    return records


def sharegpt_records(release_dir: Path, queries: pl.DataFrame) -> list[dict]:
    records = []
    for image_id, turns in sorted(_turns(queries).items()):
        messages = []
        for i, (question, answer) in enumerate(turns):
            messages.append({"role": "user", "content": f"<image>{question}" if i == 0 else question})
            messages.append({"role": "assistant", "content": answer})
        records.append({"id": image_id, "messages": messages, "images": [_image_path(image_id)]})
    return records


def dpo_records(release_dir: Path, queries: pl.DataFrame, answers: pl.DataFrame) -> list[dict]:
    """Preference pairs: the verified answer is chosen, the model's hallucinated answer rejected.

    Yes/no: the model's parsed answer contradicts the truth. Descriptions: the caption named an object that is not
    in the scene. Failed, empty or unparsed answers make no pair (a failure says nothing about the model).
    """
    need = {"query_id", "answer"}
    if not need <= set(answers.columns):
        raise InputError(f"answers table lacks column(s) {sorted(need - set(answers.columns))}")
    cols = [
        c
        for c in ("query_id", "answer", "status", "parsed", "correct", "hallucinated", "model")
        if c in answers.columns
    ]
    joined = queries.join(answers.select(cols), on="query_id", how="inner", suffix="_model")
    # the shared failed-answer rule: a failed request or a blank answer makes no pair
    joined = joined.filter(~failed_mask(joined["answer"], joined["status"] if "status" in joined.columns else None))
    records = []
    for row in joined.sort("query_id").iter_rows(named=True):
        text = row["answer"].strip()
        if row["truth"] in ("yes", "no"):
            if row.get("parsed") not in ("yes", "no") or row["parsed"] == row["truth"]:
                continue
            chosen = _yes_no(row["truth"])
        elif row["task"] == "generative":
            if not row.get("hallucinated"):
                continue
            chosen = description(list(row["objects"] or []))
        else:
            continue
        if chosen:
            records.append(
                {
                    "id": row["query_id"],
                    "prompt": f"<image>{row['question']}",
                    "chosen": chosen,
                    "rejected": text,
                    "images": [_image_path(row["image_id"])],
                    "model": row.get("model"),
                }
            )
    return records


# ---------------------------------------------------------------------------------------------- lmms-eval
LMMS_EVAL_UTILS = '''"""lmms-eval task functions for a halluflow ODE release (written by `halluflow release export`).

Yes/no questions only; the answer is read as POPE's evaluate.py does (first sentence; "no"/"not" -> no, else
yes) and an empty answer counts as unknown, not as a prediction. Aggregation: accuracy, precision, recall, F1
with "yes" as the positive class over the answers that could be read.
"""


def process_docs(dataset):
    return dataset.filter(lambda doc: doc["truth"] in ("yes", "no"))


def doc_to_visual(doc):
    return [doc["image"].convert("RGB")]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    kwargs = lmms_eval_specific_kwargs or {}
    return f"{kwargs.get('pre_prompt', '')}{doc['question']}{kwargs.get('post_prompt', '')}"


def parse_yes_no(text):
    text = (text or "").strip()
    if not text:
        return None
    first = text.split(".")[0].replace(",", " ").lower().split()
    return "no" if ("no" in first or "not" in first) else "yes"


def process_results(doc, results):
    pred = parse_yes_no(results[0] if results else "")
    item = {"truth": doc["truth"], "pred": pred, "query_type": doc.get("query_type"),
            "distribution": doc.get("distribution")}
    return {name: item for name in ("ode_accuracy", "ode_precision", "ode_recall", "ode_f1")}


def _counts(items):
    read = [i for i in items if i["pred"] is not None]
    tp = sum(i["pred"] == "yes" and i["truth"] == "yes" for i in read)
    fp = sum(i["pred"] == "yes" and i["truth"] == "no" for i in read)
    tn = sum(i["pred"] == "no" and i["truth"] == "no" for i in read)
    fn = sum(i["pred"] == "no" and i["truth"] == "yes" for i in read)
    return tp, fp, tn, fn


def aggregate_accuracy(items):
    tp, fp, tn, fn = _counts(items)
    n = tp + fp + tn + fn
    return (tp + tn) / n if n else float("nan")


def aggregate_precision(items):
    tp, fp, _, _ = _counts(items)
    return tp / (tp + fp) if tp + fp else float("nan")


def aggregate_recall(items):
    tp, _, _, fn = _counts(items)
    return tp / (tp + fn) if tp + fn else float("nan")


def aggregate_f1(items):
    p, r = aggregate_precision(items), aggregate_recall(items)
    return 2 * p * r / (p + r) if p + r else float("nan")
'''


def lmms_eval_yaml(task: str, release_dir: Path, max_new_tokens: int = 16) -> str:
    metrics = "\n".join(
        f"  - metric: ode_{m}\n    aggregation: !function utils.aggregate_{m}\n    higher_is_better: true"
        for m in ("accuracy", "precision", "recall", "f1")
    )
    return (
        f"# lmms-eval task for the halluflow release at {release_dir} (yes/no questions).\n"
        f"# Run: python -m lmms_eval --model <model> --tasks {task} --include_path <this folder's parent>\n"
        f"task: {task}\n"
        f"dataset_path: {json.dumps(str(release_dir))}\n"
        "test_split: test\n"
        "output_type: generate_until\n"
        "process_docs: !function utils.process_docs\n"
        "doc_to_visual: !function utils.doc_to_visual\n"
        "doc_to_text: !function utils.doc_to_text\n"
        "doc_to_target: truth\n"
        "generation_kwargs:\n"
        f"  max_new_tokens: {max_new_tokens}\n"
        "  temperature: 0\n"
        "  do_sample: false\n"
        "process_results: !function utils.process_results\n"
        f"metric_list:\n{metrics}\n"
        "lmms_eval_specific_kwargs:\n"
        "  default:\n"
        '    pre_prompt: ""\n'
        '    post_prompt: "\\nAnswer the question using a single word or phrase."\n'
    )


# ---------------------------------------------------------------------------------------------- entry point
def _export_card(fmt: str, release_dir: Path, manifest: dict, n_records: int, answers_path: str | None) -> str:
    stand_in = bool(manifest.get("stand_ins_used"))
    lines = [f"# Export: {fmt}", ""]
    if stand_in:
        lines += [
            "> **WARNING: the source release was made with randomly initialised STAND-IN models.** Its images",
            "> are noise; do not train on this export.",
            "",
        ]
    lines += [
        f"- source release: `{manifest.get('release', release_dir.name)}` ({release_dir})",
        f"- source manifest sha256 of queries.parquet: "
        f"`{(manifest.get('files') or {}).get('queries.parquet', {}).get('sha256')}`",
        f"- records: {n_records}",
    ]
    if answers_path:
        lines.append(f"- preference pairs from the answers in `{answers_path}` (failed/unread answers excluded)")
    lines += [
        "",
        "Truths are known by construction: yes/no truths of the release's questions and, for descriptions,",
        "exactly the scene's objects. Made by `halluflow release export`.",
        "",
    ]
    return "\n".join(lines)


def export_release(
    release_dir: str | Path, fmt: str, out: str | Path, *, answers: str | Path | None = None, task: str | None = None
) -> dict:
    """Write one export format of a release into `out`; returns {format, records, files}."""
    release_dir = Path(release_dir).resolve()
    out = Path(out)
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    queries, manifest = _read_release(release_dir)
    if fmt == "dpo" and answers is None:
        raise InputError("--format dpo needs --answers (a model's scores/<model>/answers.parquet)")
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a folder")
    resolved = out.resolve()
    if resolved == release_dir or release_dir in resolved.parents:
        raise InputError(f"--out {out}: inside the release {release_dir}; an export must not change its source release")
    if fmt == "lmms-eval":
        # The task names a folder under --out: one plain name ("../../x" from --task or the manifest is refused).
        if task is not None:
            safe_name(task, "--task")
        else:
            release = manifest.get("release", release_dir.parent.name)
            task = f"halluflow_{safe_name(str(release), f'{release_dir / MANIFEST}: release name')}".replace("-", "_")
    out.mkdir(parents=True, exist_ok=True)
    with owned_folder(out):
        return _write_export(release_dir, fmt, out, queries, manifest, answers, task)


def _write_export(
    release_dir: Path, fmt: str, out: Path, queries: pl.DataFrame, manifest: dict, answers, task: str | None
) -> dict:
    files: list[str] = []
    if fmt == "lmms-eval":
        folder = out / task
        write_text(folder / f"{task}.yaml", lmms_eval_yaml(task, release_dir))
        write_text(folder / "utils.py", LMMS_EVAL_UTILS)
        n = queries.filter(pl.col("truth").is_in(["yes", "no"])).height
        files = [f"{task}/{task}.yaml", f"{task}/utils.py"]
        card_dir = folder
    else:
        if fmt == "llava":
            records = llava_records(release_dir, queries)
        elif fmt == "sharegpt":
            records = sharegpt_records(release_dir, queries)
        else:
            records = dpo_records(release_dir, queries, read_parquet(answers))
        write_json(out / f"{fmt}.json", records)
        image_ids = sorted({Path(r["images"][0] if "images" in r else r["image"]).stem for r in records})
        _link_images(release_dir, out, image_ids)
        n = len(records)
        files = [f"{fmt}.json", *(f"images/{i}.png" for i in image_ids)]
        card_dir = out
    write_text(card_dir / "DATACARD.md", _export_card(fmt, release_dir, manifest, n, str(answers) if answers else None))
    return {"format": fmt, "records": n, "out": str(out), "files": len(files) + 1}


def configure(parser) -> None:
    parser.add_argument("release", help="release folder (holds queries.parquet, images/ and manifest.json)")
    parser.add_argument("--format", required=True, choices=FORMATS, help="what to write")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--answers", help="dpo: a model's scores/<model>/answers.parquet (parsed + hallucinated)")
    parser.add_argument("--task", help="lmms-eval: the task name (default halluflow_<release>)")


def run(args) -> int:
    result = export_release(args.release, args.format, args.out, answers=args.answers, task=args.task)
    print(dumps_json(result))
    return 0
