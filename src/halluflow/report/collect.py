"""Read one release's result folder for the report, stage by stage, tolerating stages that did not run.

Follows docs/data-contracts.md. A loader returns None when its stage's files are absent (the section then says
"not run"); a file that exists but cannot be read, or lacks a contract column, raises InputError naming it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

import polars as pl

from ..errors import InputError
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


def flatten_numbers(obj: Any, prefix: str = "") -> dict[str, float]:
    """Dotted keys → finite numbers of a nested metrics JSON (lists and strings skipped, bools are not numbers)."""
    out: dict[str, float] = {}
    if isinstance(obj, dict):
        for key in sorted(obj, key=str):
            sub = f"{prefix}.{key}" if prefix else str(key)
            out.update(flatten_numbers(obj[key], sub))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        if math.isfinite(float(obj)):
            out[prefix] = float(obj)
    return out


def pick_metric(flat: dict[str, float], name: str) -> tuple[str, float] | None:
    """The least nested key equal to `name` or ending in `.name`: the overall value before any breakdown."""
    candidates = [k for k in flat if k == name or k.endswith("." + name)]
    if not candidates:
        return None
    key = min(candidates, key=lambda k: (k.count("."), k))
    return key, flat[key]


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
        key = ("json", rel)
        if key not in self._cache:
            path = self.root / rel
            if not path.exists():
                self._cache[key] = None
            else:
                try:
                    self._cache[key] = json.loads(path.read_text(encoding="utf-8"))
                except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                    raise InputError(f"{path}: not valid JSON ({exc})") from None
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


# Scorecard: one row per model, columns = the headline number of each method (least nested key of that name).
SCORECARD = [
    ("metrics", "accuracy", "POPE accuracy"),
    ("metrics", "f1", "POPE F1"),
    ("metrics", "yes_ratio", "yes ratio"),
    ("metrics", "chair_s", "CHAIR_s"),
    ("metrics", "chair_i", "CHAIR_i"),
    ("metrics", "hallucination_rate", "hallucination rate"),
    ("caos", "caos_t", "CAOS_T"),
    ("caos", "caos_x", "CAOS_X"),
    ("caos", "caos_k", "CAOS_K"),
    ("cedi", "hallucination_rate", "CEDI hallucination rate"),
    ("cedi", "ged", "CEDI GED"),
    ("fuzz", "ghr_standard", "GHR standard"),
    ("fuzz", "ghr_fuzzed", "GHR fuzzed"),
    # failed / empty answers are excluded from every number above; the counts say how many (docs/failed-answers.md)
    ("metrics", "n_failed", "failed answers"),
    ("metrics", "n_unknown", "unknown answers"),
    ("fuzz", "n_failed_standard", "SAMF failed answers"),
]


def _caos_numbers(doc: dict | None) -> tuple[dict[str, float], str]:
    """CAOS summaries hold one block per embedder (`embedders.<name>.caos_t`); take the first, named in the label."""
    if not doc:
        return {}, ""
    embedders = doc.get("embedders")
    if isinstance(embedders, dict) and embedders:
        name = sorted(embedders)[0]
        return flatten_numbers(embedders[name]), f" ({name})"
    return flatten_numbers(doc), ""


def _cedi_numbers(doc: dict | None) -> dict[str, float]:
    """CEDI grades: headline numbers at the top level (the CEDI examiner with history); older layouts keep them
    only in `summary.<examiner>/<history>`, where the CEDI examiner with history is preferred."""
    if not doc:
        return {}
    top = flatten_numbers({k: v for k, v in doc.items() if k not in ("summary", "conversations", "settings")})
    if "ged" in top or "hallucination_rate" in top:
        return top
    summary = doc.get("summary")
    if isinstance(summary, dict) and summary:
        preferred = [k for k in ("cedi/with", "cedi/without") if k in summary]
        block = summary[preferred[0] if preferred else sorted(summary)[0]]
        return flatten_numbers({k: v for k, v in block.items() if not k.startswith("by_")})
    return top


def _fuzz_numbers(res: "Results", model: str) -> dict[str, float]:
    """The comparison table's overall row on the held-out split (SAMF Table 11 layout), else the JSON's numbers."""
    df = res.fuzz_comparison(model)
    if df is not None and "group" in df.columns:
        rows = df.filter(pl.col("group") == "overall")
        if "split" in df.columns and rows.filter(pl.col("split") == "test").height:
            rows = rows.filter(pl.col("split") == "test")
        if rows.height:
            return flatten_numbers(rows.row(0, named=True))
    return flatten_numbers(res.json(f"fuzz/{model}/comparison.json") or {})


def scorecard(res: Results) -> pl.DataFrame | None:
    """Headline numbers per model across every method that ran; columns absent for all models are dropped."""
    rows = []
    caos_suffix = ""
    for model in res.models():
        caos_flat, suffix = _caos_numbers(res.caos(model))
        caos_suffix = caos_suffix or suffix
        sources = {
            "metrics": flatten_numbers(res.metrics(model) or {}),
            "caos": caos_flat,
            "cedi": _cedi_numbers(res.cedi_grades(model)),
            "fuzz": _fuzz_numbers(res, model),
        }
        row: dict[str, Any] = {"model": model}
        for source, name, label in SCORECARD:
            hit = pick_metric(sources[source], name)
            row[label] = None if hit is None else round(hit[1], 4)
        rows.append(row)
    if not rows:
        return None
    df = pl.DataFrame(rows, schema={"model": pl.String, **{label: pl.Float64 for _, _, label in SCORECARD}})
    df = df.rename({label: label + caos_suffix for source, _, label in SCORECARD if source == "caos"})
    keep = ["model"] + [c for c in df.columns[1:] if df[c].null_count() < df.height]
    return df.select(keep) if len(keep) > 1 else None


def metrics_long(res: Results, max_depth: int = 2) -> pl.DataFrame | None:
    """Every number of every metrics/<model>.json up to `max_depth` levels, as metric × model (the full table)."""
    per_model = {m: flatten_numbers(res.metrics(m)) for m in res.models() if res.metrics(m) is not None}
    if not per_model:
        return None
    keys = sorted({k for flat in per_model.values() for k in flat if k.count(".") < max_depth})
    data = {"metric": keys}
    for model, flat in per_model.items():
        data[model] = [round(flat[k], 4) if k in flat else None for k in keys]
    return pl.DataFrame(data, schema={"metric": pl.String, **{m: pl.Float64 for m in per_model}})
