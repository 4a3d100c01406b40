"""Metric-human alignment: how well each automatic hallucination metric agrees with human labels.

Reproduces the layout of UniHall's "Metric-human alignment" table (Table 4 of the UniHall/SAMF paper: accuracy,
recall, F1, Cohen's kappa, Pearson r and Spearman rho per metric, in an original and a risk-weighted analysis, with a
seeded random metric as the chance row) and CEDI's grader-human correlation (Li et al., "Contextualized Evaluation
of Vision Language Models through Dynamic, Multi-turn Interactions": GED_hal against human hallucination counts).

Binary statistics compare decisions (value > threshold; "hallucinated" is the positive class); correlations use the
raw values (human counts or scores against metric values). Risk-weighted = every item weighted by its risk level;
Spearman's rho is then the weighted Pearson r of the (unweighted) mid-ranks. No scipy/sklearn: the formulas are
short and the tests check them by hand.
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .errors import InputError
from .io import read_bytes

ID_COLUMNS = ("id", "instance_id", "question_id", "query_id", "conversation_id", "image_id")
HUMAN_COLUMNS = ("human", "label", "hallucinated", "hallucination", "count", "score")
RISK_COLUMNS = ("risk", "risk_level")
# bookkeeping numbers in metric files that are not metrics (sizes, timings, counts, flags)
_NOT_METRICS = re.compile(r"(^|\.)(n|n_\w+|\w+_nodes|\w+_edges|turns?|timeout_s|elapsed_s|exact|seed|stand_in)$")
JSON_LIST_KEYS = ("conversations", "rows", "instances", "results", "items", "records")


# ---- reading -------------------------------------------------------------------------------------------------------


def _flatten(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _sniff(data: bytes, suffix: str) -> str:
    """The format of a file without a known suffix, from its first bytes: parquet, JSON, JSON Lines or CSV/TSV."""
    head = data[:4096].lstrip()
    if data[:4] == b"PAR1":
        return ".parquet"
    if head[:1] == b"[":
        return ".json"
    if head[:1] == b"{":
        try:
            json.loads(data)
            return ".json"
        except (json.JSONDecodeError, UnicodeDecodeError):
            return ".jsonl"
    if head and b"\x00" not in head:
        first = head.split(b"\n", 1)[0]
        return ".tsv" if b"\t" in first else ".csv"
    return suffix or "(none)"


def _parquet_rows(path: Path, data: bytes) -> list[dict[str, Any]]:
    import polars as pl

    try:
        return pl.read_parquet(io.BytesIO(data)).to_dicts()
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable parquet file ({str(exc).strip().splitlines()[0][:160]})") from None


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a CSV/TSV, JSONL, JSON (array, or object holding one) or parquet file; nested objects are flattened
    to dotted names (turn_hallucination.rate)."""
    path = Path(path)
    data = read_bytes(path)  # a file, pipe, FIFO or /dev/stdin, read once
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".csv", ".tsv", ".jsonl", ".json"):
        suffix = _sniff(data, suffix)  # `--human <(cat labels.csv)` has no suffix to go by
    try:
        if suffix == ".parquet":
            rows = _parquet_rows(path, data)
        elif suffix in (".csv", ".tsv"):
            text = data.decode("utf-8")
            rows = list(csv.DictReader(io.StringIO(text, newline=""), delimiter="\t" if suffix == ".tsv" else ","))
        elif suffix == ".jsonl":
            rows = []
            for i, line in enumerate(data.decode("utf-8").split("\n"), 1):  # not splitlines: U+2028 is text
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise InputError(f"{path}: line {i} is not valid JSON ({exc.msg})") from None
        elif suffix == ".json":
            try:
                data = json.loads(data.decode("utf-8"))
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
            if isinstance(data, Mapping):
                key = next((k for k in JSON_LIST_KEYS if isinstance(data.get(k), list)), None)
                if key is None:
                    raise InputError(f"{path}: a JSON object needs a list under one of {', '.join(JSON_LIST_KEYS)}")
                data = data[key]
            if not isinstance(data, list):
                raise InputError(f"{path}: expected a JSON array of objects")
            rows = data
        else:
            raise InputError(f"{path}: unsupported file type {suffix or '(none)'} (use csv, tsv, jsonl, json, parquet)")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    for i, r in enumerate(rows):
        if not isinstance(r, Mapping):
            raise InputError(f"{path}: row {i} is not an object")
    return [_flatten(r) for r in rows]


def _number(value: Any, where: str) -> float | None:
    """A label or metric value as a float; None for empty cells (the item is then left out of that metric)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return None if isinstance(value, float) and math.isnan(value) else float(value)
    text = str(value).strip().lower()
    if text in ("true", "yes"):
        return 1.0
    if text in ("false", "no"):
        return 0.0
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{where}: {value!r} is not a number, true/false or yes/no") from None


def _numeric_cell(value: Any) -> bool | None:
    """True for a number (a JSON number, or CSV/TSV text that reads as one: "0.25", "3"), None for an empty cell,
    False otherwise (text, true/false flags): a column is a metric when every cell is a number or empty."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return False
        return True
    return False


def _pick(columns: Iterable[str], wanted: str | None, candidates: Sequence[str], what: str, source: str) -> str:
    columns = list(columns)
    if wanted:
        if wanted not in columns:
            raise InputError(f"{source}: no column {wanted!r} ({what}); columns: {', '.join(columns)}")
        return wanted
    found = next((c for c in candidates if c in columns), None)
    if found is None:
        raise InputError(
            f"{source}: none of the {what} columns {', '.join(candidates)} is present "
            f"(columns: {', '.join(columns)}); name one with the matching option"
        )
    return found


# ---- statistics ------------------------------------------------------------------------------------------------


def midranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing the mean of their positions (what Spearman's rho needs)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def pearson(x: Sequence[float], y: Sequence[float], w: Sequence[float] | None = None) -> float | None:
    """(Weighted) Pearson r; None when either side is constant (r is undefined there)."""
    w = list(w) if w is not None else [1.0] * len(x)
    total = sum(w)
    if total <= 0:
        return None
    mx = sum(wi * xi for wi, xi in zip(w, x)) / total
    my = sum(wi * yi for wi, yi in zip(w, y)) / total
    sxy = sum(wi * (xi - mx) * (yi - my) for wi, xi, yi in zip(w, x, y))
    sxx = sum(wi * (xi - mx) ** 2 for wi, xi in zip(w, x))
    syy = sum(wi * (yi - my) ** 2 for wi, yi in zip(w, y))
    if sxx <= 0 or syy <= 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def agreement(
    human: Sequence[float],
    metric: Sequence[float],
    human_threshold: float,
    threshold: float,
    weights: Sequence[float] | None = None,
) -> dict:
    """Accuracy, precision, recall, F1 and Cohen's kappa of the decisions, Pearson and Spearman of the values."""
    w = list(weights) if weights is not None else [1.0] * len(human)
    tp = fp = fn = tn = 0.0
    for h, m, wi in zip(human, metric, w):
        hp, mp = h > human_threshold, m > threshold
        if hp and mp:
            tp += wi
        elif mp:
            fp += wi
        elif hp:
            fn += wi
        else:
            tn += wi
    total = tp + fp + fn + tn

    def ratio(a: float, b: float) -> float | None:
        return round(a / b, 6) if b > 0 else None

    po = (tp + tn) / total if total else None
    pe = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / total**2 if total else None
    kappa = (po - pe) / (1 - pe) if total and pe < 1 else None
    r = pearson(human, metric, w)
    rho = pearson(midranks(human), midranks(metric), w)
    return {
        "n": len(human),
        "weight": round(total, 6),
        "accuracy": ratio(tp + tn, total),
        "precision": ratio(tp, tp + fp),
        "recall": ratio(tp, tp + fn),
        "f1": ratio(2 * tp, 2 * tp + fp + fn),
        "kappa": None if kappa is None else round(kappa, 6),
        "pearson": None if r is None else round(r, 6),
        "spearman": None if rho is None else round(rho, 6),
        "confusion": {"tp": round(tp, 6), "fp": round(fp, 6), "fn": round(fn, 6), "tn": round(tn, 6)},
    }


# ---- alignment -----------------------------------------------------------------------------------------------


def _thresholds(specs: Sequence[str]) -> tuple[float, dict[str, float]]:
    default, per = 0.0, {}
    for spec in specs:
        name, _, value = spec.rpartition("=")
        try:
            number = float(value)
        except ValueError:
            raise InputError(f"--threshold {spec!r}: expected NUMBER or METRIC=NUMBER") from None
        if name:
            per[name] = number
        else:
            default = number
    return default, per


def align(
    human_rows: Sequence[Mapping[str, Any]],
    metric_files: Mapping[str, Sequence[Mapping[str, Any]]],
    human_source: str = "human labels",
    id_column: str | None = None,
    human_column: str | None = None,
    risk_column: str | None = None,
    metrics: Sequence[str] = (),
    thresholds: Sequence[str] = (),
    human_threshold: float = 0.0,
    random_seed: int | None = 0,
) -> dict:
    """Alignment of every metric column with the human labels; see the module docstring."""
    if not human_rows:
        raise InputError(f"{human_source}: no rows")
    cols = list(human_rows[0])
    id_col = _pick(cols, id_column, ID_COLUMNS, "id", human_source)
    label_col = _pick(cols, human_column, HUMAN_COLUMNS, "human label", human_source)
    risk_col = risk_column or next((c for c in RISK_COLUMNS if c in cols), None)
    if risk_col and risk_col not in cols:
        raise InputError(f"{human_source}: no column {risk_col!r} (risk); columns: {', '.join(cols)}")
    human: dict[str, tuple[float, float | None]] = {}
    for i, r in enumerate(human_rows):
        key = str(r.get(id_col, "")).strip()
        if not key:
            raise InputError(f"{human_source}: row {i}: empty {id_col}")
        if key in human:
            raise InputError(f"{human_source}: row {i}: duplicate {id_col} {key!r}")
        value = _number(r.get(label_col), f"{human_source}: row {i} ({id_col} {key}) column {label_col}")
        if value is None:
            raise InputError(f"{human_source}: row {i} ({id_col} {key}): empty {label_col}")
        risk = _number(r.get(risk_col), f"{human_source}: row {i} column {risk_col}") if risk_col else None
        if risk_col and (risk is None or risk < 0):
            raise InputError(f"{human_source}: row {i} ({id_col} {key}): {risk_col} must be a number >= 0")
        human[key] = (value, risk)

    risk_from = risk_col
    default_t, per_t = _thresholds(thresholds)
    values: dict[str, dict[str, float]] = {}  # metric → id → value
    unmatched: dict[str, int] = {}
    for source, rows in metric_files.items():
        if not rows:
            raise InputError(f"{source}: no rows")
        mcols = sorted({c for r in rows for c in r})
        if id_col not in mcols:
            raise InputError(
                f"{source}: no {id_col!r} column to join with {human_source} (columns: {', '.join(mcols)})"
            )
        mid = id_col
        if metrics:
            chosen = [m for m in metrics if m in mcols]
        else:
            chosen = [
                c
                for c in mcols
                if c != mid
                and c not in RISK_COLUMNS
                and not _NOT_METRICS.search(c)
                and all(_numeric_cell(r.get(c)) is not False for r in rows)
                and any(_numeric_cell(r.get(c)) for r in rows)
            ]
        seen: set[str] = set()
        for i, r in enumerate(rows):
            key = str(r.get(mid, "")).strip()
            if key in seen:
                raise InputError(
                    f"{source}: row {i}: duplicate {mid} {key!r} (one row per item; filter the file first)"
                )
            seen.add(key)
        unmatched[source] = sum(1 for k in human if k not in seen)
        metric_risk = next((c for c in RISK_COLUMNS if c in mcols), None)
        if risk_col is None and metric_risk:  # e.g. SAMF's standard.parquet carries each instance's risk_level
            for i, r in enumerate(rows):
                key = str(r.get(mid, "")).strip()
                if key in human and human[key][1] is None:
                    human[key] = (human[key][0], _number(r.get(metric_risk), f"{source}: row {i} column {metric_risk}"))
            risk_from = f"{source}:{metric_risk}"
        for c in chosen:
            name = c if c not in values else f"{Path(source).stem}:{c}"  # same column in two files
            values[name] = {}
            for i, r in enumerate(rows):
                key = str(r.get(mid, "")).strip()
                v = _number(r.get(c), f"{source}: row {i} ({mid} {key}) column {c}")
                if key in human and v is not None:
                    values[name][key] = v
    missing = [m for m in metrics if m not in {n.split(":")[-1] for n in values}]
    if missing:
        raise InputError(f"--metric {', '.join(missing)}: not a column of {', '.join(metric_files)}")
    if not values:
        raise InputError(f"{', '.join(metric_files)}: no numeric metric columns (name them with --metric)")
    if random_seed is not None:
        # the chance row of the paper's table: a uniform score per item, hallucinated when above 0.5
        rng = random.Random(random_seed)
        values["random"] = {k: rng.random() for k in sorted(human)}
        per_t.setdefault("random", 0.5)

    out_metrics = {}
    for name, by_id in values.items():
        ids = sorted(by_id)
        if not ids:
            raise InputError(f"metric {name}: no item shares an id with {human_source}")
        h = [human[k][0] for k in ids]
        m = [by_id[k] for k in ids]
        t = per_t.get(name, per_t.get(name.split(":")[-1], default_t))
        entry = {"threshold": t, "overall": agreement(h, m, human_threshold, t)}
        risks = [human[k][1] for k in ids]
        if risk_from and all(r is not None and r >= 0 for r in risks):
            entry["risk_weighted"] = agreement(h, m, human_threshold, t, weights=risks)
            levels = sorted(set(risks))
            entry["by_risk"] = {
                _level(lv): agreement(
                    [x for x, r in zip(h, risks) if r == lv],
                    [x for x, r in zip(m, risks) if r == lv],
                    human_threshold,
                    t,
                )
                for lv in levels
            }
        out_metrics[name] = entry
    return {
        "human": {
            "source": human_source,
            "id_column": id_col,
            "label_column": label_col,
            "risk_column": risk_from,
            "n": len(human),
            "threshold": human_threshold,
            "n_hallucinated": sum(1 for v, _ in human.values() if v > human_threshold),
        },
        "unmatched": unmatched,
        "metrics": out_metrics,
    }


def _level(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def table_rows(result: Mapping[str, Any]) -> list[dict]:
    """Flat rows (metric, analysis, statistics) in the layout of the paper's table, for reports."""
    rows = []
    for name, entry in result.get("metrics", {}).items():
        parts = [("original", entry["overall"])]
        if "risk_weighted" in entry:
            parts.append(("risk-weighted", entry["risk_weighted"]))
            parts += [(f"risk {lv}", s) for lv, s in entry.get("by_risk", {}).items()]
        for analysis, s in parts:
            rows.append(
                {
                    "metric": name,
                    "analysis": analysis,
                    "n": s["n"],
                    **{k: s[k] for k in ("accuracy", "recall", "f1", "kappa", "pearson", "spearman")},
                }
            )
    return rows
