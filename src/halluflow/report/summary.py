"""The standalone HTML summary of one release (design.md "the HTML report"): release audit, per-model metrics,
radar, ODE hallucination rate by distribution, concept × hallucination heatmaps, CEDI curves, SAMF bars.

Built from the result folder alone (no Snakemake needed); every section says "not run" when its stage is absent.
Images are embedded as data URLs (one portable file) or written beside the page and linked relatively.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import polars as pl

from ..errors import InputError
from ..io import write_bytes, write_text
from ..metrics.catalogue import CATALOGUE
from ..progress import get_logger, progress
from . import figures
from .collect import (
    Results,
    counts_table,
    hallucination_by_distribution,
    metrics_long,
    rejection_reasons,
    require,
    scorecard,
    scorecard_table,
)
from .page import Html, _Page, join, render_shell, tag

log = get_logger(__name__)


@dataclass(frozen=True)
class ReportOptions:
    gallery_size: int = 12  # images per gallery (round-robin over distribution × pair kind)
    max_boxes: int = 4  # detector boxes drawn per image, highest scores first
    dpi: int = 110  # figure resolution; 110 keeps the embedded page a few MB


# (section id, title, figure name or None). Ids are stable: tests and links rely on them.
SECTIONS = [
    ("overview", "Overview", None),
    ("counts", "Release audit: counts", None),
    ("gallery-accepted", "Release audit: accepted images", "gallery_accepted"),
    ("gallery-rejected", "Release audit: rejected images", "gallery_rejected"),
    ("metrics", "Per-model metrics", None),
    ("radar", "Models across metrics", "radar"),
    ("rates", "Hallucination rate by distribution", "rates"),
    ("uncertainty", "Uncertainty: intervals and model comparisons", "intervals"),
    ("diagnosis", "Concept × hallucination (clustered)", None),
    ("cedi", "CEDI: per-turn hallucination", "cedi"),
    ("cedi-errors", "CEDI: error types", "cedi_errors"),
    ("samf", "SAMF: standard vs fuzzed", "samf"),
    ("alignment", "Metric–human alignment", None),
]

FIGURE_TITLES = {
    "gallery_accepted": "Accepted images",
    "gallery_rejected": "Rejected images",
    "radar": "Models across metrics",
    "rates": "Hallucination rate by distribution",
    "intervals": "Headline metrics with bootstrap intervals",
    "diagnosis": "Concept × hallucination heatmaps",
    "cedi": "CEDI per-turn curves",
    "cedi_errors": "CEDI error types",
    "samf": "SAMF standard vs fuzzed",
}


def figure_builders(res: Results, opts: ReportOptions) -> dict[str, Callable[[], object]]:
    models = res.models()
    return {
        "gallery_accepted": lambda: figures.gallery(res, "accepted", opts.gallery_size, opts.max_boxes),
        "gallery_rejected": lambda: figures.gallery(res, "rejected", opts.gallery_size, opts.max_boxes),
        "radar": lambda: figures.radar(scorecard_table(res)),
        "rates": lambda: figures.rates_by_distribution(hallucination_by_distribution(res)),
        "intervals": lambda: figures.metric_intervals(res.comparison()),
        "diagnosis": lambda: figures.diagnosis_panels(res, models),
        "cedi": lambda: figures.cedi_curves(res, models),
        "cedi_errors": lambda: figures.cedi_error_types(res, models),
        "samf": lambda: figures.samf_bars(res, models),
    }


def write_figure_files(root: str | Path, outputs: dict[str, str | Path], opts: ReportOptions = ReportOptions()) -> None:
    """Write the named figures as PNGs (a placeholder saying why when a stage did not run): the Snakemake rules."""
    res = Results(root)
    stand_in = bool(res.stand_in_sources())
    builders = figure_builders(res, opts)
    for name, path in progress(sorted(outputs.items()), desc="report figures"):
        fig = builders[name]()
        if isinstance(fig, str):
            log.info("%s: %s", name, fig)
        figures.write_png(path, figures.render(fig, FIGURE_TITLES[name], stand_in, opts.dpi))


TABLES: dict[str, Callable[[Results], pl.DataFrame | None]] = {
    "counts": counts_table,
    "rejections": rejection_reasons,
    "scorecard": scorecard,
    "metrics": metrics_long,
    "rates": hallucination_by_distribution,
}


def write_table_files(root: str | Path, outputs: dict[str, str | Path]) -> None:
    """Write the named tables as TSV (Snakemake's report renders them as sortable tables); empty-with-note if absent."""
    res = Results(root)
    for name, path in sorted(outputs.items()):
        df = TABLES[name](res)
        if df is None:
            df = pl.DataFrame({"note": [f"not run: the stage behind the '{name}' table produced no output"]})
        # a number that is undefined for a model (null) reads n/a, as on the HTML page
        write_bytes(path, df.write_csv(separator="\t", float_precision=4, null_value="n/a").encode("utf-8"))


# ---- HTML (the page shell: halluflow.report.page) ----
def html_table(df: pl.DataFrame, percent: tuple[str, ...] = ()) -> Html:
    head = join(tag("th", c) for c in df.columns)
    body = []
    for row in df.iter_rows():
        cells = []
        for col, value in zip(df.columns, row):
            if value is None:
                cells.append(tag("td", "n/a", class_="na"))
            elif isinstance(value, float):
                cells.append(tag("td", f"{100 * value:.1f}%" if col in percent else f"{value:.4g}"))
            elif isinstance(value, (int,)) and not isinstance(value, bool):
                cells.append(tag("td", value))
            else:
                cells.append(tag("td", value, class_="text"))
        body.append(tag("tr", join(cells)))
    return tag("div", tag("table", tag("thead", tag("tr", head)), tag("tbody", join(body))), class_="scroll")


# the verifier counts per row of audit/audit.json's by_query_type_distribution (halluflow.ode.audit)
AUDIT_COLUMNS = ("query_type", "distribution", "items", "detector_judged", "detector_disagrees", "oracle_judged")
AUDIT_COLUMNS += ("oracle_disagrees", "flagged")
ALIGN_STATISTICS = ("n", "accuracy", "recall", "f1", "kappa", "pearson", "spearman")


def _check_alignment(doc: dict, where: str) -> dict:
    """An align/*.json (`halluflow align human --out`): every metric's statistics present, as table_rows reads them."""
    for name, entry in require(doc, where, "metrics", kinds=(dict,)).items():
        parts = [("metrics", name, "overall")]
        if isinstance(entry, dict) and "risk_weighted" in entry:
            parts.append(("metrics", name, "risk_weighted"))
            if "by_risk" in entry:
                levels = require(doc, where, "metrics", name, "by_risk", kinds=(dict,))
                parts += [("metrics", name, "by_risk", lv) for lv in levels]
        for part in parts:
            for key in ALIGN_STATISTICS:
                require(doc, where, *part, key, kinds=(int, float, type(None)))
    return doc


def _label_audit(res: Results) -> Html:
    """The release's label audit (halluflow.ode.audit): verifier counts and, once recorded, the label-error rates."""
    from ..ode.audit import report_tables

    summary = res.json("audit/audit.json")
    if summary is not None:
        where = str(res.root / "audit/audit.json")
        for i, _ in enumerate(require(summary, where, "by_query_type_distribution", kinds=(list,))):
            for key in AUDIT_COLUMNS:
                require(summary, where, "by_query_type_distribution", i, key)
        if summary.get("warning") is not None:
            require(summary, where, "warning", kinds=(str,))
    try:
        counts, rates = report_tables(summary, res.manifest())
    except (KeyError, IndexError, TypeError, AttributeError, ValueError, pl.exceptions.PolarsError) as exc:
        # audit.json is checked above: what is left is the label audit recorded in the manifest
        raise InputError(
            f"{res.root / 'release/manifest.json'}: key 'audit.labels': not the layout `halluflow release audit "
            f"--labels` records ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None
    body = [tag("h3", "Label audit")]
    if counts is None:
        return join([*body, _not_run("not run: no audit/audit.json (halluflow release audit, rule release_audit)")])
    if summary.get("warning"):
        body.append(tag("p", tag("b", summary["warning"]), class_="note"))
    body.append(tag("p", "Second detector and VLM oracle against the stated truth, per query type × distribution:"))
    body.append(html_table(counts))
    if rates is None:
        return join([*body, _not_run("no human labels recorded yet (halluflow release audit REL --labels CSV)")])
    from ..ode.audit import notes

    record = (res.json("release/manifest.json") or {}).get("audit") or {}
    body += [tag("p", tag("b", line), class_="warn") for line in notes(record)]
    body.append(
        tag(
            "p",
            "Human label-error rates by query type × stated answer, beside RePOPE's (Neuhaus & Hein) for POPE; exact "
            "finite-population (hypergeometric) intervals that cover every rate the unlabelled items allow:",
        )
    )
    return join([*body, html_table(rates, percent=("label-error rate", "low", "high", "RePOPE (POPE)"))])


def _not_run(message: str) -> Html:
    return tag("p", message, class_="note")


def build_summary(root: str | Path, out: str | Path, opts: ReportOptions = ReportOptions(), embed: bool = True) -> Path:
    """Write the HTML summary of `root` (results/<release>) to `out`; returns the path."""
    res = Results(root)
    out = Path(out)
    page = _Page(out, embed, opts.dpi)
    stand_in = res.stand_in_sources()
    builders = figure_builders(res, opts)
    models = res.models()

    def figure_section(sid: str, title: str, name: str, caption: str) -> None:
        fig = builders[name]()
        if isinstance(fig, str):
            # "not run" = the stage is absent; anything else (e.g. "no rejected images") ran and came out empty.
            page.add(sid, title, _not_run(fig), ran=not fig.startswith("not run"))
        else:
            png = figures.render(fig, title, bool(stand_in), opts.dpi)
            page.add(sid, title, page.image(name, png, title, caption))

    steps = [s[0] for s in SECTIONS]
    for sid in progress(steps, desc="report sections"):
        title = dict((s[0], s[1]) for s in SECTIONS)[sid]
        if sid == "overview":
            page.add(sid, title, join([_overview(res, models, stand_in), _paper_links(out)]))
        elif sid == "counts":
            counts, reasons = counts_table(res), rejection_reasons(res)
            if counts is None:
                page.add(
                    sid,
                    title,
                    _not_run("not run: scenes/scenes.parquet is absent (sample_scenes did not run)"),
                    ran=False,
                )
            else:
                body = [
                    html_table(counts, percent=("acceptance_rate",)),
                    tag("h3", "Rejection reasons"),
                    html_table(reasons)
                    if reasons is not None and reasons.height
                    else _not_run("no rejected images (or filter_images did not run)"),
                    _label_audit(res),
                ]
                page.add(sid, title, join(body))
        elif sid == "gallery-accepted":
            figure_section(
                sid,
                title,
                "gallery_accepted",
                "Kept by the detector filter. Cyan: first object of the "
                "pair, yellow: second, pink: other labels; numbers are detector confidences (0–1).",
            )
        elif sid == "gallery-rejected":
            figure_section(
                sid,
                title,
                "gallery_rejected",
                "Discarded by the detector filter, with the reason recorded by filter_images.",
            )
        elif sid == "metrics":
            card, full = scorecard(res), metrics_long(res)
            if card is None and full is None:
                page.add(
                    sid, title, _not_run("not run: no metrics/<model>.json, caos, cedi or fuzz outputs"), ran=False
                )
            else:
                body = [_warnings(res, models), html_table(card) if card is not None else None]
                if full is not None:
                    summary = tag("summary", f"All {full.height} numbers from metrics/<model>.json")
                    body.append(tag("details", summary, html_table(full)))
                page.add(sid, title, join(body))
        elif sid == "radar":
            figure_section(
                sid,
                title,
                "radar",
                "Each axis is a bounded headline metric of the metric catalogue (docs/metrics.md), drawn as its "
                f"share of the metric's range; {figures.RADAR_NOTE}. Counts, GED, CAOS cosines and the yes ratio "
                "have no better direction and are not drawn.",
            )
        elif sid == "rates":
            rates = hallucination_by_distribution(res)
            fig = figures.rates_by_distribution(rates)
            if isinstance(fig, str):
                page.add(sid, title, _not_run(fig), ran=False)
            else:
                png = figures.render(fig, title, bool(stand_in), opts.dpi)
                body = page.image(
                    "rates",
                    png,
                    title,
                    "Share of answers the scorer marked hallucinated, per scene "
                    "distribution (standard → fictional = frequent → never co-occurring concepts).",
                )
                table = tag("details", tag("summary", "Table"), html_table(rates, percent=("rate",)))
                page.add(sid, title, join([body, table]))
        elif sid == "uncertainty":
            figure_section(
                sid,
                title,
                "intervals",
                "Dots: the metric on all judged answers; bars: percentile "
                "bootstrap interval over answers (failed and unread answers excluded).",
            )
            table = comparison_table(res.comparison())
            if table is not None:
                page.sections[-1] = (
                    *page.sections[-1][:2],
                    join([page.sections[-1][2], tag("h3", "Paired comparisons"), html_table(table)]),
                    page.sections[-1][3],
                )
        elif sid == "diagnosis":
            parts = []
            for model in models:
                png_path = res.diagnosis_png(model)
                if png_path is not None:
                    parts.append(tag("h3", model))
                    parts.append(page.image_file(f"diagnosis_{model}", png_path, f"diagnosis {model}"))
            if parts:
                page.add(sid, title, join(parts))
            else:
                page.add(
                    sid, title, _not_run("not run: no diagnosis/<model>.png (ode_diagnosis did not run)"), ran=False
                )
        elif sid == "cedi":
            figure_section(
                sid,
                title,
                "cedi",
                "Share of examiner turns answered with a hallucination, per turn, with "
                "and without the conversation history.",
            )
        elif sid == "cedi-errors":
            figure_section(
                sid,
                title,
                "cedi_errors",
                "Hallucinated turns of the CEDI examiner by kind, in the "
                "paper's categories; n = hallucinated turns judged.",
            )
        elif sid == "alignment":
            found = res.alignments()
            if not found:
                page.add(
                    sid,
                    title,
                    _not_run(
                        "not run: no align/*.json (write one with `halluflow align human "
                        "--out results/<release>/align/NAME.json`)"
                    ),
                    ran=False,
                )
            else:
                from ..align import table_rows

                page.add(
                    sid,
                    title,
                    join(
                        join(
                            [
                                tag("h3", name),
                                html_table(
                                    pl.DataFrame(
                                        table_rows(_check_alignment(doc, str(res.root / f"align/{name}.json")))
                                    )
                                ),
                            ]
                        )
                        for name, doc in found.items()
                    ),
                )
        elif sid == "samf":
            figure_section(
                sid,
                title,
                "samf",
                "Hallucination on the original (standard) instances vs the same "
                "instances after the trained fuzzing policy's mutations (first controller, per group); below it, "
                "GHR per category: static vs each controller's fuzzed inputs (fuzz/<model>/controllers.parquet).",
            )
    write_text(out, _render_page(res, page, stand_in))
    return out


def comparison_table(doc: dict | None) -> pl.DataFrame | None:
    """One row per model pair and metric: difference, interval and whether it is outside the noise. Every metric is
    looked up in the catalogue (compare.difference.<metric>); an unknown one is an error."""
    if not doc or not doc.get("comparisons"):
        return None
    rows = []
    where = "compare/models.json"
    for pair in doc["comparisons"]:
        for metric, d in sorted(pair["metrics"].items()):
            name = f"compare.difference.{metric}"
            diff = CATALOGUE.read(doc, name, where, a=pair["a"], b=pair["b"])
            value_entry = f"compare.{metric}"
            rows.append(
                {
                    "a": pair["a"],
                    "b": pair["b"],
                    "metric": metric,
                    "a_value": CATALOGUE.check(value_entry, d.get("a"), f"{where}: {pair['a']} {metric}"),
                    "b_value": CATALOGUE.check(value_entry, d.get("b"), f"{where}: {pair['b']} {metric}"),
                    "difference": diff,
                    "ci_low": CATALOGUE.check(name, d.get("ci_low"), f"{where}: {metric} ci_low"),
                    "ci_high": CATALOGUE.check(name, d.get("ci_high"), f"{where}: {metric} ci_high"),
                    "n_shared": d["n"],
                    "significant": "yes" if d["significant"] else "no (inside the noise)",
                }
            )
    return pl.DataFrame(rows)


def _warnings(res: Results, models: list[str]) -> Html:
    """Warnings the stages wrote into their JSON (e.g. CAOS judging out-of-domain objects without an oracle)."""
    lines = []
    for model in models:
        doc = res.caos(model) or {}
        if doc.get("warnings") is None:
            continue
        where = str(res.root / f"caos/{model}.json")
        for i, _ in enumerate(require(doc, where, "warnings", kinds=(list,))):
            lines.append(tag("p", f"CAOS, {model}: {require(doc, where, 'warnings', i, kinds=(str,))}", class_="warn"))
    return join(lines)


def _overview(res: Results, models: list[str], stand_in: list[str]) -> Html:
    kpis = []
    for label, df in (
        ("scenes", res.scenes()),
        ("images", res.images()),
        ("accepted", res.accepted()),
        ("rejected", res.rejected()),
        ("queries", res.queries()),
    ):
        kpis.append((label, "–" if df is None else str(df.height)))
    kpis.append(("models", str(len(models))))
    body = [tag("div", join(tag("div", tag("b", v), tag("span", k), class_="kpi") for k, v in kpis), class_="kpis")]
    if models:
        body.append(tag("p", f"Models: {', '.join(models)}", class_="note"))
    manifest = res.manifest()
    if manifest is not None:
        n = len(res.manifest_files())
        body.append(tag("p", f"Release manifest: release/manifest.json ({n} files listed).", class_="note"))
    else:
        body.append(tag("p", "No release/manifest.json (package_release did not run).", class_="note"))
    if stand_in:
        body.append(tag("p", f"Stand-in models were used in: {', '.join(stand_in)}.", class_="note"))
    body += _label_support(res)
    return join(body)


def _label_support(res: Results) -> list[Html]:
    """The release's label support (halluflow.ode.support, manifest counts.label_support): the prompt-only line and
    the table per query type x stated answer; a manifest holding it in another shape is one error line."""
    from .collect import require

    manifest = res.manifest() or {}
    counts = manifest.get("counts")
    if not isinstance(counts, dict) or counts.get("label_support") is None:
        return []
    where = str(res.root / "release/manifest.json")
    threshold = require(manifest, where, "counts", "label_support", "threshold", kinds=(int, float))
    line = require(manifest, where, "counts", "label_support", "line", kinds=(str, type(None)))
    rows = require(manifest, where, "counts", "label_support", "rows", kinds=(list,))
    cols = {"query_type": (str,), "truth": (str,), "labels": (int,), "supported": (int,)}
    cols |= {"contradicted": (int,), "prompt_only": (int,)}
    table = pl.DataFrame(
        [
            {c: require(manifest, where, "counts", "label_support", "rows", i, c, kinds=k) for c, k in cols.items()}
            for i in range(len(rows))
        ],
        schema={c: pl.String if k == (str,) else pl.Int64 for c, k in cols.items()},
    ).rename({"query_type": "query type", "truth": "stated answer", "prompt_only": "prompt alone"})
    out = [tag("p", tag("b", line + "."), class_="warn")] if line else []
    out.append(
        tag(
            "p",
            f"Label support: the yes/no labels the release's detector supports at ODE's paper threshold {threshold} "
            '(a "yes" object boxed, a "no" object asked for and not boxed), contradicts, or that rest on the prompt '
            "alone (attribute and count items: their object only):",
        )
    )
    return [*out, html_table(table)]


def _paper_links(out: Path) -> Html:
    """Links to the paper pages beside this page (rules paper_<paper>, halluflow.report.papers) that exist."""
    from .papers import PAPERS

    built = [p for p in PAPERS if (out.parent / f"paper_{p}.html").is_file()]
    if not built:
        return tag(
            "p",
            "Paper pages: none built yet (",
            tag("code", "snakemake paper_ode"),
            ", paper_caos, paper_samf, paper_cedi).",
            class_="note",
        )
    links = join((tag("a", f"{p.upper()} paper layout", href=f"paper_{p}.html") for p in built), " · ")
    return tag("p", "Paper pages: ", links, class_="note", id="paper-pages")


def _render_page(res: Results, page: _Page, stand_in: list[str]) -> str:
    return render_shell(
        f"halluflow report — {res.release}",
        "Hallucination evaluation of vision-language models: ODE release audit, POPE/CHAIR/AMBER scores, CAOS, "
        "CEDI and SAMF.",
        page.sections,
        stand_in,
        join([f"built from {res.release}/ by ", tag("code", "halluflow report build")]),
    )
