"""How many of a release's yes/no labels its detector supports (the DATACARD's "Label support", manifest
`counts.label_support`).

A label is stated by construction: the prompt asked for the objects, a "no" object was checked below the exclusion
threshold. Where the filter's keep threshold is low (0 offline) a "yes" may have no detector box at all and then rests
on the prompt alone. Counted per query type x stated answer from the detections of the round each released image was
accepted on, at ODE's paper threshold (Tu et al.: an image whose entity scores below 0.65 is discarded):

- supported: "yes" - the detector boxed the item's object at >= the threshold; "no" (existence, counterfactual) -
  the detector was prompted with the object on that image and scored it below the threshold;
- contradicted: "no" - the detector boxed the object it states absent at >= the threshold;
- prompt alone: everything else ("yes" with no box at the threshold; "no" about an object the detector was never
  prompted with; an attribute or count "no").

Attribute and count items are judged by their object only: a detector reads no colour, action or number, so a
supported attribute "yes" says the object is there, not that it is red; an attribute or count "no" (the object is
there, the attribute or number is not) always rests on the prompt.
"""

from __future__ import annotations

import polars as pl

PAPER_THRESHOLD = 0.65  # ODE's paper keep threshold (halluflow.ode.release.PAPER_KEEP_THRESHOLD)
OBJECT_NO = ("existence", "counterfactual")  # "no" items that state an object absent


def label_support(
    queries: pl.DataFrame, detections: pl.DataFrame | None, threshold: float = PAPER_THRESHOLD
) -> dict | None:
    """{threshold, rows: [{query_type, truth, labels, supported, contradicted, prompt_only}], yes_labels,
    yes_prompt_only, line}; `detections`: the accepted round's rows (image_id, label, score; vocabulary when
    recorded), None or empty: no detector evidence at all. None for a queries table without the item's object
    (`target`) to look up."""
    if not {"query_id", "image_id", "query_type", "truth", "target"} <= set(queries.columns):
        return None
    items = queries.filter(pl.col("truth").is_in(["yes", "no"]) & pl.col("target").is_not_null())
    items = items.select("query_id", "image_id", "query_type", "truth", pl.col("target").str.to_lowercase().alias("_o"))
    if detections is not None and detections.height and {"image_id", "label", "score"} <= set(detections.columns):
        best = (
            detections.filter(pl.col("label").is_not_null())
            .group_by("image_id", pl.col("label").str.to_lowercase().alias("_o"))
            .agg(pl.col("score").max().alias("_score"))
        )
        if "vocabulary" in detections.columns:
            prompted = (
                detections.select("image_id", pl.col("vocabulary").list.eval(pl.element().str.to_lowercase()))
                .explode("vocabulary")
                .drop_nulls()
                .unique()
                .rename({"vocabulary": "_o"})
            )
        else:  # no vocabulary recorded: only an object with a box is known to have been asked for
            prompted = best.select("image_id", "_o")
        prompted = prompted.with_columns(pl.lit(True).alias("_prompted"))
        items = items.join(best, on=["image_id", "_o"], how="left").join(prompted, on=["image_id", "_o"], how="left")
    else:
        items = items.with_columns(
            pl.lit(None, pl.Float64).alias("_score"), pl.lit(None, pl.Boolean).alias("_prompted")
        )
    boxed = pl.col("_score").fill_null(0.0) >= threshold
    object_no = (pl.col("truth") == "no") & pl.col("query_type").is_in(OBJECT_NO)
    verdict = (
        pl.when((pl.col("truth") == "yes") & boxed)
        .then(pl.lit("supported"))
        .when(object_no & boxed)
        .then(pl.lit("contradicted"))
        .when(object_no & pl.col("_prompted").fill_null(False))
        .then(pl.lit("supported"))
        .otherwise(pl.lit("prompt_only"))
    )
    counted = (
        items.with_columns(verdict.alias("_v"))
        .group_by("query_type", "truth")
        .agg(
            pl.len().alias("labels"),
            (pl.col("_v") == "supported").sum().alias("supported"),
            (pl.col("_v") == "contradicted").sum().alias("contradicted"),
            (pl.col("_v") == "prompt_only").sum().alias("prompt_only"),
        )
        .sort("query_type", pl.col("truth") == "no")
    )
    rows = [{k: (int(v) if k not in ("query_type", "truth") else v) for k, v in r.items()} for r in counted.to_dicts()]
    yes = [r for r in rows if r["truth"] == "yes"]
    yes_labels, yes_prompt_only = sum(r["labels"] for r in yes), sum(r["prompt_only"] for r in yes)
    return {
        "threshold": threshold,
        "rows": rows,
        "yes_labels": yes_labels,
        "yes_prompt_only": yes_prompt_only,
        "line": prompt_only_line(yes_prompt_only, yes_labels, threshold),
    }


def prompt_only_line(prompt_only: int, labels: int, threshold: float = PAPER_THRESHOLD) -> str | None:
    """The one line a release with prompt-only "yes" labels carries wherever its numbers are shown; None without."""
    if not prompt_only:
        return None
    return (
        f'{prompt_only} of {labels} "yes" labels rest on the prompt alone (no detector box of the object at '
        f'{threshold}): a model that answers "no" to them may be right'
    )


def support_line(manifest: dict | None) -> str | None:
    """That line for a release, from its manifest (`counts.label_support`); None when it has none to say."""
    support = ((manifest or {}).get("counts") or {}).get("label_support") or {}
    return support.get("line")


def support_card(support: dict) -> list[str]:
    """The DATACARD's "Label support" section."""
    lines = [
        "## Label support",
        f"How many yes/no labels the detector supports at ODE's paper threshold {support['threshold']}, counted from",
        'the detections of the released images (manifest.json `counts.label_support`). Supported: a "yes" object',
        'boxed at the threshold, a "no" object the detector was prompted with and scored below it; contradicted: a',
        '"no" object boxed at the threshold; prompt alone: the rest. Attribute and count items are judged by their',
        'object only (a detector reads no attribute or number; their "no" always rests on the prompt).',
        "",
    ]
    if support.get("line"):
        lines += [f"**{support['line']}.**", ""]
    lines += ["| query type | stated answer | labels | detector supports | contradicts | prompt alone |"]
    lines += ["|---|---|---|---|---|---|"]
    for r in support["rows"]:
        lines.append(
            f"| {r['query_type']} | {r['truth']} | {r['labels']} | {r['supported']} | {r['contradicted']} | "
            f"{r['prompt_only']} |"
        )
    return [*lines, ""]


def release_support(release_dir) -> dict | None:
    """What a model's metrics carry of their release's label support (threshold, "yes" labels, how many rest on the
    prompt alone, the line): from the release folder's manifest.json; None without a folder or a record."""
    from pathlib import Path

    from ..io import read_json

    if not release_dir or not (Path(release_dir) / "manifest.json").is_file():
        return None
    support = (read_json(Path(release_dir) / "manifest.json").get("counts") or {}).get("label_support")
    if not support:
        return None
    return {k: support.get(k) for k in ("threshold", "yes_labels", "yes_prompt_only", "line")}
