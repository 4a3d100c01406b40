"""CHAIR (Rohrbach et al. 2018, LisaAnne/Hallucination utils/chair.py; anchors.md "CHAIR"), vectorised with polars.

Per caption: lower-case, tokenize, singularize each token, merge double words (left to right, a merged pair
consumes both tokens), drop "seat" when "toilet" is present, keep synonyms and map each to its COCO category.
CHAIR_s = captions with >= 1 mention outside the truth / captions; CHAIR_i = such mentions / all mentions
(duplicates counted). Tokenizer: a regex stand-in for nltk.word_tokenize (nltk data cannot be downloaded):
words are runs of letters/digits joined by '-' or '.', so "dog's" → "dog", "'s" is dropped as nltk splits it.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import polars as pl

from ..errors import InputError
from ..io import read_jsonl
from .singular import singularize, singularize_cached

CLI_DESCRIPTION = "CHAIR_s / CHAIR_i of captions against per-image COCO objects (LisaAnne/Hallucination rules)."
CLI_EPILOG = """examples:
  halluflow score chair --captions captions.jsonl --truth truth.jsonl
  halluflow score chair --captions c.jsonl --truth t.jsonl --synonyms path/to/synonyms.txt --out chair.json
  halluflow score chair --captions c.jsonl --truth t.jsonl --fix-synonym-spaces --per-caption rows.parquet
captions: JSONL {"image_id", "caption"}; truth: JSONL {"image_id", "objects": [COCO categories or synonyms]}.
--synonyms defaults to ../shared/data/chair-lisaanne-hallucination/synonyms.txt (the file is not shipped)."""

# Constants of chair.py's CHAIR.__init__ (BSD-2-Clause per the repository README): two-word names merged into one
# token before synonym lookup; "baby/adult <animal>" → the animal and "passenger <vehicle>" → the vehicle so that
# "baby"/"passenger" do not fire for person; "home plate"/"train track" deliberately swallow "train".
_COCO_DOUBLE_WORDS = [
    "motor bike", "motor cycle", "air plane", "traffic light", "street light", "traffic signal", "stop light",
    "fire hydrant", "stop sign", "parking meter", "suit case", "sports ball", "baseball bat", "baseball glove",
    "tennis racket", "wine glass", "hot dog", "cell phone", "mobile phone", "teddy bear", "hair drier",
    "potted plant", "bow tie", "laptop computer", "stove top oven", "hot dog", "teddy bear", "home plate",
    "train track"]
_ANIMAL_WORDS = ["bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "animal", "cub"]
_VEHICLE_WORDS = ["jet", "train"]


def _double_word_dict() -> dict[str, str]:
    d = {w: w for w in _COCO_DOUBLE_WORDS}
    d.update({f"{p} {a}": a for a in _ANIMAL_WORDS for p in ("baby", "adult")})
    d.update({f"passenger {v}": v for v in _VEHICLE_WORDS})
    d["bow tie"] = "tie"
    d["toilet seat"] = "toilet"
    d["wine glas"] = "wine glass"  # singularize("glass") == "glas"
    return d


DOUBLE_WORD_DICT = _double_word_dict()

# Runs of letters/digits, joined by inner '-' or '.' (nltk keeps "t-shirt", "e.g"); apostrophes split like nltk.
TOKEN_PATTERN = r"[^\W_]+(?:[-.][^\W_]+)*"
_TOKEN_RE = re.compile(TOKEN_PATTERN)


def tokenize(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


def default_synonyms_path() -> Path:
    shared = Path(os.environ.get("HALLUFLOW_SHARED", Path(__file__).resolve().parents[3].parent / "shared"))
    return shared / "data" / "chair-lisaanne-hallucination" / "synonyms.txt"


def load_synonyms(path: str | Path | None = None, fix_spaces: bool = False) -> dict[str, str]:
    """synonym → COCO category (first entry of its line), parsed like chair.py: line.strip().split(', ').

    chair.py keeps the two entries written after a double space (' motor bike', ' cheesecake') with their leading
    space, so they never match; `fix_spaces=True` strips them (a named divergence from the original)."""
    path = Path(path) if path else default_synonyms_path()
    if not path.exists():
        raise InputError(f"CHAIR synonyms file {path} not found (pass --synonyms / scoring.chair_synonyms)")
    mapping: dict[str, str] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        entries = line.strip().split(", ")
        if fix_spaces:
            entries = [e.strip() for e in entries]
        if not entries[0]:
            raise InputError(f"{path}:{lineno}: empty category name")
        for e in entries:
            mapping[e] = entries[0]  # chair.py: a later line overwrites an earlier one
    return mapping


def caption_mentions(caption: str, synonyms: dict[str, str]) -> list[tuple[str, str]]:
    """(word, category) mentions of one caption, in order — the per-caption reference path (chair.py logic)."""
    words = [singularize_cached(w) for w in tokenize(caption.lower())]
    merged, i = [], 0
    while i < len(words):
        pair = " ".join(words[i:i + 2])
        if pair in DOUBLE_WORD_DICT:
            merged.append(DOUBLE_WORD_DICT[pair])
            i += 2
        else:
            merged.append(words[i])
            i += 1
    if "toilet" in merged and "seat" in merged:
        merged = [w for w in merged if w != "seat"]
    return [(w, synonyms[w]) for w in merged if w in synonyms]


def normalise_truth(objects, synonyms: dict[str, str]) -> list[str]:
    """Truth objects may be COCO categories or synonyms (any case); map them to categories."""
    out = []
    for o in objects:
        o = str(o).strip().lower()
        o = synonyms.get(o) or synonyms.get(singularize(o)) or o
        out.append(o)
    return sorted(set(out))


def mentions_frame(captions: pl.DataFrame, synonyms: dict[str, str]) -> pl.DataFrame:
    """All mentions of all captions, vectorised: columns cap (row index), pos, word, category.

    Rows stay sorted by (cap, pos), so "the next token of the same caption" is a global shift guarded by
    cap == shifted cap (window functions over 10^6 tokens are an order of magnitude slower)."""
    tokens = (
        captions.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("cap"),
                        pl.col("caption").str.to_lowercase().str.extract_all(TOKEN_PATTERN).alias("tok"))
        .with_columns(pos=pl.int_ranges(0, pl.col("tok").list.len(), dtype=pl.UInt32))
        .explode("tok", "pos")
        .drop_nulls("tok")
    )
    # singularize each distinct token once (a few thousand distinct words for 10^5 captions)
    uniq = tokens["tok"].unique()
    sing = pl.DataFrame({"tok": uniq, "word": [singularize_cached(t) for t in uniq]},
                        schema={"tok": pl.String, "word": pl.String})
    words = tokens.join(sing, on="tok", how="left", maintain_order="left").drop("tok")
    pairs = pl.DataFrame({"bigram": list(DOUBLE_WORD_DICT), "merged": list(DOUBLE_WORD_DICT.values())})
    same_next = pl.col("cap").shift(-1) == pl.col("cap")
    same_prev = pl.col("cap").shift(1) == pl.col("cap")
    words = (
        words.with_columns(nxt=pl.when(same_next).then(pl.col("word").shift(-1)))
        .with_columns(bigram=pl.concat_str(["word", "nxt"], separator=" "))
        .join(pairs, on="bigram", how="left", maintain_order="left")
        .with_columns(is_pair=pl.col("merged").is_not_null())
        # chair.py scans left to right and a merged pair consumes both tokens: in a run of overlapping pairs
        # only the 1st, 3rd, ... are taken.
        .with_columns(start=pl.col("is_pair") & ~(pl.col("is_pair").shift(1, fill_value=False) & same_prev))
        .with_columns(off=pl.col("pos") - pl.when(pl.col("start")).then(pl.col("pos")).forward_fill())
        .with_columns(taken=pl.col("is_pair") & (pl.col("off") % 2 == 0))
        .filter(~(pl.col("taken").shift(1, fill_value=False) & same_prev))
        .with_columns(word=pl.when(pl.col("taken")).then(pl.col("merged")).otherwise(pl.col("word")))
        .select("cap", "pos", "word")
    )
    toilet_caps = words.filter(pl.col("word") == "toilet")["cap"].unique().implode()
    words = words.filter(~((pl.col("word") == "seat") & pl.col("cap").is_in(toilet_caps)))
    syn = pl.DataFrame({"word": list(synonyms), "category": list(synonyms.values())})
    return words.join(syn, on="word", how="inner", maintain_order="left")


def chair_scores(captions: pl.DataFrame, truth: dict[str, list[str]], synonyms: dict[str, str]) -> tuple[dict, pl.DataFrame]:
    """CHAIR over `captions` (columns image_id, caption) with truth {image_id: categories}; returns (metrics, rows)."""
    captions = captions.with_columns(pl.col("image_id").cast(pl.String))
    missing = captions.join(pl.DataFrame({"image_id": list(truth)}, schema={"image_id": pl.String}),
                            on="image_id", how="anti")
    if missing.height:
        raise InputError(f"no truth objects for image_id {missing['image_id'][0]!r} ({missing.height} captions)")
    truth_pairs = pl.DataFrame(
        {"image_id": [k for k, v in truth.items() for _ in v], "category": [c for v in truth.values() for c in v]},
        schema={"image_id": pl.String, "category": pl.String}).with_columns(in_truth=pl.lit(True))
    ment = mentions_frame(captions, synonyms).join(
        captions.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("cap"), "image_id"), on="cap", how="left")
    ment = ment.join(truth_pairs, on=["image_id", "category"], how="left", maintain_order="left").with_columns(
        hallucinated=pl.col("in_truth").is_null())
    per_cap = ment.group_by("cap").agg(
        n_mentions=pl.len(), n_hallucinated=pl.col("hallucinated").sum(),
        mentioned=pl.col("category"), hallucinated_objects=pl.col("category").filter(pl.col("hallucinated")))
    rows = (captions.with_row_index("cap").with_columns(pl.col("cap").cast(pl.UInt32))
            .join(per_cap, on="cap", how="left", maintain_order="left")
            .with_columns(pl.col("n_mentions", "n_hallucinated").fill_null(0).cast(pl.Int64),
                          pl.col("mentioned", "hallucinated_objects").fill_null(pl.lit([], dtype=pl.List(pl.String))))
            .drop("cap"))
    n_caps = rows.height
    n_ment = int(rows["n_mentions"].sum())
    n_hall = int(rows["n_hallucinated"].sum())
    n_hall_caps = int((rows["n_hallucinated"] > 0).sum())
    metrics = {
        "chair_s": n_hall_caps / n_caps if n_caps else None,
        "chair_i": n_hall / n_ment if n_ment else None,
        "n_captions": n_caps, "n_mentions": n_ment, "n_hallucinated_mentions": n_hall,
        "n_hallucinated_captions": n_hall_caps,
    }
    return metrics, rows


def load_captions(path) -> pl.DataFrame:
    rows = read_jsonl(path)
    for i, r in enumerate(rows, 1):
        if "image_id" not in r or not isinstance(r.get("caption"), str):
            raise InputError(f"{path}: record {i} needs 'image_id' and a string 'caption'")
    return pl.DataFrame({"image_id": [str(r["image_id"]) for r in rows], "caption": [r["caption"] for r in rows]},
                        schema={"image_id": pl.String, "caption": pl.String})


def load_truth(path, synonyms: dict[str, str]) -> dict[str, list[str]]:
    truth: dict[str, list[str]] = {}
    for i, r in enumerate(read_jsonl(path), 1):
        objs = r.get("objects", r.get("truth"))
        if "image_id" not in r or not isinstance(objs, list):
            raise InputError(f"{path}: record {i} needs 'image_id' and a list 'objects'")
        key = str(r["image_id"])
        if key in truth:
            raise InputError(f"{path}: image_id {key!r} appears more than once")
        truth[key] = normalise_truth(objs, synonyms)
    return truth


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--captions", required=True, help='JSONL of {"image_id", "caption"}')
    parser.add_argument("--truth", required=True, help='JSONL of {"image_id", "objects": [...]}')
    parser.add_argument("--synonyms", help="CHAIR synonyms.txt (default: ../shared/data/chair-lisaanne-hallucination/)")
    parser.add_argument("--fix-synonym-spaces", action="store_true",
                        help="count ' motor bike' / ' cheesecake' (the original never matches them)")
    parser.add_argument("--per-caption", help="write per-caption rows (mentions, hallucinated objects) to this parquet")
    parser.add_argument("--out", help="also write the JSON to this file")


def run(args: argparse.Namespace) -> int:
    from ..io import write_parquet
    from .pope import emit

    synonyms = load_synonyms(args.synonyms, fix_spaces=args.fix_synonym_spaces)
    metrics, rows = chair_scores(load_captions(args.captions), load_truth(args.truth, synonyms), synonyms)
    if args.per_caption:
        write_parquet(args.per_caption, rows)
    emit(metrics, args.out)
    return 0
