"""The fine-tuning section of the ODE paper page (Tu et al., ODE, Fig. 10/11): the before/after table per
distribution and overall, the weights' hashes before and after, and the figure, from the metrics and training records
the fine-tuning loop (halluflow.ode.finetune, rules/finetune.smk) wrote."""

from __future__ import annotations

from pathlib import Path

from ..io import read_json, write_bytes, write_json
from ..metrics.catalogue import CATALOGUE
from . import figures
from .collect import DISTRIBUTIONS

# The table's numbers (metric catalogue keys; per distribution the breakdown entry `by.<key>`): Fig. 11's
# discriminative and Fig. 10's generative scores, and the hallucination rate over both.
TABLE_METRICS = ("hallucination_rate", "pope.accuracy", "pope.f1", "generative.chair_s", "generative.chair_i")


def _value(metrics: dict, key: str, distribution: str | None):
    if distribution is None:
        return CATALOGUE.read(metrics, key, "metrics")
    return CATALOGUE.read(metrics, f"by.{key}", "metrics", breakdown="distribution", group=distribution)


def before_after_rows(base: dict, tuned: dict[str, dict]) -> tuple[list[str], list[list]]:
    """Columns and rows of the before/after table: one row per (distribution, metric), overall first; a value the
    metrics lack (no generative query, no such distribution) is null."""
    methods = list(tuned)
    columns = ["distribution", "metric", "base", *methods, *(f"{m} - base" for m in methods)]
    rows = []
    dists = [None, *(d for d in DISTRIBUTIONS if d in (base.get("by_distribution") or {}))]
    for dist in dists:
        for key in TABLE_METRICS:
            before = _value(base, key, dist)
            after = [_value(tuned[m], key, dist) for m in methods]
            diffs = [None if a is None or before is None else round(a - before, 6) for a in after]
            rows.append(
                ["overall" if dist is None else dist, key if dist is None else f"by.{key}", before, *after, *diffs]
            )
    return columns, rows


def _figure(rows: list[list], columns: list[str], methods: list[str], out: Path, dpi: int, stand_in: bool) -> None:
    """Fig. 10/11's layout: generative (CHAIR_i) and discriminative (POPE accuracy) per distribution, base beside
    each tuned model, in the report's look (palette, stand-in stamp, byte-stable PNG)."""
    import numpy as np

    panels = [
        ("generative.chair_i", "Generative: CHAIR_i (lower is better)"),
        ("pope.accuracy", "Discriminative: POPE accuracy (higher is better)"),
    ]
    series = ["base", *methods]
    fig, axes = figures.plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, (key, title) in zip(axes, panels):
        picked = [r for r in rows if r[1] in (key, f"by.{key}")]
        x = np.arange(len(picked))
        width = 0.8 / len(series)
        for i, name in enumerate(series):
            col = columns.index(name)
            values = [np.nan if r[col] is None else r[col] for r in picked]
            offset = (i - (len(series) - 1) / 2) * width
            ax.bar(x + offset, values, width, label=name, color=figures.PALETTE[i % len(figures.PALETTE)])
        ax.set_xticks(x, [r[0].replace("_", "-") for r in picked], fontsize=8)
        ax.set_ylim(0, 1.18)  # room above 1.0 for the legend
        ax.set_title(title)
        ax.legend(fontsize=8, ncol=len(series), loc="upper center")
    fig.tight_layout()
    write_bytes(out, figures.to_png(figures.stamp_stand_in(fig, stand_in), dpi))


def finetune_section(
    base_metrics: str,
    tuned_metrics: dict[str, str],
    records: dict[str, str],
    out: str | Path,
    model: str,
    dpi: int = 110,
) -> dict:
    """The paper section of the loop: before/after table, weight hashes, the Fig. 10/11 figure and a caption that
    names model, method, steps and sizes."""
    out = Path(out)
    base = read_json(base_metrics)
    tuned = {m: read_json(p) for m, p in tuned_metrics.items()}
    recs = {m: read_json(p) for m, p in records.items()}
    methods = list(tuned)
    columns, rows = before_after_rows(base, tuned)
    stand_in = any(r["stand_in"] for r in recs.values())
    first = next(iter(recs.values()))
    weights = [
        [
            m,
            r["examples"],
            r["steps"],
            r["learning_rate"],
            "LoRA r=%d" % r["lora"]["r"] if r["lora"] else "full",
            r["weights_sha256_before"][:16],
            r["weights_sha256_after"][:16],
            "yes" if r["weights_changed"] else "NO",
        ]
        for m, r in recs.items()
    ]
    figure = out.parent / "before_after.png"
    _figure(rows, columns, methods, figure, dpi, stand_in)
    how = "; ".join(
        f"{m.upper()} {r['steps']} steps × batch {r['batch_size']}×{r['gradient_accumulation_steps']} on {r['examples']} "
        f"examples, lr {r['learning_rate']:g}"
        + (f", β {r['beta']:g}" if r["beta"] is not None else "")
        + (f", LoRA r={r['lora']['r']} α={r['lora']['alpha']} (merged)" if r["lora"] else ", full weights")
        for m, r in recs.items()
    )
    caption = (
        f"Model {model} ({first['base']['model']}) fine-tuned with TRL on the exports of the training release "
        f"{first['train_release']} ({first['train_pairs']} concept pairs): {how}. Before/after on the child release "
        f"{first['eval_release']}, which shares {first['shared_pairs']} concept pairs with it, answered by the answer "
        f"stage and scored by the ODE scorer ({base.get('n_answers')} answers per model)."
        + (
            " STAND-IN: the base model is a tiny random stand-in; the numbers prove the path, not an effect."
            if stand_in
            else ""
        )
    )
    section = {
        "paper": "ode",
        "section": "finetune",
        "title": "Fine-tuning on ODE data: before and after on a disjoint child release (ODE Fig. 10/11)",
        "caption": caption,
        "stand_ins": [model] if stand_in else [],
        "tables": [
            {
                "id": "finetune_before_after",
                "title": "Before / after, per distribution and overall",
                "columns": columns,
                "rows": rows,
                "metrics": sorted({r[1] for r in rows}),
                "note": "hallucination rate, CHAIR_s and CHAIR_i: lower is better; POPE accuracy and F1: higher.",
            },
            {
                "id": "finetune_weights",
                "title": "Training and the weights before / after (sha256 over every tensor)",
                "columns": [
                    "method",
                    "examples",
                    "steps",
                    "learning rate",
                    "weights",
                    "sha256 before",
                    "sha256 after",
                    "changed",
                ],
                "rows": weights,
                "metrics": [],
                "note": "first 16 hex digits; the full sha256 of both is in finetune/<model>/<method>/train.json",
            },
        ],
        "figures": [
            {
                "id": "fig10_11",
                "title": "Generative (Fig. 10) and discriminative (Fig. 11) tasks, base vs fine-tuned",
                "file": figure.name,
                "caption": "CHAIR_i of the descriptions and POPE accuracy of the yes/no questions per distribution "
                "of the child release, the base model beside each fine-tuned one.",
                "metrics": ["generative.chair_i", "by.generative.chair_i", "pope.accuracy", "by.pope.accuracy"],
            }
        ],
    }
    write_json(out, section)
    return section
