"""Read one release's result folder for the report, stage by stage, tolerating stages that did not run.

Follows docs/data-contracts.md. A loader returns None when its stage's files are absent (the section then says
"not run"); a file that exists but cannot be read, or lacks a contract column, raises InputError naming it.
Numbers of the JSON documents are read only through the metric catalogue (halluflow.metrics.catalogue).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import polars as pl

from ..errors import InputError
from ..io import read_json
from ..metrics.catalogue import CATALOGUE, Metric
from ..progress import get_logger

log = get_logger(__name__)

# ODE's four distributions and two pair kinds, in the paper's order (figure 6 reads left to right like this).
DISTRIBUTIONS = ["standard", "long_tail", "random", "fictional"]
PAIR_KINDS = ["entity_entity", "entity_environment"]

SCENE_COLUMNS = ("scene_id", "distribution", "pair_kind", "object_a", "object_b")
FILTER_COLUMNS = ("image_id", "scene_id", "distribution", "pair_kind", "path")
DETECTION_COLUMNS = ("image_id", "label", "score", "x0", "y0", "x1", "y1")
QUERY_COLUMNS = ("query_id", "image_id", "distribution", "pair_kind", "task", "query_type")


def _order_key(values: Iterable[str], order: list[str]) -> dict[str, int]:
    """Rank known names by the paper's order, unknown ones after them alphabetically (stable plots and tables)."""
    extra = sorted(v for v in set(values) if v not in order)
    return {name: i for i, name in enumerate(order + extra)}


_KIND_NAMES = {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number"}
_KIND_NAMES.update({bool: "a boolean", type(None): "null"})


def _json_kind(value: Any) -> str:
    """How JSON names a value's type (an error message says `got a list`, not `got list`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    return _KIND_NAMES.get(type(value), type(value).__name__)


def require(doc: Any, where: str, *path: str | int, kinds: tuple[type, ...] = ()) -> Any:
    """doc[path[0]][path[1]]... with a one-line InputError naming `where` (the file) and the key when a step is
    missing or, with `kinds`, the value is not one of them. A result file a stage wrote in another shape fails
    here, never with a KeyError deep in a table builder."""
    value = doc
    for i, key in enumerate(path):
        shown = ".".join(str(k) for k in path[: i + 1])
        if isinstance(key, int):
            if not isinstance(value, list) or not -len(value) <= key < len(value):
                raise InputError(f"{where}: key '{shown}': missing (expected a list of at least {key + 1})")
        elif not isinstance(value, dict) or key not in value:
            parent = ".".join(str(k) for k in path[:i])
            if not isinstance(value, dict):
                raise InputError(f"{where}: key '{parent}': expected an object, got {_json_kind(value)}")
            raise InputError(f"{where}: key '{shown}': missing")
        value = value[key]
    if kinds and (not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)):
        names = " or ".join(dict.fromkeys(_KIND_NAMES.get(k, k.__name__) for k in kinds))
        raise InputError(f"{where}: key '{'.'.join(map(str, path))}': expected {names}, got {_json_kind(value)}")
    return value


def _any_stand_in(obj: Any) -> bool:
    if isinstance(obj, dict):
        return any((k == "stand_in" and v is True) or _any_stand_in(v) for k, v in obj.items())
    if isinstance(obj, list):
        return any(_any_stand_in(v) for v in obj)
    return False


class Results:
    """Lazy, cached access to `results/<release>/`; every accessor returns None for a stage that did not run."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not self.root.is_dir():
            raise InputError(f"{self.root}: result folder not found (expected results/<release>/)")
        self.release = self.root.resolve().name
        self._cache: dict[Any, Any] = {}

    # ---- low-level readers -------------------------------------------------------------------------------
    def _read_parquet(self, path: Path, required: Iterable[str] = ()) -> pl.DataFrame:
        try:
            df = pl.read_parquet(path)
        except Exception as exc:  # polars raises several exception types for corrupt files
            raise InputError(f"{path}: not a readable parquet table ({type(exc).__name__}: {exc})") from None
        missing = [c for c in required if c not in df.columns]
        if missing:
            raise InputError(f"{path}: missing column(s) {', '.join(missing)} (see docs/data-contracts.md)")
        return df

    def table(self, rel: str, required: Iterable[str] = ()) -> pl.DataFrame | None:
        key = ("table", rel)
        if key not in self._cache:
            path = self.root / rel
            self._cache[key] = self._read_parquet(path, required) if path.exists() else None
        return self._cache[key]

    def shards(self, folder: str, required: Iterable[str] = ()) -> pl.DataFrame | None:
        """Concatenate `folder/<shard>.parquet` in shard order; None when no shard exists."""
        key = ("shards", folder)
        if key not in self._cache:
            paths = sorted((self.root / folder).glob("*.parquet"))
            frames = [self._read_parquet(p, required) for p in paths]
            self._cache[key] = pl.concat(frames, how="diagonal_relaxed") if frames else None
        return self._cache[key]

    def json(self, rel: str) -> Any:
        """A result document (a JSON object), None when absent. Read through the one decoding guard
        (halluflow.io.read_json: depth-bounded, one line naming the file); a document that is not an object
        (a list, a number) is refused naming the file, never taken for an absent stage."""
        key = ("json", rel)
        if key not in self._cache:
            path = self.root / rel
            doc = read_json(path) if path.exists() or path.is_symlink() else None
            if doc is not None and not isinstance(doc, dict):
                raise InputError(f"{path}: expected a JSON object, got {_json_kind(doc)}")
            self._cache[key] = doc
        return self._cache[key]

    # ---- contract tables ---------------------------------------------------------------------------------
    def scenes(self) -> pl.DataFrame | None:
        return self.table("scenes/scenes.parquet", SCENE_COLUMNS)

    def accepted(self) -> pl.DataFrame | None:
        return self.table("filtered/accepted.parquet", FILTER_COLUMNS)

    def rejected(self) -> pl.DataFrame | None:
        return self.table("filtered/rejected.parquet", FILTER_COLUMNS + ("reason",))

    def images(self) -> pl.DataFrame | None:
        return self.shards("images", ("image_id", "path"))

    def detections(self) -> pl.DataFrame | None:
        return self.shards("detections", DETECTION_COLUMNS)

    def queries(self) -> pl.DataFrame | None:
        # The packaged release copy is what models answered; fall back to the stage output.
        for rel in ("release/queries.parquet", "queries/queries.parquet"):
            if (self.root / rel).exists():
                return self.table(rel, QUERY_COLUMNS)
        return None

    def manifest(self) -> dict | None:
        return self.json("release/manifest.json")

    def manifest_files(self) -> dict:
        """The manifest's `files` table ({path: {sha256, ...}}); InputError naming the file and the key when it is
        not one (a string's length is not a file count)."""
        files = (self.manifest() or {}).get("files", {})
        if not isinstance(files, dict):
            raise InputError(
                f"{self.root / 'release/manifest.json'}: key 'files': expected an object (path -> sha256), got "
                f"{_json_kind(files)}"
            )
        return files

    def comparison(self) -> dict | None:
        """compare/models.json (rule score_compare), checked against this folder: its `models` are models with
        results here (a renamed model is refused, never drawn beside the others), each comparison names two of
        them and carries `n` and `significant` per metric. None when absent."""
        doc = self.json("compare/models.json")
        if doc is None:
            return None
        where = str(self.root / "compare/models.json")
        models = require(doc, where, "models", kinds=(dict,))
        known = self.models()
        for name in models:
            if name not in known:
                raise InputError(
                    f"{where}: key 'models.{name}': no model of that name has results in this folder "
                    f"({', '.join(known) or 'none'}); renamed?"
                )
        for i, _ in enumerate(require(doc, where, "comparisons", kinds=(list,)) if "comparisons" in doc else []):
            for side in ("a", "b"):
                name = require(doc, where, "comparisons", i, side, kinds=(str,))
                if name not in models:
                    raise InputError(f"{where}: key 'comparisons.{i}.{side}': {name!r} is not one of its 'models'")
            for metric in require(doc, where, "comparisons", i, "metrics", kinds=(dict,)):
                require(doc, where, "comparisons", i, "metrics", metric, "n", kinds=(int,))
                require(doc, where, "comparisons", i, "metrics", metric, "significant", kinds=(bool,))
        return doc

    # ---- per-model outputs -------------------------------------------------------------------------------
    def models(self) -> list[str]:
        """Every model that left an output in any per-model stage, sorted."""
        names: set[str] = set()
        # diagnosis/ also holds <model>.distributions.parquet: its PNG names the model unambiguously.
        for pattern in ("metrics/*.json", "caos/*.json", "diagnosis/*.png"):
            names.update(p.stem for p in self.root.glob(pattern))
        for folder in ("answers", "scores", "cedi", "fuzz"):
            if (self.root / folder).is_dir():
                names.update(p.name for p in (self.root / folder).iterdir() if p.is_dir())
        return sorted(names)

    def metrics(self, model: str) -> dict | None:
        return self.json(f"metrics/{model}.json")

    def scored_answers(self, model: str) -> pl.DataFrame | None:
        return self.table(f"scores/{model}/answers.parquet", ("query_id",))

    def answers(self, model: str) -> pl.DataFrame | None:
        return self.shards(f"answers/{model}", ("query_id", "answer"))

    def caos(self, model: str) -> dict | None:
        return self.json(f"caos/{model}.json")

    def diagnosis_png(self, model: str) -> Path | None:
        path = self.root / "diagnosis" / f"{model}.png"
        return path if path.exists() else None

    def cedi_per_turn(self, model: str) -> pl.DataFrame | None:
        return self.table(f"cedi/{model}/per_turn.parquet")

    def cedi_grades(self, model: str) -> dict | None:
        return self.json(f"cedi/{model}/grades.json")

    def alignments(self) -> dict[str, dict]:
        """align/*.json written by `halluflow align human --out` (metric-human agreement), by file stem."""
        return {p.stem: d for p in sorted(self.root.glob("align/*.json")) if (d := self.json(f"align/{p.name}"))}

    def fuzz_comparison(self, model: str) -> pl.DataFrame | None:
        return self.table(f"fuzz/{model}/comparison.parquet")

    # ---- provenance --------------------------------------------------------------------------------------
    def stand_in_sources(self) -> list[str]:
        """Which stages ran on stand-in (random or tiny) models: drives the banner on every page and figure."""
        found = []
        for label, df in (("synthesis", self.images()), ("detection", self.detections())):
            if df is not None and "stand_in" in df.columns and df["stand_in"].fill_null(False).any():
                found.append(label)
        if _any_stand_in(self.manifest()) and "release" not in found:
            found.append("release")
        for model in self.models():
            tables = (self.answers(model), self.cedi_per_turn(model), self.fuzz_comparison(model))
            in_tables = any(
                df is not None and "stand_in" in df.columns and df["stand_in"].fill_null(False).any() for df in tables
            )
            docs = (
                self.metrics(model),
                self.caos(model),
                self.cedi_grades(model),
                self.json(f"fuzz/{model}/comparison.json"),
            )
            if in_tables or any(_any_stand_in(d) for d in docs):
                found.append(f"model {model}")
        return found


def counts_table(res: Results) -> pl.DataFrame | None:
    """Scenes, images, accepted, rejected and queries per distribution × pair kind (the release audit's counts)."""
    scenes = res.scenes()
    if scenes is None:
        return None
    keys = ["distribution", "pair_kind"]
    out = scenes.group_by(keys).agg(pl.len().alias("scenes"))
    parts = {"accepted": res.accepted(), "rejected": res.rejected(), "queries": res.queries()}
    images = res.images()
    if images is not None and "scene_id" in images.columns:
        parts["images"] = images.join(scenes.select("scene_id", *keys), on="scene_id", how="inner")
    for name in ("images", "accepted", "rejected", "queries"):
        df = parts.get(name)
        if df is None:
            continue
        counted = df.group_by(keys).agg(pl.len().alias(name))
        out = out.join(counted, on=keys, how="full", coalesce=True)
    for name in ("scenes", "images", "accepted", "rejected", "queries"):
        if name in out.columns:
            out = out.with_columns(pl.col(name).fill_null(0).cast(pl.Int64))
    if "accepted" in out.columns and "rejected" in out.columns:
        judged = pl.col("accepted") + pl.col("rejected")
        out = out.with_columns(
            pl.when(judged > 0).then(pl.col("accepted") / judged).otherwise(None).round(3).alias("acceptance_rate")
        )
    return _sort_design(out)


def _sort_design(df: pl.DataFrame, extra: list[str] | None = None) -> pl.DataFrame:
    dist = _order_key(df["distribution"].drop_nulls().to_list(), DISTRIBUTIONS)
    kind = _order_key(df["pair_kind"].drop_nulls().to_list(), PAIR_KINDS) if "pair_kind" in df.columns else {}
    cols = [
        pl.col("distribution").replace_strict(dist, default=len(dist)).alias("_d"),
    ]
    if "pair_kind" in df.columns:
        cols.append(pl.col("pair_kind").replace_strict(kind, default=len(kind)).alias("_k"))
    sort_cols = (extra or []) + [c.meta.output_name() for c in cols]
    return df.with_columns(cols).sort(sort_cols).drop([c.meta.output_name() for c in cols])


def rejection_reasons(res: Results) -> pl.DataFrame | None:
    rejected = res.rejected()
    if rejected is None:
        return None
    return (
        rejected.group_by("reason").agg(pl.len().alias("images")).sort(["images", "reason"], descending=[True, False])
    )


def hallucination_by_distribution(res: Results) -> pl.DataFrame | None:
    """Share of hallucinated answers per model × distribution × task (ODE figure 6), from the scored answers.

    An answer counts as hallucinated when the scorer flagged it (`hallucinated`); tables that only carry `correct`
    count wrong yes/no answers. Distribution and task come from the queries table when the scores lack them.
    """
    rows = []
    queries = res.queries()
    for model in res.models():
        scored = res.scored_answers(model)
        if scored is None:
            continue
        path = res.root / f"scores/{model}/answers.parquet"
        if "hallucinated" in scored.columns:
            flag = pl.col("hallucinated").cast(pl.Float64)
        elif "correct" in scored.columns:
            flag = 1.0 - pl.col("correct").cast(pl.Float64)
        else:
            raise InputError(f"{path}: needs a 'hallucinated' or 'correct' column to plot hallucination rates")
        need = [c for c in ("distribution", "task") if c not in scored.columns]
        if need:
            if queries is None:
                raise InputError(f"{path}: lacks {', '.join(need)} and no queries table to join them from")
            scored = scored.join(queries.select("query_id", *need), on="query_id", how="left")
        scored = scored.with_columns(flag.alias("_h")).filter(pl.col("_h").is_not_null())
        grouped = scored.group_by("distribution", "task").agg(
            pl.len().alias("n"), pl.col("_h").sum().alias("hallucinated"), pl.col("_h").mean().alias("rate")
        )
        rows.append(grouped.with_columns(pl.lit(model).alias("model")))
    if not rows:
        return None
    out = pl.concat(rows).select("model", "distribution", "task", "n", "hallucinated", "rate")
    out = out.with_columns(pl.col("hallucinated").cast(pl.Int64), pl.col("rate").round(4))
    return _sort_design(out, extra=["model", "task"])


# Scorecard: one row per model, one column per catalogue entry (docs/metrics.md), with the report's label. Failed
# and empty answers are excluded from every number; the count columns say how many (docs/failed-answers.md).
SCORECARD: list[tuple[str, str]] = [
    ("pope.accuracy", "POPE accuracy"),
    ("pope.f1", "POPE F1"),
    ("pope.yes_ratio", "yes ratio"),
    ("amber.overall.f1", "AMBER F1 (%)"),
    ("generative.chair_s", "CHAIR_s (ODE)"),
    ("generative.chair_i", "CHAIR_i (ODE)"),
    ("chair.chair_s", "CHAIR_s"),
    ("chair.chair_i", "CHAIR_i"),
    ("amber.generative.chair", "AMBER CHAIR (%)"),
    ("hallucination_rate", "hallucination rate"),
    ("caos.caos_t", "CAOS_T"),
    ("caos.caos_x", "CAOS_X"),
    ("caos.caos_k", "CAOS_K"),
    ("cedi.hallucination_rate", "CEDI hallucination rate"),
    ("cedi.ged", "CEDI GED"),
    ("samf.ghr_standard", "GHR standard"),
    ("samf.ghr_fuzzed", "GHR fuzzed"),
    ("n_failed", "failed answers"),
    ("pope.n_unknown", "unknown answers"),
    ("samf.n_failed_standard", "SAMF failed answers"),
]


@dataclass(frozen=True)
class Scorecard:
    """The scorecard table and, for every column but `model`, the catalogue entry its numbers were read through."""

    frame: pl.DataFrame
    columns: dict[str, Metric]


def _documents(res: Results, model: str) -> dict[str, tuple[Any, str]]:
    """Each catalogue document of one model with the path named in errors."""
    return {
        "metrics": (res.metrics(model), f"{res.root}/metrics/{model}.json"),
        "caos": (res.caos(model), f"{res.root}/caos/{model}.json"),
        "cedi": (res.cedi_grades(model), f"{res.root}/cedi/{model}/grades.json"),
        "samf": (res.json(f"fuzz/{model}/comparison.json"), f"{res.root}/fuzz/{model}/comparison.json"),
    }


def _caos_embedder(res: Results, models: list[str]) -> str | None:
    """CAOS summaries hold one block per embedder: the card shows the alphabetically first one found, named in the
    column label; a model without that embedder shows n/a (never another embedder's number)."""
    names = sorted({e for m in models for e in ((res.caos(m) or {}).get("embedders") or {})})
    return names[0] if names else None


def scorecard_table(res: Results) -> Scorecard | None:
    """Headline numbers per model, each read through its catalogue entry. A value that is null or absent for a model
    is None (shown as n/a); a column is left out only when no model's document has its location at all."""
    models = res.models()
    embedder = _caos_embedder(res, models)
    params = {"caos": {"embedder": embedder} if embedder else None, "samf": {"group": "overall"}}
    docs = {m: _documents(res, m) for m in models}
    rows, present = [], set()
    for model in models:
        row: dict[str, Any] = {"model": model}
        for name, label in SCORECARD:
            entry = CATALOGUE[name]
            doc, where = docs[model][entry.document]
            kw = params.get(entry.document, {})
            if doc is None or kw is None:
                row[label] = None
                continue
            if CATALOGUE.present(doc, name, where, **kw):
                present.add(label)
            value = CATALOGUE.read(doc, name, where, **kw)
            row[label] = None if value is None else round(value, 4)
        rows.append(row)
    if not rows:
        return None
    labels = [label for _, label in SCORECARD]
    df = pl.DataFrame(rows, schema={"model": pl.String, **{label: pl.Float64 for label in labels}})
    keep = [label for label in labels if label in present]
    if not keep:
        return None
    renamed = {
        label: f"{label} ({embedder})" for name, label in SCORECARD if CATALOGUE[name].document == "caos" and embedder
    }
    columns = {renamed.get(label, label): CATALOGUE[name] for name, label in SCORECARD if label in present}
    return Scorecard(df.select("model", *keep).rename({k: v for k, v in renamed.items() if k in keep}), columns)


def scorecard(res: Results) -> pl.DataFrame | None:
    """The scorecard as a table (TSV and HTML); see scorecard_table."""
    card = scorecard_table(res)
    return None if card is None else card.frame


def metrics_long(res: Results) -> pl.DataFrame | None:
    """Every catalogued number of every metrics/<model>.json (breakdowns aside), as metric × model, with the
    catalogue name, location and direction beside it."""
    per_model = {m: (res.metrics(m), f"{res.root}/metrics/{m}.json") for m in res.models()}
    per_model = {m: d for m, d in per_model.items() if d[0] is not None}
    if not per_model:
        return None
    entries = [
        e
        for e in CATALOGUE.in_document("metrics")
        if not e.parameters and any(CATALOGUE.present(doc, e.name, where) for doc, where in per_model.values())
    ]
    data: dict[str, list] = {
        "metric": [e.name for e in entries],
        "label": [e.label for e in entries],
        "better": [e.better or "" for e in entries],
    }
    for model, (doc, where) in per_model.items():
        values = [CATALOGUE.read(doc, e.name, where) for e in entries]
        data[model] = [None if v is None else round(v, 4) for v in values]
    schema = {"metric": pl.String, "label": pl.String, "better": pl.String, **{m: pl.Float64 for m in per_model}}
    return pl.DataFrame(data, schema=schema)
