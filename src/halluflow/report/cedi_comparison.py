"""The CEDI paper section of the CEDI page (halluflow.report.papers renders it): the comparison of examiners across
graders (Li et al., CEDI paper, "CEDI elicits more hallucinations than static examiners") as tables, the radar with
the paper's normalisation, the per-turn curves with and without history and the error types.

The numbers come from halluflow.cedi.comparison (`section_tables`: the grades of every examiner's transcripts by
every grader); this module only draws and writes them, in the report's look (halluflow.report.figures).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..cedi.comparison import RADAR_AXES, section_tables
from ..io import write_json
from . import figures


def radar_figure(data: Mapping[str, Mapping[str, Mapping[str, float | None]]]):
    """One polar panel per model, one polygon per examiner over the paper-normalised radii."""
    import matplotlib.pyplot as plt

    if not data:
        return "no examiner has comparison numbers (cedi_grade wrote no `comparison` block)"
    axes = [a for a, *_ in RADAR_AXES]
    labels = [f"{a}\n{norm}" for a, _, _, norm in RADAR_AXES]
    angles = [2 * math.pi * i / len(axes) for i in range(len(axes))]
    fig = plt.figure(figsize=(7.2 * len(data), 5.6))
    examiners = sorted({e for per in data.values() for e in per})
    for k, (model, per) in enumerate(sorted(data.items())):
        ax = fig.add_subplot(1, len(data), k + 1, projection="polar")
        top = 0.0
        for i, examiner in enumerate(examiners):
            if examiner not in per:
                continue
            # n/a (the grader did not run, or had nothing to measure) is drawn at 0; the radar_axes table says n/a
            vals = [per[examiner].get(a) or 0.0 for a in axes]
            top = max(top, *vals)
            colour = figures.PALETTE[i % len(figures.PALETTE)]
            ax.plot(angles + angles[:1], vals + vals[:1], color=colour, linewidth=1.8, label=examiner)
            ax.fill(angles + angles[:1], vals + vals[:1], color=colour, alpha=0.1)
        ax.set_xticks(angles, labels, fontsize=7)
        ax.set_ylim(0, max(1.0, top * 1.1))
        ax.tick_params(axis="y", labelsize=7, labelcolor="#666666")
        ax.set_title(model, pad=26)
        ax.legend(loc="upper left", bbox_to_anchor=(1.12, 1.05), fontsize=8, frameon=False, title="examiner")
    fig.suptitle("CEDI vs baseline examiners across graders (larger radius = more hallucination exposed)", y=1.02)
    fig.subplots_adjust(wspace=0.9)
    return fig


def turns_figure(rows: Sequence[Sequence[Any]]):
    """The CEDI examiner's per-turn curves, with vs without history, from the per_turn table rows (the report's
    per-turn panels)."""
    import polars as pl

    frames = {}
    for model in sorted({r[0] for r in rows}):
        sel = [r for r in rows if r[0] == model and r[1] == "cedi" and r[5] is not None]
        if sel:
            frames[model] = pl.DataFrame(
                {
                    "history": [r[2] for r in sel],
                    "turn": [r[3] for r in sel],
                    "rate": [r[5] for r in sel],
                    "n": [r[4] for r in sel],
                }
            )
    return figures.cedi_curve_panels(frames) if frames else "the CEDI examiner has no judged turns"


def errors_figure(data: Mapping[str, Mapping[str, tuple[list, int | None]]]):
    import matplotlib.pyplot as plt

    bars = [(f"{m}\n{s}", shares, n) for m, per in sorted(data.items()) for s, (shares, n) in sorted(per.items())]
    bars = [b for b in bars if b[2]]
    if not bars:
        return "no hallucinated turn to type"
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(bars) + 3), 3.6))
    bottom = [0.0] * len(bars)
    for k, label in enumerate(figures.CEDI_ERROR_LABELS.values()):
        vals = [100 * (b[1][k] or 0) for b in bars]
        ax.bar([b[0] for b in bars], vals, bottom=bottom, color=figures.PALETTE[k], label=label)
        bottom = [x + v for x, v in zip(bottom, vals)]
    for i, b in enumerate(bars):
        ax.text(i, 101, f"n={b[2]}", ha="center", va="bottom", fontsize=7)
    ax.set_ylim(0, 112)
    ax.set_ylabel("hallucinated turns (%)")
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("Error types per examiner and setting")
    fig.tight_layout()
    return fig


def stand_ins_of(grades: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Every stand-in and fallback behind the section's numbers, in words."""
    out = []
    for model, doc in sorted(grades.items()):
        info = doc.get("model") or {}
        if doc.get("stand_in") or info.get("stand_in"):
            out.append(f"{model}: stand-in model under test")
        fb = doc.get("fallbacks") or {}
        for component, f in sorted(fb.items()):
            if f.get("fell_back"):
                out.append(f"{model}: {component} fell back to its rule/template fallback {f['fell_back']} time(s)")
            elif f.get("configured") in ("rule", "template", "random"):
                out.append(f"{model}: {component} is the offline {f['configured']} stand-in (configured)")
        llm = (doc.get("graders") or {}).get("llm") or {}
        if llm.get("stand_in"):
            out.append(f"{model}: stand-in LLM {llm.get('model')} for the examiner/parser/VALOR roles")
    return list(dict.fromkeys(out))


def caption_of(grades: Mapping[str, Mapping[str, Any]]) -> str:
    parts = []
    for model, doc in sorted(grades.items()):
        s = doc.get("settings") or {}
        gr = doc.get("graders") or {}
        llm = gr.get("llm") or {}
        convs = {k: v.get("conversations") for k, v in (doc.get("summary") or {}).items()}
        images = len({r.get("image_id") for r in doc.get("conversations") or []})
        examiners = ", ".join(dict.fromkeys(k.split("/")[0] for k in convs))
        roles = f"{llm.get('backend')} {llm.get('model')}" if llm else "none"
        parts.append(
            f"Model under test {model} ({(doc.get('model') or {}).get('backend', '?')}"
            f"{', stand-in' if doc.get('stand_in') else ''}); {images} image(s), source {s.get('source')}; "
            f"conversations per examiner/history {convs}. Examiners: {examiners} (CEDI's question writer "
            f"{s.get('question_writer')}, switch {s.get('switch')}). LLM roles: {roles}. Graders: "
            + "; ".join(f"{k}: {v}" for k, v in sorted((gr.get("described") or {}).items()))
            + f"; scene-graph parser {s.get('parser')}."
        )
    return " ".join(parts)


def write_section(grades: Mapping[str, Mapping[str, Any]], out_json: str | Path) -> dict:
    """The CEDI paper section (paper page contract): tables + radar, per-turn and error-type figures beside it."""
    out_json = Path(out_json)
    tables, data = section_tables(grades)
    stand_ins = stand_ins_of(grades)
    stand_in = any("stand-in" in s for s in stand_ins)
    panels = [
        ("radar", "Examiners across graders (CEDI's radar)", radar_figure(data["radar"]), tables[0]["metrics"]),
        (
            "per_turn",
            "Hallucination rate per turn, with and without history",
            turns_figure(tables[1]["rows"]),
            tables[1]["metrics"],
        ),
        ("error_types", "Error types", errors_figure(data["errors"]), tables[3]["metrics"]),
    ]
    entries = []
    for fid, title, fig, metrics in panels:
        figures.write_png(out_json.parent / f"{fid}.png", figures.render(fig, title, stand_in))
        entries.append({"id": fid, "title": title, "file": f"{fid}.png", "caption": title, "metrics": metrics})
    section = {
        "paper": "cedi",
        "section": "comparison",
        "title": "Examiners × graders (CEDI's radar), history, premise rejection, error types",
        "caption": caption_of(grades),
        "stand_ins": stand_ins,
        "tables": tables,
        "figures": entries,
    }
    write_json(out_json, section)
    return section
