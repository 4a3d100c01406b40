"""CHAIR (Rohrbach, Hendricks, Burns, Darrell, Saenko, "Object Hallucination in Image Captioning", EMNLP 2018;
code: LisaAnne/Hallucination utils/chair.py), vectorised with polars.

Per caption: lower-case, word_tokenize (halluflow.metrics.treebank), singularize each token the way
pattern.en.singularize does (halluflow.metrics.singular), merge double words (left to right, a merged pair consumes
both tokens), drop "seat" when "toilet" is present, keep synonyms and map each to its COCO category.
CHAIR_s = captions with >= 1 mention outside the truth / captions; CHAIR_i = such mentions / all mentions
(duplicates counted). The synonym list and the hard-coded rules ship with the package (data/chair_synonyms.tsv,
data/chair_rules.json; see resources/README.md), so scoring needs nothing beside the installed package.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl

from ..errors import InputError
from ..io import read_jsonl, read_text
from .singular import singularize, singularize_cached
from .treebank import token_frame

DATA_DIR = Path(__file__).resolve().parent / "data"
SYNONYMS_TSV = DATA_DIR / "chair_synonyms.tsv"
RULES_JSON = DATA_DIR / "chair_rules.json"


def load_rules(path: str | Path = RULES_JSON) -> dict[str, str]:
    """double_word_dict built from the shipped rule lists exactly as CHAIR.__init__ builds it: two-word names merged
    into one token; "baby/adult <animal>" → the animal and "passenger <vehicle>" → the vehicle (so "baby" and
    "passenger" do not fire for person); "home plate"/"train track" deliberately swallow "train"; explicit
    overrides last ("wine glas" because singularize("glass") == "glas")."""
    rules = json.loads(Path(path).read_text(encoding="utf-8"))
    d = {w: w for w in rules["coco_double_words"]}
    d.update({f"{p} {a}": a for a in rules["animal_words"] for p in ("baby", "adult")})
    d.update({f"passenger {v}": v for v in rules["vehicle_words"]})
    d.update(rules["explicit_overrides"])
    return d


DOUBLE_WORD_DICT = load_rules()

# Plain word tokenizer (runs of letters/digits joined by '-' or '.') for concept matchers that want words only;
# CHAIR itself tokenizes like nltk (treebank.token_frame).
TOKEN_PATTERN = r"[^\W_]+(?:[-.][^\W_]+)*"
_TOKEN_RE = re.compile(TOKEN_PATTERN)


def tokenize(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


def load_synonyms(path: str | Path | None = None, fix_spaces: bool = False) -> dict[str, str]:
    """synonym → COCO category (first entry of its line), parsed like chair.py: line.strip().split(', ').

    chair.py keeps the two entries written after a double space (' motor bike', ' cheesecake') with their leading
    space, so they never match; `fix_spaces=True` strips them (a named divergence from the original).
    `path` None: the list shipped with halluflow (data/chair_synonyms.tsv, same mapping as CHAIR's file)."""
    if path is None:
        return shipped_synonyms(fix_spaces)
    path = Path(path)
    if not path.exists():
        raise InputError(f"CHAIR synonyms file {path} not found (pass --synonyms / scoring.chair_synonyms)")
    mapping: dict[str, str] = {}
    for lineno, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        entries = line.strip().split(", ")
        if fix_spaces:
            entries = [e.strip() for e in entries]
        if not entries[0]:
            raise InputError(f"{path}:{lineno}: empty category name")
        for e in entries:
            mapping[e] = entries[0]  # chair.py: a later line overwrites an earlier one
    if not mapping:
        raise InputError(f"CHAIR synonyms file {path} holds no synonyms (every caption would score CHAIR 0)")
    return mapping


def shipped_synonyms(fix_spaces: bool = False) -> dict[str, str]:
    table = pl.read_csv(
        SYNONYMS_TSV,
        separator="\t",
        quote_char=None,
        schema={"synonym": pl.String, "coco_category": pl.String, "leading_space": pl.String},
    )
    keys = [
        (" " + s if lead == "yes" and not fix_spaces else s)
        for s, lead in zip(table["synonym"], table["leading_space"])
    ]
    return dict(zip(keys, table["coco_category"].to_list()))


def derive_resources(synonyms_txt: str | Path, special_cases_json: str | Path, out_dir: str | Path = DATA_DIR) -> int:
    """Write data/chair_synonyms.tsv and data/chair_rules.json from CHAIR's synonyms.txt and the transcription of
    chair.py's hard-coded lists (see resources/README.md); returns the number of synonym rows."""
    from ..io import write_text

    out_dir = Path(out_dir)
    entries = load_synonyms(synonyms_txt)
    lines = ["synonym\tcoco_category\tleading_space"]
    lines += [f"{e.strip()}\t{cat}\t{'yes' if e != e.strip() else 'no'}" for e, cat in entries.items()]
    write_text(out_dir / SYNONYMS_TSV.name, "\n".join(lines) + "\n")
    special = json.loads(Path(special_cases_json).read_text(encoding="utf-8"))
    keys = ("coco_double_words", "animal_words", "vehicle_words", "explicit_overrides")
    write_text(out_dir / RULES_JSON.name, json.dumps({k: special[k] for k in keys}, indent=1) + "\n")
    return len(entries)


def caption_mentions(caption: str, synonyms: dict[str, str]) -> list[tuple[str, str]]:
    """(word, category) mentions of one caption, in order."""
    frame = mentions_frame(pl.DataFrame({"caption": [caption]}, schema={"caption": pl.String}), synonyms)
    return list(zip(frame["word"].to_list(), frame["category"].to_list()))


def normalise_truth(objects, synonyms: dict[str, str]) -> list[str]:
    """Truth objects may be COCO categories or synonyms (any case); map them to categories."""
    out = []
    for o in objects:
        o = str(o).strip().lower()
        o = synonyms.get(o) or synonyms.get(singularize(o)) or o
        out.append(o)
    return sorted(set(out))


# Captions are matched in chunks: the columns of one chunk's tokens (about 13 per caption) are all built before they
# shrink to its mentions, so chunks bound the peak memory (100,000 captions: 225 MiB whole process in chunks of
# 25,000, 358 MiB in one; the port of chair.py takes 279 MiB) at no cost in time.
CAPTION_CHUNK = 25_000


def mentions_frame(captions: pl.DataFrame, synonyms: dict[str, str]) -> pl.DataFrame:
    """All mentions of all captions, vectorised: columns cap (row index), pos, word, category (in chunks of
    CAPTION_CHUNK captions; each caption is matched on its own)."""
    parts = [
        _chunk_mentions(captions["caption"].slice(i, CAPTION_CHUNK), synonyms).with_columns(pl.col("cap") + i)
        for i in range(0, max(captions.height, 1), CAPTION_CHUNK)
    ]
    return pl.concat(parts)


def _chunk_mentions(captions: pl.Series, synonyms: dict[str, str]) -> pl.DataFrame:
    """mentions_frame of one chunk. Rows stay sorted by (cap, pos), so "the next token of the same caption" is a
    global shift guarded by cap == shifted cap (window functions over 10^6 tokens are an order of magnitude
    slower)."""
    tokens = token_frame(captions.str.to_lowercase()).rename({"doc": "cap"})
    # singularize each distinct token once (a few thousand distinct words for 10^5 captions)
    distinct = tokens["tok"].unique().to_list()
    singular = dict(zip(distinct, map(singularize_cached, distinct)))
    same_next = pl.col("cap").shift(-1) == pl.col("cap")
    same_prev = pl.col("cap").shift(1) == pl.col("cap")
    words = (
        tokens.lazy()
        .select("cap", "pos", word=pl.col("tok").replace_strict(singular, return_dtype=pl.String))
        .with_columns(nxt=pl.when(same_next).then(pl.col("word").shift(-1)))
        .with_columns(
            merged=pl.concat_str(["word", "nxt"], separator=" ").replace_strict(
                DOUBLE_WORD_DICT, default=None, return_dtype=pl.String
            )
        )
        .with_columns(is_pair=pl.col("merged").is_not_null())
        # chair.py scans left to right and a merged pair consumes both tokens: in a run of overlapping pairs
        # only the 1st, 3rd, ... are taken.
        .with_columns(start=pl.col("is_pair") & ~(pl.col("is_pair").shift(1, fill_value=False) & same_prev))
        .with_columns(off=pl.col("pos") - pl.when(pl.col("start")).then(pl.col("pos")).forward_fill())
        .with_columns(taken=pl.col("is_pair") & (pl.col("off") % 2 == 0))
        .filter(~(pl.col("taken").shift(1, fill_value=False) & same_prev))
        .select("cap", "pos", word=pl.when(pl.col("taken")).then(pl.col("merged")).otherwise(pl.col("word")))
        .collect()
    )
    toilet_caps = words.filter(pl.col("word") == "toilet")["cap"].unique().implode()
    words = words.filter(~((pl.col("word") == "seat") & pl.col("cap").is_in(toilet_caps)))
    syn = pl.DataFrame({"word": list(synonyms), "category": list(synonyms.values())})
    return words.join(syn, on="word", how="inner", maintain_order="left")


def chair_scores(
    captions: pl.DataFrame, truth: dict[str, list[str]], synonyms: dict[str, str]
) -> tuple[dict, pl.DataFrame]:
    """CHAIR over `captions` (columns image_id, caption) with truth {image_id: categories}; returns (metrics, rows)."""
    captions = captions.with_columns(pl.col("image_id").cast(pl.String))
    missing = captions.join(
        pl.DataFrame({"image_id": list(truth)}, schema={"image_id": pl.String}), on="image_id", how="anti"
    )
    if missing.height:
        raise InputError(f"no truth objects for image_id {missing['image_id'][0]!r} ({missing.height} captions)")
    truth_pairs = pl.DataFrame(
        {"image_id": [k for k, v in truth.items() for _ in v], "category": [c for v in truth.values() for c in v]},
        schema={"image_id": pl.String, "category": pl.String},
    ).with_columns(in_truth=pl.lit(True))
    ment = mentions_frame(captions, synonyms).join(
        captions.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("cap"), "image_id"), on="cap", how="left"
    )
    ment = ment.join(truth_pairs, on=["image_id", "category"], how="left", maintain_order="left").with_columns(
        hallucinated=pl.col("in_truth").is_null()
    )
    per_cap = ment.group_by("cap").agg(
        n_mentions=pl.len(),
        n_hallucinated=pl.col("hallucinated").sum(),
        mentioned=pl.col("category"),
        hallucinated_objects=pl.col("category").filter(pl.col("hallucinated")),
    )
    rows = (
        captions.with_row_index("cap")
        .with_columns(pl.col("cap").cast(pl.UInt32))
        .join(per_cap, on="cap", how="left", maintain_order="left")
        .with_columns(
            pl.col("n_mentions", "n_hallucinated").fill_null(0).cast(pl.Int64),
            pl.col("mentioned", "hallucinated_objects").fill_null(pl.lit([], dtype=pl.List(pl.String))),
        )
        .drop("cap")
    )
    n_caps = rows.height
    n_ment = int(rows["n_mentions"].sum())
    n_hall = int(rows["n_hallucinated"].sum())
    n_hall_caps = int((rows["n_hallucinated"] > 0).sum())
    metrics = {
        "chair_s": n_hall_caps / n_caps if n_caps else None,
        "chair_i": n_hall / n_ment if n_ment else None,
        "n_captions": n_caps,
        "n_mentions": n_ment,
        "n_hallucinated_mentions": n_hall,
        "n_hallucinated_captions": n_hall_caps,
    }
    return metrics, rows


def load_captions(path) -> pl.DataFrame:
    """Captions [image_id, caption, failed] through the shared fast JSONL reader (a non-string caption is refused);
    a failed (status other than ok), missing or empty caption is kept but flagged, so the scorer leaves it out and
    counts it (an empty caption would otherwise be a perfect CHAIR of 0)."""
    from .formats import read_records
    from .parsers import failed_mask

    df = read_records(path, ("caption", "status"), "image_id", "record")
    ids = df["image_id"]
    if ids.is_null().any():
        raise InputError(f"{path}: record {int(ids.is_null().arg_max()) + 1} has no 'image_id'")
    if df["caption"].is_null().all() and df["status"].is_null().all():
        # Captions under another key ("text", "answer") would otherwise read as every answer failed.
        raise InputError(f"{path}: records have no 'caption' (expected {{image_id, caption}})")
    return pl.DataFrame(
        {"image_id": ids.cast(pl.String), "caption": df["caption"], "failed": failed_mask(df["caption"], df["status"])}
    )


def score_captions(captions: pl.DataFrame, truth: dict[str, list[str]], synonyms: dict[str, str]):
    """chair_scores over the captions load_captions did not flag as failed; those are counted in n_failed."""
    metrics, rows = chair_scores(captions.filter(~pl.col("failed")).drop("failed"), truth, synonyms)
    metrics["n_failed"] = int(captions["failed"].sum())
    return metrics, rows


def load_truth(path, synonyms: dict[str, str]) -> dict[str, list[str]]:
    truth: dict[str, list[str]] = {}
    for i, r in enumerate(read_jsonl(path), 1):
        objs = r.get("objects", r.get("truth"))
        if "image_id" not in r or not isinstance(objs, list):
            raise InputError(f"{path}: record {i} needs 'image_id' and a list 'objects'")
        if not all(isinstance(o, str) for o in objs):
            raise InputError(
                f"{path}: record {i} (image_id {r['image_id']!r}): objects must be names (strings), "
                f"got {json.dumps(objs)[:60]}"
            )
        key = str(r["image_id"])
        if key in truth:
            raise InputError(f"{path}: image_id {key!r} appears more than once")
        truth[key] = normalise_truth(objs, synonyms)
    return truth
