"""The paper sections of the ODE, CAOS and UniHall/SAMF pages (halluflow.report.papers renders them).

Each function reads one finished result folder (results/<release>/, through halluflow.report.collect.Results, the
report's own reader) and writes paper-section JSON files with their PNG figures into a folder, in the layout of the
paper's figures and tables:

- ODE (Tu, Hu, Sang, CVPR 2025): results per distribution (Fig. 6), real-image set vs ODE images on the same concepts
  (Fig. 1/4) and their difference per model (Fig. 7) from the validity view (halluflow.validity), the clustered
  concept x hallucination matrix (Fig. 8, halluflow.ode.diagnosis) and the domain release (Fig. 9,
  halluflow.ode.domain).
- CAOS: per model and embedder, object precision, recall, objects per caption, 1 - CHAIR_s, POPE-F1 and the CAOS
  scores and ratios (Fig. 3), CAOS_K for k = 1..10 (Fig. 4), CAOS on the object subsets (Fig. 5), and the oracle.
- UniHall / SAMF: GHR/BHR/SHR/GHS per category, static vs fuzzed, every controller of the run side by side on the same
  instances (samf_compare's by_category rows), and Table 4 (metric-human agreement) when labels were given.

Every number is read through the metric catalogue (`CATALOGUE.read`) at its exact location; every caption says which
models, judges and sizes produced it, and every stand-in is listed in the section's `stand_ins`. A part whose stage
did not run is a section without figures whose caption says what to run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import polars as pl

from ..io import write_json
from ..metrics.catalogue import CATALOGUE
from . import figures
from .collect import DISTRIBUTIONS, Results, hallucination_by_distribution
from .page import MAX_INLINE_FIGURE, figure_file

SUBSETS = ("all", "in_domain", "out_of_domain", "without_top3_frequent")


def _model_stand_ins(res: Results, docs: dict[str, dict | None]) -> list[str]:
    """`model X` for every model whose result document says it is a stand-in, plus the release's stand-ins."""
    out = [s for s in res.stand_in_sources() if not s.startswith("model ")]
    out += [f"model {m} (stand-in)" for m, d in docs.items() if d and d.get("stand_in")]
    return out


class _Writer:
    """One paper's section files in one folder."""

    def __init__(self, paper: str, folder: str | Path):
        self.paper, self.folder = paper, Path(folder)
        self.paths: list[Path] = []

    def figure(self, name: str, fig, title: str, stand_in: bool) -> str:
        fig.suptitle(title, y=1.02)
        figures.write_png(self.folder / f"{name}.png", figures.to_png(figures.stamp_stand_in(fig, stand_in)))
        return f"{name}.png"

    def legend_figure(self, name: str, fig, axes, stand_in: bool, legend: str | None = None, title: str = "") -> str:
        """The figure with the legend of its panels right of the last one (the paper's layout), saved."""
        axes[0][-1].legend(title=legend, fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.tight_layout()
        return self.figure(name, fig, title, stand_in)

    def section(self, sid: str, title: str, caption: str, stand_ins: list[str], tables=(), figs=()) -> None:
        path = self.folder / f"{sid}.json"
        doc = {
            "paper": self.paper,
            "section": sid,
            "title": title,
            "caption": caption,
            "stand_ins": sorted(set(stand_ins)),
            "tables": list(tables),
            "figures": list(figs),
        }
        write_json(path, doc)
        self.paths.append(path)


def _models_text(docs: dict[str, dict | None]) -> str:
    parts = [f"{m}{' (STAND-IN)' if d and d.get('stand_in') else ''}" for m, d in docs.items()]
    return ", ".join(parts) or "none"


def _bars(ax, groups: list[str], series: dict[str, list[float | None]], colours: dict[str, str] | None = None):
    """Grouped bars: one group per x label, one bar per series; a missing value is a gap marked n/a."""
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        xs = [j - 0.4 + width * (i + 0.5) for j in range(len(groups))]
        colour = (colours or {}).get(name, figures.PALETTE[i % len(figures.PALETTE)])
        ax.bar(xs, [0.0 if v is None else v for v in values], width=width * 0.92, color=colour, label=name)
        for x, v in zip(xs, values):
            if v is None:
                ax.text(x, 0.01, "n/a", ha="center", va="bottom", fontsize=6, rotation=90, color="#555555")
    ax.set_xticks(range(len(groups)), groups, rotation=20, ha="right", fontsize=8)
    ax.grid(axis="y", alpha=0.3)


# ---- ODE ------------------------------------------------------------------------------------------------------------
def _models(res: Results, models: list[str] | None) -> list[str]:
    """The run's models (the config's, in its order) that have results; None: every model in the folder."""
    found = res.models()
    return [m for m in models if m in found] if models is not None else found


def ode_sections(root: str | Path, folder: str | Path, models: list[str] | None = None) -> list[Path]:
    res = Results(root)
    w = _Writer("ode", folder)
    docs = {m: res.metrics(m) for m in _models(res, models)}
    stand_ins = _model_stand_ins(res, docs)
    queries, images = res.queries(), res.accepted()
    manifest = res.manifest() or {}
    # the judge of every ODE number: the release's stated truth, answers read by the scorer's parser
    parsers = sorted({str(d["parser"]) for d in docs.values() if d and d.get("parser")})
    # a model asked or read otherwise than the release's task declares (halluflow.ode.task) is said in every caption
    overridden = [
        f"{m} ({'; '.join((d.get('task') or {}).get('overrides') or [])})"
        for m, d in docs.items()
        if d and (d.get("task") or {}).get("overridden")
    ]
    sizes = (
        f"judged against the release's truth, answers read by the {', '.join(parsers) or 'release'} parser; "
        f"release {res.release}: {0 if images is None else images.height} accepted images, "
        f"{0 if queries is None else queries.height} questions"
        + (
            "; NOT the release's declared task (an override, metrics task.overrides): " + ", ".join(overridden)
            if overridden
            else ""
        )
    )
    names = list(docs)
    models = _models_text(docs)
    _ode_fig6(res, w, names, models, sizes, stand_ins)
    _ode_validity(res, w, models, stand_ins)
    _ode_fig8(res, w, names, models, sizes, stand_ins)
    _ode_fig9(res, w, manifest, names, models, sizes, stand_ins)
    return w.paths


def _ode_fig6(res: Results, w: _Writer, names: list[str], models: str, sizes: str, stand_ins: list[str]) -> None:
    rates = hallucination_by_distribution(res)
    rates = None if rates is None else rates.filter(pl.col("model").is_in(names))
    title = "Results per distribution (ODE Fig. 6 layout)"
    caption = (
        f"Share of answers the release's scorer marked hallucinated, per scene distribution (standard, long-tail, "
        f"random, fictional) and task. Models: {models}; {sizes}."
    )
    if rates is None or not rates.height:
        w.section("fig6", title, caption + " Not run: no scores/<model>/answers.parquet.", stand_ins)
        return
    fig = figures.rates_by_distribution(rates)
    fig.suptitle("")
    png = w.figure("fig6", fig, "", bool(stand_ins))
    table = rates.rename({"rate": "hallucination_rate"})
    w.section(
        "fig6",
        title,
        caption,
        stand_ins,
        tables=[_table("fig6_table", "Per model, distribution and task", table, ["by.hallucination_rate"])],
        figs=[
            {
                "id": "fig6",
                "title": "Hallucination rate by distribution",
                "file": png,
                "caption": "Bars: hallucinated answers (%) per distribution; n = judged answers.",
                "metrics": ["by.hallucination_rate"],
            }
        ],
    )


def _table(tid: str, title: str, df: pl.DataFrame, metrics: list[str], note: str | None = None) -> dict:
    out = {"id": tid, "title": title, "columns": df.columns, "rows": [list(r) for r in df.iter_rows()]}
    out["metrics"] = metrics
    if note:
        out["note"] = note
    return out


def _ode_validity(res: Results, w: _Writer, models: str, stand_ins: list[str]) -> None:
    doc = res.json("validity/validity.json")
    title14 = "Real-image set vs ODE images on the same concepts (ODE Fig. 1/4 layout)"
    title7 = "Difference between the two datasets per model (ODE Fig. 7 layout)"
    if not doc:
        why = (
            " Not run: set validity.source (a POPE or AMBER set) and validity.results (the run that answered it with "
            "the same models) and ask for results/<release>/validity/validity.json (halluflow release validity). "
            f"Models of this run: {models}."
        )
        w.section("fig1_4", title14, "Existence questions of a static real-image set and of the release." + why, [])
        w.section("fig7", title7, "ODE − real per model, with bootstrap intervals." + why, [])
        return
    metric = doc["metric"]
    rows = doc["models"]
    where = str(res.root / "validity/validity.json")
    value = {
        (r["model"], side): CATALOGUE.check(metric, (r.get(side) or {}).get("value"), f"{where}: {r['model']} {side}")
        for r in rows
        for side in ("ode", "real")
    }
    names = [r["model"] for r in rows]
    v_stand = stand_ins + [f"model {r['model']} (stand-in)" for r in rows if r.get("stand_in")]
    real = doc["real"]
    label = CATALOGUE[metric].label
    caption = (
        f"{label} on the existence questions of the {len(doc['shared_concepts'])} concepts shared by the release and "
        f"the {real['source']} set ({doc['n_questions']['ode']} ODE and {doc['n_questions']['real']} real "
        f"questions); models {', '.join(names)}; {doc['n_resamples']} bootstrap resamples, seed {doc['seed']}. "
        "The paper's third column (recent web images) needs a second real-image run and is not drawn."
    )
    fig, ax = plt.subplots(figsize=(max(4.5, 1.1 * len(names) + 2), 3.4))
    _bars(
        ax,
        names,
        {
            f"real ({real['source']})": [value[(m, "real")] for m in names],
            "ODE": [value[(m, "ode")] for m in names],
        },
    )
    ax.set_ylabel(label)
    ax.legend(fontsize=8, frameon=False)
    png = w.figure("fig1_4", fig, "", bool(v_stand))
    table = pl.DataFrame(
        {
            "model": names,
            f"real {label}": [value[(m, "real")] for m in names],
            f"ODE {label}": [value[(m, "ode")] for m in names],
        }
    )
    w.section(
        "fig1_4",
        title14,
        caption,
        v_stand,
        tables=[_table("fig1_4_table", "Per model", table, [metric])],
        figs=[{"id": "fig1_4", "title": title14, "file": png, "caption": caption, "metrics": [metric]}],
    )
    diffs = [(r.get("difference") or {}) for r in rows]
    fig, ax = plt.subplots(figsize=(max(4.5, 1.1 * len(names) + 2), 3.2))
    d_values = [d.get("value") for d in diffs]
    ax.bar(names, [0.0 if v is None else v for v in d_values], color=figures.PALETTE[0])
    for i, d in enumerate(diffs):
        if d.get("ci_low") is not None and d.get("ci_high") is not None:
            ax.plot([i, i], [d["ci_low"], d["ci_high"]], color="black", lw=1.2)
    ax.axhline(0, color="#555555", lw=0.8)
    ax.set_ylabel(f"{label}: ODE − real")
    ax.tick_params(axis="x", rotation=20)
    png = w.figure("fig7", fig, "", bool(v_stand))
    corr = doc.get("correlation") or {}
    note = "Rank agreement of the two columns across models: " + "; ".join(
        f"{k} {v['value']:.3f}" if v.get("value") is not None else f"{k} undefined ({v.get('undefined')})"
        for k, v in corr.items()
    )
    table = pl.DataFrame(
        {
            "model": names,
            "ODE − real": d_values,
            "ci_low": [d.get("ci_low") for d in diffs],
            "ci_high": [d.get("ci_high") for d in diffs],
        },
        schema={"model": pl.Utf8, "ODE − real": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64},
    )
    w.section(
        "fig7",
        title7,
        caption + " Bars: ODE − real; lines: bootstrap interval.",
        v_stand,
        tables=[_table("fig7_table", "Difference per model", table, [metric], note=note)],
        figs=[{"id": "fig7", "title": title7, "file": png, "caption": "ODE − real per model.", "metrics": [metric]}],
    )


def _ode_fig8(res: Results, w: _Writer, names: list[str], models: str, sizes: str, stand_ins: list[str]) -> None:
    title = "Clustered concept × hallucination matrix (ODE Fig. 8 layout)"
    figs, rows = [], []
    for model in names:
        png = res.diagnosis_png(model)
        matrix = res.table(f"diagnosis/{model}.parquet")
        if png is None or matrix is None:
            continue
        name = f"fig8_{len(figs)}"
        _, size = figure_file(png, str(png))
        if size > MAX_INLINE_FIGURE:  # never read whole: the section's figure says where the file is
            note = f"diagnosis/{model}.png is {size / 1e6:,.0f} MB, "
            note += f"over the {MAX_INLINE_FIGURE / 1e6:.0f} MB a page holds"
            figures.write_png(w.folder / f"{name}.png", figures.to_png(figures.placeholder(str(model), note)))
        else:
            figures.write_png(w.folder / f"{name}.png", png.read_bytes())
        figs.append(
            {
                "id": name,
                "title": f"{model}",
                "file": f"{name}.png",
                "caption": f"{model}: concepts (rows, clustered) × hallucination dimensions (columns).",
                "metrics": ["by.hallucination_rate"],
            }
        )
        per_cluster = (
            matrix.group_by("cluster")
            .agg(
                pl.col("concept").n_unique().alias("concepts"),
                pl.col("n").sum().alias("n_judged"),
                (pl.col("n_hallucinated").sum() / pl.col("n").sum()).alias("hallucination_rate"),
            )
            .sort("cluster")
        )
        rows += [[model, *r] for r in per_cluster.iter_rows()]
    caption = (
        f"Rows: concepts, clustered by their hallucination profile (halluflow.ode.diagnosis); columns: hallucination "
        f"dimensions (existence, counterfactual, attributes, generative). Models: {models}; {sizes}."
    )
    if not figs:
        w.section("fig8", title, caption + " Not run: no diagnosis/<model>.png (rule ode_diagnosis).", stand_ins)
        return
    table = {
        "id": "fig8_clusters",
        "title": "Clusters per model",
        "columns": ["model", "cluster", "concepts", "n_judged", "hallucination_rate"],
        "rows": rows,
        "metrics": ["by.hallucination_rate"],
    }
    w.section("fig8", title, caption, stand_ins, tables=[table], figs=figs)


def _ode_fig9(
    res: Results, w: _Writer, manifest: dict, names: list[str], models: str, sizes: str, stand_ins: list[str]
) -> None:
    from ..ode.release import domain_line

    config = manifest.get("config") or {}
    domain = (config.get("ode") or {}).get("domain")
    title = "Domain release (ODE Fig. 9 layout)"
    line = domain_line(config).lstrip("- ").replace("`", "")  # the DATACARD's markdown line, as plain text
    if not domain:
        w.section(
            "fig9",
            title,
            f"{line} A domain release restricts the graph to a domain's concepts (ode.domain: concepts, categories or "
            "neighbourhood_of; halluflow.ode.domain) and is evaluated like this page's Fig. 6.",
            [],
        )
        return
    rows = []
    for model in names:
        doc = res.metrics(model) or {}
        for dist in DISTRIBUTIONS:
            if dist in (doc.get("by_distribution") or {}):
                where = f"{res.root}/metrics/{model}.json"
                rows.append(
                    [
                        model,
                        dist,
                        CATALOGUE.read(doc, "by.hallucination_rate", where, breakdown="distribution", group=dist),
                        CATALOGUE.read(doc, "by.pope.f1", where, breakdown="distribution", group=dist),
                    ]
                )
    table = {
        "id": "fig9_table",
        "title": "Per model and distribution on the domain release",
        "columns": ["model", "distribution", "hallucination_rate", "POPE F1"],
        "rows": rows,
        "metrics": ["by.hallucination_rate", "by.pope.f1"],
    }
    w.section("fig9", title, f"{line} Models: {models}; {sizes}.", stand_ins, tables=[table])


# ---- CAOS -----------------------------------------------------------------------------------------------------------
FIG3 = [  # (column, catalogue key, drawn as 1 - value)
    ("object precision", "caos.objects.precision", False),
    ("object recall", "caos.objects.recall", False),
    ("objects per caption", "caos.objects.objects_per_caption", False),
    ("1 − CHAIR_s", "caos.objects.chair_s", True),
    ("CAOS POPE-F1", "caos.metrics.pope_f1", False),
]
FIG3_EMBEDDED = [
    ("CAOS_T", "caos.caos_t"),
    ("CAOS_X", "caos.caos_x"),
    ("CAOS_K", "caos.caos_k"),
    ("CAOS_avg", "caos.caos_avg"),
    ("CAOS_T/X", "caos.caos_t_over_x"),
    ("CAOS_X/K", "caos.caos_x_over_k"),
]


def _oracle_text(doc: dict) -> str:
    """How out-of-domain objects were judged, from the run's own settings (caos/<model>.json `oracle`, `settings`)."""
    oracle = doc.get("oracle")
    if oracle:
        members = ", ".join(
            f"{m.get('name') or m.get('model')}{' (STAND-IN)' if m.get('stand_in') else ''}"
            for m in oracle.get("members") or []
        )
        return f"oracle ensemble [{members}] (vote {oracle.get('vote')}, tie {oracle.get('tie')})"
    policy = (doc.get("settings") or {}).get("ood_without_oracle")
    if policy == "hallucinated":
        return "no oracle: out-of-domain objects the truth does not list counted as hallucinated (ood_without_oracle)"
    if policy == "exclude":
        return "no oracle: out-of-domain objects the truth does not list left undecided, excluded (ood_without_oracle)"
    return "no oracle (how out-of-domain objects were judged is not recorded in this result)"


def _objects_text(doc: dict) -> str:
    """What counted as an object, from the run's settings: negation, meta-words, synonym classes."""
    settings = doc.get("settings") or {}
    parts = []
    if "negation" in settings:
        parts.append("objects said to be absent left out" if settings["negation"] == "skip" else "negations ignored")
    if "meta_words" in settings:
        n = (doc.get("extraction") or {}).get("meta_words_left_out")
        left = f" ({n} mentions left out)" if n else ""
        parts.append(
            f"meta-words (picture, image, scene, background...) not objects{left}"
            if settings["meta_words"] == "skip"
            else "meta-words (picture, image, scene...) counted as objects"
        )
    if "synonym_classes" in settings:
        parts.append(
            "objects and truth compared by CHAIR synonym class (woman = person)"
            if settings["synonym_classes"]
            else "objects and truth compared by name (no synonym table)"
        )
    return "; ".join(parts)


def _judges_text(doc: dict) -> str:
    llm = doc.get("llm") or {}
    extractor = doc.get("extractor")
    if llm:
        extractor += f" with {llm.get('model')}{' (STAND-IN)' if llm.get('stand_in') else ''}"
    objects = _objects_text(doc)
    return f"extractor {extractor}{f' ({objects})' if objects else ''}; {_oracle_text(doc)}"


def _caos_stand_ins(doc: dict) -> list[str]:
    out = []
    for m in (doc.get("oracle") or {}).get("members") or []:
        if m.get("stand_in"):
            out.append(f"oracle member {m.get('name') or m.get('model')} (stand-in)")
    for name, info in (doc.get("embedder_info") or {}).items():
        if info.get("stand_in"):
            out.append(f"embedder {name} (stand-in)")
    if (doc.get("llm") or {}).get("stand_in"):
        out.append("extractor LLM (stand-in)")
    return out


def caos_sections(root: str | Path, folder: str | Path, models: list[str] | None = None) -> list[Path]:
    res = Results(root)
    w = _Writer("caos", folder)
    docs = {m: res.caos(m) for m in _models(res, models)}
    docs = {m: d for m, d in docs.items() if d}
    if not docs:
        w.section(
            "fig3",
            "Per-model object metrics and CAOS (CAOS Fig. 3 layout)",
            "Not run: no caos/<model>.json (rule caos_score; caos.models selects the models).",
            _model_stand_ins(res, {}),
        )
        return w.paths
    stand_ins = _model_stand_ins(res, docs) + [s for d in docs.values() for s in _caos_stand_ins(d)]
    first = next(iter(docs.values()))
    embedders = sorted(first.get("embedders") or {})
    sizes = ", ".join(
        f"{m}: {d['objects']['n_captions']} captions, {d['objects']['n_objects']} objects" for m, d in docs.items()
    )
    who = f"Models: {_models_text(docs)}; {_judges_text(first)}; embedders {', '.join(embedders)}; {sizes}."
    stand = bool(stand_ins)
    _caos_fig3(w, docs, embedders, who, stand_ins, stand)
    _caos_fig4(w, docs, embedders, who, stand_ins, stand)
    _caos_fig5(w, docs, embedders, who, stand_ins, stand)
    _caos_oracle(w, docs, who, stand_ins)
    return w.paths


def _where(model: str) -> str:
    return f"caos/{model}.json"


def _read(doc: dict, model: str, key: str, embedder: str | None):
    return CATALOGUE.read(doc, key, _where(model), embedder=embedder) if embedder else None


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def _caos_fig3(w, docs, embedders, who, stand_ins, stand) -> None:
    models = list(docs)
    rows, values = [], {}
    for m, d in docs.items():
        row = [m]
        for column, key, inverted in FIG3:
            v = CATALOGUE.read(d, key, _where(m))
            values[(m, column)] = None if v is None else (1 - v if inverted else v)
            row.append(v)
        rows.append(row)
    plain = {
        "id": "fig3_objects",
        "title": "Object metrics per model",
        "columns": ["model", *[CATALOGUE[k].label for _, k, _ in FIG3]],
        "rows": rows,
        "metrics": [k for _, k, _ in FIG3],
        "note": "CHAIR_s is listed as measured; the figure draws 1 − CHAIR_s (higher is better, as in the paper).",
    }
    e_rows = []
    for m, d in docs.items():
        for emb in embedders:
            e_rows.append([m, emb, *[CATALOGUE.read(d, k, _where(m), embedder=emb) for _, k in FIG3_EMBEDDED]])
    embedded = {
        "id": "fig3_caos",
        "title": "CAOS scores and ratios per model and embedder",
        "columns": ["model", "embedder", *[CATALOGUE[k].label for _, k in FIG3_EMBEDDED]],
        "rows": e_rows,
        "metrics": [k for _, k in FIG3_EMBEDDED],
    }
    # The paper's Fig. 3 axes, one panel per embedder, with its normalisations: objects per caption / 5, CAOS_avg x 2
    axes_def = [(c, lambda m, e, c=c: values[(m, c)]) for c, _, _ in FIG3 if c != "objects per caption"]
    axes_def.insert(2, ("objects per caption ÷ 5", lambda m, e: _scaled(values[(m, "objects per caption")], 0.2)))
    for label, key, scale in (("CAOS_T/X", "caos.caos_t_over_x", 1), ("CAOS_X/K", "caos.caos_x_over_k", 1)) + (
        ("CAOS_avg × 2", "caos.caos_avg", 2),
    ):
        axes_def.append((label, lambda m, e, key=key, scale=scale: _scaled(_read(docs[m], m, key, e), scale)))
    ncol = max(1, len(embedders))
    fig, axes = plt.subplots(1, ncol, figsize=(5.6 * ncol, 3.8), squeeze=False, sharey=True)
    colours = figures.model_colours(models)
    for ax, emb in zip(axes[0], embedders or [None]):
        _bars(ax, [a for a, _ in axes_def], {m: [f(m, emb) for _, f in axes_def] for m in models}, colours)
        ax.set_title(f"{emb}" if emb else "no embedder")
    png = w.legend_figure("fig3", fig, axes, stand, "model")
    w.section(
        "fig3",
        "Per-model object metrics and CAOS (CAOS Fig. 3 layout)",
        who + " Drawn as in the paper: objects per caption divided by 5, 1 − CHAIR_s, CAOS_avg multiplied by 2; the "
        "tables hold the measured values.",
        stand_ins,
        tables=[plain, embedded],
        figs=[
            {
                "id": "fig3",
                "title": "Precision, recall, 1 − CHAIR_s, POPE-F1 and CAOS per model",
                "file": png,
                "caption": "One panel per embedder (the object metrics do not depend on it); bars per model.",
                "metrics": [k for _, k, _ in FIG3] + [k for _, k in FIG3_EMBEDDED],
            }
        ],
    )


def _caos_fig4(w, docs, embedders, who, stand_ins, stand) -> None:
    models = list(docs)
    colours = figures.model_colours(models)
    fig, axes = plt.subplots(1, max(1, len(embedders)), figsize=(4.6 * max(1, len(embedders)), 3.4), squeeze=False)
    rows = []
    for ax, emb in zip(axes[0], embedders):
        for m in models:
            sweep = (docs[m]["embedders"][emb].get("caos_k_sweep") or {}).keys()
            ks = sorted(int(k) for k in sweep)
            ys = [CATALOGUE.read(docs[m], "caos.caos_k_sweep", _where(m), embedder=emb, k=str(k)) for k in ks]
            ax.plot(ks, [float("nan") if y is None else y for y in ys], marker="o", color=colours[m], label=m)
            rows += [[m, emb, k, y] for k, y in zip(ks, ys)]
        ax.set_xlabel("k (most frequent objects)")
        ax.set_ylabel("CAOS_K")
        ax.set_title(f"CAOS_K with {emb}")
        ax.grid(alpha=0.3)
    png = w.legend_figure("fig4", fig, axes, stand)
    w.section(
        "fig4",
        "CAOS_K for k = 1..10 (CAOS Fig. 4 layout)",
        who,
        stand_ins,
        tables=[
            {
                "id": "fig4_table",
                "title": "CAOS_K per k",
                "columns": ["model", "embedder", "k", "CAOS_K at k"],
                "rows": rows,
                "metrics": ["caos.caos_k_sweep"],
            }
        ],
        figs=[
            {
                "id": "fig4",
                "title": "CAOS_K against k",
                "file": png,
                "caption": "Similarity of hallucinated objects to the k most frequent objects.",
                "metrics": ["caos.caos_k_sweep"],
            }
        ],
    )


def _subset_value(doc: dict, model: str, emb: str, subset: str, score: str):
    if subset == "all":
        return CATALOGUE.read(doc, f"caos.{score}", _where(model), embedder=emb)
    return CATALOGUE.read(doc, f"caos.subsets.{score}", _where(model), embedder=emb, subset=subset)


def _caos_fig5(w, docs, embedders, who, stand_ins, stand) -> None:
    models = list(docs)
    scores = ("caos_t", "caos_x", "caos_k")
    rows = []
    for m, d in docs.items():
        for emb in embedders:
            for subset in SUBSETS:
                n_key = "caos.n_hallucinated" if subset == "all" else "caos.subsets.n_hallucinated"
                params = {"embedder": emb} if subset == "all" else {"embedder": emb, "subset": subset}
                n = CATALOGUE.read(d, n_key, _where(m), **params)
                rows.append(
                    [m, emb, subset, None if n is None else int(n)]
                    + [_subset_value(d, m, emb, subset, s) for s in scores]
                )
    emb = embedders[0] if embedders else None
    fig, axes = plt.subplots(1, len(scores), figsize=(4.4 * len(scores), 3.4), squeeze=False, sharey=True)
    colours = figures.model_colours(models)
    for ax, score in zip(axes[0], scores):
        _bars(
            ax, list(SUBSETS), {m: [_subset_value(docs[m], m, emb, s, score) for s in SUBSETS] for m in models}, colours
        )
        ax.set_title(f"{CATALOGUE['caos.' + score].label} ({emb})")
    png = w.legend_figure("fig5", fig, axes, stand)
    w.section(
        "fig5",
        "CAOS on the object subsets (CAOS Fig. 5 layout)",
        who + " Subsets: all hallucinated objects, in-domain, out-of-domain, and without the top-3 frequent objects.",
        stand_ins,
        tables=[
            {
                "id": "fig5_table",
                "title": "Per model, embedder and subset",
                "columns": ["model", "embedder", "subset", "hallucinated objects", "CAOS_T", "CAOS_X", "CAOS_K"],
                "rows": rows,
                "metrics": ["caos.n_hallucinated", "caos.caos_t", "caos.caos_x", "caos.caos_k"],
                "note": "Subset rows are caos.subsets.<score> (same definitions restricted to the subset's objects).",
            }
        ],
        figs=[
            {
                "id": "fig5",
                "title": "CAOS_T / CAOS_X / CAOS_K per subset",
                "file": png,
                "caption": f"Embedder {emb}; the table has every embedder.",
                "metrics": ["caos.caos_t", "caos.caos_x", "caos.caos_k", "caos.subsets.caos_t"],
            }
        ],
    )


def _caos_oracle(w, docs, who, stand_ins) -> None:
    keys = [
        "caos.objects.n_in_domain",
        "caos.objects.n_out_of_domain",
        "caos.objects.n_oracle_judged",
        "caos.objects.n_oracle_ties",
        "caos.objects.n_undecided",
    ]
    rows = [[m, *[CATALOGUE.read(d, k, _where(m)) for k in keys]] for m, d in docs.items()]
    rows = [[r[0], *[None if v is None else int(v) for v in r[1:]]] for r in rows]
    warnings = sorted({x for d in docs.values() for x in d.get("warnings") or []})
    w.section(
        "oracle",
        "Out-of-domain objects and the oracle ensemble",
        who,
        stand_ins,
        tables=[
            {
                "id": "oracle_counts",
                "title": "Objects judged in-domain (vocabulary) and by the oracle",
                "columns": ["model", *[k.split(".")[-1] for k in keys]],
                "rows": rows,
                "metrics": keys,
                **({"note": " ".join(warnings)} if warnings else {}),
            }
        ],
    )


# ---- UniHall / SAMF -------------------------------------------------------------------------------------------------
SAMF_METRICS = ("ghr", "bhr", "shr", "ghs")
# the paper's two controller families (UniHall / SAMF: hill climbing is the heuristic, the bandits the RL ones)
CONTROLLER_KIND = {"hill_climb": "heuristic", "ucb": "RL", "epsilon_greedy": "RL"}


def _by_text(texts: dict[str, str]) -> dict[str, list[str]]:
    """Controllers grouped by their judge description (said once when every controller had the same judges)."""
    out: dict[str, list[str]] = {}
    for name, text in texts.items():
        out.setdefault(text, []).append(name)
    return out


def _controller(name: str) -> str:
    return f"{name} ({CONTROLLER_KIND.get(name, 'controller')})"


def _judge_text(judges: dict | None) -> str:
    if not judges:
        return "judges not recorded"
    parts = []
    for role, info in sorted((judges.get("models") or {}).items()):
        if not info:
            continue
        model = info.get("model")
        if isinstance(model, dict):
            name, stand = model.get("model"), model.get("stand_in")
            kind = info.get("kind")
        else:
            name, stand, kind = model, info.get("stand_in"), info.get("backend")
        failed = f", {info['failed']} of {info['asked']} calls failed (rule fallback)" if info.get("failed") else ""
        parts.append(f"{role}: {kind} {name}{' (STAND-IN)' if stand else ''}{failed}")
    return "; ".join(parts) or f"judge {judges.get('judge')}"


def _judge_stand_ins(judges: dict | None) -> list[str]:
    out = []
    for role, info in ((judges or {}).get("models") or {}).items():
        if not info:
            continue
        model = info.get("model")
        stand = model.get("stand_in") if isinstance(model, dict) else info.get("stand_in")
        if stand:
            out.append(f"SAMF {role} (stand-in)")
    return out


def samf_sections(root: str | Path, folder: str | Path, models: list[str] | None = None) -> list[Path]:
    res = Results(root)
    w = _Writer("samf", folder)
    docs = {m: res.json(f"fuzz/{m}/comparison.json") for m in _models(res, models)}
    docs = {m: d for m, d in docs.items() if d}
    title = "GHR / BHR / SHR / GHS per category, static vs fuzzed, per controller (UniHall / SAMF layout)"
    if not docs:
        w.section("categories", title, "Not run: no fuzz/<model>/comparison.json (rule samf_compare).", [])
        return w.paths
    stand_ins = _model_stand_ins(res, docs)
    rows, judges = [], {}
    for m, d in docs.items():
        for c in d.get("controllers") or []:
            judges.setdefault(c, (d.get("fuzzed_judges") or {}).get(c))
            stand_ins += _judge_stand_ins((d.get("fuzzed_judges") or {}).get(c))
        for r in d.get("by_category") or []:
            where = f"fuzz/{m}/comparison.json"
            params = {"controller": r["controller"], "category": r["category"], "setting": r["setting"]}
            rows.append(
                [
                    m,
                    _controller(r["controller"]),
                    r["category"],
                    r["setting"],
                    *[CATALOGUE.read(d, f"samf.by_category.{k}", where, **params) for k in SAMF_METRICS],
                    int(CATALOGUE.read(d, "samf.by_category.n", where, **params) or 0),
                    int(CATALOGUE.read(d, "samf.by_category.n_failed", where, **params) or 0),
                ]
            )
    controllers = sorted({c for d in docs.values() for c in d.get("controllers") or []})
    n_inst = sorted({r[-2] for r in rows if r[2] == "overall" and r[3] == "static"})
    who = (
        f"Models: {_models_text(docs)}; controllers {', '.join(_controller(c) for c in controllers)} "
        f"on the same test instances ({', '.join(map(str, n_inst))} per model, split "
        f"{next(iter(docs.values())).get('split')}); judges: "
        + " | ".join(
            f"{', '.join(cs)}: {text}" for text, cs in _by_text({c: _judge_text(j) for c, j in judges.items()}).items()
        )
        + "."
    )
    columns = ["model", "controller", "category", "setting", *SAMF_METRICS, "n", "n_failed"]
    table = {
        "id": "by_category",
        "title": "Per model, controller, category and setting (static = the original instances)",
        "columns": columns,
        "rows": rows,
        "metrics": [f"samf.by_category.{k}" for k in (*SAMF_METRICS, "n", "n_failed")],
        "note": "Static rows are the same instances for every controller (one static answer per instance).",
    }
    figs = [_samf_figure(w, m, [r for r in rows if r[0] == m], bool(stand_ins)) for m in docs]
    w.section("categories", title, who, stand_ins, tables=[table], figs=figs)
    _samf_agreement(w, docs, who, stand_ins)
    return w.paths


def _samf_figure(w: _Writer, model: str, rows: list[list[Any]], stand: bool) -> dict:
    categories = [c for c in ("object", "instruction", "knowledge", "overall") if any(r[2] == c for r in rows)]
    controllers = sorted({r[1] for r in rows})
    fig, axes = plt.subplots(1, len(SAMF_METRICS), figsize=(3.6 * len(SAMF_METRICS), 3.4), squeeze=False, sharey=True)
    for i, (ax, metric) in enumerate(zip(axes[0], SAMF_METRICS)):
        col = 4 + i

        def cell(ctrl, cat, setting, col=col):
            hit = [r[col] for r in rows if r[1] == ctrl and r[2] == cat and r[3] == setting]
            return hit[0] if hit else None

        series = {"static": [cell(controllers[0], c, "static") for c in categories]}
        for ctrl in controllers:
            series[f"fuzzed: {ctrl}"] = [cell(ctrl, c, "fuzzed") for c in categories]
        _bars(ax, categories, series)
        ax.set_title(metric.upper())
        ax.set_ylim(0, 1.05)
    png = w.legend_figure(f"categories_{model}", fig, axes, stand, title=f"{model}: static vs fuzzed per category")
    return {
        "id": f"categories_{model}",
        "title": f"{model}: static vs each controller's fuzzed instances",
        "file": png,
        "caption": "n/a: the metric is undefined for that cell (e.g. GHS without a judge, no instance of a category).",
        "metrics": [f"samf.by_category.{k}" for k in SAMF_METRICS],
    }


def _samf_agreement(w: _Writer, docs: dict, who: str, stand_ins: list[str]) -> None:
    title = "Metric–human agreement (UniHall / SAMF Table 4 layout)"
    keys = ["accuracy", "recall", "f1", "kappa", "pearson", "spearman", "n"]
    rows = []
    for m, d in docs.items():
        for r in (d.get("agreement") or {}).get("table") or []:
            params = {"metric": r["metric"], "analysis": r["analysis"]}
            rows.append(
                [m, r["metric"], r["analysis"]]
                + [CATALOGUE.read(d, f"samf.agreement.{k}", f"fuzz/{m}/comparison.json", **params) for k in keys]
            )
    if not rows:
        w.section(
            "table4",
            title,
            "Not run: no human labels given (samf.agreement.labels: a CSV of instance id and human verdict).",
            [],
        )
        return
    w.section(
        "table4",
        title,
        who,
        stand_ins,
        tables=[
            {
                "id": "agreement",
                "title": "Agreement of each metric with the human labels (static answers)",
                "columns": ["model", "metric", "analysis", *keys],
                "rows": rows,
                "metrics": [f"samf.agreement.{k}" for k in keys],
            }
        ],
    )


SECTION_WRITERS = {"ode": ode_sections, "caos": caos_sections, "samf": samf_sections}
