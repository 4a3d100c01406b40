"""Label audit of an ODE release: `halluflow release audit REL`.

A release states the truth of every yes/no item by construction (the prompt asked for the pair, the filter
detector saw it, a "no" object scored below the exclusion threshold). The audit measures how often that is wrong,
as RePOPE (Neuhaus and Hein) did for POPE and LiveXiv (Shabtay et al.) did for its automatic labels:

- automatic: independent verifiers re-judge every item. A second open-vocabulary detector (not the one that
  filtered the images) scores every object an existence-type item names; the VLM-oracle ensemble of CAOS
  ("Evaluating Hallucination in Large Vision-Language Models based on Context-Aware Object Similarities") answers
  every yes/no item's own question and votes with CAOS's rule. Each disagreement with the stated truth is flagged
  per item and counted per query type x distribution. Offline the verifiers are random stand-ins: their
  disagreements are noise and every output says so;
- human: a stratified sample (strata = query type x distribution) sized for a stated precision is written as one
  self-contained HTML page; the CSV its annotator saves comes back through `--labels` as label-error rates per query
  type x stated answer (RePOPE's table, beside RePOPE's rates), per query type and overall, each with an exact
  finite-population interval on the number of wrong labels (`group_rate`: hypergeometric per cell, unlabelled items
  covered, cells combined conservatively), written into the release's DATACARD and manifest.

Independence: the second detector may not be the one that filtered the images (same id and revision, or a folder
whose files hash alike); oracle members that are models under test are refused unless allowed, and then every output
says so. When the automatic verifiers decide nothing, every output says the rate rests on human labels only.

Sample size per query type (normal approximation, finite-population corrected): n0 = z^2 p (1 - p) / e^2 and
n = ceil(n0 / (1 + (n0 - 1) / N)), N = the query type's yes/no items, e = the margin, p = the expected error
rate (0.5: the worst case), z = the normal quantile of the confidence. Within a query type the sample is allocated
to the distributions in proportion to their size (largest remainders, at least one item per non-empty stratum).
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
import tempfile
from pathlib import Path
from statistics import NormalDist

import numpy as np
import polars as pl

from ..errors import ConfigError, InputError
from ..io import (
    dumps_json,
    owned_folder,
    read_json,
    read_parquet,
    read_text,
    sha256_bytes,
    sha256_file,
    write_json,
    write_parquet,
    write_text,
)
from ..models import MODELS_CACHE, oracle_specs
from ..progress import get_logger

log = get_logger(__name__)

AUDIT_JSON = "audit.json"
ITEMS = "verifiers.parquet"
SAMPLE = "sample.parquet"
PAGE = "annotate.html"
LABELS_JSON = "labels.json"
# Query types whose item names one object the image either shows or not: the detector can judge them. Attribute and
# count items are judged by the oracle only (a box says nothing about "red"; box counts of a random detector less).
DETECTOR_TYPES = ("existence", "counterfactual")
# Backends that never look at the pixels (a text-only LM, the co-occurrence prior) cannot verify what an image shows;
# they are left out of the default oracle (naming one with --oracle still uses it).
LABELS = ("yes", "no", "unsure")
CSV_COLUMNS = ("query_id", "image_id", "query_type", "distribution", "question", "truth", "label")
SECTION = "## Label audit"


# ---- statistics ---------------------------------------------------------------------------------------------------


def z_value(confidence: float) -> float:
    """The two-sided normal quantile of `confidence` (0.95 -> 1.959964)."""
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"audit confidence must be between 0 and 1 (exclusive), got {confidence}")
    return NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)


def sample_size(population: int, margin: float = 0.025, confidence: float = 0.95, expected: float = 0.5) -> int:
    """Items to label so a rate over `population` items has half-width `margin` at `confidence` (module docstring)."""
    if population <= 0:
        return 0
    if not 0.0 < margin < 1.0:
        raise ConfigError(f"audit margin must be between 0 and 1 (exclusive), got {margin}")
    if not 0.0 < expected < 1.0:
        raise ConfigError(f"audit expected error rate must be between 0 and 1 (exclusive), got {expected}")
    n0 = z_value(confidence) ** 2 * expected * (1.0 - expected) / margin**2
    return min(population, math.ceil(n0 / (1.0 + (n0 - 1.0) / population)))


def allocate(sizes: dict, n: int) -> dict:
    """Split `n` over strata in proportion to their sizes: largest remainders (ties by stratum order), at least one
    item for every non-empty stratum while `n` allows (else the largest strata get one), never more than a stratum
    holds."""
    keys = sorted(k for k, v in sizes.items() if v > 0)
    total = sum(sizes[k] for k in keys)
    n = min(max(n, 0), total)
    out = {k: 0 for k in sizes}
    if n == 0:
        return out
    share = {k: n * sizes[k] / total for k in keys}
    floor = 1 if n >= len(keys) else 0
    for k in keys:
        out[k] = min(sizes[k], max(floor, math.floor(share[k])))
    # Hand out what rounding left (or take back what the minimum of one added) by the size of the remainder.
    while sum(out.values()) < n:
        k = max((k for k in keys if out[k] < sizes[k]), key=lambda k: (share[k] - out[k], -keys.index(k)))
        out[k] += 1
    while sum(out.values()) > n:
        k = min((k for k in keys if out[k] > floor), key=lambda k: (share[k] - out[k], keys.index(k)))
        out[k] -= 1
    return out


def wilson(rate: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion `rate` observed on `n` (possibly effective, non-integer) trials."""
    if n <= 0:
        return (0.0, 1.0)
    if math.isinf(n):
        return (rate, rate)
    z2 = z_value(confidence) ** 2
    centre = (rate + z2 / (2 * n)) / (1 + z2 / n)
    half = math.sqrt(z2) / (1 + z2 / n) * math.sqrt(rate * (1 - rate) / n + z2 / (4 * n * n))
    return (max(0.0, centre - half), min(1.0, centre + half))


def wilson_interval(errors: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of `errors` out of `n`."""
    return wilson(errors / n if n else 0.0, n, confidence)


# RePOPE (Neuhaus & Hein, "RePOPE: Impact of Annotation Errors on the POPE Benchmark"): the share of POPE's MSCOCO
# labels its relabelling found wrong, by stated answer. The audit's table by query type x stated answer stands beside it.
REPOPE_RATES = {"yes": 0.093, "no": 0.017}
REPOPE_SOURCE = 'Neuhaus & Hein, "RePOPE: Impact of Annotation Errors on the POPE Benchmark": POPE (MSCOCO) labels'


def hypergeom_interval(wrong_low: int, wrong_high: int, draws: int, population: int, alpha: float) -> tuple[int, int]:
    """Exact interval on K, the number of wrong labels among `population` items, from `draws` items drawn without
    replacement (a simple random sample) of which at least `wrong_low` and at most `wrong_high` are wrong (the rest of
    the range: sampled items left unsure or unlabelled). Lower end: the least K with P(X >= wrong_low | K) >= alpha/2;
    upper end: the largest K with P(X <= wrong_high | K) >= alpha/2 (X hypergeometric: `draws` from `population`
    items, K of them wrong). With every item drawn it is [wrong_low, wrong_high] (no sampling error); with none,
    [0, population]."""
    if not 0 <= wrong_low <= wrong_high <= draws <= population:
        raise ValueError(f"hypergeom_interval: need 0 <= {wrong_low} <= {wrong_high} <= {draws} <= {population}")
    if draws == population:
        return wrong_low, wrong_high
    if draws == 0:
        return 0, population
    from scipy.stats import hypergeom

    tail = alpha / 2.0
    ks = np.arange(population + 1)
    # K is possible only when the sample's right labels fit among the population's right ones
    upper_tail = hypergeom.sf(wrong_low - 1, population, ks, draws)  # P(X >= wrong_low | K)
    lower_tail = hypergeom.cdf(wrong_high, population, ks, draws)  # P(X <= wrong_high | K)
    ok_low = np.nonzero((upper_tail >= tail * (1 - 1e-9)) & (population - ks >= draws - wrong_low))[0]
    ok_high = np.nonzero((lower_tail >= tail * (1 - 1e-9)) & (ks >= wrong_high))[0]
    return int(ok_low.min()), int(ok_high.max())


def group_rate(cells: list[dict], confidence: float = 0.95) -> dict:
    """Label-error rate of a group of cells {population, sampled, labelled, errors, unresolved} (cells: query type x
    distribution x stated answer; unresolved = sampled items labelled unsure or not at all).

    Interval: per cell the exact hypergeometric interval on its NUMBER of wrong labels (hypergeom_interval, an
    unresolved item counted right for the lower end and wrong for the upper end, whatever made it unresolved), summed
    over the cells; the cells with sampling error (0 < sampled < population) share the error level by Bonferroni
    (each at 1 - (1 - confidence) / m), so the sum holds at `confidence` or more. `kind`: "census" when every item is
    labelled (the rate is exact), "census-bounds" when every item was sampled but some are unresolved (the interval
    is every rate they allow), "sampled" otherwise. Point estimate: each labelled cell's rate weighted by its share
    of the items of the labelled cells (cells without labels have none; the interval still covers them)."""
    population = sum(c["population"] for c in cells)
    sampled = sum(c["sampled"] for c in cells)
    labelled = sum(c["labelled"] for c in cells)
    errors = sum(c["errors"] for c in cells)
    unresolved = sum(c["unresolved"] for c in cells)
    out = {
        "population": population,
        "sampled": sampled,
        "labelled": labelled,
        "errors": errors,
        "unresolved": unresolved,
        "strata_without_labels": sum(1 for c in cells if c["labelled"] == 0),
    }
    if population == 0:
        return {**out, "error_rate": None, "interval": None, "wrong": None, "kind": None, "bonferroni_cells": 0}
    random = [c for c in cells if 0 < c["sampled"] < c["population"]]
    alpha = (1.0 - confidence) / max(1, len(random))
    low = high = 0
    for c in cells:
        lo, hi = hypergeom_interval(c["errors"], c["errors"] + c["unresolved"], c["sampled"], c["population"], alpha)
        low, high = low + lo, high + hi
    covered = [c for c in cells if c["labelled"] > 0]
    covered_pop = sum(c["population"] for c in covered)
    rate = sum(c["population"] / covered_pop * c["errors"] / c["labelled"] for c in covered) if covered else None
    if all(c["sampled"] == c["population"] for c in cells):
        kind = "census" if unresolved == 0 else "census-bounds"
    else:
        kind = "sampled"
    return {
        **out,
        "error_rate": None if rate is None else round(rate, 6),
        "interval": [round(low / population, 6), round(high / population, 6)],
        "wrong": [low, high],
        "kind": kind,
        "bonferroni_cells": len(random),
    }


def interval_text(r: dict) -> str:
    """How the audit prints a group's interval: "exact (census)", "[9.4%, 12.5%] (census bounds)", "[a, b]"."""
    if r.get("interval") is None:
        return "-"
    if r.get("kind") == "census":
        return "exact (census)"
    text = f"[{percent(r['interval'][0])}, {percent(r['interval'][1])}]"
    return text + (" (census bounds)" if r.get("kind") == "census-bounds" else "")


# ---- reading a release --------------------------------------------------------------------------------------------


def read_release(release_dir: Path) -> tuple[dict, pl.DataFrame]:
    """(manifest, yes/no items) of a release that verifies; one error line otherwise."""
    from .release import MANIFEST, verify_release

    problems = verify_release(release_dir)
    if problems:
        raise InputError(f"{release_dir}: does not verify ({problems[0]}); audit a release `release verify` accepts")
    manifest = read_json(release_dir / MANIFEST)
    queries = read_parquet(release_dir / "queries.parquet")
    needed = {"query_id", "image_id", "image", "distribution", "query_type", "question", "truth", "target"}
    missing = sorted(needed - set(queries.columns))
    if missing:
        raise InputError(f"{release_dir / 'queries.parquet'}: lacks column(s) {missing}")
    items = queries.filter(pl.col("truth").is_in(["yes", "no"])).sort("query_id")
    if items.height == 0:
        raise InputError(f"{release_dir / 'queries.parquet'}: no yes/no items to audit")
    return manifest, items


def default_out(release_dir: Path) -> Path:
    """results/<release>/audit beside results/<release>/release (else <folder>-audit beside it)."""
    return release_dir.parent / ("audit" if release_dir.name == "release" else f"{release_dir.name}-audit")


def _check_out(release_dir: Path, out_dir: Path) -> None:
    real_out, real_rel = out_dir.resolve(), release_dir.resolve()
    if real_out == real_rel or real_rel in real_out.parents:
        raise InputError(f"{out_dir}: inside the release {release_dir}; its files would be unlisted there")


# ---- verifiers ----------------------------------------------------------------------------------------------------


def detector_verdicts(
    release_dir: Path, items: pl.DataFrame, detector, threshold: float, batch_size: int = 8
) -> pl.DataFrame:
    """query_id, detector_score (max over boxes of the item's object) and detector_says for existence-type items."""
    from .detection import detect_shard

    judged = items.filter(pl.col("query_type").is_in(DETECTOR_TYPES) & pl.col("attribute_kind").is_null())
    schema = {"query_id": pl.String, "detector_score": pl.Float64, "detector_says": pl.String}
    if judged.height == 0:
        return pl.DataFrame(schema=schema)
    labels = {
        image_id: sorted(set(group["target"].to_list()))
        for (image_id,), group in judged.group_by(["image_id"], maintain_order=True)
    }
    images = judged.select("image_id", pl.col("image").alias("path")).unique("image_id").sort("image_id")
    boxes = detect_shard(images, labels, release_dir, detector, batch_size)
    best = boxes.group_by("image_id", "label").agg(pl.col("score").max().alias("detector_score"))
    return (
        judged.select("query_id", "image_id", "target")
        .join(best, left_on=["image_id", "target"], right_on=["image_id", "label"], how="left")
        .with_columns(pl.col("detector_score").fill_null(0.0))
        .with_columns(
            pl.when(pl.col("detector_score") >= threshold)
            .then(pl.lit("yes"))
            .otherwise(pl.lit("no"))
            .alias("detector_says")
        )
        .select(list(schema))
        .cast(schema)
    )


def oracle_verdicts(
    release_dir: Path, items: pl.DataFrame, members, rule: str, tie: str, suffix: str, max_new_tokens: int = 6
) -> pl.DataFrame:
    """query_id, oracle_yes/no/abstain and oracle_says: every member answers each item's own question (one batch per
    member, so a model loads once), parsed and combined by CAOS's oracle parser and vote (a tie under
    `tie: exclude` and a failed answer decide nothing)."""
    from ..caos.scores import oracle_yes_no, vote
    from ..models.model import vlm_request

    requests = [
        vlm_request(
            r["query_id"],
            r["question"] + suffix,
            release_dir / r["image"],
            task="discriminative",
            max_new_tokens=max_new_tokens,
        )
        for r in items.select("query_id", "question", "image").iter_rows(named=True)
    ]
    parsed: list[list[str | None]] = [[] for _ in requests]
    for mut in members:
        results = mut.generate(requests)
        if len(results) != len(requests):
            raise InputError(f"oracle member {mut.name!r} returned {len(results)} answers for {len(requests)}")
        for row, result in zip(parsed, results):
            row.append(oracle_yes_no(result.text) if result.ok else None)
    verdicts = [vote(p, rule, tie) for p in parsed]
    return pl.DataFrame(
        {
            "query_id": items["query_id"],
            "oracle_yes": [v.yes for v in verdicts],
            "oracle_no": [v.no for v in verdicts],
            "oracle_abstain": [v.abstain for v in verdicts],
            "oracle_says": [None if v.present is None else ("yes" if v.present else "no") for v in verdicts],
        },
        schema={
            "query_id": pl.String,
            "oracle_yes": pl.Int64,
            "oracle_no": pl.Int64,
            "oracle_abstain": pl.Int64,
            "oracle_says": pl.String,
        },
    )


def flag_items(items: pl.DataFrame, detector: pl.DataFrame | None, oracle: pl.DataFrame | None) -> pl.DataFrame:
    """One row per yes/no item with each verifier's verdict and whether it disagrees with the stated truth."""
    cols = ["query_id", "image_id", "query_type", "attribute_kind", "distribution", "question", "target", "truth"]
    table = items.select([c for c in cols if c in items.columns])
    for part, says in ((detector, "detector_says"), (oracle, "oracle_says")):
        if part is not None:
            table = table.join(part, on="query_id", how="left")
        else:
            table = table.with_columns(pl.lit(None, dtype=pl.String).alias(says))
    table = table.with_columns(
        (pl.col("detector_says").is_not_null() & (pl.col("detector_says") != pl.col("truth"))).alias(
            "detector_disagrees"
        ),
        (pl.col("oracle_says").is_not_null() & (pl.col("oracle_says") != pl.col("truth"))).alias("oracle_disagrees"),
    )
    return table.with_columns((pl.col("detector_disagrees") | pl.col("oracle_disagrees")).alias("flagged")).sort(
        "query_id"
    )


def verifier_counts(table: pl.DataFrame) -> list[dict]:
    """Per query type x distribution: items, items each verifier judged, its disagreements, items flagged."""
    rows = (
        table.group_by("query_type", "distribution")
        .agg(
            pl.len().alias("items"),
            pl.col("detector_says").is_not_null().sum().alias("detector_judged"),
            pl.col("detector_disagrees").sum().alias("detector_disagrees"),
            pl.col("oracle_says").is_not_null().sum().alias("oracle_judged"),
            pl.col("oracle_disagrees").sum().alias("oracle_disagrees"),
            pl.col("flagged").sum().alias("flagged"),
        )
        .sort("query_type", "distribution")
    )
    return [{k: (int(v) if isinstance(v, (int, np.integer)) else v) for k, v in r.items()} for r in rows.to_dicts()]


# ---- the stratified sample ----------------------------------------------------------------------------------------


def draw_sample(
    items: pl.DataFrame, margin: float, confidence: float, expected: float, seed: int
) -> tuple[pl.DataFrame, list[dict]]:
    """The sampled items (query type x distribution strata, module docstring) and the design of each stratum."""
    rng = np.random.default_rng(seed)
    design, picked = [], []
    for (qtype,), kind in sorted(items.group_by(["query_type"]), key=lambda g: g[0]):
        sizes = {d: n for d, n in kind.group_by("distribution").len().iter_rows()}
        n_kind = sample_size(kind.height, margin, confidence, expected)
        for dist, n in sorted(allocate(sizes, n_kind).items()):
            stratum = kind.filter(pl.col("distribution") == dist).sort("query_id")
            order = rng.permutation(stratum.height)[:n]
            picked.append(stratum[sorted(order.tolist())])
            design.append({"query_type": qtype, "distribution": dist, "population": stratum.height, "sampled": n})
    sample = pl.concat(picked).sort("query_type", "distribution", "query_id")
    return sample, design


# ---- the annotation page ------------------------------------------------------------------------------------------


def _data_uri(path: Path, max_side: int) -> str:
    """An image as a data URI: the PNG as it is when small enough, else a JPEG thumbnail (keeps the page small)."""
    from PIL import Image

    data = path.read_bytes()
    with Image.open(io.BytesIO(data)) as im:
        if max(im.size) <= max_side:
            return "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        im = im.convert("RGB")
        im.thumbnail((max_side, max_side))
        buf = io.BytesIO()
        im.save(buf, format="JPEG", quality=85)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


PAGE_STYLE = """
body{font-family:system-ui,sans-serif;margin:0;background:#f4f4f6;color:#1d1d22}
header{background:#22232b;color:#fff;padding:12px 20px}
header h1{font-size:20px;margin:0 0 4px}
header p{margin:0;font-size:13px;color:#c9cad3}
.warn{background:#b3261e;color:#fff;padding:8px 20px;font-weight:600}
main{display:flex;gap:24px;padding:20px;align-items:flex-start}
#img{width:480px;max-width:45vw;height:auto;border:1px solid #bbb;background:#fff}
.card{background:#fff;border-radius:8px;padding:16px 20px;box-shadow:0 1px 3px #0002;min-width:380px}
#question{font-size:24px;margin:8px 0 12px}
#stated{font-size:15px;color:#555}
.buttons button{font-size:18px;padding:10px 18px;margin:12px 8px 0 0;border-radius:6px;border:1px solid #888;cursor:pointer}
button.chosen{outline:3px solid #1a73e8}
#yes{background:#dff3e3}#no{background:#f8dede}#unsure{background:#eee}
.meta{font-size:12px;color:#666;margin-top:10px}
nav{margin-top:16px;font-size:14px}
kbd{border:1px solid #aaa;border-radius:3px;padding:0 4px;background:#fafafa}
#save{background:#1a73e8;color:#fff;border:none;font-size:16px;padding:10px 16px;border-radius:6px;margin-top:16px}
"""

# One page, no network: the items and their images are inlined, labels live in the page (and in localStorage, so a
# reload keeps them), and "save CSV" hands the annotator a file through a Blob link. `?selftest` drives the page
# through its own key handler (arrows, then y/n/u by a fixed pattern) and writes the CSV text into the DOM, so a
# headless browser's --dump-dom can read what "save CSV" would have saved.
PAGE_SCRIPT = r"""
const data = JSON.parse(document.getElementById('audit-data').textContent);
const items = data.items;
const selftest = new URLSearchParams(location.search).has('selftest');
const store = 'halluflow-audit:' + data.sample_id;
let labels = {};
if (!selftest) { try { labels = JSON.parse(localStorage.getItem(store) || '{}'); } catch (e) { labels = {}; } }
let at = 0;
const $ = (id) => document.getElementById(id);
function show() {
  const it = items[at];
  $('img').src = data.images[it.image_id];
  $('question').textContent = it.question;
  $('stated').textContent = 'The release states: ' + it.truth.toUpperCase();
  $('meta').textContent = it.query_type + ' / ' + it.distribution + ' / ' + it.query_id;
  $('pos').textContent = (at + 1) + ' / ' + items.length;
  $('done').textContent = Object.keys(labels).length + ' labelled';
  for (const v of ['yes', 'no', 'unsure']) $(v).classList.toggle('chosen', labels[it.query_id] === v);
}
function persist() { if (!selftest) { try { localStorage.setItem(store, JSON.stringify(labels)); } catch (e) {} } }
function label(v) {
  labels[items[at].query_id] = v;
  persist();
  if (at < items.length - 1) at += 1;
  show();
}
function move(step) { at = Math.min(items.length - 1, Math.max(0, at + step)); show(); }
function field(value) {
  const s = value === null || value === undefined ? '' : String(value);
  return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
}
function csvText() {
  const lines = [data.columns.join(',')];
  for (const it of items) {
    const row = data.columns.map((c) => (c === 'label' ? labels[it.query_id] || '' : it[c]));
    lines.push(row.map(field).join(','));
  }
  return lines.join('\r\n') + '\r\n';
}
function saveCsv() {
  const blob = new Blob([csvText()], {type: 'text/csv;charset=utf-8'});
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = data.csv_name;
  document.body.appendChild(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 0);
}
const keys = {y: () => label('yes'), n: () => label('no'), u: () => label('unsure'),
              ArrowRight: () => move(1), ArrowLeft: () => move(-1)};
document.addEventListener('keydown', (e) => {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const act = keys[e.key.length === 1 ? e.key.toLowerCase() : e.key];
  if (act) { e.preventDefault(); act(); }
});
for (const v of ['yes', 'no', 'unsure']) $(v).addEventListener('click', () => label(v));
$('prev').addEventListener('click', () => move(-1));
$('next').addEventListener('click', () => move(1));
$('save').addEventListener('click', saveCsv);
show();
if (selftest) {
  const press = (key) => document.dispatchEvent(new KeyboardEvent('keydown', {key: key}));
  press('ArrowRight');
  const forward = at === Math.min(1, items.length - 1);
  press('ArrowLeft');
  const back = at === 0;
  // item i: the stated truth, except i % 10 == 3 (the opposite) and i % 10 == 7 (unsure)
  items.forEach((it, i) => press(i % 10 === 3 ? (it.truth === 'yes' ? 'n' : 'y') : i % 10 === 7 ? 'u' : it.truth[0]));
  const out = document.createElement('pre');
  out.id = 'selftest-csv';
  out.dataset.navigation = forward && back ? 'ok' : 'broken';
  out.textContent = csvText();
  document.body.appendChild(out);
}
"""


def annotation_page(
    sample: pl.DataFrame, release_dir: Path, name: str, sample_id: str, stand_ins: bool, max_side: int = 512
) -> str:
    """The self-contained annotation page of `sample` (images inlined once each, no external resource)."""
    images = {
        image_id: _data_uri(release_dir / image, max_side)
        for image_id, image in sample.select("image_id", "image").unique("image_id").sort("image_id").iter_rows()
    }
    data = {
        "release": name,
        "sample_id": sample_id,
        "csv_name": f"labels-{name}.csv",
        "columns": list(CSV_COLUMNS),
        "items": sample.select([c for c in CSV_COLUMNS if c != "label"]).to_dicts(),
        "images": images,
    }
    payload = json.dumps(data, ensure_ascii=True, sort_keys=True).replace("</", "<\\/")
    warn = (
        '<div class="warn">STAND-IN release: its images were made by randomly initialised models and are noise. '
        "Label what you see; expect most stated truths to look wrong.</div>"
        if stand_ins
        else ""
    )
    title = html.escape(f"Label audit: {name}")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<style>{PAGE_STYLE}</style></head>
<body>
<header><h1>{title}</h1>
<p>{len(data["items"])} sampled yes/no items. Answer each question by what the image shows (not by what the release states):
<kbd>y</kbd> yes, <kbd>n</kbd> no, <kbd>u</kbd> unsure, <kbd>&larr;</kbd>/<kbd>&rarr;</kbd> move.
Then <b>save CSV</b> and run <code>halluflow release audit RELEASE --labels {html.escape(data["csv_name"])}</code>.</p></header>
{warn}
<main><img id="img" alt="item image">
<div class="card"><div id="question"></div><div id="stated"></div>
<div class="buttons"><button id="yes">Yes (y)</button><button id="no">No (n)</button><button id="unsure">Unsure (u)</button></div>
<div class="meta" id="meta"></div>
<nav><button id="prev">&larr; previous</button> <span id="pos"></span> <button id="next">next &rarr;</button> &middot; <span id="done"></span></nav>
<button id="save">save CSV</button></div></main>
<script type="application/json" id="audit-data">{payload}</script>
<script>{PAGE_SCRIPT}</script>
</body></html>
"""


# ---- labels -------------------------------------------------------------------------------------------------------


def read_labels(path: str | Path, sample: pl.DataFrame) -> dict[str, str]:
    """{query_id: yes/no/unsure} from the page's CSV; every row must be a sampled item with its stated truth."""
    text = read_text(path).lstrip("\ufeff")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    missing = {"query_id", "label"} - set(reader.fieldnames or [])
    if missing:
        raise InputError(f"{path}: lacks column(s) {sorted(missing)} (the CSV the annotation page saves has them)")
    truth = dict(sample.select("query_id", "truth").iter_rows())
    labels: dict[str, str] = {}
    for line, row in enumerate(reader, start=2):
        qid, value = (row.get("query_id") or "").strip(), (row.get("label") or "").strip().lower()
        if qid not in truth:
            raise InputError(f"{path} line {line}: query_id {qid!r} is not in this audit's sample")
        if qid in labels:
            raise InputError(f"{path} line {line}: query_id {qid!r} appears twice")
        if row.get("truth") not in (None, "", truth[qid]):
            raise InputError(
                f"{path} line {line}: truth {row['truth']!r} of {qid!r} is not the release's {truth[qid]!r} "
                "(labels of another release or sample?)"
            )
        if value == "":
            continue  # not labelled yet
        if value not in LABELS:
            raise InputError(f"{path} line {line}: label {value!r} is not one of {', '.join(LABELS)}")
        labels[qid] = value
    return labels


def label_rates(items: pl.DataFrame, sample: pl.DataFrame, labels: dict[str, str], confidence: float) -> dict:
    """Label-error rates (a yes/no label that differs from the stated truth) of the release's yes/no `items` from the
    audit's `sample`, per query type, per query type x stated answer (RePOPE's table), per stated answer and overall,
    each with group_rate's interval. Cells are query type x distribution x stated answer: the sample was drawn at
    random within query type x distribution, so given how many of a cell's items it holds they are a simple random
    sample of the cell (post-stratification by the stated answer keeps the hypergeometric interval exact)."""
    keys = ["query_type", "distribution", "truth"]
    frame = sample.select("query_id", *keys).with_columns(
        pl.col("query_id").replace_strict(labels, default=None, return_dtype=pl.String).alias("label")
    )
    population = {tuple(k): n for *k, n in items.group_by(keys).len().iter_rows()}
    cells = []
    for key in sorted(population):
        rows = frame.filter(pl.all_horizontal([pl.col(c) == v for c, v in zip(keys, key)]))
        decided = rows.filter(pl.col("label").is_in(["yes", "no"]))
        cells.append(
            {
                **dict(zip(keys, key)),
                "population": population[key],
                "sampled": rows.height,
                "labelled": decided.height,
                "unsure": rows.filter(pl.col("label") == "unsure").height,
                "unresolved": rows.height - decided.height,
                "errors": decided.filter(pl.col("label") != pl.col("truth")).height,
            }
        )

    def rate(group: list[dict]) -> dict:
        return {**group_rate(group, confidence), "unsure": sum(c["unsure"] for c in group)}

    types = sorted({c["query_type"] for c in cells})
    by_answer_rows = []
    for qtype in types:
        for truth in ("yes", "no"):
            group = [c for c in cells if c["query_type"] == qtype and c["truth"] == truth]
            if group:
                by_answer_rows.append({"query_type": qtype, "truth": truth, **rate(group)})
    return {
        "confidence": confidence,
        "labelled": sum(c["labelled"] for c in cells),
        "unsure": sum(c["unsure"] for c in cells),
        "unresolved": sum(c["unresolved"] for c in cells),
        "sampled": sample.height,
        "interval_method": "exact hypergeometric interval on the number of wrong labels per query type x distribution "
        "x stated answer (unsure or unlabelled sampled items: right for the lower end, wrong for the upper); summed "
        "over cells, Bonferroni over the cells with sampling error",
        "overall": rate(cells),
        "by_query_type": {qtype: rate([c for c in cells if c["query_type"] == qtype]) for qtype in types},
        "by_query_type_answer": by_answer_rows,
        "by_answer": {
            truth: rate([c for c in cells if c["truth"] == truth])
            for truth in ("yes", "no")
            if any(c["truth"] == truth for c in cells)
        },
        "repope": {**REPOPE_RATES, "source": REPOPE_SOURCE},
        "strata": cells,
    }


# ---- the audit ----------------------------------------------------------------------------------------------------


def audit_release(
    release_dir: str | Path,
    out_dir: str | Path,
    *,
    detector=None,
    detector_threshold: float | None = None,
    oracle_members=(),
    oracle_rule: str = "majority",
    oracle_tie: str = "exclude",
    yes_no_suffix: str = " Answer yes or no.",
    margin: float = 0.025,
    confidence: float = 0.95,
    expected: float = 0.5,
    seed: int | None = None,
    max_side: int = 512,
    batch_size: int = 8,
    dependent_oracle: list[str] = (),
    left_out_dependent: list[str] = (),
) -> dict:
    """Run the verifiers over every yes/no item, draw the sample, write the page; returns audit.json's content.

    `detector`: a detector backend (None: not run), never the release's own (refused); `oracle_members`: vlm Models
    (halluflow.models.model.Model: .name, .generate(requests), .describe()); empty: no oracle. `dependent_oracle`:
    members that are models under test, used by choice (every output says so); `left_out_dependent`: members the
    default oracle left out for that reason. Writes only inside `out_dir`."""
    release_dir, out_dir = Path(release_dir), Path(out_dir)
    _check_out(release_dir, out_dir)
    manifest, items = read_release(release_dir)
    name = manifest.get("release") or release_dir.name
    if detector is None and not oracle_members:
        why = (
            f"; the default oracle left out {', '.join(map(str, left_out_dependent))} (models under test: name "
            "independent members, or pass --allow-dependent-oracle)"
            if left_out_dependent
            else ""
        )
        raise ConfigError(f"release audit: no verifier (a detector or at least one oracle member is needed){why}")
    verifiers: dict = {}
    det = ora = None
    if detector is not None:
        info = detector.describe()
        refuse_same_detector(manifest, info.model, info.revision)
        if detector_threshold is None:
            detector_threshold = (
                ((manifest.get("config") or {}).get("ode") or {}).get("filter", {}).get("exclusion_threshold")
            )
        if detector_threshold is None:
            raise ConfigError("release audit: the manifest records no ode.filter.exclusion_threshold; pass one")
        det = detector_verdicts(release_dir, items, detector, float(detector_threshold), batch_size)
        verifiers["detector"] = {
            **detector.describe().as_dict(),
            "threshold": float(detector_threshold),
            "judges": list(DETECTOR_TYPES),
        }
    if oracle_members:
        ora = oracle_verdicts(release_dir, items, oracle_members, oracle_rule, oracle_tie, yes_no_suffix)
        verifiers["oracle"] = {
            "members": [{"name": m.name, **m.describe().as_dict()} for m in oracle_members],
            "vote": oracle_rule,
            "tie": oracle_tie,
            "judges": "every yes/no item, asked its own question",
        }
    table = flag_items(items, det, ora)
    stand_in_verifiers = any(
        v.get("stand_in")
        for v in [verifiers.get("detector") or {}] + (verifiers.get("oracle") or {}).get("members", [])
    )
    seed = int(manifest.get("seed", 0) if seed is None else seed)
    sample, design = draw_sample(items, margin, confidence, expected, seed)
    queries_sha = manifest["files"]["queries.parquet"]["sha256"]
    sample_id = sha256_bytes(dumps_json({"queries": queries_sha, "sample": sample["query_id"].to_list()}).encode())[:16]
    totals = {
        "detector_judged": int(table["detector_says"].is_not_null().sum()),
        "detector_disagrees": int(table["detector_disagrees"].sum()),
        "oracle_judged": int(table["oracle_says"].is_not_null().sum()),
        "oracle_disagrees": int(table["oracle_disagrees"].sum()),
        # asked but undecided: every member abstained (no yes/no in its answer, or a failed one) or a tie
        "oracle_undecided": int(table["oracle_says"].is_null().sum()) if oracle_members else 0,
        "flagged": int(table["flagged"].sum()),
    }
    summary = {
        "format": "halluflow-audit/1",
        "release": name,
        "queries_sha256": queries_sha,
        "items": table.height,
        "verifiers": verifiers,
        "stand_in_verifiers": stand_in_verifiers,
        "release_stand_ins": bool(manifest.get("stand_ins_used")),
        "warning": (
            "the verifiers are randomly initialised STAND-IN models: their verdicts and disagreements are noise"
            if stand_in_verifiers
            else None
        ),
        "totals": totals,
        "independence": {
            "dependent_oracle": list(dependent_oracle),
            "left_out_dependent": list(left_out_dependent),
            "note": dependent_note(list(dependent_oracle)),
        },
        "human_only": human_only_note(totals, table.height, stand_in_verifiers),
        "by_query_type_distribution": verifier_counts(table),
        "sample": {
            "id": sample_id,
            "size": sample.height,
            "margin": margin,
            "confidence": confidence,
            "expected_rate": expected,
            "seed": seed,
            "formula": "n0 = z^2 p (1 - p) / e^2; n = ceil(n0 / (1 + (n0 - 1) / N)) per query type, "
            "allocated to distributions in proportion to size",
            "strata": design,
        },
    }
    with owned_folder(out_dir):
        write_parquet(out_dir / ITEMS, table)
        write_parquet(out_dir / SAMPLE, sample)
        page = annotation_page(sample, release_dir, name, sample_id, bool(manifest.get("stand_ins_used")), max_side)
        write_text(out_dir / PAGE, page)
        write_json(out_dir / AUDIT_JSON, summary)
    return summary


def apply_labels(release_dir: str | Path, out_dir: str | Path, labels_path: str | Path) -> dict:
    """Score the annotator's CSV against the audit's sample and record the result in the release (DATACARD.md, its
    hub card README.md and manifest.json, re-hashed by the release module) and in `out_dir`/labels.json."""
    from .hub import HUB_CARD, hub_card
    from .release import update_release

    release_dir, out_dir = Path(release_dir), Path(out_dir)
    _check_out(release_dir, out_dir)
    if not (out_dir / AUDIT_JSON).is_file() or not (out_dir / SAMPLE).is_file():
        raise InputError(f"{out_dir}: no audit to label; run `halluflow release audit {release_dir}` first")
    summary = read_json(out_dir / AUDIT_JSON)
    manifest, items = read_release(release_dir)
    if manifest["files"]["queries.parquet"]["sha256"] != summary.get("queries_sha256"):
        raise InputError(f"{out_dir / AUDIT_JSON}: made for other queries than {release_dir}'s; rerun the audit")
    sample = read_parquet(out_dir / SAMPLE)
    labels = read_labels(labels_path, sample)
    if not labels:
        raise InputError(f"{labels_path}: no item is labelled yes, no or unsure")
    rates = label_rates(items, sample, labels, summary["sample"]["confidence"])
    result = {
        "labels_file": Path(labels_path).name,
        # of the text read (a pipe or FIFO is read once, so the file cannot be hashed again)
        "labels_sha256": sha256_bytes(read_text(labels_path).encode("utf-8")),
        "sample_id": summary["sample"]["id"],
        **rates,
    }
    record = {
        "verifiers": summary["verifiers"],
        "stand_in_verifiers": summary["stand_in_verifiers"],
        "totals": summary["totals"],
        "by_query_type_distribution": summary["by_query_type_distribution"],
        "sample": {k: v for k, v in summary["sample"].items() if k != "strata"},
        "independence": summary.get("independence") or {},
        "human_only": summary.get("human_only")
        or human_only_note(summary["totals"], summary["items"], summary["stand_in_verifiers"]),
        "labels": result,
    }
    card = with_audit_section(read_text(release_dir / "DATACARD.md"), datacard_section(record))
    texts = {"DATACARD.md": card}
    if HUB_CARD in manifest["files"]:
        texts[HUB_CARD] = hub_card(manifest.get("release") or release_dir.name, card)
    with owned_folder(out_dir):
        write_json(out_dir / LABELS_JSON, result)
    update_release(release_dir, texts, {"audit": record})
    return record


def dependent_note(members: list[str]) -> str | None:
    """The line every output carries when oracle members are models under test (--allow-dependent-oracle)."""
    if not members:
        return None
    return (
        f"DEPENDENT ORACLE: {', '.join(map(str, members))} "
        f"{'is a model' if len(members) == 1 else 'are models'} under test; its verdicts are not independent of the "
        "results they check (--allow-dependent-oracle)"
    )


def human_only_note(totals: dict, items: int, stand_in_verifiers: bool) -> str | None:
    """The line saying the label-error rate rests on human labels alone: the automatic verifiers decided no item
    (or are random stand-ins, whose verdicts are noise)."""
    decided = totals["detector_judged"] + totals["oracle_judged"]
    if decided == 0:
        return (
            f"the automatic verifiers decided none of the {items} yes/no items (detector judged 0, oracle decided 0): "
            "the label-error rate rests on human labels only"
        )
    if stand_in_verifiers:
        return "the automatic verifiers are random stand-ins: the label-error rate rests on human labels only"
    return None


def percent(x: float | None) -> str:
    """A rate as the audit prints it: 12.3%, '-' when undefined."""
    return "-" if x is None else f"{100 * x:.1f}%"


def notes(record: dict) -> list[str]:
    """The lines every output of a labelled audit carries: a dependent oracle, human labels alone."""
    out = [(record.get("independence") or {}).get("note"), record.get("human_only")]
    return [line for line in out if line]


def rate_rows(lab: dict) -> list[tuple[str, dict, float | None]]:
    """(row name, rates, RePOPE's rate beside it) of RePOPE's table: query type x stated answer, then every "yes",
    every "no", overall. RePOPE's rates stand beside the existence rows and the totals (POPE asks existence only)."""
    repope = lab.get("repope") or REPOPE_RATES
    rows = []
    for r in lab.get("by_query_type_answer") or []:
        ref = repope.get(r["truth"]) if r["query_type"] == "existence" else None
        rows.append((f'{r["query_type"]} / "{r["truth"]}"', r, ref))
    for truth, r in (lab.get("by_answer") or {}).items():
        rows.append((f'all / "{truth}"', r, repope.get(truth)))
    rows.append(("overall", lab["overall"], None))
    return rows


def datacard_section(record: dict) -> str:
    """The DATACARD's "Label audit" section: the human label-error rates by query type x stated answer beside
    RePOPE's, per query type, then the automatic verifiers' counts."""
    lab, sample = record["labels"], record["sample"]
    conf = f"{100 * lab['confidence']:g}%"
    unresolved = lab.get("unresolved", lab["unsure"])
    lines = [SECTION, ""]
    lines += [f"**{line}**" for line in notes(record)]
    if notes(record):
        lines.append("")
    lines += [
        f"Human labels (`{lab['labels_file']}`, sha256 {lab['labels_sha256'][:12]}...): {lab['labelled']} of "
        f"{lab['sampled']} sampled yes/no items answered yes or no, {lab['unsure']} unsure, "
        f"{unresolved - lab['unsure']} unlabelled. The sample is stratified by query type x distribution and sized "
        f"for +/-{100 * sample['margin']:g} points at {100 * sample['confidence']:g}% per query type "
        f"({sample['formula']}; p = {sample['expected_rate']}). An error is a label that differs from the stated "
        "truth. Interval: " + lab.get("interval_method", "") + f", at {conf}; it covers every rate the unlabelled and "
        'unsure items allow. "exact (census)": every item of the group labelled, the rate is exact.',
        "",
        f"| query type / stated answer | items | labelled | unresolved | errors | label-error rate | {conf} interval "
        "| RePOPE (POPE) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r, ref in rate_rows(lab):
        lines.append(
            f"| {name} | {r.get('population', '-')} | {r['labelled']} | {r.get('unresolved', r['unsure'])} | "
            f"{r['errors']} | {percent(r['error_rate'])} | {interval_text(r)} | {percent(ref)} |"
        )
    lines += [
        "",
        f"RePOPE: {(lab.get('repope') or {}).get('source', REPOPE_SOURCE)}, relabelled; a share of the stated "
        '"yes" (or "no") labels found wrong.',
        "",
        f"| query type | items | labelled | errors | label-error rate | {conf} interval |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in [*lab["by_query_type"].items(), ("overall", lab["overall"])]:
        lines.append(
            f"| {name} | {r.get('population', '-')} | {r['labelled']} | {r['errors']} | {percent(r['error_rate'])} "
            f"| {interval_text(r)} |"
        )
    ver = record["verifiers"]
    lines += ["", "Automatic verifiers (every yes/no item; `halluflow release audit` writes the per-item flags):"]
    if record["stand_in_verifiers"]:
        lines.append("**The verifiers were randomly initialised STAND-IN models: their disagreements are noise.**")
    if "detector" in ver:
        d = ver["detector"]
        lines.append(
            f"- second detector {d.get('model')} ({d.get('backend')}{', STAND-IN' if d.get('stand_in') else ''}), "
            f"object present at score >= {d['threshold']}: existence and counterfactual-object items"
        )
    if "oracle" in ver:
        members = ", ".join(
            f"{m['name']}{' (STAND-IN)' if m.get('stand_in') else ''}" for m in ver["oracle"]["members"]
        )
        lines.append(f"- VLM oracle (CAOS ensemble, {ver['oracle']['vote']} vote): {members}; every yes/no item")
    left_out = (record.get("independence") or {}).get("left_out_dependent") or []
    if left_out:
        lines.append(f"- left out of the default oracle as models under test: {', '.join(map(str, left_out))}")
    lines += [
        "",
        "| query type | distribution | items | detector disagrees | oracle disagrees | flagged |",
        "|---|---|---|---|---|---|",
    ]
    for r in record["by_query_type_distribution"]:
        lines.append(
            f"| {r['query_type']} | {r['distribution']} | {r['items']} | {r['detector_disagrees']} of "
            f"{r['detector_judged']} | {r['oracle_disagrees']} of {r['oracle_judged']} | {r['flagged']} |"
        )
    return "\n".join(lines) + "\n"


def with_audit_section(card: str, section: str) -> str:
    """The data card with its "Label audit" section replaced (or appended): a new label file replaces the old one."""
    start = card.find("\n" + SECTION + "\n")
    if start < 0:
        return card.rstrip("\n") + "\n\n" + section
    end = card.find("\n## ", start + len(SECTION) + 2)
    rest = card[end + 1 :] if end >= 0 else ""
    return card[: start + 1] + section + ("\n" + rest if rest else "")


# ---- building the verifiers ---------------------------------------------------------------------------------------


def audit_settings(config: dict, overrides: dict | None = None) -> dict:
    """The `audit:` settings: the config's section, then the non-None `overrides`, completed with the schema's
    defaults and validated (a wrong or unknown key names it)."""
    from ..config_types import Audit

    settings = {**(config.get("audit") or {}), **{k: v for k, v in (overrides or {}).items() if v is not None}}
    return Audit.from_dict(settings).to_dict()


def standin_detector(manifest: dict, folder: Path):
    """A tiny random OWLv2 with other weights than the release's stand-in (its seed + 1): independent noise."""
    from ..models.registry import create
    from ..models.standins import build_standin

    seed = int((((manifest.get("config") or {}).get("detection") or {}).get("stand_in") or {}).get("seed", 0)) + 1
    model = build_standin("owlv2", folder, seed=seed)
    detector = create("detector", {"backend": "transformers", "model": str(model), "device": "cpu"})
    # It lives in a temporary folder: name it by what it is, so the audit (and the manifest) hold no temp path.
    detector.model_id = f"tiny-owlv2 stand-in (seed {seed})"
    return detector


def _model_key(name: str | None) -> str:
    """A model id as identities compare it: a local folder by its resolved path, a hub id case-folded."""
    text = str(name or "").strip().rstrip("/")
    path = Path(text)
    return str(path.resolve()) if text and path.exists() else text.lower()


def folder_digest(path: str | Path) -> str | None:
    """sha256 over a local model folder's files (relative path and content), None when it is not a folder."""
    path = Path(path)
    if not path.is_dir():
        return None
    parts = [f"{f.relative_to(path).as_posix()}\0{sha256_file(f)}" for f in sorted(path.rglob("*")) if f.is_file()]
    return sha256_bytes("\n".join(parts).encode())


def release_detectors(manifest: dict) -> list[dict]:
    """The detectors that filtered the release's images (the manifest's `models`, role detector)."""
    return [m for m in manifest.get("models") or [] if m.get("role") == "detector"]


def same_detector(manifest: dict, model: str, revision: str | None = None) -> dict | None:
    """The release detector `model` (+ `revision`) is, or None: the same id with no differing revision on record,
    or a local folder whose files hash like the release detector's folder."""
    for m in release_detectors(manifest):
        if _model_key(m.get("model")) == _model_key(model):
            if m.get("revision") is None or revision is None or str(m["revision"]) == str(revision):
                return m
        digest = folder_digest(model) if Path(str(model)).is_dir() else None
        if digest and digest == (m.get("folder_sha256") or folder_digest(str(m.get("model")))):
            return m
    return None


def refuse_same_detector(manifest: dict, model: str, revision: str | None = None) -> None:
    """One error line when the audit's detector is the one that filtered the release (it would agree with itself)."""
    m = same_detector(manifest, model, revision)
    if m is not None:
        shown = m.get("model") + (f" (revision {m['revision']})" if m.get("revision") else "")
        raise ConfigError(
            f"audit detector (--detector, config key audit.detector) {model!r} is the release's own detector "
            f"{shown}: it would agree with itself; name an independent detector (another model) or 'none'"
        )


def _spec_key(spec: dict) -> tuple[str, str]:
    args = spec.get("args") or {}
    return (str(spec.get("backend") or ""), _model_key(args.get("model") or spec.get("model") or spec.get("name")))


def dependent_members(config: dict, specs: list[dict]) -> list[str]:
    """Names of oracle members that are models under test (a `models:` entry, by name or by backend + model): an
    oracle of the models being measured judges the labels they are measured against."""
    tested = config.get("models") or []
    names = {m.get("name") for m in tested}
    keys = {_spec_key(m) for m in tested}
    return [s.get("name") for s in specs if s.get("name") in names or _spec_key(s) in keys]


def oracle_choice(config: dict, names: list[str] | None, allow_dependent: bool) -> tuple[list[dict], dict]:
    """(member specs, record) of the audit's oracle. Named members that are models under test are refused unless
    `allow_dependent`; the default (names None) leaves them out and says how many it left out."""
    specs = oracle_specs(config, names)
    dependent = dependent_members(config, specs)
    record: dict = {"dependent_members": [], "left_out_dependent": []}
    if dependent and names is None and not allow_dependent:
        record["left_out_dependent"] = dependent
        return [s for s in specs if s.get("name") not in dependent], record
    if dependent and not allow_dependent:
        raise ConfigError(
            f"audit oracle (--oracle, config key audit.oracle): {', '.join(map(str, dependent))} "
            f"{'is a model' if len(dependent) == 1 else 'are models'} under test (models:); an oracle of the "
            "measured models is not independent of what it judges; pass --allow-dependent-oracle "
            "(audit.allow_dependent_oracle: true) to use it anyway"
        )
    record["dependent_members"] = dependent
    return specs, record


def run_workflow(
    release_dir: str | Path,
    out_dir: str | Path,
    config: dict,
    overrides: dict | None = None,
    *,
    models_cache: str = MODELS_CACHE,
    seed: int | None = None,
    max_side: int = 512,
) -> dict:
    """`release audit` and rule release_audit: build the verifiers from the `audit:` settings (audit_settings) and
    run `audit_release`. detector: hub id or folder (never the release's own detector), "none", or None for a
    stand-in (refused for a release made with real models); oracle: names from `models:` ([] none; None:
    oracle_specs' default less the models under test); members under test need allow_dependent_oracle."""
    from ..models.model import Model
    from ..models.registry import create

    cfg = audit_settings(config, overrides)
    release_dir = Path(release_dir)
    _check_out(release_dir, Path(out_dir))  # before any model loads
    manifest, _ = read_release(release_dir)
    if cfg["detector"] not in (None, "none"):
        refuse_same_detector(manifest, cfg["detector"])  # before it loads
    specs, independence = oracle_choice(config, cfg["oracle"], cfg["allow_dependent_oracle"])
    queries = read_parquet(release_dir / "queries.parquet")
    members = [
        Model.under_test(
            s, graph_dir=release_dir.parent / "graph", queries=queries, models_cache=models_cache, method="audit oracle"
        )
        for s in specs
    ]
    vote_rule = ((config.get("caos") or {}).get("oracle") or {}).get("vote", "majority")
    with tempfile.TemporaryDirectory(prefix="halluflow-audit-") as tmp:
        if cfg["detector"] is None:
            if not manifest.get("stand_ins_used"):
                raise ConfigError(
                    "audit detector (--detector, config key audit.detector): the release was made with real models; "
                    "name an independent real detector (e.g. IDEA-Research/grounding-dino-base) or 'none'"
                )
            det = standin_detector(manifest, Path(tmp) / "tiny-owlv2-audit")
        elif cfg["detector"] == "none":
            det = None
        else:
            det = create("detector", {"backend": cfg["detector_backend"], "model": cfg["detector"]})
        return audit_release(
            release_dir,
            out_dir,
            detector=det,
            detector_threshold=cfg["detector_threshold"],
            oracle_members=members,
            oracle_rule=vote_rule,
            oracle_tie="exclude",  # a tie (a member answering neither yes nor no) decides nothing
            yes_no_suffix=(config.get("answer") or {}).get("yes_no_suffix") or " Answer yes or no.",
            margin=cfg["margin"],
            confidence=cfg["confidence"],
            expected=cfg["expected_rate"],
            seed=seed,
            max_side=max_side,
            dependent_oracle=independence["dependent_members"],
            left_out_dependent=independence["left_out_dependent"],
        )


# ---- the report ---------------------------------------------------------------------------------------------------


def report_tables(summary: dict | None, manifest: dict | None) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """What the HTML report shows beside the release: the verifiers' counts per query type x distribution (from
    audit/audit.json) and the recorded label-error rates per query type (from the manifest's `audit` key)."""
    order = ["query_type", "distribution", "items", "detector_judged", "detector_disagrees", "oracle_judged"]
    order += ["oracle_disagrees", "flagged"]
    counts = pl.DataFrame(summary["by_query_type_distribution"]).select(order) if summary else None
    audit = (manifest or {}).get("audit") or {}
    labels = audit.get("labels")
    rates = None
    if labels:
        rates = pl.DataFrame(
            [
                {
                    "query type / stated answer": name,
                    "items": r.get("population"),
                    "labelled": r["labelled"],
                    "unresolved": r.get("unresolved", r["unsure"]),
                    "errors": r["errors"],
                    "label-error rate": r["error_rate"],
                    "low": r["interval"][0] if r["interval"] else None,
                    "high": r["interval"][1] if r["interval"] else None,
                    "interval": {"census": "exact (census)", "census-bounds": "census bounds"}.get(
                        r.get("kind"), "sampled"
                    ),
                    "RePOPE (POPE)": ref,
                }
                for name, r, ref in rate_rows(labels)
            ],
            infer_schema_length=None,
        )
    return counts, rates
