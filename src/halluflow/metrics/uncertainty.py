"""Uncertainty of headline metrics: bootstrap confidence intervals, paired model comparisons, repeated releases.

ODE ("open-set dynamic evaluation", Tu et al.) regenerates its benchmark and averages results over releases; a
single number per model hides how much of a difference between two models is sampling noise. Three tools:

- `bootstrap_ci`: a percentile bootstrap over answers. Every metric here (POPE accuracy / precision / recall /
  F1 / yes-ratio, hallucination rate) depends on the answers only through the counts of a few outcome categories,
  so resampling n answers with replacement is exactly a multinomial draw of those counts: vectorised, no loop over
  resamples or answers.
- `paired_difference`: the paired bootstrap of Koehn (2004) / Efron & Tibshirani on the queries both models
  answered: joint outcome categories are resampled together, so the difference's interval accounts for the
  correlation between the models. "significant" = the 95% interval excludes 0. Tables of different queries (other
  ids, or a shared id with another truth or image sha256: answers of another release) are refused, not paired.
- `across_releases`: mean and Student-t 95% interval of one metric over N releases (seeds); for a bounded metric
  (a rate, an F1) the interval is taken on the logit scale, so it never leaves the metric's range. The files must
  score one model, each release once; their numbers are read through the metric catalogue (docs/metrics.md).

Failed and unread answers are excluded before any of this (they are not outcomes); their counts travel along.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import numpy as np
import polars as pl

from ..errors import InputError
from ..io import read_json, read_parquet, write_json
from .parsers import failed_mask

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
        # no flag (a table from elsewhere): the shared failed-answer rule on what it records (a table without
        # answer texts can only be judged by its status)
        status = scores["status"] if "status" in scores.columns else None
        text = (
            scores["answer"] if "answer" in scores.columns else pl.repeat("(not recorded)", scores.height, eager=True)
        )
        ok = scores.filter(~failed_mask(text, status))
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


def check_pairable(a: pl.DataFrame, b: pl.DataFrame, name_a: str = "a", name_b: str = "b") -> None:
    """InputError (one line) unless the two score tables answer the same queries: the same query ids, and for each
    id the same truth and, where both tables record it, the same image sha256 and the same task (task_hash). Answers
    to different releases (or to a release whose images changed between two answer runs, or asked with another
    prompt or read with another reader) are not paired answers, whatever their ids say."""
    for name, df in ((name_a, a), (name_b, b)):
        dup = df["query_id"].is_duplicated()
        if dup.any():
            raise InputError(f"score compare: {name} answers query {df.filter(dup)['query_id'][0]!r} more than once")
    ids_a, ids_b = set(a["query_id"].to_list()), set(b["query_id"].to_list())
    if ids_a != ids_b:
        only_a, only_b = sorted(ids_a - ids_b), sorted(ids_b - ids_a)
        example = f"{only_a[0]!r} only in {name_a}" if only_a else f"{only_b[0]!r} only in {name_b}"
        raise InputError(
            f"score compare: {name_a} and {name_b} answered different queries ({len(only_a)} of {len(ids_a)} ids of "
            f"{name_a} and {len(only_b)} of {len(ids_b)} of {name_b} unmatched, e.g. {example}): answers of different "
            "releases are not paired"
        )
    # answers asked or read under different task definitions (another prompt suffix, limit or yes/no reader:
    # halluflow.ode.task) are not paired answers either; a table without the column (made before tasks) is not
    # checked
    if "task_hash" in a.columns and "task_hash" in b.columns:
        tasks_a, tasks_b = set(a["task_hash"].drop_nulls().to_list()), set(b["task_hash"].drop_nulls().to_list())
        if tasks_a and tasks_b and tasks_a != tasks_b:
            raise InputError(
                f"score compare: {name_a} was asked and read under task {', '.join(sorted(tasks_a))} and {name_b} "
                f"under {', '.join(sorted(tasks_b))} (another prompt, generation limit or reader: see each metrics "
                "JSON's task block): not paired"
            )
    cols = ["query_id", "truth"] + ["image_sha256"] * ("image_sha256" in a.columns and "image_sha256" in b.columns)
    both = a.select(cols).join(b.select(cols), on="query_id", suffix="_b")
    for col, what in (("truth", "truth"), ("image_sha256", "image sha256")):
        if col not in cols:
            continue
        differ = both.filter(pl.col(col).cast(pl.String).ne_missing(pl.col(f"{col}_b").cast(pl.String)))
        if differ.height:
            first = differ.row(0, named=True)
            raise InputError(
                f"score compare: query {first['query_id']!r} has {what} {first[col]!r} in {name_a} but "
                f"{first[col + '_b']!r} in {name_b} ({differ.height} such queries): not the same query, not paired"
            )


def paired_difference(
    a: pl.DataFrame,
    b: pl.DataFrame,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
    names: tuple[str, str] = ("a", "b"),
) -> dict:
    """Paired bootstrap of metric(a) - metric(b) over the queries both models answered (and could be read); the
    tables must answer the same queries (`check_pairable`, `names` label them in its message)."""
    read_a, hall_a, _ = _judged(a)
    read_b, hall_b, _ = _judged(b)
    check_pairable(a, b, *names)
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


# Bounded metrics are pulled this far (a share of their range) inside their bounds before the logit: a release at
# exactly 0 or 1 would otherwise have an infinite logit.
LOGIT_EPS = 1e-3


def across_releases(
    values: list[float], alpha: float = 0.05, low: float | None = None, high: float | None = None
) -> dict:
    """Mean and Student-t interval of one metric over releases (None-s, i.e. undefined values, are dropped).

    With both bounds given (a rate, an F1, a percent) the interval is a Student-t interval of the logit of the
    value's share of its range, mapped back, so it stays inside the range however few releases there are (with two
    releases t = 12.7: a plain interval of CHAIR_s 0.3 and 0.9 would reach from -3.5 to 4.7)."""
    from scipy import stats

    x = np.array([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    bounded = low is not None and high is not None
    method = "student-t on the logit of the share of the range" if bounded else "student-t"
    if x.size == 0:
        return {"mean": None, "ci_low": None, "ci_high": None, "n_releases": 0, "interval": method}
    mean = float(x.mean())
    if x.size == 1:
        return {"mean": mean, "ci_low": None, "ci_high": None, "std": None, "n_releases": 1, "interval": method}
    t = float(stats.t.ppf(1 - alpha / 2, x.size - 1))
    if bounded:
        share = np.clip((x - low) / (high - low), LOGIT_EPS, 1 - LOGIT_EPS)
        z = np.log(share / (1 - share))
        half = t * z.std(ddof=1) / math.sqrt(x.size)
        lo, hi = (low + (high - low) / (1 + math.exp(-v)) for v in (z.mean() - half, z.mean() + half))
        if half == 0:  # every release gave the same value
            lo = hi = mean
    else:
        half = t * x.std(ddof=1) / math.sqrt(x.size)
        lo, hi = mean - half, mean + half
    return {
        "mean": mean,
        "ci_low": float(lo),
        "ci_high": float(hi),
        "std": float(x.std(ddof=1)),
        "n_releases": int(x.size),
        "interval": method,
    }


# The headline numbers pooled over releases, by metric catalogue name (docs/metrics.md); those absent from every
# file are left out.
RELEASE_METRICS = (
    "pope.accuracy",
    "pope.f1",
    "pope.precision",
    "pope.recall",
    "hallucination_rate",
    "generative.chair_s",
    "generative.chair_i",
    "chair.chair_s",
    "chair.chair_i",
    "amber.overall.f1",
    "amber.generative.chair",
)


def repeated_releases(metrics: list[dict], alpha: float = 0.05, sources: list[str] | None = None) -> dict:
    """Headline metrics of one model over several releases' metrics/<model>.json files, read through the metric
    catalogue (an out-of-range value is an error naming its file)."""
    from .catalogue import CATALOGUE

    sources = sources or [f"release {i + 1}" for i in range(len(metrics))]
    out = {}
    for name in RELEASE_METRICS:
        if not any(CATALOGUE.present(doc, name, where) for doc, where in zip(metrics, sources)):
            continue
        entry = CATALOGUE[name]
        values = [CATALOGUE.read(doc, name, where) for doc, where in zip(metrics, sources)]
        bounds = (entry.low, entry.high) if entry.bounded else (None, None)
        out[name] = across_releases(values, alpha, *bounds)
    return out


def load_releases(paths: list[str]) -> list[dict]:
    """The metrics files of `score compare --metrics`: one model, each release once (one line on any other input)."""
    import hashlib

    docs, seen, digests, models = [], {}, {}, {}
    for p in paths:
        path = Path(p)
        key = path.resolve()
        if key in seen:
            raise InputError(f"--metrics {p}: the same file as {seen[key]} (each release once)")
        seen[key] = p
        if path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest in digests:
                raise InputError(f"--metrics {p}: identical to {digests[digest]} (the same release given twice)")
            digests[digest] = p
        doc = read_json(p)
        if not isinstance(doc, dict) or not doc.get("model"):
            raise InputError(f"--metrics {p}: no 'model' key (not a metrics/<model>.json file)")
        models.setdefault(str(doc["model"]), p)
        docs.append(doc)
    if len(models) > 1:
        raise InputError(
            "--metrics: the files score different models ("
            + "; ".join(f"{m} in {p}" for m, p in models.items())
            + "): pool the releases of one model"
        )
    # releases asked or read under different task definitions (prompt, limits, reader) are not repetitions of one
    # measurement; a file made before tasks were recorded is not checked
    tasks: dict[str, str] = {}
    for p, doc in zip(paths, docs):
        task = doc.get("task")
        if isinstance(task, dict) and task.get("hash"):
            tasks.setdefault(str(task["hash"]), p)
    if len(tasks) > 1:
        raise InputError(
            "--metrics: the files were asked or read under different tasks ("
            + "; ".join(f"task {h} in {p}" for h, p in tasks.items())
            + "; see each file's task block): not pooled"
        )
    return docs


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
                    "metrics": paired_difference(
                        tables[a], tables[b], n_resamples=n_resamples, seed=seed, alpha=alpha, names=(a, b)
                    ),
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


def compare_files(
    *, scores: list[str] | None, metrics: list[str] | None, resamples: str, seed: int, confidence: float
) -> dict:
    """`halluflow score compare`: paired bootstrap comparisons of the models of `scores` (answers.parquet tables,
    one per model), or the intervals of one model's `metrics` JSON files over repeated releases."""
    n_resamples = resample_count(resamples)
    if not 0 < confidence < 1:
        raise InputError(f"--confidence {confidence}: expected a number between 0 and 1")
    alpha = 1 - confidence
    if metrics:
        docs = load_releases(metrics)
        return {
            "confidence": confidence,
            "model": docs[0]["model"],
            "releases": metrics,
            "metrics": repeated_releases(docs, alpha, sources=list(metrics)),
        }
    tables = {}
    for p in map(Path, scores or ()):
        table = read_parquet(p)
        name = _model_name(p, table)
        if name in tables:
            raise InputError(f"--scores {p}: model {name!r} given twice")
        tables[name] = table
    return compare_models(tables, n_resamples=n_resamples, seed=seed, alpha=alpha)
