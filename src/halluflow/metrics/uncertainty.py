"""Uncertainty of headline metrics: bootstrap confidence intervals, paired model comparisons, repeated releases.

ODE ("open-set dynamic evaluation", Tu et al.) regenerates its benchmark and averages results over releases; a
single number per model hides how much of a difference between two models is sampling noise. Three tools:

- `bootstrap_ci`: a percentile bootstrap over answers. Every metric here (POPE accuracy / precision / recall /
  F1 / yes-ratio, hallucination rate) depends on the answers only through the counts of a few outcome categories,
  so resampling n answers with replacement is exactly a multinomial draw of those counts: vectorised, no loop over
  resamples or answers.
- `paired_difference`: the paired bootstrap of Koehn (2004) / Efron & Tibshirani on the queries both models
  answered: joint outcome categories are resampled together, so the difference's interval accounts for the
  correlation between the models. "significant" = the 95% interval excludes 0.
- `across_releases`: mean and Student-t 95% interval of one metric over N releases (seeds).

Failed and unread answers are excluded before any of this (they are not outcomes); their counts travel along.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import numpy as np
import polars as pl

from ..errors import InputError
from ..io import dumps_json, read_json, read_parquet, write_json

CLI_DESCRIPTION = (
    "Bootstrap 95% confidence intervals of each model's headline metrics and paired bootstrap "
    "comparisons between models on the queries they share, from the score stage's "
    "scores/<model>/answers.parquet tables; or (--metrics) the mean and 95% interval of metrics over "
    "repeated releases. A difference is 'significant' when its interval excludes 0."
)
CLI_EPILOG = """examples:
  halluflow score compare --scores results/ode-demo/scores/*/answers.parquet
  halluflow score compare --scores a.parquet b.parquet --resamples 5000 --seed 1 --out compare.json
  halluflow score compare --metrics results/rel-s*/metrics/tiny-smolvlm.json"""

# Outcome categories of a judged yes/no answer (positive = "yes", as POPE).
TP, FP, TN, FN = 0, 1, 2, 3


def _pope_from_counts(c: np.ndarray) -> dict[str, np.ndarray]:
    """POPE's formulas on count arrays (last axis = TP, FP, TN, FN); NaN where a denominator is 0."""
    tp, fp, tn, fn = (c[..., i].astype(np.float64) for i in range(4))
    n = tp + fp + tn + fn
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = tp / (tp + fp)
        recall = tp / (tp + fn)
        return {
            "accuracy": (tp + tn) / n,
            "precision": precision,
            "recall": recall,
            "f1": 2 * precision * recall / (precision + recall),
            "yes_ratio": (tp + fp) / n,
        }


def _rate_from_counts(c: np.ndarray) -> dict[str, np.ndarray]:
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"hallucination_rate": c[..., 1] / (c[..., 0] + c[..., 1])}


def _interval(samples: np.ndarray, alpha: float) -> tuple[float | None, float | None]:
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return None, None
    lo, hi = np.quantile(samples, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def _value(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def bootstrap_ci(
    counts: np.ndarray,
    metric_fn: Callable[[np.ndarray], dict[str, np.ndarray]],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> dict[str, dict]:
    """Point value and percentile interval of each metric, resampling answers via a multinomial on `counts`."""
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    point = metric_fn(counts)
    if n == 0:
        return {k: {"value": None, "ci_low": None, "ci_high": None, "n": 0} for k in point}
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, counts / n, size=n_resamples)
    boot = metric_fn(draws)
    out = {}
    for key, value in point.items():
        lo, hi = _interval(boot[key], alpha)
        out[key] = {"value": _value(value), "ci_low": lo, "ci_high": hi, "n": n}
    return out


def _judged(scores: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """(yes/no rows with a read answer, rows with a hallucination verdict, exclusion counts)."""
    need = {"query_id", "truth", "parsed"}
    if not need <= set(scores.columns):
        raise InputError(f"scores table lacks column(s) {sorted(need - set(scores.columns))}")
    scores = scores.with_columns(pl.col("truth").cast(pl.Utf8), pl.col("parsed").cast(pl.Utf8))
    if "failed" in scores.columns:  # the scoring stage's flag: a failed request or an empty answer
        ok = scores.filter(~pl.col("failed").fill_null(True))
    else:
        ok = scores.filter(pl.col("status") == "ok") if "status" in scores.columns else scores
    yes_no = ok.filter(pl.col("truth").is_in(["yes", "no"]))
    read = yes_no.filter(pl.col("parsed").is_in(["yes", "no"]))
    halluc = ok.filter(pl.col("hallucinated").is_not_null()) if "hallucinated" in ok.columns else ok.clear()
    excluded = {"n_failed": scores.height - ok.height, "n_unknown": yes_no.height - read.height}
    return read, halluc, excluded


def _pope_category(df: pl.DataFrame) -> np.ndarray:
    pred_yes = (df["parsed"] == "yes").to_numpy()
    truth_yes = (df["truth"] == "yes").to_numpy()
    return np.where(pred_yes, np.where(truth_yes, TP, FP), np.where(truth_yes, FN, TN))


def model_intervals(scores: pl.DataFrame, *, n_resamples: int = 2000, seed: int = 0, alpha: float = 0.05) -> dict:
    """95% intervals of POPE metrics (yes/no questions) and the hallucination rate (every judged answer)."""
    read, halluc, excluded = _judged(scores)
    pope = bootstrap_ci(
        np.bincount(_pope_category(read), minlength=4),
        _pope_from_counts,
        n_resamples=n_resamples,
        seed=seed,
        alpha=alpha,
    )
    h = halluc["hallucinated"].cast(pl.Int64).to_numpy() if halluc.height else np.zeros(0, dtype=np.int64)
    rate = bootstrap_ci(np.bincount(h, minlength=2), _rate_from_counts, n_resamples=n_resamples, seed=seed, alpha=alpha)
    return {**pope, **rate, **excluded, "n_resamples": n_resamples, "confidence": 1 - alpha}


def paired_difference(
    a: pl.DataFrame, b: pl.DataFrame, *, n_resamples: int = 2000, seed: int = 0, alpha: float = 0.05
) -> dict:
    """Paired bootstrap of metric(a) - metric(b) over the queries both models answered (and could be read)."""
    read_a, hall_a, _ = _judged(a)
    read_b, hall_b, _ = _judged(b)
    rng_seed = seed
    out: dict = {}
    both = read_a.select("query_id", "truth", "parsed").join(
        read_b.select("query_id", "parsed"), on="query_id", suffix="_b"
    )
    cat_a = _pope_category(both)
    cat_b = _pope_category(both.select("query_id", "truth", pl.col("parsed_b").alias("parsed")))
    pairs = [(np.bincount(cat_a * 4 + cat_b, minlength=16), 4, _pope_from_counts)]
    hboth = hall_a.select("query_id", "hallucinated").join(
        hall_b.select("query_id", "hallucinated"), on="query_id", suffix="_b"
    )
    ha = hboth["hallucinated"].cast(pl.Int64).to_numpy() if hboth.height else np.zeros(0, dtype=np.int64)
    hb = hboth["hallucinated_b"].cast(pl.Int64).to_numpy() if hboth.height else np.zeros(0, dtype=np.int64)
    pairs.append((np.bincount(ha * 2 + hb, minlength=4), 2, _rate_from_counts))
    rng = np.random.default_rng(rng_seed)
    for joint, k, fn in pairs:
        n = int(joint.sum())

        def marginals(c, k=k):
            c = c.reshape(*c.shape[:-1], k, k)
            return c.sum(axis=-1), c.sum(axis=-2)

        ma, mb = marginals(joint)
        point_a, point_b = fn(ma), fn(mb)
        if n:
            draws = rng.multinomial(n, joint / n, size=n_resamples)
            da, db = marginals(draws)
            boot_a, boot_b = fn(da), fn(db)
        for key in point_a:
            diff = point_a[key] - point_b[key]
            entry = {
                "a": _value(point_a[key]),
                "b": _value(point_b[key]),
                "difference": _value(diff),
                "n": n,
                "ci_low": None,
                "ci_high": None,
                "p_value": None,
                "significant": False,
            }
            if n:
                d = boot_a[key] - boot_b[key]
                d = d[np.isfinite(d)]
                lo, hi = _interval(d, alpha)
                entry.update(ci_low=lo, ci_high=hi)
                if d.size:
                    p = 2 * min((d <= 0).mean(), (d >= 0).mean())
                    entry["p_value"] = float(min(p, 1.0))
                    entry["significant"] = bool(lo is not None and (lo > 0 or hi < 0))
            out[key] = entry
    return out


def across_releases(values: list[float], alpha: float = 0.05) -> dict:
    """Mean and Student-t interval of one metric over releases (None-s, i.e. undefined values, are dropped)."""
    from scipy import stats

    x = np.array([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if x.size == 0:
        return {"mean": None, "ci_low": None, "ci_high": None, "n_releases": 0}
    mean = float(x.mean())
    if x.size == 1:
        return {"mean": mean, "ci_low": None, "ci_high": None, "std": None, "n_releases": 1}
    sem = x.std(ddof=1) / math.sqrt(x.size)
    half = float(stats.t.ppf(1 - alpha / 2, x.size - 1) * sem)
    return {
        "mean": mean,
        "ci_low": mean - half,
        "ci_high": mean + half,
        "std": float(x.std(ddof=1)),
        "n_releases": int(x.size),
    }


HEADLINE = (
    ("pope", "accuracy"),
    ("pope", "f1"),
    ("pope", "precision"),
    ("pope", "recall"),
    (None, "hallucination_rate"),
    ("generative", "chair_s"),
    ("generative", "chair_i"),
)


def repeated_releases(metrics: list[dict], alpha: float = 0.05) -> dict:
    """Headline metrics of one model over several releases' metrics/<model>.json files."""
    out = {}
    for block, key in HEADLINE:
        vals = [((m.get(block) or {}) if block else m).get(key) for m in metrics]
        out[f"{block}.{key}" if block else key] = across_releases(vals, alpha)
    return out


def compare_models(
    tables: dict[str, pl.DataFrame], *, n_resamples: int = 2000, seed: int = 0, alpha: float = 0.05
) -> dict:
    """Intervals for every model and the paired comparison of every pair (sorted names)."""
    names = sorted(tables)
    models = {name: model_intervals(tables[name], n_resamples=n_resamples, seed=seed, alpha=alpha) for name in names}
    comparisons = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            comparisons.append(
                {
                    "a": a,
                    "b": b,
                    "metrics": paired_difference(tables[a], tables[b], n_resamples=n_resamples, seed=seed, alpha=alpha),
                }
            )
    return {
        "confidence": 1 - alpha,
        "n_resamples": n_resamples,
        "seed": seed,
        "models": models,
        "comparisons": comparisons,
    }


def compare_score_files(
    scores: list[str], out: str, *, resamples: int = 1000, seed: int = 0, confidence: float = 0.95
) -> dict:
    """Rule score_compare: every model's scores/<model>/answers.parquet -> compare/models.json."""
    tables = {}
    for p in map(Path, scores):
        table = read_parquet(p)
        tables[_model_name(p, table)] = table
    result = compare_models(tables, n_resamples=resamples, seed=seed, alpha=1 - confidence)
    result["stand_in"] = any(bool(t["stand_in"].any()) for t in tables.values() if "stand_in" in t.columns)
    write_json(out, result)
    return result


def _model_name(path: Path, table: pl.DataFrame) -> str:
    if "model" in table.columns and table.height and table["model"][0]:
        return str(table["model"][0])
    return path.parent.name if path.name == "answers.parquet" else path.stem


# Each resample draws one multinomial row per model pair: 10^6 rows take tens of MB, 10^11 would need terabytes.
MAX_RESAMPLES = 1_000_000


def resample_count(text: str | int) -> int:
    """A whole number of resamples, written 5000 or 5e3, from 1 to MAX_RESAMPLES; else InputError."""
    try:
        value = float(text)
    except (TypeError, ValueError, OverflowError):
        value = float("nan")
    if not value.is_integer() or not 1 <= value <= MAX_RESAMPLES:
        raise InputError(f"--resamples {text}: expected a whole number from 1 to {MAX_RESAMPLES}")
    return int(value)


def configure(parser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--scores", nargs="+", help="scores/<model>/answers.parquet tables (one per model)")
    src.add_argument("--metrics", nargs="+", help="metrics/<model>.json of one model from several releases")
    parser.add_argument(
        "--resamples",
        default="2000",
        help=f"bootstrap resamples, 1..{MAX_RESAMPLES} (default 2000)",
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--confidence", type=float, default=0.95, help="interval level (default 0.95)")
    parser.add_argument("--out", help="also write the JSON here")


def run(args) -> int:
    resamples = resample_count(args.resamples)
    if not 0 < args.confidence < 1:
        raise InputError(f"--confidence {args.confidence}: expected a number between 0 and 1")
    alpha = 1 - args.confidence
    if args.metrics:
        result = {
            "confidence": args.confidence,
            "releases": args.metrics,
            "metrics": repeated_releases([read_json(p) for p in args.metrics], alpha),
        }
    else:
        tables = {}
        for p in map(Path, args.scores):
            table = read_parquet(p)
            name = _model_name(p, table)
            if name in tables:
                raise InputError(f"--scores {p}: model {name!r} given twice")
            tables[name] = table
        result = compare_models(tables, n_resamples=resamples, seed=args.seed, alpha=alpha)
    if args.out:
        write_json(args.out, result)
    print(dumps_json(result))
    return 0
