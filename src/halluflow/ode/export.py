"""Training and interchange exports of an ODE release (`halluflow release export`), and its dataset card.

ODE ("open-set dynamic evaluation", Tu et al.) argues that a regenerated benchmark also yields
hallucination-targeted fine-tuning data. This module writes a release as conversation-format training sets
(LLaVA, ShareGPT, DPO pairs from a model's hallucinated vs corrected answers, each with LLaMA-Factory's
`dataset_info.json`), as an lmms-eval task folder (one subtask per distribution and per query kind, grouped under
the release) and as a VLMEvalKit Y/N dataset (TSV + dataset class), each with a data card; `halluflow import`
(ode/imports.py) reads those tools' per-sample outputs back. It also writes the two files that let
`datasets.load_dataset(<release>)` load the release folder itself (images as an `Image` feature, one row per
query): `metadata.jsonl` and a Hugging Face dataset card `README.md` (YAML front matter, licence, citation and the
data card's prose). Only truths known by construction are used: yes/no truths, and the scene's objects for
descriptions.
"""

from __future__ import annotations

import base64
import csv
import json
import re
from pathlib import Path

import polars as pl

from ..errors import InputError
from ..io import (
    atomic_path,
    link_or_copy,
    owned_folder,
    read_bytes,
    read_parquet,
    safe_join,
    safe_name,
    write_json,
    write_jsonl,
    write_text,
)
from ..metrics.parsers import failed_mask
from .hub import CITATION, HUB_CARD, HUB_METADATA, hub_card, hub_metadata_rows, write_hub_files  # noqa: F401
from .nouns import list_phrase

FORMATS = ("llava", "sharegpt", "dpo", "lmms-eval", "vlmevalkit")
MANIFEST = "manifest.json"
POPE_LABELS = "pope_labels.jsonl"
LLAMAFACTORY_INFO = "dataset_info.json"


# ---------------------------------------------------------------------------------------------- conversations
def _yes_no(truth: str) -> str:
    return "Yes." if truth == "yes" else "No."


def description(objects: list[str]) -> str:
    """A description that names exactly the verified objects of the scene (nothing else is known to be there)."""
    objects = [o for o in objects if o]
    # the question templates' noun lexicon words it: "a drawing and an egg", "a dog and grass"
    return f"The image shows {list_phrase(objects)}." if objects else ""


def _read_release(release_dir: Path) -> tuple[pl.DataFrame, dict]:
    """The queries and manifest of a release that verifies (`halluflow release verify`): an export of altered,
    missing or unlisted files would carry them into training data or another tool's numbers, so it is refused as
    `answer run` refuses to answer such a release."""
    from .release import read_manifest, verify_release

    if not (release_dir / "queries.parquet").is_file():
        raise InputError(f"{release_dir}: not a release folder (queries.parquet missing)")
    problems = verify_release(release_dir)
    if problems:
        raise InputError(
            f"release {release_dir} fails verification ({len(problems)} problem(s), first: {problems[0]}); "
            f"run `halluflow release verify {release_dir}`"
        )
    manifest = read_manifest(release_dir)
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

The release declares its task (manifest.json `task`; TASK_HASH below): the prompt of each query kind and the
generation limits (in the YAML files) and the yes/no reader. The answers are read here by that reader, copied from
halluflow (halluflow.metrics.parsers; READER below), so this file runs without halluflow and reads every answer as
`halluflow score release` does. A blank answer (only whitespace, control or format characters) is failed; an answer
the reader cannot read (a refusal, a hedge, another language, an emoji) is unknown; both are left out of every ratio.
Aggregation: accuracy, precision, recall, F1 (with "yes" as the positive class) and yes_ratio over the answers that
were read; a ratio with a zero denominator is None (null in results.json, never NaN). Descriptions (the generative
subtask) are kept in the samples with their query_id: `halluflow import lmms-eval` brings them back for halluflow's
own CHAIR-style scoring. Every per-sample record carries the query_id and TASK_HASH, so `--log_samples` output maps
back to the release and its task.
"""

import re

{reader_source}

TASK_HASH = {task_hash!r}
READER = {reader!r}
_BLANK = re.compile({blank!r})


def is_blank(text):
    return _BLANK.fullmatch(text) is not None


def read_answer(text):
    """("failed" | "yes" | "no" | None): halluflow's failed-answer rule, then the release's reader."""
    if not isinstance(text, str) or is_blank(text):
        return "failed"
    return {reader_function}(text)


def _yes_no(dataset):
    return dataset.filter(lambda doc: doc["truth"] in ("yes", "no"))


def _select(dataset, column, value):
    return _yes_no(dataset).filter(lambda doc: doc[column] == value)


def process_docs_all(dataset):
    return _yes_no(dataset)


def process_docs_generative(dataset):
    return dataset.filter(lambda doc: doc["query_type"] == "generative")


def doc_to_visual(doc):
    return [doc["image"].convert("RGB")]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    kwargs = lmms_eval_specific_kwargs or {{}}
    return f"{{kwargs.get('pre_prompt', '')}}{{doc['question']}}{{kwargs.get('post_prompt', '')}}"


def process_results(doc, results):
    pred = read_answer(results[0] if results else "")
    item = {{"query_id": doc["query_id"], "truth": doc["truth"], "pred": pred, "query_type": doc.get("query_type"),
            "distribution": doc.get("distribution"), "task_hash": TASK_HASH}}
    return {{name: item for name in METRICS}}


def process_generative(doc, results):
    text = results[0] if results else ""
    return {{"ode_described": {{"query_id": doc["query_id"], "described": not read_answer(text) == "failed",
                               "task_hash": TASK_HASH}}}}


def _counts(items):
    read = [i for i in items if i["pred"] in ("yes", "no")]
    tp = sum(i["pred"] == "yes" and i["truth"] == "yes" for i in read)
    fp = sum(i["pred"] == "yes" and i["truth"] == "no" for i in read)
    tn = sum(i["pred"] == "no" and i["truth"] == "no" for i in read)
    fn = sum(i["pred"] == "no" and i["truth"] == "yes" for i in read)
    return tp, fp, tn, fn


def _ratio(num, den):
    return float(num) / float(den) if den else None


def aggregate_accuracy(items):
    tp, fp, tn, fn = _counts(items)
    return _ratio(tp + tn, tp + fp + tn + fn)


def aggregate_precision(items):
    tp, fp, _, _ = _counts(items)
    return _ratio(tp, tp + fp)


def aggregate_recall(items):
    tp, _, _, fn = _counts(items)
    return _ratio(tp, tp + fn)


def aggregate_f1(items):
    p, r = aggregate_precision(items), aggregate_recall(items)
    if p is None or r is None:
        return None
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def aggregate_yes_ratio(items):
    tp, fp, tn, fn = _counts(items)
    return _ratio(tp + fp, tp + fp + tn + fn)


def aggregate_described(items):
    return _ratio(sum(i["described"] for i in items), len(items))


def aggregate_group(metrics, sizes, weight_by_size=True):
    """The group row: the subtasks' numbers averaged, weighted by their sizes (lmms-eval's group aggregation; a
    subtask with no number, None, is left out)."""
    pairs = [(m, s if weight_by_size else 1) for m, s in zip(metrics, sizes) if isinstance(m, (int, float))]
    total = sum(s for _, s in pairs)
    return sum(m * s for m, s in pairs) / total if total else None


METRICS = ("ode_accuracy", "ode_precision", "ode_recall", "ode_f1", "ode_yes_ratio")
'''
# the group row aggregates these (a size-weighted mean of the distributions' numbers; for accuracy and yes_ratio it
# is the pooled number when no answer is failed or unknown); precision, recall and F1 do not average, the pooled ones
# are those of the `_all` subtask
LMMS_GROUP_METRICS = ("accuracy", "yes_ratio")
# the readers an exported task can carry, as standalone source
PORTABLE_READERS = ("release", "pope_lower")


def lmms_eval_reader_source(reader: str) -> tuple[str, str]:
    """(source, function name) of a yes/no reader that runs without halluflow."""
    import inspect

    from ..metrics import parsers

    if reader == "release":
        return parsers.release_reader_source(), "release_yes_no"
    if reader == "pope_lower":
        source = inspect.getsource(parsers.pope_lower_yes_no).replace(" -> str | None", "")
        return f"YES, NO = {parsers.YES!r}, {parsers.NO!r}\n\n\n{source}", "pope_lower_yes_no"
    raise InputError(
        f"the release's task reads yes/no answers with {reader!r}, which an exported task cannot carry "
        f"(portable readers: {', '.join(PORTABLE_READERS)})"
    )


LMMS_YES_NO_METRICS = ("accuracy", "precision", "recall", "f1", "yes_ratio")
LMMS_TEMPLATE = "_default_template_yaml"  # no .yaml suffix: lmms-eval indexes it as an include, not as a task


def _slug(value: str) -> str:
    """A task-name / identifier part from a data value ("long-tail" -> "long_tail")."""
    slug = re.sub(r"[^0-9a-zA-Z]+", "_", str(value)).strip("_").lower()
    return slug or "none"


def _identifier(name: str) -> str:
    """A Python name for a generated function or module (`--task 2025-demo` is a valid task name, not a name)."""
    slug = _slug(name)
    return f"t_{slug}" if slug[0].isdigit() else slug


def lmms_eval_subtasks(task: str, queries: pl.DataFrame) -> list[dict]:
    """One subtask per distribution and per yes/no query kind, one over all yes/no questions and, when the release
    has descriptions, a generative one: [{name, column, value, n, generative}] in a fixed order."""
    yes_no = queries.filter(pl.col("truth").is_in(["yes", "no"]))
    subtasks = [{"name": f"{task}_all", "column": None, "value": None, "n": yes_no.height, "generative": False}]
    for column, prefix in (("distribution", "dist"), ("query_type", "kind")):
        if column not in queries.columns:
            continue
        for value, n in sorted(yes_no.group_by(column).len().iter_rows(), key=lambda r: str(r[0])):
            if value is not None:
                name = f"{task}_{prefix}_{_slug(value)}"
                subtasks.append({"name": name, "column": column, "value": value, "n": n, "generative": False})
    names = [s["name"] for s in subtasks]
    clash = next((n for n in names if names.count(n) > 1), None)
    if clash:
        raise InputError(f"lmms-eval export: two distributions or query kinds both become the task name {clash!r}")
    n_gen = queries.filter(pl.col("query_type") == "generative").height
    if n_gen:
        subtasks.append({"name": f"{task}_generative", "column": None, "value": None, "n": n_gen, "generative": True})
    return subtasks


def lmms_eval_utils(subtasks: list[dict], task: dict) -> str:
    """The task's utils.py: the release's reader (standalone), the fixed functions and one process_docs per
    distribution / query-kind subtask."""
    from ..metrics.parsers import _BLANK
    from .task import task_hash

    reader = task["kinds"]["discriminative"]["reader"]
    source, function = lmms_eval_reader_source(reader)
    lines = [
        LMMS_EVAL_UTILS.format(
            reader_source=source.rstrip("\n"),
            task_hash=task_hash(task),
            reader=reader,
            blank=_BLANK.pattern,
            reader_function=function,
        )
    ]
    for s in subtasks:
        if s["column"] is not None:
            lines.append(
                f"\n\ndef process_docs_{_identifier(s['name'])}(dataset):\n"
                f"    return _select(dataset, {s['column']!r}, {s['value']!r})\n"
            )
    return "".join(lines)


def _yaml_string(text: str) -> str:
    """A YAML scalar holding exactly `text` (JSON strings are YAML double-quoted strings)."""
    return json.dumps(text, ensure_ascii=False)


def lmms_eval_template(data_path: str, task: dict) -> str:
    """The yes/no subtasks' shared YAML: the release task's yes/no prompt (post_prompt = its suffix, so doc_to_text
    gives exactly the answer stage's prompt) and generation limit; greedy decoding."""
    disc = task["kinds"]["discriminative"]
    metrics = "\n".join(
        # the yes-ratio has no better direction (POPE reads it against 0.5); lmms-eval requires the key
        f"  - metric: ode_{m}\n    aggregation: !function utils.aggregate_{m}\n"
        f"    higher_is_better: {'false' if m == 'yes_ratio' else 'true'}"
        for m in LMMS_YES_NO_METRICS
    )
    return (
        "# Shared settings of the yes/no subtasks (included by each). dataset_path is relative to the export folder:\n"
        "# run lmms-eval from there (cd <export folder>; python -m lmms_eval --include_path . --tasks ...).\n"
        "# Prompt and max_new_tokens: the release's declared task (manifest.json `task`).\n"
        f"dataset_path: {data_path}\n"
        "test_split: test\n"
        "output_type: generate_until\n"
        "doc_to_visual: !function utils.doc_to_visual\n"
        "doc_to_text: !function utils.doc_to_text\n"
        "doc_to_target: truth\n"
        "generation_kwargs:\n"
        f"  max_new_tokens: {disc['max_new_tokens']}\n"
        "  temperature: 0\n"
        "  do_sample: false\n"
        "process_results: !function utils.process_results\n"
        f"metric_list:\n{metrics}\n"
        "lmms_eval_specific_kwargs:\n"
        "  default:\n"
        '    pre_prompt: ""\n'
        f"    post_prompt: {_yaml_string(disc['suffix'])}\n"
        "metadata:\n"
        "  - version: 1.0\n"
    )


def lmms_eval_subtask_yaml(s: dict, task: dict) -> str:
    head = f"include: {LMMS_TEMPLATE}\ntask: {s['name']}\n"
    if s["generative"]:
        gen = task["kinds"]["generative"]
        return head + (
            "process_docs: !function utils.process_docs_generative\n"
            "generation_kwargs:\n"
            f"  max_new_tokens: {gen['max_new_tokens']}\n"
            "  temperature: 0\n"
            "  do_sample: false\n"
            "process_results: !function utils.process_generative\n"
            "metric_list:\n"
            "  - metric: ode_described\n"
            "    aggregation: !function utils.aggregate_described\n"
            "    higher_is_better: true\n"
            "lmms_eval_specific_kwargs:\n"
            "  default:\n"
            '    pre_prompt: ""\n'
            f"    post_prompt: {_yaml_string(gen['suffix'])}\n"
        )
    docs = "process_docs_all" if s["column"] is None else f"process_docs_{_identifier(s['name'])}"
    return head + f"process_docs: !function utils.{docs}\n"


def lmms_eval_group_yaml(name: str, tasks: list[str]) -> str:
    """A group over subtasks with a row of its own: accuracy and yes-ratio averaged over the subtasks, weighted by
    their sizes (lmms-eval's group aggregation, through utils.aggregate_group so a subtask without a number does
    not break it)."""
    listed = "\n".join(f"  - {t}" for t in tasks)
    aggregate = "\n".join(
        f"  - metric: ode_{m}\n    aggregation: !function utils.aggregate_group\n    weight_by_size: true"
        for m in LMMS_GROUP_METRICS
    )
    return f"group: {name}\ntask:\n{listed}\naggregate_metric_list:\n{aggregate}\nmetadata:\n  version: 1.0\n"


# ---------------------------------------------------------------------------------------------- VLMEvalKit
VLMEVALKIT_COLUMNS = (
    "index",
    "image",
    "question",
    "answer",
    "category",
    "query_type",
    "query_id",
    "image_id",
    "task_hash",
)


def vlmevalkit_rows(release_dir: Path, queries: pl.DataFrame, definition: dict | None = None) -> list[list[str]]:
    """VLMEvalKit's Y/N TSV rows: question = the release task's yes/no prompt, answer "Yes"/"No", category =
    distribution, the image as base64 PNG once per image (later questions on it hold the index of the first, which
    VLMEvalKit resolves), query_id and the task's hash kept (VLMEvalKit copies every column into its predictions)."""
    from .task import prompt, task_definition, task_hash

    definition = definition or task_definition()
    digest = task_hash(definition)
    rows, first = [], {}
    yes_no = queries.filter(pl.col("truth").is_in(["yes", "no"]))
    for i, row in enumerate(yes_no.iter_rows(named=True)):
        image_id = row["image_id"]
        if image_id in first:
            image = str(first[image_id])
        else:
            first[image_id] = i
            image = base64.b64encode(read_bytes(safe_join(release_dir, _image_path(image_id)))).decode("ascii")
        rows.append(
            [
                str(i),
                image,
                prompt(definition, row["question"], "discriminative"),
                "Yes" if row["truth"] == "yes" else "No",
                str(row.get("distribution") or ""),
                str(row.get("query_type") or ""),
                row["query_id"],
                image_id,
                digest,
            ]
        )
    return rows


def write_tsv(path: Path, header: tuple[str, ...], rows: list[list[str]]) -> None:
    """A fully quoted tab-separated file, as VLMEvalKit's own dump writes one (pandas reads it back as written)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, delimiter="\t", quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def pope_label_rows(queries: pl.DataFrame) -> list[dict]:
    """The release's yes/no truths as a POPE label file (question_id = query_id), for `halluflow score pope`."""
    yes_no = queries.filter(pl.col("truth").is_in(["yes", "no"]))
    return [
        {"question_id": r["query_id"], "image": _image_path(r["image_id"]), "text": r["question"], "label": r["truth"]}
        for r in yes_no.iter_rows(named=True)
    ]


# ---------------------------------------------------------------------------------------------- LLaMA-Factory
def llamafactory_info(fmt: str, name: str) -> dict:
    """LLaMA-Factory's dataset registry entry (dataset_info.json) for one training export. Image paths in the
    records are relative to the folder holding dataset_info.json, which is LLaMA-Factory's `dataset_dir` and, by
    default, its `media_dir`: `--dataset_dir <export> --dataset <name>` finds both."""
    if fmt == "llava":
        entry = {"formatting": "sharegpt", "columns": {"messages": "conversations", "images": "image"}}
    elif fmt == "sharegpt":
        entry = {
            "formatting": "sharegpt",
            "columns": {"messages": "messages", "images": "images"},
            "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"},
        }
    else:
        entry = {
            "formatting": "alpaca",
            "ranking": True,
            "columns": {"prompt": "prompt", "chosen": "chosen", "rejected": "rejected", "images": "images"},
        }
    return {name: {"file_name": f"{fmt}.json", **entry}}


# ---------------------------------------------------------------------------------------------- entry point
def _export_card(
    fmt: str, release_dir: Path, manifest: dict, n_records: int, answers_path: str | None, use: list[str]
) -> str:
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
        "## Use",
        "",
        *use,
        "",
        "Truths are known by construction: yes/no truths of the release's questions and, for descriptions,",
        "exactly the scene's objects. Made by `halluflow release export`.",
        "",
        *CITATION,
    ]
    return "\n".join(lines)


def export_release(
    release_dir: str | Path, fmt: str, out: str | Path, *, answers: str | Path | None = None, task: str | None = None
) -> dict:
    """Write one export format of a release into `out`; returns {format, records, out, ...}."""
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
    # The task / dataset name names files under --out: one plain name ("../../x" from --task or the manifest is
    # refused).
    if task is not None:
        safe_name(task, "--task")
    else:
        release = manifest.get("release", release_dir.parent.name)
        task = f"halluflow_{safe_name(str(release), f'{release_dir / MANIFEST}: release name')}".replace("-", "_")
    out.mkdir(parents=True, exist_ok=True)
    with owned_folder(out):
        return _write_export(release_dir, fmt, out, queries, manifest, answers, task)


def _write_lmms_eval(
    release_dir: Path, out: Path, queries: pl.DataFrame, task: str, definition: dict
) -> tuple[list[str], list[str]]:
    """The task folder: the release's data (images linked, so the folder stands on its own and dataset_path is
    relative), the shared template, one YAML per subtask, the groups, utils.py and the POPE labels; prompts,
    generation limits and the reader are the release's task `definition`."""
    lmms_eval_reader_source(definition["kinds"]["discriminative"]["reader"])  # a reader it cannot carry: refused first
    folder = out / task
    data = f"{task}/data"
    write_jsonl(out / data / HUB_METADATA, hub_metadata_rows(queries))
    write_text(out / data / HUB_CARD, hub_card(task, f"Data of the lmms-eval task `{task}` (see ../DATACARD.md).\n"))
    _link_images(release_dir, out / data, sorted(set(queries["image_id"].to_list())))
    subtasks = lmms_eval_subtasks(task, queries)
    write_text(folder / LMMS_TEMPLATE, lmms_eval_template(data, definition))
    for s in subtasks:
        write_text(folder / f"{s['name']}.yaml", lmms_eval_subtask_yaml(s, definition))
    by_dist = [s["name"] for s in subtasks if s["column"] == "distribution"]
    by_kind = [s["name"] for s in subtasks if s["column"] == "query_type"]
    generative = [s["name"] for s in subtasks if s["generative"]]
    # The release group answers every query once (the distributions partition the yes/no questions); the kinds
    # partition them again, so they form a second group rather than doubling the release group's model calls.
    write_text(folder / f"{task}.yaml", lmms_eval_group_yaml(task, by_dist + generative))
    if by_kind:
        write_text(folder / f"{task}_by_kind.yaml", lmms_eval_group_yaml(f"{task}_by_kind", by_kind))
    write_text(folder / "utils.py", lmms_eval_utils(subtasks, definition))
    write_jsonl(folder / POPE_LABELS, pope_label_rows(queries))
    n_gen = sum(s["n"] for s in subtasks if s["generative"])
    use = [
        f"    cd <the export folder>   # dataset_path `{data}` is relative to it",
        f"    python -m lmms_eval --model <model> --include_path . --tasks {task} --log_samples --output_path logs",
        "",
        f"- `{task}`: group of the per-distribution subtasks"
        + (f" and `{task}_generative` ({n_gen} descriptions, kept for halluflow's scoring)" if n_gen else "")
        + ": every query once; its own row averages accuracy and yes-ratio over the distributions, weighted by "
        "size (pooled precision, recall and F1: `halluflow score release`, or the subtask below);",
        f"- `{task}_by_kind`: one subtask per yes/no query kind; `{task}_all`: every yes/no question.",
        "",
        *_task_use_lines(definition, "lmms-eval"),
        "| subtask | queries |",
        "|---|---|",
        *(f"| `{s['name']}` | {s['n']} |" for s in subtasks),
        "",
        "Back into halluflow, per distribution, pair kind and query kind, read as lmms-eval read them:",
        "",
        f"    halluflow import lmms-eval logs/<model>/*_samples_{task}_*.jsonl --out answers.jsonl",
        "    halluflow score release answers.jsonl --release <the release folder>",
        "",
        "A query found in several subtasks is kept once. POPE's own reading of the same answers (its official",
        f"numbers, not the release's): `halluflow score pope --answers answers.jsonl --labels {task}/{POPE_LABELS}`.",
    ]
    return [s["name"] for s in subtasks], use


def _task_use_lines(definition: dict, tool: str) -> list[str]:
    from .task import task_hash

    disc, gen = definition["kinds"]["discriminative"], definition["kinds"]["generative"]
    return [
        f"The release's task (hash `{task_hash(definition)}`), as {tool} runs it: yes/no prompt "
        f"`{disc['template']}`, at most {disc['max_new_tokens']} new tokens, read by halluflow's `{disc['reader']}` "
        f"reader; descriptions `{gen['template']}`, at most {gen['max_new_tokens']} new tokens; no system prompt.",
        "",
    ]


def vlmevalkit_data_config(name: str) -> dict:
    """VLMEvalKit's --data-config for the exported TSV: its own Y/N dataset class reads $LMUData/<name>.tsv (no
    URL, no md5 check) and, the name containing "POPE", rates it with POPE_rating (VLMEvalKit run.py
    build_dataset_from_config + ImageBaseDataset.load_data, commit e8e78f0)."""
    return {name: {"class": "ImageYORNDataset", "dataset": name}}


def _write_vlmevalkit(
    release_dir: Path, out: Path, queries: pl.DataFrame, task: str, definition: dict
) -> tuple[int, list[str]]:
    """VLMEvalKit's Y/N dataset: `<name>.tsv` (base64 images; the question column holds the release task's exact
    yes/no prompt, since VLMEvalKit sends it as written), the --data-config JSON and the POPE labels."""
    from .task import task_hash

    name = task if "POPE" in task else f"{task}_POPE"
    rows = vlmevalkit_rows(release_dir, queries, definition)
    write_tsv(out / f"{name}.tsv", VLMEVALKIT_COLUMNS, rows)
    config = vlmevalkit_data_config(name)
    write_json(out / f"{name}.data_config.json", config)
    write_jsonl(out / POPE_LABELS, pope_label_rows(queries))
    inline = json.dumps(config, separators=(",", ":"))
    use = [
        f"Copy `{name}.tsv` into `$LMUData` (default `~/LMUData`) and run VLMEvalKit's own run.py; its `--data-config`",
        "names the Y/N dataset class (no import, no code of this export runs inside VLMEvalKit):",
        "",
        f"    python run.py --model <model> --data {name} --data-config '{inline}'",
        "",
        f"(the same JSON is `{name}.data_config.json`). The name contains `POPE`, so VLMEvalKit rates it with its",
        "POPE rating (accuracy, precision, recall, F1 overall and per `category`, the release's distributions).",
        f"The `question` column is the release task's yes/no prompt (task `{task_hash(definition)}`); the generation",
        "limit is the model's own in VLMEvalKit (no dataset sets it).",
        "",
        f"Back into halluflow: `halluflow import vlmevalkit <model>_{name}.xlsx --out answers.jsonl` (.xlsx, or the",
        ".tsv / .json that PRED_FORMAT=tsv / json writes), then `halluflow score release answers.jsonl --release",
        "<the release folder>` (per distribution, pair kind and query kind, the release's reader);",
        f"`halluflow score pope --answers answers.jsonl --labels {POPE_LABELS} --parser vlmevalkit` gives",
        "VLMEvalKit's own numbers.",
    ]
    return len(rows), use


def _write_export(
    release_dir: Path, fmt: str, out: Path, queries: pl.DataFrame, manifest: dict, answers, task: str
) -> dict:
    from .task import release_task, task_definition

    # the release's declared task; a release made before releases declared one is asked with halluflow's defaults
    definition = release_task(release_dir, manifest) or task_definition()
    if fmt == "lmms-eval":
        subtasks, use = _write_lmms_eval(release_dir, out, queries, task, definition)
        n = queries.filter(pl.col("truth").is_in(["yes", "no"]) | (pl.col("query_type") == "generative")).height
        card_dir, extra = out / task, {"task": task, "subtasks": subtasks}
    elif fmt == "vlmevalkit":
        n, use = _write_vlmevalkit(release_dir, out, queries, task, definition)
        card_dir, extra = out, {}
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
        name = f"{task}_{fmt}"
        write_json(out / LLAMAFACTORY_INFO, llamafactory_info(fmt, name))
        n = len(records)
        card_dir, extra = out, {"dataset": name}
        use = [
            f"Image paths are relative to this folder, which holds `{LLAMAFACTORY_INFO}` (LLaMA-Factory's registry):",
            f"LLaMA-Factory: `--dataset_dir <this folder> --dataset {name}` (its media_dir defaults to dataset_dir);",
            f"LLaVA's train.py: `--data_path <this folder>/{fmt}.json --image_folder <this folder>`.",
        ]
    write_text(card_dir / "DATACARD.md", _export_card(fmt, release_dir, manifest, n, answers and str(answers), use))
    return {"format": fmt, "records": n, "out": str(out), **extra}
