"""Evaluation sources for the answer stage: an ODE release, POPE question files, AMBER queries, or COCO images.

Each becomes one table in the queries.parquet schema (docs/data-contracts.md) plus the folder its `image` paths are
relative to. POPE: COCO label files are JSONL, A-OKVQA/GQA ones JSON arrays ({question_id, image, text, label});
AMBER: query_*.json ({id, image, query}) with optional annotations.json for the truth; COCO: an image folder and its
instances_*.json, one caption request per image with the annotated categories as truth (the setting of CHAIR,
Rohrbach et al. "Object Hallucination in Image Captioning", and of CAOS). Images live in a user-supplied folder;
paths escaping it and missing files are reported up front.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable

from .errors import InputError
from .io import safe_join

# The kinds of `answer.source` (one module each in halluflow.benchmarks); kept for callers of the first release.
SOURCE_KINDS = ("ode", "pope", "amber", "coco")
COCO_PROMPT = "Describe this image."

# Columns every source provides (the queries.parquet contract); extra ODE columns are kept as they are.
QUERY_COLUMNS = {
    "query_id": "str",
    "image_id": "str",
    "image": "str",
    "scene_id": "str",
    "distribution": "str",
    "pair_kind": "str",
    "task": "str",
    "query_type": "str",
    "attribute_kind": "str",
    "question": "str",
    "truth": "str",
    "target": "str",
    "objects": "list",
    "strategy": "str",
}

_POPE_TARGET = re.compile(r"^is there (?:a|an) (.+?) in the image\??$", re.I)
_AMBER_TYPES = {
    "generative": "generative",
    "discriminative-hallucination": "existence",
    "discriminative-attribute-state": "attribute",
    "discriminative-attribute-number": "count",
    "discriminative-attribute-action": "attribute",
    "discriminative-relation": "relation",
    "relation": "relation",
}


def _table(rows: list[dict]):
    import polars as pl

    schema = {k: (pl.List(pl.String) if v == "list" else pl.String) for k, v in QUERY_COLUMNS.items()}
    return pl.DataFrame([{k: r.get(k) for k in QUERY_COLUMNS} for r in rows], schema=schema, orient="row")


def pope_queries(path: str | os.PathLike):
    """POPE label file (JSONL or JSON array) → queries; label is the truth, "Is there a X in the image?" the target."""
    from .metrics.formats import read_pope_labels

    labels = read_pope_labels(path, require_label=False)
    rows = []
    for i, r in enumerate(labels.iter_rows(named=True)):
        missing = [k for k in ("image", "text") if r[k] is None]
        if missing:
            raise InputError(f"{path}: item {i}: missing key(s) {', '.join(missing)}")
        m = _POPE_TARGET.match(r["text"].strip())
        rows.append(
            {
                "query_id": r["question_id"],
                "image_id": Path(r["image"]).stem,
                "image": r["image"],
                "task": "discriminative",
                "query_type": "existence",
                "question": r["text"],
                "truth": r["truth"],
                "target": m.group(1) if m else None,
                "objects": [],
            }
        )
    return _table(rows)


def amber_queries(path: str | os.PathLike, annotations: str | os.PathLike | None = None):
    """AMBER query file → queries; with annotations.json the truth, query type and truth objects are filled in."""
    from .metrics.formats import read_amber_annotations, read_amber_queries

    data = read_amber_queries(path)
    notes: dict[int, dict] = {}
    if annotations is not None:
        notes = {a["id"]: a for a in read_amber_annotations(annotations, indexed=False)}
    rows = []
    for r in data:
        note = notes.get(int(r["id"]), {})
        kind = note.get("type", "generative" if "describe" in str(r["query"]).lower() else None)
        query_type = _AMBER_TYPES.get(kind or "", "existence")
        generative = query_type == "generative"
        truth = note.get("truth")
        rows.append(
            {
                "query_id": str(r["id"]),
                "image_id": Path(str(r["image"])).stem,
                "image": str(r["image"]),
                "task": "generative" if generative else "discriminative",
                "query_type": query_type,
                "question": str(r["query"]),
                "truth": None if generative or truth is None else str(truth).lower(),
                "objects": [str(o) for o in truth] if generative and isinstance(truth, list) else [],
            }
        )
    return _table(rows)


def coco_queries(annotations: str | os.PathLike, prompt: str = COCO_PROMPT, limit: int | None = None, seed: int = 0):
    """COCO instances JSON → one generative query per image (query_id = image_id = COCO's image id), truth = the
    image's categories. `limit` draws that many images (seeded, the same for every model and every stage)."""
    import random

    from .ode.graph import read_coco_images

    images = sorted(read_coco_images(annotations), key=lambda r: (len(r[0]), r[0]))
    if not images:
        raise InputError(f"{annotations}: no images listed")
    if limit is not None and limit < len(images):
        chosen = set(random.Random(seed).sample(range(len(images)), limit))
        images = [r for i, r in enumerate(images) if i in chosen]
    rows = [
        {
            "query_id": iid,
            "image_id": iid,
            "image": file_name,
            "task": "generative",
            "query_type": "generative",
            "question": prompt,
            "objects": objects,
        }
        for iid, file_name, objects in images
    ]
    return _table(rows)


def ode_queries(release_dir: str | os.PathLike):
    """The release's queries.parquet (the ODE benchmark's questions)."""
    from .benchmarks import get

    return get("ode").queries({"path": str(release_dir)})[0]


def load_source(
    kind: str,
    path: str | os.PathLike,
    images: str | os.PathLike | None = None,
    annotations: str | os.PathLike | None = None,
    *,
    prompt: str | None = None,
    limit: int | None = None,
    seed: int = 0,
):
    """Return (queries table, image root) of the benchmark `kind` (halluflow.benchmarks). For `ode` the image root
    is the release folder itself, for `coco` the image folder `path` (its truth is `annotations`)."""
    from .benchmarks import get

    source = {"kind": kind, "path": path, "images": images, "annotations": annotations}
    source.update(prompt=prompt, limit=limit, seed=seed)
    table, root = get(kind).queries(source)
    return check_queries(table, f"{kind} source {path}"), root


def check_queries(table, what: str, show: int = 3):
    """The queries table of a source when every query can be answered and scored once: query ids unique and
    present, every question a non-empty text; else InputError in one line (a duplicated id gives two answer rows
    for one question, an empty question a request that asks nothing: both would change the numbers silently).
    A stated image_sha256 is compared in lower case (upper-case hex is the same digest)."""
    import polars as pl

    if table.height == 0 or "query_id" not in table.columns:
        return table
    ids = table["query_id"].cast(pl.String)
    if ids.null_count() or (ids.str.strip_chars() == "").any():
        n = ids.null_count() + int((ids.str.strip_chars() == "").sum())
        raise InputError(f"{what}: {n} of {table.height} queries have no query_id")
    counts = ids.value_counts()
    repeated = counts.filter(pl.col("count") > 1)
    if repeated.height:
        first = ", ".join(repr(v) for v in repeated["query_id"].head(show).to_list())
        raise InputError(
            f"{what}: {repeated.height} query id(s) appear more than once ({int(repeated['count'].sum())} rows; "
            f"first: {first}); each query is answered and scored once"
        )
    if "question" in table.columns:
        questions = table["question"].cast(pl.String, strict=False)
        empty = questions.is_null() | (questions.str.strip_chars() == "")
        if empty.any():
            first = ", ".join(repr(v) for v in ids.filter(empty).head(show).to_list())
            raise InputError(
                f"{what}: {int(empty.sum())} of {table.height} queries have an empty question (first: {first}); "
                "nothing would be asked"
            )
    if "image_sha256" in table.columns and table["image_sha256"].dtype == pl.String:
        table = table.with_columns(pl.col("image_sha256").str.to_lowercase())
    return table


def source_queries(source: dict, release: str | os.PathLike | None = None):
    """load_source for the config's `answer.source` section (every stage reads the same table from it)."""
    return load_source(
        source["kind"],
        source["path"] or release,
        source.get("images"),
        source.get("annotations"),
        prompt=source.get("prompt"),
        limit=source.get("limit"),
        seed=int(source.get("seed") or 0),
    )


def resolve_images(relative: Iterable[str], root: str | os.PathLike, show: int = 5) -> list[Path]:
    """Absolute image paths under `root`; InputError if any escapes it or is missing (how many, and the first)."""
    root = Path(root)
    paths = [safe_join(root, r) for r in relative]
    missing = sorted({str(p.relative_to(root.resolve())) for p in paths if not p.is_file()})
    if missing:
        raise InputError(
            f"{len(missing)} image(s) missing under {root}: {', '.join(missing[:show])}"
            + (" ..." if len(missing) > show else "")
        )
    return paths


def original_id(query_id: str):
    """An AMBER id back as the integer its files hold ("12" -> 12); anything else (" ²", "007") stays as given.
    POPE ids are written back exactly as their label file gives them (metrics.formats.pope_native_ids)."""
    text = str(query_id)
    return int(text) if text.isascii() and text.isdigit() and (text == "0" or not text.startswith("0")) else query_id
