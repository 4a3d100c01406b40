"""Validity against real images: do models rank the same on an ODE release and on a static real-image set?

ODE (Tu, Hu, Sang, "ODE: Open-Set Evaluation of Hallucinations in Multimodal Large Language Models", CVPR 2025)
checks its synthetic images by scoring the same models on real and synthetic images of the same concepts and showing
each model's two scores and their difference (its Fig. 7, object-existence questions). This module does that for two
finished runs of the workflow on the same models: one whose source is an ODE release, one whose source is a static
real-image set (POPE or AMBER, their images supplied by the user). Both are restricted to the concepts they share:
the real set's existence questions whose object is one of the release's concepts, and the release's existence
questions (plain and counterfactual object questions, never attribute or count ones) about those same concepts.

Per model: the metric on each side (POPE's formulas, through the metric catalogue's `pope.<metric>` entry), the
difference ODE − real, each with a percentile bootstrap interval over that model's answers. Across models: Spearman's
rho and Kendall's tau-b between the two columns, with a bootstrap interval from the same resamples (the answers of
every model on both sides are redrawn, the models stay fixed). Seeded and deterministic. With fewer than 3 models,
or when one column is constant, a correlation is undefined and said to be, never printed as a number.

Every answer is judged by the rule of the side it comes from: the failed-answer rule and the parser recorded in that
run's metrics (ODE: `parser`/`positive`; POPE: `pope.parser`/`pope.positive`; AMBER: AMBER's exact Yes/No), so the
unrestricted numbers are the runs' own. Failed answers are left out and counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from .errors import InputError, visible
from .io import read_json, read_parquet, write_json
from .metrics.catalogue import CATALOGUE
from .metrics.parsers import PARSERS, failed_mask, parse_answers
from .metrics.pope import aggregation_for, confusion_counts, metrics_from_counts

METRICS = ("accuracy", "precision", "recall", "f1")
# Existence questions of an ODE release: plain and counterfactual object questions (no attribute, no count).
EXISTENCE_TYPES = ("existence", "counterfactual")
# The confusion counts a block is made from (metrics.pope.confusion_counts' keys).
COUNT_FIELDS = ("n", "tp", "fp", "tn", "fn", "n_unknown", "pred_yes", "pred_no", "truth_yes", "truth_no", "fn_answered")


def concept_key(name: str) -> str:
    """A concept as both sides are matched on: lower case, single spaces."""
    return " ".join(str(name).lower().split())


@dataclass
class Side:
    """One model's judged existence answers on one test set, as distinct (parsed, truth) cells with multiplicities."""

    cells: pl.DataFrame  # parsed (yes/no/null), truth (yes/no), w
    n_failed: int
    parser: str
    positive: str

    @property
    def n(self) -> int:
        return int(self.cells["w"].sum()) if self.cells.height else 0

    def unit_counts(self) -> np.ndarray:
        """(cells × COUNT_FIELDS): the confusion counts one answer of each cell adds. Counts are sums over answers,
        so a resample's counts are its cell multiplicities times this matrix."""
        rows = []
        for i in range(self.cells.height):
            c = confusion_counts(self.cells["parsed"][i : i + 1], self.cells["truth"][i : i + 1], self.positive)
            rows.append([c[k] for k in COUNT_FIELDS])
        return np.asarray(rows, dtype=np.int64).reshape(-1, len(COUNT_FIELDS))

    def counts(self) -> np.ndarray:
        """The confusion counts of all its answers (COUNT_FIELDS)."""
        if not self.cells.height:
            return np.zeros(len(COUNT_FIELDS), dtype=np.int64)
        return self.cells["w"].to_numpy().astype(np.int64) @ self.unit_counts()

    def block(self, counts) -> dict:
        """The POPE block (metrics.pope.metrics_from_counts) of one set of confusion counts."""
        c = {k: int(v) for k, v in zip(COUNT_FIELDS, counts)}
        c["n_failed"] = self.n_failed
        return metrics_from_counts(c, aggregation_for(self.parser), self.positive)


def _side(parsed: pl.Series, truth: pl.Series, n_failed: int, parser: str, positive: str) -> Side:
    cells = (
        pl.DataFrame({"parsed": parsed.cast(pl.String), "truth": truth.cast(pl.String)})
        .group_by("parsed", "truth")
        .agg(w=pl.len())
        .sort("parsed", "truth", nulls_last=True)
    )
    return Side(cells, n_failed, parser, positive)


def read_metric(block: dict, metric: str, where: str) -> float | None:
    """The metric of a POPE block, read through the catalogue's `pope.<metric>` entry (a metrics document holds its
    POPE block under `pope`)."""
    return CATALOGUE.read({"pope": block}, f"pope.{metric}", where)


# ---- the two runs -----------------------------------------------------------------------------------------------


def _metrics_docs(folder: Path, what: str) -> dict[str, dict]:
    docs = {}
    for path in sorted((folder / "metrics").glob("*.json")):
        doc = read_json(path)
        if not isinstance(doc, dict) or "model" not in doc:
            raise InputError(f"{path}: not a metrics file of the score stage (no 'model')")
        docs[str(doc["model"])] = {**doc, "_path": str(path)}
    if not docs:
        raise InputError(f"{what} {folder}: no metrics/<model>.json (run the workflow's score stage first)")
    return docs


def _release_queries(ode: Path, release: Path | None) -> tuple[pl.DataFrame, Path]:
    candidates = [release / "queries.parquet"] if release else [ode / "release" / "queries.parquet"]
    for path in candidates:
        if path.exists():
            table = read_parquet(path)
            missing = [c for c in ("query_id", "query_type", "attribute_kind", "target") if c not in table.columns]
            if missing:
                raise InputError(f"{path}: missing column(s) {', '.join(missing)}")
            return table, path
    raise InputError(f"{candidates[0]}: release queries not found (give the release folder with --release)")


def ode_existence(ode: Path, release: Path | None = None) -> tuple[pl.DataFrame, Path]:
    """The release's existence questions: query_id, concept (the asked object, concept_key'd)."""
    queries, path = _release_queries(ode, release)
    table = queries.filter(
        pl.col("query_type").is_in(EXISTENCE_TYPES)
        & pl.col("attribute_kind").is_null()
        & pl.col("target").is_not_null()
    ).select(pl.col("query_id").cast(pl.String), pl.col("target").map_elements(concept_key, pl.String).alias("concept"))
    return table, path


def _label(kind: str) -> str:
    """The benchmark's printed name (POPE, AMBER, ODE ...); an unknown kind as given."""
    from .benchmarks import get, names

    return get(kind).label if kind in names() else kind


def real_existence(kind: str, labels: str, annotations: str | None = None) -> pl.DataFrame:
    """The static set's existence questions: query_id (as the answer stage stores it), concept, truth."""
    from .benchmarks import get, names, yes_no_names

    bench = get(kind) if kind in names() else None
    if bench is None or not bench.yes_no:
        raise InputError(
            f"real run's source {kind!r}: validity pairs an ODE release with a static yes/no set "
            f"({', '.join(yes_no_names())}); COCO caption sets are not supported"
        )
    table = bench.existence({"kind": kind, "path": labels, "annotations": annotations})
    return (
        table.filter(pl.col("concept").is_not_null() & pl.col("truth").is_in(["yes", "no"]))
        .select(pl.col("query_id").cast(pl.String), "concept", "truth")
        .with_columns(pl.col("concept").map_elements(concept_key, pl.String))
    )


def _real_answers(real: Path, model: str) -> pl.DataFrame:
    from .ode.scoring import read_answer_shards

    shards = sorted(str(p) for p in (real / "answers" / model).glob("*.parquet"))
    if not shards:
        raise InputError(f"{real / 'answers' / model}: no answer shards of model {model!r}")
    return read_answer_shards(shards)


def _ode_side(ode: Path, model: str, doc: dict, questions: pl.DataFrame) -> Side:
    path = ode / "scores" / model / "answers.parquet"
    scored = read_parquet(path)
    missing = [c for c in ("query_id", "truth", "parsed", "failed") if c not in scored.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)} (not a score-stage table)")
    rows = scored.with_columns(pl.col("query_id").cast(pl.String)).join(questions, on="query_id", how="inner")
    if not rows.height:
        raise InputError(
            f"{path}: answers none of the release's {questions.height} existence questions on the shared concepts "
            "(scores of another release? give its folder with --release)"
        )
    ok = rows.filter(~pl.col("failed").fill_null(True))
    return _side(
        ok["parsed"], ok["truth"], rows.height - ok.height, doc.get("parser", "pope"), doc.get("positive", "yes")
    )


def _real_side(real: Path, model: str, kind: str, doc: dict, questions: pl.DataFrame, parser: str | None) -> Side:
    from .benchmarks import get

    bench = get(kind)
    block = doc.get(bench.scores_key) if isinstance(doc.get(bench.scores_key), dict) else {}
    parser = parser or block.get("parser") or bench.parser
    positive = block.get("positive") or "yes"
    if parser not in PARSERS:
        raise InputError(f"{doc['_path']}: unknown parser {parser!r}")
    answers = _real_answers(real, model)
    rows = answers.select("query_id", "answer", "status").join(questions, on="query_id", how="inner")
    if not rows.height:
        raise InputError(
            f"{real / 'answers' / model}: answers none of the {questions.height} existence questions of the label "
            "file on the shared concepts (answers to another file?)"
        )
    failed = failed_mask(rows["answer"], rows["status"], parser=parser)
    ok = rows.filter(~failed)
    return _side(parse_answers(ok["answer"], parser), ok["truth"], rows.height - ok.height, parser, positive)


# ---- correlations and the bootstrap -------------------------------------------------------------------------------


def rank_correlations(x, y) -> dict[str, float | None]:
    """Spearman's rho and Kendall's tau-b of two equally long columns (None when either is constant or fewer than 3
    values are given: a rank correlation of 2 points is ±1 whatever the scores, not evidence)."""
    from scipy.stats import kendalltau, spearmanr

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"spearman": None, "kendall": None}
    rho = float(spearmanr(x, y).statistic)
    tau = float(kendalltau(x, y).statistic)
    return {"spearman": rho if math.isfinite(rho) else None, "kendall": tau if math.isfinite(tau) else None}


def _interval(samples: list, alpha: float) -> tuple[float | None, float | None]:
    values = np.asarray([s for s in samples if s is not None], dtype=float)
    if values.size == 0:
        return None, None
    lo, hi = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def _draw(side: Side, rng: np.random.Generator, n_resamples: int) -> np.ndarray:
    """Bootstrap confusion counts (n_resamples × COUNT_FIELDS): resampling the answers with replacement is a
    multinomial draw of the cell multiplicities."""
    n = side.n
    if n == 0:
        return np.zeros((n_resamples, len(COUNT_FIELDS)), dtype=np.int64)
    w = side.cells["w"].to_numpy().astype(float)
    return rng.multinomial(n, w / n, size=n_resamples) @ side.unit_counts()


def compare_sides(
    sides: dict[str, tuple[Side, Side]],
    metric: str,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> dict:
    """Per model the metric on each side and ODE − real, with percentile bootstrap intervals; across models the rank
    correlations with intervals from the same resamples. `sides`: model -> (ODE side, real side)."""
    if metric not in METRICS:
        raise InputError(f"--metric {metric!r}: expected one of {', '.join(METRICS)}")
    rng = np.random.default_rng(seed)
    models = sorted(sides)
    point: dict[str, dict] = {}
    boot: dict[str, dict[str, list]] = {}
    for model in models:
        point[model], boot[model] = {}, {}
        for label, side in zip(("ode", "real"), sides[model]):
            where = f"model {model} ({label})"
            point[model][label] = (read_metric(side.block(side.counts()), metric, where), side)
            boot[model][label] = [read_metric(side.block(c), metric, where) for c in _draw(side, rng, n_resamples)]
    rows = []
    for model in models:
        (ode_value, ode_side), (real_value, real_side) = point[model]["ode"], point[model]["real"]
        diff = None if ode_value is None or real_value is None else ode_value - real_value
        boot_diff = [None if a is None or b is None else a - b for a, b in zip(boot[model]["ode"], boot[model]["real"])]
        row = {"model": model, "difference": {"value": diff, **_ci(boot_diff, alpha)}}
        for label, value, side in (("ode", ode_value, ode_side), ("real", real_value, real_side)):
            row[label] = {
                "value": value,
                **_ci(boot[model][label], alpha),
                "n": side.n,
                "n_failed": side.n_failed,
                "parser": side.parser,
            }
        rows.append(row)
    defined = [r for r in rows if r["ode"]["value"] is not None and r["real"]["value"] is not None]
    correlation = {}
    values = rank_correlations([r["ode"]["value"] for r in defined], [r["real"]["value"] for r in defined])
    samples = {"spearman": [], "kendall": []}
    for b in range(n_resamples):
        xs = [boot[r["model"]]["ode"][b] for r in defined]
        ys = [boot[r["model"]]["real"][b] for r in defined]
        got = rank_correlations(xs, ys) if all(v is not None for v in xs + ys) else {"spearman": None, "kendall": None}
        for key in samples:
            samples[key].append(got[key])
    for key in ("spearman", "kendall"):
        entry = {"value": values[key], "n_models": len(defined)}
        if len(defined) < 3:
            entry["undefined"] = f"{len(defined)} model(s) with both scores: a rank correlation needs at least 3"
        elif values[key] is None:
            entry["undefined"] = "one column is constant (every model has the same score on one side)"
        else:
            entry.update(_ci(samples[key], alpha))
            entry["n_resamples_defined"] = sum(s is not None for s in samples[key])
        correlation[key] = entry
    return {"models": rows, "correlation": correlation}


def _ci(samples: list, alpha: float) -> dict:
    lo, hi = _interval(samples, alpha)
    return {"ci_low": lo, "ci_high": hi}


# ---- the command ---------------------------------------------------------------------------------------------------


def validity(
    ode: str | Path,
    real: str | Path,
    labels: str,
    *,
    annotations: str | None = None,
    release: str | Path | None = None,
    metric: str = "accuracy",
    parser: str | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict:
    """The validity document of two finished runs (see the module docstring)."""
    ode, real = Path(ode), Path(real)
    if not 0 < confidence < 1:
        raise InputError(f"--confidence {confidence}: expected a number between 0 and 1")
    if n_resamples < 1:
        raise InputError(f"--resamples {n_resamples}: expected at least 1")
    ode_docs, real_docs = _metrics_docs(ode, "ODE run"), _metrics_docs(real, "real-image run")
    kinds = {str(d.get("source", "ode")) for d in real_docs.values()}
    if len(kinds) != 1:
        raise InputError(f"{real}/metrics: models scored on different sources ({', '.join(sorted(kinds))})")
    kind = kinds.pop()
    odd = [m for m, d in ode_docs.items() if d.get("source", "ode") != "ode"]
    if odd:
        raise InputError(
            f"{ode_docs[odd[0]]['_path']}: scored on a {ode_docs[odd[0]]['source']} source, not an ODE release"
        )
    ode_q, queries_path = ode_existence(ode, Path(release) if release else None)
    real_q = real_existence(kind, labels, annotations)
    ode_concepts, real_concepts = set(ode_q["concept"].to_list()), set(real_q["concept"].to_list())
    shared = sorted(ode_concepts & real_concepts)
    if not shared:
        raise InputError(
            f"{queries_path} and {labels}: no concept shared between the release's {len(ode_concepts)} and the "
            f"{_label(kind)} set's {len(real_concepts)} existence-question objects"
        )
    ode_q = ode_q.filter(pl.col("concept").is_in(shared))
    real_q = real_q.filter(pl.col("concept").is_in(shared))
    models = sorted(set(ode_docs) & set(real_docs))
    if not models:
        raise InputError(
            f"{ode} and {real}: no model answered both ({', '.join(sorted(ode_docs))} vs {', '.join(sorted(real_docs))})"
        )
    sides = {
        m: (_ode_side(ode, m, ode_docs[m], ode_q), _real_side(real, m, kind, real_docs[m], real_q, parser))
        for m in models
    }
    result = compare_sides(sides, metric, n_resamples=n_resamples, seed=seed, alpha=1 - confidence)
    for row in result["models"]:
        m = row["model"]
        row["stand_in"] = bool(ode_docs[m].get("stand_in")) or bool(real_docs[m].get("stand_in"))
    entry = CATALOGUE[f"pope.{metric}"]
    return {
        "metric": entry.name,
        "label": entry.label,
        "better": entry.better,
        "difference": "ODE − real",
        "ode": {"results": str(ode), "queries": str(queries_path), "n_concepts": len(ode_concepts)},
        "real": {"results": str(real), "source": kind, "labels": str(labels), "n_concepts": len(real_concepts)},
        "shared_concepts": shared,
        "n_questions": {"ode": ode_q.height, "real": real_q.height},
        "unpaired_models": sorted(set(ode_docs) ^ set(real_docs)),
        "stand_in": any(r["stand_in"] for r in result["models"]),
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": confidence,
        **result,
    }


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _with_ci(cell: dict) -> str:
    if cell["value"] is None:
        return "n/a"
    if cell.get("ci_low") is None:
        return _fmt(cell["value"])
    return f"{_fmt(cell['value'])} [{_fmt(cell['ci_low'])}, {_fmt(cell['ci_high'])}]"


def table(doc: dict) -> str:
    """The plain-text table and correlations `release validity` prints."""
    real = _label(doc["real"]["source"])
    level = f"{doc['confidence']:.0%}"
    head = ["model", "ODE", "n", real, "n", f"ODE − {real}"]
    body = [
        [
            r["model"] + (" (stand-in)" if r["stand_in"] else ""),
            _with_ci(r["ode"]),
            str(r["ode"]["n"]),
            _with_ci(r["real"]),
            str(r["real"]["n"]),
            _with_ci(r["difference"]),
        ]
        for r in doc["models"]
    ]
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    lines = [
        f"{doc['label']} ({doc['metric']}, better: {doc['better'] or '—'}) on {len(doc['shared_concepts'])} shared "
        f"concept(s): {doc['n_questions']['ode']} ODE and {doc['n_questions']['real']} {real} existence questions; "
        f"[{level} bootstrap intervals, {doc['n_resamples']} resamples, seed {doc['seed']}]",
        "  ".join(h.ljust(w) for h, w in zip(head, widths)),
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
    for key, name in (("spearman", "Spearman rho"), ("kendall", "Kendall tau-b")):
        c = doc["correlation"][key]
        if "undefined" in c:
            lines.append(f"{name}: undefined ({c['undefined']})")
        else:
            lines.append(f"{name}: {_with_ci(c)} over {c['n_models']} models")
    if doc["unpaired_models"]:
        lines.append(f"not in both runs (left out): {', '.join(doc['unpaired_models'])}")
    if doc["stand_in"]:
        lines.append("(stand-in) = a tiny random stand-in model: its answers are noise, and so is its row")
    return "\n".join(visible(line) for line in lines)  # a model name from data stays on its line


def run_workflow(ode: str | Path, section: dict, out: str, *, seed: int = 0, release: str | None = None) -> dict:
    """Rule release_validity: this run's results and the config's `validity` section -> validity/validity.json."""
    if not section.get("results"):
        raise InputError(
            "config key 'validity.results': required when validity.source is set (the result folder "
            "of the run that answered that set with the same models)"
        )
    source = section["source"]
    doc = validity(
        ode,
        section["results"],
        source["path"],
        annotations=source.get("annotations"),
        release=release,
        metric=section.get("metric", "accuracy"),
        n_resamples=int(section.get("resamples", 1000)),
        seed=int(seed),
    )
    write_json(out, doc)
    return doc
