"""ODE scoring (Tu, Hu, Sang, "ODE: Open-Set Evaluation of Hallucinations in Multimodal Large Language Models",
CVPR 2025, §4; its released scorer is AMBER's): POPE-style metrics of the yes/no queries broken down by
distribution, pair kind, query type and attribute kind, hallucination rate per distribution, and CHAIR-like scores
of the generative answers. A caption's object is supported when it names a truth object or a synonym of one (CHAIR's
synonym table, the one CAOS uses); the truth is the scene's objects plus those the detector confirmed in the image
(`generative_truth: detected`, default) or the scene's objects alone (`scene`). Cog (AMBER's, as ODE's scorer
computes it): the share of each image's hallucination-prone objects a caption names; they are the heaviest
neighbours of the scene's objects in the hallucination graph G_H (`cog_graph: hallucination`, default) or in the
co-occurrence graph (`cooccurrence`, ODE's released query generator), at most `cog_objects` (ODE: 5) per image,
never a truth object, a synonym of one or an object the detector confirmed.

Outputs: a tidy table with one row per answer (scores/<model>/answers.parquet) and a metrics JSON per model.
A failed answer (`failed`, the shared rule of metrics.parsers: a failed request, or under halluflow's own parsers a
blank answer) is never scored: left out of every metric, counted as n_failed in every block it would belong to.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence

import polars as pl

from ..errors import InputError
from ..io import read_parquet
from ..metrics.chair import tokenize
from ..metrics.parsers import (
    default_rule_line,
    default_rule_mask,
    default_rule_reasons,
    excludes_unknown,
    failed_mask,
    parse_answers,
    parser_mode,
)
from ..metrics.pope import aggregation_for, confusion_counts, metrics_from_counts
from ..metrics.singular import singularize_cached
from ..models.fetch import lock_record

ANSWER_COLUMNS = ("query_id", "model", "answer", "status")
QUERY_COLUMNS = ("query_id", "distribution", "pair_kind", "task", "query_type", "attribute_kind", "truth", "objects")
GENERATIVE_TRUTH = ("detected", "scene")
COG_GRAPHS = ("hallucination", "cooccurrence")
COG_OBJECTS = 5  # ODE's query generator keeps at most 5 hallucination-prone objects per image
BREAKDOWNS = ("distribution", "pair_kind", "query_type", "attribute_kind", "generator")
# Breakdowns over columns a release may lack (releases made before generators were recorded): skipped when absent.
OPTIONAL_BREAKDOWNS = ("generator",)
GENERATIVE = "generative"
# The scale of each block of a metrics JSON, as the metric catalogue (halluflow.metrics.catalogue) states it: POPE's
# numbers, the hallucination rate and the CHAIR-like description scores are fractions (0-1); AMBER's block is AMBER's
# own counters in percent (0-100, rounded as AMBER prints them: the anchors reproduce them exactly). Written into
# every metrics JSON as `units`, so a reader never has to guess which scale a number is on.
UNITS = {"hallucination_rate": "fraction", "pope": "fraction", "generative": "fraction", "amber": "percent"}


class ConceptMatcher:
    """Mentions of vocabulary concepts in free text: lower-case, tokenize, singularize (as CHAIR does), then the
    longest vocabulary phrase starting at each position wins ("traffic light" before "light").

    `synonyms` ((surface, category) pairs, e.g. CHAIR's "man" → "person") add their surfaces to the vocabulary and
    put concepts of one category in one class, so "a man" supports the truth object "person".
    """

    def __init__(self, vocabulary: Iterable[str], synonyms: Iterable[tuple[str, str]] = ()):
        self.phrases: dict[tuple[str, ...], str] = {}
        for concept in vocabulary:
            if concept is None or not str(concept).strip():
                continue
            key = self.key(str(concept))
            if key:
                self.phrases.setdefault(key, str(concept))
        self.classes: dict[tuple[str, ...], tuple[str, ...]] = {}
        for surface, category in synonyms:
            key, cat = self.key(surface), self.key(category)
            if key and cat:
                self.phrases.setdefault(key, surface)
                self.phrases.setdefault(cat, category)
                self.classes.setdefault(key, cat)
        self.max_len = max((len(k) for k in self.phrases), default=1)

    @staticmethod
    def key(text: str) -> tuple[str, ...]:
        return tuple(singularize_cached(t) for t in tokenize(text.lower().replace("_", " ")))

    def canonical(self, concept: str) -> str:
        """The vocabulary spelling of a truth object (so 'Dogs' and 'dog' compare equal); unknown → as given."""
        return self.phrases.get(self.key(concept), concept)

    def synonym_class(self, concept: str) -> tuple[str, ...]:
        """The category a concept belongs to (its own key when the synonym table does not list it)."""
        key = self.key(concept)
        return self.classes.get(key, key)

    def unsupported(self, mentions: Sequence[str], truth: Iterable[str]) -> list[str]:
        """Mentions naming no truth object, directly or through a synonym: the hallucinated objects."""
        classes = {self.synonym_class(t) for t in truth if t}
        return [m for m in mentions if self.synonym_class(m) not in classes]

    def mentions(self, text: str) -> list[str]:
        words = self.key(text)
        out, i = [], 0
        while i < len(words):
            for n in range(min(self.max_len, len(words) - i), 0, -1):
                hit = self.phrases.get(words[i : i + n])
                if hit is not None:
                    out.append(hit)
                    i += n
                    break
            else:
                i += 1
        return out


def default_synonyms() -> list[tuple[str, str]]:
    """The tool's one synonym table (resources/caos/coco_synonyms.tsv, derived from CHAIR's), shared with CAOS."""
    from ..caos.extract import default_chair_synonyms, read_synonym_table

    path = default_chair_synonyms()
    return read_synonym_table(path) if path else []


def prone_neighbours(graph: pl.DataFrame | None, directed: bool = True) -> dict[str, list[tuple[str, int]]]:
    """object → [(neighbour, weight)] of a (source, target, weight) edge table, heaviest first (ties by name).
    G_H is directed (a truth object → the objects annotated as hallucinated beside it); the co-occurrence graph is
    read both ways."""
    out: dict[str, dict[str, int]] = {}
    for s, t, w in graph.select(graph.columns[:3]).iter_rows() if graph is not None and graph.height else []:
        if s is None or t is None or s == t:
            continue
        for a, b in ((s, t),) if directed else ((s, t), (t, s)):
            out.setdefault(a, {})[b] = max(int(w), out.get(a, {}).get(b, 0))
    return {a: sorted(nb.items(), key=lambda p: (-p[1], p[0])) for a, nb in out.items()}


def hallucination_prone(
    truth: Iterable[str],
    detected: Iterable[str],
    neighbours: dict[str, list[tuple[str, int]]],
    matcher: ConceptMatcher,
    limit: int = COG_OBJECTS,
) -> list[str]:
    """The hallucination-prone objects of one image: the neighbours of its truth objects by the heaviest edge from
    any of them (ties by name), each once, leaving out the truth objects, their synonyms and the detected objects
    (ODE's query generator leaves out truth and detected objects), at most `limit`."""
    truth = [t for t in truth if t]
    barred = {matcher.synonym_class(o) for o in [*truth, *(d for d in detected if d)]}
    best: dict[str, int] = {}
    for t in truth:
        for other, w in neighbours.get(t, []):
            best[other] = max(w, best.get(other, 0))
    out, classes = [], set()
    for other, _ in sorted(best.items(), key=lambda p: (-p[1], p[0])):
        cls = matcher.synonym_class(other)
        if cls in barred or cls in classes:
            continue
        out.append(other)
        classes.add(cls)
        if len(out) == limit:
            break
    return out


def _require(df: pl.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"{what} lacks column(s) {', '.join(missing)} (see docs/data-contracts.md)")


def score_answers(
    queries: pl.DataFrame,
    answers: pl.DataFrame,
    vocabulary: Iterable[str],
    parser: str = "pope",
    positive: str = "yes",
    synonyms: Iterable[tuple[str, str]] = (),
    generative_truth: str = "detected",
    prone: dict[str, list[tuple[str, int]]] | None = None,
    cog_objects: int = COG_OBJECTS,
) -> pl.DataFrame:
    """The tidy per-answer table: parsed/correct/hallucinated for yes/no queries, mentions for generative ones.

    `generative_truth`: `detected` judges a caption against the scene's objects plus the objects the detector
    confirmed in the image (the queries' `detected` column, when present); `scene` against the scene's objects only.
    `prone` (prone_neighbours of a graph): each caption's hallucination-prone objects for Cog; None = no Cog.
    """
    if generative_truth not in GENERATIVE_TRUTH:
        raise InputError(
            f"config key 'scoring.generative_truth': unknown value {generative_truth!r}; known: "
            f"{', '.join(GENERATIVE_TRUTH)}"
        )
    _require(queries, QUERY_COLUMNS, "queries table")
    _require(answers, ANSWER_COLUMNS, "answers table")
    dup = answers["query_id"].is_duplicated()
    if dup.any():
        raise InputError(f"answers: query_id {answers.filter(dup)['query_id'][0]!r} answered more than once")
    unknown = answers.join(queries.select("query_id"), on="query_id", how="anti")
    if unknown.height:
        raise InputError(
            f"answers: query_id {unknown['query_id'][0]!r} is not in the queries table ({unknown.height} unknown)"
        )
    stand_in = pl.col("stand_in").fill_null(False) if "stand_in" in answers.columns else pl.lit(False)
    confirmed = (
        pl.col("detected")
        if generative_truth == "detected" and "detected" in queries.columns
        else pl.lit(None, pl.List(pl.String))
    ).alias("_detected")
    # the objects the detector saw, whatever `generative_truth` says: ODE never counts them as hallucination-prone
    seen_objects = (pl.col("detected") if "detected" in queries.columns else pl.lit(None, pl.List(pl.String))).alias(
        "_seen"
    )
    # the image each answer was given (answer stage): `score compare` refuses to pair answers to different images
    seen = pl.col("image_sha256") if "image_sha256" in answers.columns else pl.lit(None, pl.String)
    df = (
        answers.select("query_id", "model", "answer", "status", stand_in.alias("stand_in"), seen.alias("image_sha256"))
        .join(
            queries.select(
                *QUERY_COLUMNS, *[c for c in OPTIONAL_BREAKDOWNS if c in queries.columns], confirmed, seen_objects
            ),
            on="query_id",
            how="inner",
            maintain_order="left",
        )
        .sort("query_id")
    )
    df = df.with_columns(failed_mask(df["answer"], df["status"], parser=parser).alias("failed"))
    df = df.with_columns(pl.when(~pl.col("failed")).then(pl.col("answer")).otherwise(None).alias("_answer"))
    is_disc = pl.col("query_type") != GENERATIVE
    parsed = parse_answers(df["_answer"], parser)
    df = df.with_columns(pl.when(is_disc).then(parsed).otherwise(None).alias("parsed"))
    df = df.with_columns(
        pl.when(is_disc & pl.col("_answer").is_not_null())
        .then(pl.col("parsed").fill_null("") == pl.col("truth"))
        .otherwise(None)
        .alias("correct")
    )

    matcher = ConceptMatcher(vocabulary, synonyms)
    gen = df.filter(~is_disc & pl.col("_answer").is_not_null())
    mentioned, hallucinated, covered, n_truth, prone_lists, prone_named = [], [], [], [], [], []
    for text, objects, detected, seen in zip(
        gen["_answer"].to_list(), gen["objects"].to_list(), gen["_detected"].to_list(), gen["_seen"].to_list()
    ):
        truth = {matcher.canonical(o) for o in objects or []}
        found = matcher.mentions(text)
        mentioned.append(found)
        hallucinated.append(matcher.unsupported(found, truth | set(detected or [])))
        # coverage stays over the scene's objects: detections widen what a caption may say, not what it must
        found_classes = {matcher.synonym_class(m) for m in found}
        covered.append(sum(matcher.synonym_class(t) in found_classes for t in truth))
        n_truth.append(len(truth))
        listed = (
            hallucination_prone(sorted(truth), seen or [], prone, matcher, cog_objects) if prone is not None else None
        )
        prone_lists.append(listed)
        prone_named.append(
            sum(matcher.synonym_class(p) in found_classes for p in listed) if listed is not None else None
        )
    gen_cols = pl.DataFrame(
        {
            "query_id": gen["query_id"],
            "mentioned": mentioned,
            "hallucinated_objects": hallucinated,
            "n_truth_covered": covered,
            "n_truth": n_truth,
            "hallu_prone": prone_lists,
            "n_hallu_prone_mentioned": prone_named,
        },
        schema={
            "query_id": pl.String,
            "mentioned": pl.List(pl.String),
            "hallucinated_objects": pl.List(pl.String),
            "n_truth_covered": pl.Int64,
            "n_truth": pl.Int64,
            "hallu_prone": pl.List(pl.String),
            "n_hallu_prone_mentioned": pl.Int64,
        },
    )
    df = df.join(gen_cols, on="query_id", how="left", maintain_order="left").with_columns(
        pl.col("mentioned").list.len().cast(pl.Int64).alias("n_mentions"),
        pl.col("hallucinated_objects").list.len().cast(pl.Int64).alias("n_hallucinated"),
        pl.col("hallu_prone").list.len().cast(pl.Int64).alias("n_hallu_prone"),
    )
    # one flag per answer for the report: a wrong yes/no answer, or a caption naming an object not in the scene;
    # null when the answer cannot be judged (failed request, or a yes/no answer the parser could not read)
    df = df.with_columns(
        pl.when(is_disc & pl.col("parsed").is_not_null())
        .then(~pl.col("correct"))
        .when(~is_disc & pl.col("_answer").is_not_null())
        .then(pl.col("n_hallucinated") > 0)
        .otherwise(None)
        .alias("hallucinated")
    )
    return df.drop("_answer", "_detected", "_seen").select(
        "query_id",
        "model",
        "distribution",
        "pair_kind",
        "task",
        "query_type",
        "attribute_kind",
        "truth",
        "answer",
        "status",
        "failed",
        "parsed",
        "correct",
        "hallucinated",
        "mentioned",
        "hallucinated_objects",
        "n_mentions",
        "n_hallucinated",
        "n_truth",
        "n_truth_covered",
        "hallu_prone",
        "n_hallu_prone",
        "n_hallu_prone_mentioned",
        "objects",
        "stand_in",
        "image_sha256",
        *[c for c in OPTIONAL_BREAKDOWNS if c in df.columns],
    )


def _pope_block(df: pl.DataFrame, parser: str, positive: str) -> dict | None:
    asked = df.filter(pl.col("query_type") != GENERATIVE)
    disc = asked.filter(~pl.col("failed"))
    if disc.height == 0:
        return None
    counts = confusion_counts(disc["parsed"], disc["truth"], positive)
    counts["n_failed"] = asked.height - disc.height  # the failed yes/no answers this block left out
    out = metrics_from_counts(counts, aggregation_for(parser), positive)
    by_default = _default_rule(disc, parser)
    out["n_default_rule"] = None if by_default is None else int(by_default.sum())
    return out


def _default_rule(disc: pl.DataFrame, parser: str) -> pl.Series | None:
    """Which yes/no answers `parser` read only by its default rule (parsers.default_rule_mask); None for a table
    without the answer texts (a scored table built by hand)."""
    if "answer" not in disc.columns:
        return None
    return default_rule_mask(disc["answer"], disc["parsed"], parser)


def _generative_block(df: pl.DataFrame) -> dict | None:
    gen = df.filter((pl.col("query_type") == GENERATIVE) & ~pl.col("failed"))
    if gen.height == 0:
        return None
    n_ment, n_hall = int(gen["n_mentions"].sum()), int(gen["n_hallucinated"].sum())
    n_truth, n_cov = int(gen["n_truth"].sum()), int(gen["n_truth_covered"].sum())
    n_hall_caps = int((gen["n_hallucinated"] > 0).sum())
    out = {
        "chair_s": n_hall_caps / gen.height,
        "chair_i": n_hall / n_ment if n_ment else None,
        "coverage": n_cov / n_truth if n_truth else None,
        "n_captions": gen.height,
        "n_mentions": n_ment,
        "n_hallucinated_mentions": n_hall,
        "n_hallucinated_captions": n_hall_caps,
    }
    prone = _prone_counts(gen)
    if prone is not None:
        n_prone, n_named = prone
        out |= {
            "cog": n_named / n_prone if n_prone else None,
            "n_hallu_prone": n_prone,
            "n_hallu_prone_mentioned": n_named,
        }
    return out


def _prone_counts(gen: pl.DataFrame) -> tuple[int, int] | None:
    """(hallucination-prone objects, those the captions named) over scored captions; None when Cog was not asked."""
    listed = gen.filter(pl.col("hallu_prone").is_not_null())
    if listed.height == 0:
        return None
    return int(listed["n_hallu_prone"].sum()), int(listed["n_hallu_prone_mentioned"].sum())


def amber_section() -> pl.Expr:
    """AMBER's section of a yes/no query, by what it asks: an attribute question (a counterfactual one too, "Is the
    camera narrow?") → state / action, a count → number, an object question (existence or counterfactual) →
    existence; anything else → relation."""
    attribute = pl.col("query_type").is_in(["attribute", "counterfactual"]) & pl.col("attribute_kind").is_in(
        ["state", "action"]
    )
    return (
        pl.when(attribute)
        .then(pl.col("attribute_kind"))
        .when(pl.col("query_type") == "count")
        .then(pl.lit("number"))
        .when(pl.col("query_type").is_in(["existence", "counterfactual"]))
        .then(pl.lit("existence"))
        .otherwise(pl.lit("relation"))
    )


def _amber_block(df: pl.DataFrame) -> dict | None:
    """ODE's released scorer = AMBER's counters ("No" positive, 0.001 denominators, percent, 1 decimal) on the
    configured (looser) parse, sections by amber_section. Generative: AMBER's CHAIR / Cover / Hal over our concept
    mentions, and Cog over each image's hallucination-prone objects (null when none were listed)."""
    from ..metrics.amber import _accumulate, _accumulated, _r, discriminative_scores

    ok = df.filter(~pl.col("failed"))
    disc = ok.filter(pl.col("query_type") != GENERATIVE).with_columns(section=amber_section())
    out: dict = {}
    if disc.height:
        scores = discriminative_scores(disc.with_columns(correct=pl.col("correct").fill_null(False)))
        present = set(disc["section"].to_list())
        out = {
            k: v
            for k, v in scores.items()
            if k in present or k == "overall" or (k == "attribute" and present & {"state", "action", "number"})
        }
    gen = ok.filter(pl.col("query_type") == GENERATIVE)
    if gen.height:
        rows = gen.select("n_mentions", "n_hallucinated", "n_truth", "n_truth_covered").to_dicts()
        out["generative"] = {
            "chair": _r(
                sum(r["n_hallucinated"] for r in rows) / _accumulate(0.001, [r["n_mentions"] for r in rows]) * 100
            ),
            "cover": _r(
                sum(r["n_truth_covered"] for r in rows) / _accumulate(0.001, [r["n_truth"] for r in rows]) * 100
            ),
            "hal": _r(100 - sum(r["n_hallucinated"] == 0 for r in rows) / _accumulated(0.001, len(rows)) * 100),
            "n": len(rows),
        }
        prone = _prone_counts(gen)
        if prone is not None:
            # AMBER's Cog counter: named prone objects / (0.001 + prone objects, image after image)
            counts = gen.filter(pl.col("hallu_prone").is_not_null())["n_hallu_prone"].to_list()
            out["generative"]["cog"] = _r(prone[1] / _accumulate(0.001, counts) * 100) if prone[0] else None
    return out or None


def _rate(df: pl.DataFrame) -> dict:
    judged = df.filter(pl.col("hallucinated").is_not_null())
    n = judged.height
    k = int(judged["hallucinated"].sum()) if n else 0
    return {"hallucination_rate": k / n if n else None, "n_judged": n, "n_hallucinated": k}


def _section(df: pl.DataFrame, parser: str, positive: str) -> dict:
    out = _rate(df)
    out["n_failed"] = int(df["failed"].sum())
    # the release reader's unknown yes/no answers are in no ratio: AMBER's counters leave them out too
    read = (
        df.filter((pl.col("query_type") == GENERATIVE) | pl.col("failed") | pl.col("parsed").is_not_null())
        if excludes_unknown(parser)
        else df
    )
    pope, gen, amber = _pope_block(df, parser, positive), _generative_block(df), _amber_block(read)
    if pope is not None:
        out["pope"] = pope
    if gen is not None:
        out["generative"] = gen
    if amber is not None:
        out["amber"] = amber  # ODE's own (AMBER's) numbers, in every breakdown group as over all answers
    return out


def _groups(df: pl.DataFrame, keys: Sequence[str], parser: str, positive: str) -> dict:
    out = {}
    for part in df.with_columns(pl.col(list(keys)).fill_null("none")).partition_by(list(keys), maintain_order=False):
        name = "/".join(str(part[k][0]) for k in keys)
        out[name] = _section(part, parser, positive)
    return dict(sorted(out.items()))


def ode_metrics(
    scored: pl.DataFrame,
    model: str,
    parser: str = "pope",
    positive: str = "yes",
    breakdowns: Sequence[str] = BREAKDOWNS,
) -> dict:
    """Metrics JSON of one model: overall sections first (the report picks the least nested numbers), then one
    `by_<column>` block per breakdown, then distribution × query type and distribution × pair kind. Every section
    (overall and each group) has the same blocks: rate, POPE, CHAIR-like generative, AMBER's (ODE's scorer)."""
    breakdowns = [b for b in breakdowns if b in scored.columns or b not in OPTIONAL_BREAKDOWNS]
    unknown = [b for b in breakdowns if b not in scored.columns]
    if unknown:
        raise InputError(f"scoring.breakdowns: unknown column(s) {', '.join(unknown)} (known: {', '.join(BREAKDOWNS)})")
    out = {
        "model": model,
        "parser": parser,
        "parser_mode": parser_mode(parser),
        "positive": positive,
        "stand_in": bool(scored["stand_in"].any()) if scored.height else False,
        "n_answers": scored.height,
        "n_failed": int(scored["failed"].sum()),
        "n_unknown": int(((scored["query_type"] != GENERATIVE) & ~scored["failed"] & scored["parsed"].is_null()).sum()),
    }
    disc = scored.filter((pl.col("query_type") != GENERATIVE) & ~pl.col("failed"))
    mask = _default_rule(disc, parser)
    by_default = disc.filter(mask) if mask is not None else None
    out["n_default_rule"] = None if by_default is None else by_default.height
    out["default_rule_reasons"] = {} if by_default is None else default_rule_reasons(by_default["answer"].to_list())
    out["units"] = dict(UNITS)  # one scale per block, as the metric catalogue states it
    out.update(_section(scored, parser, positive))
    for b in breakdowns:
        out[f"by_{b}"] = _groups(scored, [b], parser, positive)
    # ODE's tables: each distribution per query type and per pair kind (entity-entity, entity-environment)
    for second in ("query_type", "pair_kind"):
        if {"distribution", second} <= set(scored.columns):
            out[f"by_distribution_{second}"] = _groups(scored, ["distribution", second], parser, positive)
    return out


def read_answer_shards(paths: Sequence[str]) -> pl.DataFrame:
    frames = []
    for p in paths:
        df = read_parquet(p)
        _require(df, ANSWER_COLUMNS, f"answers shard {p}")
        cols = list(ANSWER_COLUMNS) + [c for c in ("stand_in", "image_sha256", "task_definition") if c in df.columns]
        frames.append(
            df.select(cols).with_columns(pl.col("query_id").cast(pl.String), pl.col("answer").cast(pl.String))
        )
    if not frames:
        raise InputError("no answer shards given")
    return pl.concat(frames, how="diagonal_relaxed")


def run_score(
    answer_paths: Sequence[str],
    queries_path: str,
    nodes_path: str,
    scores_out: str,
    metrics_out: str,
    model: str,
    scoring: dict,
    hallu_path: str | None = None,
    edges_path: str | None = None,
    release_dir: str | None = None,
) -> dict:
    """The `score` rule: read the model's answer shards, score them, write the tidy table and the metrics JSON.
    Cog reads the graph `scoring.cog_graph` names: G_H (`hallu_path`) or the co-occurrence edges (`edges_path`);
    without that file there is no Cog. The yes/no reader is `scoring.parser`, or (null) the one the release's task
    declares (`release_dir`'s manifest); the metrics' `task` block says how the answers were asked and read and
    what differs from the release's declaration (halluflow.ode.task)."""
    from ..io import write_json, write_parquet
    from .task import answers_task, release_task

    queries = read_parquet(queries_path)
    nodes = read_parquet(nodes_path)
    _require(nodes, ("node",), f"graph nodes {nodes_path}")
    cog_graph = scoring.get("cog_graph", "hallucination")
    if cog_graph not in COG_GRAPHS:
        raise InputError(f"config key 'scoring.cog_graph': unknown value {cog_graph!r}; known: {', '.join(COG_GRAPHS)}")
    graph_path = hallu_path if cog_graph == "hallucination" else edges_path
    prone = None
    if graph_path:
        graph = read_parquet(graph_path)
        _require(graph, ("source", "target", "weight"), f"graph edges {graph_path}")
        prone = prone_neighbours(graph.select("source", "target", "weight"), directed=cog_graph == "hallucination")
    # concept vocabulary = graph nodes, plus any truth object of the release (fictional objects included) and every
    # hallucination-prone object (a caption naming one must be found to count for Cog)
    vocabulary = sorted(
        set(nodes["node"].drop_nulls().to_list())
        | set(queries["objects"].explode().drop_nulls().to_list())
        | set(queries["target"].drop_nulls().to_list())
        | {o for nb in (prone or {}).values() for o, _ in nb}
    )
    answers = read_answer_shards(answer_paths)
    used, task = answers_task(answers, release_task(release_dir), scoring.get("parser"), f"answers of {model}")
    parser, positive = used["kinds"]["discriminative"]["reader"], scoring.get("positive", "yes")
    scored = score_answers(
        queries,
        answers,
        vocabulary,
        parser,
        positive,
        synonyms=default_synonyms(),
        generative_truth=scoring.get("generative_truth", "detected"),
        prone=prone,
        cog_objects=int(scoring.get("cog_objects", COG_OBJECTS)),
    )
    wrong_model = scored.filter(pl.col("model") != model)
    if wrong_model.height:
        raise InputError(f"answers of model {model!r} contain rows of model {wrong_model['model'][0]!r}")
    metrics = ode_metrics(scored, model, parser, positive, scoring.get("breakdowns", BREAKDOWNS))
    if metrics["n_default_rule"]:
        n_read = metrics["pope"]["n"] + (metrics["n_unknown"] if excludes_unknown(parser) else 0)
        print(
            default_rule_line(
                f"score {model}", parser, metrics["n_default_rule"], n_read, metrics["default_rule_reasons"]
            ),
            file=sys.stderr,
        )
    metrics["task"] = task
    from .support import release_support

    support = release_support(release_dir)  # how many "yes" labels rest on the prompt alone (the DATACARD's line)
    if support:
        metrics["label_support"] = support
        if support["line"]:
            print(f"score {model}: release labels: {support['line']}", file=sys.stderr)
    for line in task["overrides"]:
        print(f"score {model}: task override (recorded in metrics task.overrides): {line}", file=sys.stderr)
    metrics["models_lock"] = lock_record()  # the Hub commits the run loaded, when it checked a lock
    # `score compare` pairs only answers asked and read under one task
    scored = scored.with_columns(pl.lit(task["hash"]).alias("task_hash"))
    write_parquet(scores_out, scored)
    write_json(metrics_out, metrics)
    return metrics
