"""ODE hallucination diagnosis (ODE, Tu et al. CVPR 2025, section 04 "幻觉倾向分析与诊断"): a concept × hallucination-frequency
matrix per model, clustered hierarchically (scipy) to locate the concepts a model is weak on, plus per-distribution
comparison tables. The paper shows the clustered matrix (Fig. 8) but publishes no code; the definitions are ours:

  events   one per (concept, dimension, answer): discriminative queries → concept = the object asked about, dimension =
           query type (attribute split by kind, e.g. "attribute:state"), hallucinated = the scored answer is wrong;
           generative queries → one event per truth object of the image, dimension "generative", hallucinated = the
           caption has ≥ 1 hallucinated object (CAOS judging).
  M[c, d]  = hallucinated events / events for concept c and dimension d (NaN when there is none).
  rows are clustered with `linkage(pdist(M filled with 0, metric), method)`; flat clusters by `maxclust`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import ConfigError, InputError
from ..io import atomic_path, write_parquet
from ..metrics.parsers import failed_mask, parse_yes_no
from ..progress import get_logger

log = get_logger(__name__)

LINKAGE_METHODS = ("single", "complete", "average", "weighted", "centroid", "median", "ward")
METRICS = ("euclidean", "cityblock", "cosine", "correlation", "chebyshev", "hamming", "jaccard")
EUCLIDEAN_ONLY = {"centroid", "median", "ward"}
GENERATIVE = "generative"


def dimension_of(query_type: str, attribute_kind: str | None) -> str:
    if query_type == "attribute" and attribute_kind:
        return f"attribute:{attribute_kind}"
    return query_type


def discriminative_events(queries, answers, scores=None):
    """(query_id, concept, dimension, distribution, hallucinated) for yes/no queries.

    `scores` (the scoring stage's scores/<model>/answers.parquet) is preferred: its `hallucinated` column, else
    `not correct`. Without it, answers are parsed here (first word yes/no) and compared with the query's truth.
    """
    import polars as pl

    disc = queries.filter(pl.col("query_type") != GENERATIVE).filter(pl.col("target").is_not_null())
    if (
        scores is not None
        and "query_id" in scores.columns
        and ("hallucinated" in scores.columns or "correct" in scores.columns)
    ):
        flag = pl.col("hallucinated") if "hallucinated" in scores.columns else ~pl.col("correct")
        judged = scores.select("query_id", flag.cast(pl.Boolean).alias("hallucinated"))
        source = "scores"
    else:
        ok = answers.filter(~failed_mask(answers["answer"], answers["status"])).select("query_id", "answer")
        joined = disc.select("query_id", "truth").join(ok, on="query_id", how="inner")
        parsed = [parse_yes_no(a, "lenient") for a in joined["answer"].to_list()]
        judged = pl.DataFrame(
            {
                "query_id": joined["query_id"],
                "hallucinated": [None if p is None else p != t for p, t in zip(parsed, joined["truth"].to_list())],
            },
            schema={"query_id": pl.String, "hallucinated": pl.Boolean},
        )
        source = "answers"
    events = disc.join(judged, on="query_id", how="inner").filter(pl.col("hallucinated").is_not_null())
    kinds = events["attribute_kind"].to_list() if "attribute_kind" in events.columns else [None] * events.height
    events = events.with_columns(
        pl.Series(
            "dimension", [dimension_of(q, k) for q, k in zip(events["query_type"].to_list(), kinds)], dtype=pl.String
        ),
        pl.col("target").alias("concept"),
    )
    return _event_frame(events), source


def generative_events(queries, captions):
    """One event per truth object of each answered generative query (CAOS per-caption table)."""
    import polars as pl

    gen = queries.filter(pl.col("query_type") == GENERATIVE).select("query_id", "objects", "distribution")
    caps = captions.select(pl.col("caption_id").alias("query_id"), (pl.col("n_hallucinated") > 0).alias("hallucinated"))
    joined = gen.join(caps, on="query_id", how="inner").explode("objects").filter(pl.col("objects").is_not_null())
    joined = joined.with_columns(pl.col("objects").alias("concept"), pl.lit(GENERATIVE).alias("dimension"))
    return _event_frame(joined)


def _event_frame(df):
    import polars as pl

    cols = {
        "query_id": pl.String,
        "concept": pl.String,
        "dimension": pl.String,
        "distribution": pl.String,
        "hallucinated": pl.Boolean,
    }
    if "distribution" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=pl.String).alias("distribution"))
    return df.select([pl.col(c).cast(t) for c, t in cols.items()])


def rate_table(events, by: Sequence[str]):
    import polars as pl

    return (
        events.group_by(list(by))
        .agg(pl.len().cast(pl.Int64).alias("n"), pl.col("hallucinated").sum().cast(pl.Int64).alias("n_hallucinated"))
        .with_columns((pl.col("n_hallucinated") / pl.col("n")).alias("rate"))
        .sort(list(by))
    )


def cluster_rows(matrix: np.ndarray, method: str = "average", metric: str = "euclidean", n_clusters: int = 4):
    """Leaf order and flat cluster ids of the rows; fewer than 2 rows need no clustering."""
    from scipy.cluster.hierarchy import fcluster, leaves_list, linkage
    from scipy.spatial.distance import pdist

    if method not in LINKAGE_METHODS:
        raise ConfigError(f"config key 'diagnosis.linkage': {method!r} is not one of {list(LINKAGE_METHODS)}")
    if metric not in METRICS:
        raise ConfigError(f"config key 'diagnosis.metric': {metric!r} is not one of {list(METRICS)}")
    if method in EUCLIDEAN_ONLY and metric != "euclidean":
        raise ConfigError(f"config key 'diagnosis.metric': linkage {method!r} needs metric 'euclidean', got {metric!r}")
    n = matrix.shape[0]
    if n < 2:
        return np.arange(n), np.ones(n, dtype=np.int64), None
    # Unobserved cells count as "no hallucination seen" for the distance only; the table keeps them null.
    filled = np.nan_to_num(matrix, nan=0.0)
    dist = pdist(filled, metric=metric)
    # cosine/correlation are undefined for all-zero (or constant) rows: treat those pairs as maximally far apart.
    dist = np.nan_to_num(dist, nan=float(np.nanmax(dist)) if np.isfinite(dist).any() else 1.0)
    z = linkage(dist, method=method)
    clusters = fcluster(z, t=min(n_clusters, n), criterion="maxclust").astype(np.int64)
    return leaves_list(z), clusters, z


def diagnose(events, *, linkage: str = "average", metric: str = "euclidean", n_clusters: int = 4, min_events: int = 1):
    """Clustered concept × dimension matrix as a tidy table (concept, dimension, n, n_hallucinated, rate, row, cluster)
    and the wide matrix (rows in leaf order) for plotting."""
    import polars as pl

    cells = rate_table(events, ["concept", "dimension"])
    totals = cells.group_by("concept").agg(pl.col("n").sum().alias("total")).filter(pl.col("total") >= min_events)
    cells = cells.join(totals.select("concept"), on="concept", how="semi")
    concepts = sorted(cells["concept"].unique().to_list())
    dims = sorted(cells["dimension"].unique().to_list(), key=lambda d: (d == GENERATIVE, d))
    matrix = np.full((len(concepts), len(dims)), np.nan)
    ci, di = {c: i for i, c in enumerate(concepts)}, {d: j for j, d in enumerate(dims)}
    for c, d, r in zip(cells["concept"], cells["dimension"], cells["rate"]):
        matrix[ci[c], di[d]] = r
    order, clusters, _ = cluster_rows(matrix, linkage, metric, n_clusters)
    row_of = {concepts[idx]: pos for pos, idx in enumerate(order)}
    cluster_of = {c: int(clusters[i]) for i, c in enumerate(concepts)}
    tidy = cells.with_columns(
        pl.col("concept").replace_strict(row_of, return_dtype=pl.Int64).alias("row"),
        pl.col("concept").replace_strict(cluster_of, return_dtype=pl.Int64).alias("cluster"),
    ).sort(["row", "dimension"])
    ordered = [concepts[i] for i in order]
    return tidy, matrix[order] if len(order) else matrix, ordered, dims


def plot_heatmap(
    path: str | Path,
    matrix: np.ndarray,
    rows: Sequence[str],
    cols: Sequence[str],
    title: str,
    max_rows: int = 80,
    clusters: Sequence[int] | None = None,
) -> None:
    """Heatmap PNG with labelled axes, white lines between flat clusters (contiguous in leaf order); deterministic
    bytes (no software/date metadata)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = list(rows)
    note = ""
    if len(shown) > max_rows:
        shown, matrix, note = shown[:max_rows], matrix[:max_rows], f" (first {max_rows} of {len(rows)} concepts)"
    height = 2.0 + 0.18 * max(len(shown), 1)
    fig, ax = plt.subplots(figsize=(2.5 + 0.9 * max(len(cols), 1), height))
    if len(shown) and len(cols):
        cmap = matplotlib.colormaps["viridis"].with_extremes(bad="lightgrey")
        im = ax.imshow(
            np.ma.masked_invalid(matrix), aspect="auto", cmap=cmap, vmin=0.0, vmax=1.0, interpolation="nearest"
        )
        fig.colorbar(im, ax=ax, label="hallucination rate (grey: no query)")
        ax.set_xticks(range(len(cols)), labels=cols, rotation=45, ha="right")
        ax.set_yticks(range(len(shown)), labels=shown, fontsize=7)
        if clusters is not None:
            shown_clusters = list(clusters)[: len(shown)]
            for i in range(1, len(shown_clusters)):
                if shown_clusters[i] != shown_clusters[i - 1]:
                    ax.axhline(i - 0.5, color="white", linewidth=2)
    else:
        ax.text(0.5, 0.5, "no scored answers", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
    ax.set_xlabel("query dimension")
    ax.set_ylabel("concept (clustered order)")
    ax.set_title(title + note, fontsize=9)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)


def run_diagnosis(
    queries,
    answers,
    captions,
    *,
    scores=None,
    model: str,
    stand_in: bool,
    out_parquet,
    out_png,
    out_distributions,
    linkage: str = "average",
    metric: str = "euclidean",
    n_clusters: int = 4,
    min_events: int = 1,
    max_rows: int = 80,
) -> dict:
    """Write the clustered matrix (parquet + PNG) and the per-distribution table for one model; return a summary."""
    import polars as pl

    for col in ("query_id", "query_type", "target", "objects", "truth"):
        if col not in queries.columns:
            raise InputError(f"queries table: missing column {col!r} (have {queries.columns})")
    disc, source = discriminative_events(queries, answers, scores)
    events = pl.concat([disc, generative_events(queries, captions)])
    tidy, matrix, rows, dims = diagnose(
        events, linkage=linkage, metric=metric, n_clusters=n_clusters, min_events=min_events
    )
    tidy = tidy.with_columns(pl.lit(model).alias("model"), pl.lit(stand_in).alias("stand_in"))
    write_parquet(out_parquet, tidy)
    # One count per query: a generative caption contributes one event per truth object to the matrix but one
    # answer to the distribution comparison.
    per_query = events.unique(subset=["query_id", "dimension"], keep="first", maintain_order=True)
    dist = rate_table(per_query, ["distribution", "dimension"]).with_columns(
        pl.lit(model).alias("model"), pl.lit(stand_in).alias("stand_in")
    )
    write_parquet(out_distributions, dist)
    label = f"{model}{' (STAND-IN model: noise)' if stand_in else ''}: concept × hallucination rate, {linkage}/{metric}"
    row_clusters = [c for _, c in sorted(set(zip(tidy["row"].to_list(), tidy["cluster"].to_list())))]
    plot_heatmap(
        out_png, matrix, rows, dims, label + f", {n_clusters} clusters", max_rows=max_rows, clusters=row_clusters
    )
    log.info(
        "diagnosis %s: %d events, %d concepts × %d dimensions (judged from %s)",
        model,
        events.height,
        len(rows),
        len(dims),
        source,
    )
    return {"events": events.height, "concepts": len(rows), "dimensions": dims, "judged_from": source}
