"""The report's figures (matplotlib, Agg): release-audit galleries with detector boxes, ODE figure-6-style
hallucination rate by distribution, a CEDI-style radar across models, CEDI per-turn curves, SAMF standard vs fuzzed
bars and the concept × hallucination heatmaps. Each builder returns a Figure, or a string saying why it cannot draw.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: jobs on clusters and CI have no display
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from PIL import Image  # noqa: E402

from ..errors import InputError, clip, visible  # noqa: E402
from ..io import open_rgb, safe_join  # noqa: E402
from ..metrics.catalogue import CATALOGUE  # noqa: E402
from .collect import DISTRIBUTIONS, PAIR_KINDS, Results, Scorecard, _order_key  # noqa: E402

STAND_IN_NOTE = "STAND-IN MODELS (tiny random weights): these numbers are noise, not a measurement"
# Colour-blind-safe palette (Okabe-Ito): models keep one colour across every figure.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
BOX_COLOURS = {"a": "#00E5FF", "b": "#FFEA00", "other": "#FF4081"}

plt.rcParams.update(
    {
        "font.size": 10,
        "axes.titlesize": 11,
        "axes.labelsize": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "figure.facecolor": "white",
        "svg.hashsalt": "halluflow",
        # every label a figure draws is data (concept, model, reason): `$\frac{1}{$` is text, never mathtext
        "text.parse_math": False,
    }
)
MAX_LABEL = 80  # characters of one data value drawn in a figure (a 5 MB rejection reason is cut, with a marker)


def data_label(value: object, limit: int = MAX_LABEL) -> str:
    """A value from data as a figure label: control characters shown as escapes, cut at `limit` characters."""
    return clip(visible(value), limit)


def model_colours(models: list[str]) -> dict[str, str]:
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(sorted(models))}


def to_png(fig: Figure, dpi: int = 110) -> bytes:
    """PNG bytes without the Software/date metadata, so the same data gives byte-identical files."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None}, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def stamp_stand_in(fig: Figure, stand_in: bool) -> Figure:
    if stand_in:
        # Below the axes so it never covers a title; bbox_inches="tight" grows the canvas to include it.
        fig.text(
            0.5,
            -0.01,
            STAND_IN_NOTE,
            ha="center",
            va="top",
            fontsize=9,
            color="white",
            weight="bold",
            bbox={"facecolor": "#C62828", "edgecolor": "none", "pad": 4},
        )
    return fig


def placeholder(title: str, message: str) -> Figure:
    """A small figure standing in for a section whose stage did not run (Snakemake outputs must exist)."""
    fig = plt.figure(figsize=(6, 1.6))
    fig.text(0.5, 0.62, title, ha="center", va="center", fontsize=12, weight="bold")
    fig.text(0.5, 0.3, message, ha="center", va="center", fontsize=9, color="#555555", wrap=True)
    return fig


# ---- release audit: galleries ------------------------------------------------------------------------------
def pick_gallery(df: pl.DataFrame, n: int) -> pl.DataFrame:
    """Round-robin over distribution × pair kind (then image id) so every cell of the design is shown."""
    dist = _order_key(df["distribution"].to_list(), DISTRIBUTIONS)
    kind = _order_key(df["pair_kind"].to_list(), PAIR_KINDS)
    ranked = (
        df.with_columns(
            pl.col("distribution").replace_strict(dist, default=len(dist)).alias("_d"),
            pl.col("pair_kind").replace_strict(kind, default=len(kind)).alias("_k"),
        )
        .sort("_d", "_k", "image_id")
        .with_columns(pl.int_range(pl.len()).over("_d", "_k").alias("_r"))
        .sort("_r", "_d", "_k", "image_id")
    )
    return ranked.head(n).drop("_d", "_k", "_r")


def gallery(res: Results, which: str, n: int = 12, max_boxes: int = 4, columns: int = 4) -> Figure | str:
    """Accepted or rejected images with the detector's highest-scoring boxes and, for rejections, the reason."""
    table = res.accepted() if which == "accepted" else res.rejected()
    if table is None:
        return f"not run: filtered/{which}.parquet is absent (filter_images did not run)"
    if table.height == 0:
        return f"no {which} images in this release"
    chosen = pick_gallery(table, n)
    scenes = res.scenes()
    if scenes is not None:
        chosen = chosen.join(scenes.select("scene_id", "object_a", "object_b"), on="scene_id", how="left")
    detections = res.detections()
    rows = math.ceil(chosen.height / columns)
    cols = min(columns, chosen.height)
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(3.0 * cols, (3.3 if which == "rejected" else 3.1) * rows),
        squeeze=False,
        layout="constrained",
    )
    for ax in axes.flat:
        ax.axis("off")
    for ax, row in zip(axes.flat, chosen.iter_rows(named=True)):
        _draw_tile(ax, res, row, detections, max_boxes, which)
    fig.suptitle(
        f"{which.capitalize()} images ({chosen.height} of {table.height} shown) — boxes: detector "
        f"label and confidence (0–1)",
        fontsize=11,
    )
    return fig


MAX_DRAWN_IMAGE_BYTES = 64_000_000  # an image file drawn into a figure (a gallery tile, a diagnosis panel)
MAX_DRAWN_IMAGE_PIXELS = 40_000_000  # ... and its pixels: larger ones are named in the figure, not decoded


def _image_problem(path: Path) -> str | None:
    """Why the image at `path` is not drawn (too large, not a regular file, unreadable), or None: it can be."""
    if not path.is_file():
        return "not a regular file"
    size = path.stat().st_size
    if size > MAX_DRAWN_IMAGE_BYTES:
        return f"{size / 1e6:,.0f} MB, over the {MAX_DRAWN_IMAGE_BYTES / 1e6:.0f} MB limit"
    try:
        with Image.open(path) as img:
            w, h = img.size
    except Exception as exc:  # PIL raises many types for a file that is not an image
        return f"not a readable image ({type(exc).__name__})"
    if w * h > MAX_DRAWN_IMAGE_PIXELS:
        return f"{w} x {h} pixels, over the {MAX_DRAWN_IMAGE_PIXELS / 1e6:.0f} megapixel limit"
    return None


def _draw_image(ax, path: Path) -> None:
    """The image on `ax`, or a line saying why it is not drawn (the figure still renders, and says so)."""
    problem = _image_problem(path)
    if problem is None:
        try:
            ax.imshow(open_rgb(path))
            return
        except InputError as exc:
            problem = f"not a readable image ({data_label(exc, 60)})"
    ax.text(
        0.5,
        0.5,
        f"image not drawn: {problem}\n{data_label(path.name)}",
        ha="center",
        va="center",
        transform=ax.transAxes,
        color="#C62828",
        fontsize=7,
        wrap=True,
    )


def _draw_tile(ax, res: Results, row: dict, detections: pl.DataFrame | None, max_boxes: int, which: str) -> None:
    path = safe_join(res.root, row["path"])
    if path.exists():
        _draw_image(ax, path)
    else:
        ax.text(
            0.5,
            0.5,
            f"missing image\n{data_label(row['path'])}",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="#C62828",
        )
    obj_a, obj_b = row.get("object_a"), row.get("object_b")
    if detections is not None:
        # a null label records an image the detector found nothing in (its vocabulary only): no box to draw
        boxes = detections.filter((pl.col("image_id") == row["image_id"]) & pl.col("label").is_not_null()).sort(
            "score", "label", descending=[True, False]
        )
        for det in boxes.head(max_boxes).iter_rows(named=True):
            colour = BOX_COLOURS["a" if det["label"] == obj_a else "b" if det["label"] == obj_b else "other"]
            ax.add_patch(
                Rectangle(
                    (det["x0"], det["y0"]),
                    det["x1"] - det["x0"],
                    det["y1"] - det["y0"],
                    fill=False,
                    edgecolor=colour,
                    linewidth=1.6,
                )
            )
            ax.text(
                det["x0"],
                det["y0"],
                f"{data_label(det['label'], 40)} {det['score']:.2f}",
                fontsize=7,
                color="black",
                va="bottom",
                bbox={"facecolor": colour, "edgecolor": "none", "pad": 1, "alpha": 0.85},
            )
    pair = f"{data_label(obj_a, 40)} + {data_label(obj_b, 40)}" if obj_a else data_label(row["scene_id"])
    title = f"{pair}\n{data_label(row['distribution'], 40)} · {data_label(row['pair_kind'].replace('_', '–'), 40)}"
    if which == "rejected":
        title += f"\nrejected: {data_label(row.get('reason', '?'), 60)}"
    ax.set_title(title, fontsize=8, color="#B71C1C" if which == "rejected" else "black")


# ---- ODE figure 6: hallucination rate by distribution ---------------------------------------------------------
def rates_by_distribution(rates: pl.DataFrame | None) -> Figure | str:
    if rates is None:
        return "not run: no scores/<model>/answers.parquet (the score rule did not run)"
    tasks = sorted(rates["task"].drop_nulls().unique().to_list()) or ["all"]
    models = sorted(rates["model"].unique().to_list())
    colours = model_colours(models)
    dists = [
        d
        for d in _order_key(rates["distribution"].drop_nulls().to_list(), DISTRIBUTIONS)
        if d in set(rates["distribution"].to_list())
    ]
    fig, axes = plt.subplots(
        1,
        len(tasks),
        figsize=(max(4.5, 0.9 * len(dists) * len(models) ** 0.5) * len(tasks) + 1.2, 3.8),
        squeeze=False,
        sharey=True,
    )
    width = 0.8 / max(1, len(models))
    for ax, task in zip(axes.flat, tasks):
        sub = rates.filter(pl.col("task") == task) if task != "all" else rates
        for i, model in enumerate(models):
            xs, ys, ns = [], [], []
            for j, dist in enumerate(dists):
                cell = sub.filter((pl.col("model") == model) & (pl.col("distribution") == dist))
                if cell.height:
                    n = int(cell["n"].sum())
                    xs.append(j - 0.4 + width * (i + 0.5))
                    ys.append(100.0 * float(cell["hallucinated"].sum()) / n if n else 0.0)
                    ns.append(n)
            bars = ax.bar(xs, ys, width=width * 0.92, color=colours[model], label=data_label(model))
            for bar, y, n in zip(bars, ys, ns):
                ax.text(
                    bar.get_x() + bar.get_width() / 2, y + 1, f"{y:.0f}%\nn={n}", ha="center", va="bottom", fontsize=7
                )
        ax.set_xticks(range(len(dists)), [data_label(d.replace("_", "-"), 40) for d in dists])
        ax.set_title(f"{data_label(task, 40)} queries")
        ax.set_xlabel("scene distribution")
        ax.set_ylim(0, 115)
        ax.grid(axis="y", alpha=0.3)
    axes.flat[0].set_ylabel("hallucinated answers (%)")
    axes.flat[-1].legend(title="model", fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle("Hallucination rate by distribution (ODE fig. 6 style)", y=1.02)
    fig.tight_layout()
    return fig


# ---- uncertainty: headline metrics with bootstrap intervals ----------------------------------------------------
INTERVAL_METRICS = ("compare.accuracy", "compare.f1", "compare.hallucination_rate")


def metric_intervals(doc: dict | None) -> Figure | str:
    """Per model, each headline metric as a dot with its bootstrap interval (compare/models.json, read through the
    metric catalogue)."""
    if not doc or not doc.get("models"):
        return "not run: no compare/models.json (the score_compare rule did not run)"
    models = sorted(doc["models"])
    colours = model_colours(models)
    fig, axes = plt.subplots(
        1,
        len(INTERVAL_METRICS),
        figsize=(3.2 * len(INTERVAL_METRICS) + 1.2, 0.5 * len(models) + 1.8),
        squeeze=False,
        sharey=True,
    )
    for ax, name in zip(axes.flat, INTERVAL_METRICS):
        entry = CATALOGUE[name]
        for i, model in enumerate(models):
            m = CATALOGUE.read(doc, name, "compare/models.json", model=model) or {}
            if m.get("value") is None:
                ax.text(0.5, i, "n/a", ha="center", va="center", fontsize=8, color="#888888")
                continue
            lo, hi = m.get("ci_low"), m.get("ci_high")
            err = [[m["value"] - lo], [hi - m["value"]]] if lo is not None and hi is not None else None
            ax.errorbar([m["value"]], [i], xerr=err, fmt="o", color=colours[model], capsize=4, ms=6)
        ax.set_xlim(entry.low, entry.high)
        ax.set_title(f"{entry.label} ({entry.better} is better)" if entry.better else entry.label)
        ax.grid(axis="x", alpha=0.3)
    axes.flat[0].set_yticks(range(len(models)), [data_label(m) for m in models])
    axes.flat[0].set_ylim(-0.6, len(models) - 0.4)
    level = int(round(100 * float(doc.get("confidence", 0.95))))
    fig.suptitle(f"Headline metrics with {level}% bootstrap intervals ({doc.get('n_resamples')} resamples)", y=1.02)
    fig.tight_layout()
    return fig


# ---- CEDI-style radar --------------------------------------------------------------------------------------
RADAR_NOTE = "outward = better; lower-is-better metrics drawn as 1 − value; each axis spans the metric's range"


def radar_axes(card: Scorecard) -> list[tuple[str, str]]:
    """(column, axis label) of every scorecard column the radar can draw: its catalogue entry is bounded and has a
    better direction (counts, CAOS cosines, GED and the yes ratio have none); lower-is-better ones are flipped."""
    out = []
    for column in card.frame.columns[1:]:
        if column not in card.columns:
            raise InputError(f"radar: scorecard column {column!r} has no metric catalogue entry")
        entry = card.columns[column]
        if entry.bounded and entry.better in ("higher", "lower"):
            out.append((column, column if entry.better == "higher" else f"1 − {column}"))
    return out


def radar(card: Scorecard | None) -> Figure | str:
    """Polygons per model over every bounded, directed headline metric shared by all models, each scaled to its
    catalogue range and flipped when lower is better, so outward is better on every axis."""
    if card is None:
        return "not run: no per-model metrics yet (score / caos / cedi / samf)"
    frame = card.frame
    # Models with no headline number yet (their scoring still running or off) are left out, not fatal.
    frame = frame.filter(pl.any_horizontal(pl.col(frame.columns[1:]).is_not_null()))
    axes = [(c, label) for c, label in radar_axes(card) if frame.height and frame[c].null_count() == 0]
    if len(axes) < 3:
        return f"a radar needs at least 3 bounded metrics with a direction shared by all models; found {len(axes)}"
    models = frame["model"].to_list()
    colours = model_colours(models)
    angles = [2 * math.pi * i / len(axes) for i in range(len(axes))]
    fig = plt.figure(figsize=(6.4, 5.6))
    ax = fig.add_subplot(projection="polar")
    for row in frame.iter_rows(named=True):
        values = []
        for column, _ in axes:
            entry = card.columns[column]
            share = (row[column] - entry.low) / (entry.high - entry.low)
            values.append(share if entry.better == "higher" else 1.0 - share)
        ax.plot(
            angles + angles[:1], values + values[:1], color=colours[row["model"]], linewidth=1.8, label=row["model"]
        )
        ax.fill(angles + angles[:1], values + values[:1], color=colours[row["model"]], alpha=0.12)
    ax.set_xticks(angles, [label for _, label in axes], fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_yticks([0.25, 0.5, 0.75, 1.0], ["0.25", "0.5", "0.75", "1"], fontsize=7, color="#666666")
    ax.set_title(f"Models across metrics\n({RADAR_NOTE})", pad=18, fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.05, 1.05), fontsize=8, frameon=False, title="model")
    return fig


# ---- CEDI per-turn curves ----------------------------------------------------------------------------------
def cedi_curve_data(df: pl.DataFrame) -> pl.DataFrame | str:
    """Normalise a per_turn table to (mode, turn, rate, n), pooling question types.

    The grader writes one row per (examiner, history, turn, question_type) with n_judged / n_hallucinated / rate;
    rates are pooled as Σ n_hallucinated / Σ n_judged. Tables with only a rate (weighted by n) or raw
    per-answer `hallucinated` flags are accepted too.
    """
    turn = next((c for c in ("turn", "round", "turn_index") if c in df.columns), None)
    if turn is None:
        return f"per_turn table has no turn column (columns: {', '.join(df.columns)})"
    modes = [c for c in ("examiner", "mode", "history", "with_history", "setting") if c in df.columns]
    if modes:
        parts = []
        for c in modes:
            col = pl.col(c)
            if df.schema[c] == pl.Boolean:
                col = col.replace_strict({True: "with history", False: "without history"}, return_dtype=pl.String)
            elif c == "history":
                col = pl.concat_str([col.cast(pl.String), pl.lit(" history")])
            parts.append(col.cast(pl.String).fill_null("?"))
        df = df.with_columns(pl.concat_str(parts, separator=", ").alias("_mode"))
    else:
        df = df.with_columns(pl.lit("all").alias("_mode"))
    if {"n_hallucinated", "n_judged"} <= set(df.columns):
        df = df.with_columns(
            pl.col("n_hallucinated").cast(pl.Float64).alias("_k"), pl.col("n_judged").cast(pl.Float64).alias("_w")
        )
    else:
        rate = next((c for c in ("hallucination_rate", "rate", "hal_rate") if c in df.columns), None)
        if rate is not None:
            weight = pl.col("n").cast(pl.Float64) if "n" in df.columns else pl.lit(1.0)
            df = df.filter(pl.col(rate).is_not_null()).with_columns(weight.alias("_w"))
            df = df.with_columns((pl.col(rate).cast(pl.Float64) * pl.col("_w")).alias("_k"))
        elif "hallucinated" in df.columns:
            df = df.filter(pl.col("hallucinated").is_not_null()).with_columns(
                pl.col("hallucinated").cast(pl.Float64).alias("_k"), pl.lit(1.0).alias("_w")
            )
        else:
            return f"per_turn table has no rate or hallucinated column (columns: {', '.join(df.columns)})"
    return (
        df.group_by("_mode", turn)
        .agg(pl.col("_k").sum().alias("_k"), pl.col("_w").sum().alias("n"))
        .filter(pl.col("n") > 0)
        .with_columns((pl.col("_k") / pl.col("n")).alias("rate"))
        .rename({"_mode": "mode", turn: "turn"})
        .select("mode", "turn", "rate", "n")
        .sort("mode", "turn")
    )


def cedi_curves(res: Results, models: list[str]) -> Figure | str:
    data = {m: res.cedi_per_turn(m) for m in models}
    data = {m: d for m, d in data.items() if d is not None}
    if not data:
        return "not run: no cedi/<model>/per_turn.parquet (CEDI did not run)"
    return cedi_curve_panels(data)


def cedi_curve_panels(data: dict[str, pl.DataFrame]) -> Figure:
    """One panel per model, one curve per mode of its per-turn table (cedi_curve_data); also the CEDI paper page's."""
    fig, axes = plt.subplots(1, len(data), figsize=(4.2 * len(data), 3.4), squeeze=False, sharey=True)
    styles = ["-o", "--s", "-^", "--d", "-v", "--x", "-P", "--*"]
    for ax, (model, df) in zip(axes.flat, sorted(data.items())):
        curves = cedi_curve_data(df)
        if isinstance(curves, str):
            ax.text(0.5, 0.5, curves, ha="center", va="center", wrap=True, fontsize=8, transform=ax.transAxes)
            continue
        for k, mode in enumerate(sorted(curves["mode"].unique().to_list())):
            c = curves.filter(pl.col("mode") == mode)
            ax.plot(
                c["turn"].to_list(),
                [100 * v for v in c["rate"].to_list()],
                styles[k % len(styles)],
                color=PALETTE[k % len(PALETTE)],
                label=mode,
                markersize=4,
            )
        ax.set_title(data_label(model))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("conversation turn")
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, frameon=False)
    axes.flat[0].set_ylabel("hallucinated answers (%)")
    fig.suptitle("CEDI: hallucination rate per turn", y=1.02)
    fig.tight_layout()
    return fig


# ---- CEDI error types ------------------------------------------------------------------------------------------
CEDI_ERROR_LABELS = {
    "object": "hallucinated object",
    "attribute": "wrong attribute",
    "relation": "wrong relation",
    "other": "other (e.g. reasoning)",
}


def cedi_error_types(res: Results, models: list[str]) -> Figure | str:
    """Share of the CEDI examiner's hallucinated turns per error type and model (the paper's error breakdown:
    object / attribute / relation / other), from grades.json `error_types`."""
    data = {}
    for m in models:
        doc = res.cedi_grades(m)
        counts = ((doc or {}).get("error_types") or {}).get("counts")
        if counts is not None:
            data[m] = counts
    if not data:
        return "not run: no cedi/<model>/grades.json with error_types (CEDI did not run)"
    fig, ax = plt.subplots(figsize=(max(4.5, 1.2 * len(data) + 3), 3.4))
    names = sorted(data)
    bottom = [0.0] * len(names)
    for k, (kind, label) in enumerate(CEDI_ERROR_LABELS.items()):
        shares = [100 * data[m].get(kind, 0) / max(1, sum(data[m].values())) for m in names]
        ax.bar(names, shares, bottom=bottom, color=PALETTE[k], label=label)
        bottom = [b + v for b, v in zip(bottom, shares)]
    for i, m in enumerate(names):
        ax.text(i, 101, f"n={sum(data[m].values())}", ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, 110)
    ax.set_ylabel("hallucinated turns (%)")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("CEDI: what the errors look like")
    fig.tight_layout()
    return fig


# ---- SAMF standard vs fuzzed ---------------------------------------------------------------------------------
def samf_bar_data(df: pl.DataFrame) -> pl.DataFrame | str:
    """Normalise a comparison table to (label, setting, value): long (a setting column) or wide (x_standard/x_fuzzed).

    Wide tables (SAMF's Table 11 layout: group, split, ghr_standard, ghr_fuzzed, bhr_standard, ...) plot GHR per
    group on the held-out split when those columns exist.
    """
    if "split" in df.columns and df.filter(pl.col("split") == "test").height:
        df = df.filter(pl.col("split") == "test")
    strings = [c for c in df.columns if df.schema[c] == pl.String]
    setting = next((c for c in strings if {"standard", "fuzzed"} <= set(df[c].drop_nulls().to_list())), None)
    numeric = [c for c in df.columns if df.schema[c].is_numeric() and df.schema[c] != pl.Boolean]
    label_col = next((c for c in ("group", "subtype", "category", "metric", "label") if c in df.columns), None)
    if label_col is None:
        label_col = next((c for c in strings if c not in (setting, "split", "policy")), None)
    label_expr = pl.col(label_col).cast(pl.String).fill_null("") if label_col else pl.lit("all")
    if setting is not None:
        value = next((c for c in ("value", "ghr", "rate") if c in numeric), numeric[0] if numeric else None)
        if value is None:
            return "comparison table has no numeric column"
        return df.filter(pl.col(setting).is_in(["standard", "fuzzed"])).select(
            label_expr.alias("label"), pl.col(setting).alias("setting"), pl.col(value).cast(pl.Float64).alias("value")
        )
    pairs = [
        (c, c.replace("standard", "fuzzed"))
        for c in numeric
        if "standard" in c and c.replace("standard", "fuzzed") in numeric
    ]
    if "ghr_standard" in numeric and "ghr_fuzzed" in numeric:
        pairs = [("ghr_standard", "ghr_fuzzed")]
    if not pairs:
        return f"comparison table has neither a standard/fuzzed setting column nor *standard*/*fuzzed* columns ({', '.join(df.columns)})"
    frames = []
    for std, fuz in pairs:
        metric = std.replace("standard", "").strip("_") or "value"
        lab = pl.concat_str([label_expr, pl.lit(f" · {metric}")]) if len(pairs) > 1 else label_expr
        for col, name in ((std, "standard"), (fuz, "fuzzed")):
            frames.append(
                df.select(
                    lab.alias("label"), pl.lit(name).alias("setting"), pl.col(col).cast(pl.Float64).alias("value")
                )
            )
    return pl.concat(frames)


def _samf_group_axes(ax, model: str, df: pl.DataFrame) -> None:
    """Standard vs fuzzed GHR per group (Table 11 layout, the first controller's rows)."""
    colours = {"standard": "#9E9E9E", "fuzzed": "#D55E00"}
    bars = samf_bar_data(df)
    if isinstance(bars, str):
        ax.text(0.5, 0.5, bars, ha="center", va="center", wrap=True, fontsize=8, transform=ax.transAxes)
        ax.axis("off")
        return
    labels = list(dict.fromkeys(bars["label"].to_list()))
    for k, name in enumerate(("standard", "fuzzed")):
        sub = bars.filter(pl.col("setting") == name)
        lookup = dict(zip(sub["label"].to_list(), sub["value"].to_list()))
        xs = [i - 0.2 + 0.4 * k for i in range(len(labels))]
        heights = [lookup.get(label) or 0.0 for label in labels]
        drawn = ax.bar(xs, heights, width=0.38, color=colours[name], label=name)
        ax.bar_label(drawn, labels=[f"{h:.2f}" for h in heights], fontsize=7, padding=2)
    _samf_ticks(ax, labels)
    ax.set_title(data_label(model))
    ax.set_ylabel("hallucination rate (GHR, 0–1)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, frameon=False)


def _samf_ticks(ax, labels: list[str]) -> None:
    many = len(labels) > 3
    ax.set_xticks(
        range(len(labels)),
        [data_label(x) for x in labels],
        rotation=30 if many else 0,
        ha="right" if many else "center",
        fontsize=8,
    )


def _samf_controller_axes(ax, model: str, df: pl.DataFrame) -> None:
    """GHR per category: the static bar (the same for every controller) beside each controller's fuzzed bar."""
    df = df.filter(pl.col("split") == "test") if "split" in df.columns else df
    categories = list(dict.fromkeys(df["category"].to_list()))
    controllers = list(dict.fromkeys(df["controller"].to_list()))
    first = df.filter(pl.col("controller") == controllers[0])
    series = [("static", first.filter(pl.col("setting") == "static"), "#9E9E9E")]
    palette = ["#D55E00", "#0072B2", "#009E73", "#CC79A7"]
    for k, name in enumerate(controllers):
        sub = df.filter((pl.col("controller") == name) & (pl.col("setting") == "fuzzed"))
        series.append((f"fuzzed · {name}", sub, palette[k % len(palette)]))
    width = 0.8 / len(series)
    for k, (label, sub, colour) in enumerate(series):
        lookup = dict(zip(sub["category"].to_list(), sub["ghr"].to_list()))
        xs = [i - 0.4 + width * (k + 0.5) for i in range(len(categories))]
        values = [lookup.get(c) for c in categories]
        drawn = ax.bar(xs, [v or 0.0 for v in values], width=width * 0.95, color=colour, label=label)
        ax.bar_label(drawn, labels=["n/a" if v is None else f"{v:.2f}" for v in values], fontsize=6, padding=2)
    _samf_ticks(ax, categories)
    ax.set_title(f"{data_label(model)}: by category and controller")
    ax.set_ylabel("GHR (0–1), test split")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, frameon=False)


def samf_bars(res: Results, models: list[str]) -> Figure | str:
    """Per model: standard vs fuzzed GHR per group and, when samf_compare wrote controllers.parquet, a second row
    with static vs each controller's fuzzed GHR per category (the heuristic vs RL comparison of one run)."""
    data = {m: res.fuzz_comparison(m) for m in models}
    data = {m: d for m, d in data.items() if d is not None}
    if not data:
        return "not run: no fuzz/<model>/comparison.parquet (SAMF did not run)"
    by_controller = {m: res.table(f"fuzz/{m}/controllers.parquet") for m in data}
    by_controller = {m: d for m, d in by_controller.items() if d is not None and d.height}
    rows = 2 if by_controller else 1
    fig, axes = plt.subplots(rows, len(data), figsize=(4.6 * len(data), 3.8 * rows), squeeze=False)
    for col, (model, df) in enumerate(sorted(data.items())):
        _samf_group_axes(axes[0][col], model, df)
        if rows == 2:
            if model in by_controller:
                _samf_controller_axes(axes[1][col], model, by_controller[model])
            else:
                axes[1][col].axis("off")
    fig.suptitle("SAMF: standard vs fuzzed inputs", y=1.02)
    fig.tight_layout()
    return fig


# ---- concept × hallucination heatmaps (drawn by the diagnosis stage; combined here for the Snakemake report) -----
def diagnosis_panels(res: Results, models: list[str]) -> Figure | str:
    pngs = [(m, res.diagnosis_png(m)) for m in models]
    pngs = [(m, p) for m, p in pngs if p is not None]
    if not pngs:
        return "not run: no diagnosis/<model>.png (ode_diagnosis did not run)"
    fig, axes = plt.subplots(len(pngs), 1, figsize=(8, 6 * len(pngs)), squeeze=False)
    for ax, (model, path) in zip(axes.flat, pngs):
        _draw_image(ax, path)
        ax.set_title(data_label(model))
        ax.axis("off")
    fig.tight_layout()
    return fig


def render(fig_or_reason: Figure | str, title: str, stand_in: bool, dpi: int = 110) -> bytes:
    """PNG bytes of a figure (stamped when stand-ins ran) or of a placeholder carrying the reason."""
    if isinstance(fig_or_reason, str):
        return to_png(placeholder(title, fig_or_reason), dpi)
    return to_png(stamp_stand_in(fig_or_reason, stand_in), dpi)


def write_png(path: str | Path, data: bytes) -> None:
    from ..io import write_bytes

    write_bytes(path, data)
