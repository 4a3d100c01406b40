"""Queries of ODE (Tu, Hu, Sang, CVPR 2025, §3.4 "query construction"; github
Iridescent-y/ODE `query_generator.py`) plus POPE negatives.

Generative "Please describe this picture."; existence yes for the truth objects and "no" for graph neighbours
in descending edge weight (excluding truth and detected objects), POPE's random / popular / adversarial
negatives, or G_H's hallucination-prone objects; attribute (state, action) yes/no; count yes "one" / no "two,
three"; and the paper's counterfactual queries (objects and attributes never seen with the scene's objects),
which ODE's released code lacks.
"""

from __future__ import annotations

import hashlib
import re
from json.encoder import encode_basestring_ascii as json_string  # json.dumps of a str

import numpy as np
import polars as pl

from ..errors import ConfigError, InputError
from ..io import canonical_json
from ..progress import get_logger, progress
from .attributes import (
    IMPLIED_BY_ENVIRONMENT,
    NUMBER_WORDS,
    attribute_fit_problem,
    clean_word,
    counterfactual_forms,
    node_attribute_forms,
    read_attribute_types,
    read_attribute_words,
)
from .concepts import NOT_A_THING, Implications, concept, no_object_problem, read_concepts
from .graph import neighbours
from .nouns import askable_nodes, noun, read_lexicon

log = get_logger(__name__)

STRATEGIES = ("graph_neighbour", "random", "popular", "adversarial", "hallucination")

QUESTION_STYLES = ("grammatical", "ode_code")
EXISTENCE = "Is there {article} {object} in the picture?"
# Existence per noun kind (halluflow.ode.nouns): a count noun takes its article by sound ("a urinal", "an umbrella"),
# a mass noun none ("Is there grass …?"), a plural agrees ("Are there jeans …?").
EXISTENCE_BY_KIND = {
    "count": EXISTENCE,
    "mass": "Is there {object} in the picture?",
    "plural": "Are there {object} in the picture?",
}
# One template per kind: states are adjectives ("Is the car red?"), actions gerunds ("Is the dog swimming?"), the
# verb agrees with a plural ("Are the jeans blue?"); counts agree in number ("Is there one dog?", "Are there two
# dogs?") and are asked about count nouns only.
ATTRIBUTE = {"state": "{be} the {object} {attribute}?", "action": "{be} the {object} {attribute}?"}
COUNT_ONE = "Is there one {object}?"
# How many of each count noun a prompt asks for ("a dog and a frisbee", ode/prompts.py): a count question is asked
# only where the detector's merged boxes agree with it, so its "yes" is both what was asked for and what was seen.
PROMPT_COUNT = 1
COUNT_MANY = "Are there {number} {plural}?"
# ODE's code asks "Is the {obj} {attr} in the picture?" with AMBER's mined words as they are, and actions read
# "Does the dog run in the picture?" as AMBER's own questions; counts assume "one" (`question_style: ode_code`).
ODE_CODE = {
    "state": "Is the {object} {attribute} in the picture?",
    "action": "Does the {object} {attribute} in the picture?",
    "count_one": "Is there one {object} in the picture?",
    "count_many": "Are there {number} {plural} in the picture?",
}

QUERY_SCHEMA = {
    "query_id": pl.String,
    "image_id": pl.String,
    "image": pl.String,
    "scene_id": pl.String,
    "distribution": pl.String,
    "pair_kind": pl.String,
    "task": pl.String,
    "query_type": pl.String,
    "attribute_kind": pl.String,
    "question": pl.String,
    "truth": pl.String,
    "target": pl.String,
    "objects": pl.List(pl.String),
    "strategy": pl.String,
    # objects the detector confirmed in the image (>= the exclusion threshold): with `objects`, the truth a
    # generative answer is judged against
    "detected": pl.List(pl.String),
}


def article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def plural(word: str) -> str:
    """Plain English plural of the last word; enough for count questions ("two benches", "three skies")."""
    head, _, last = word.rpartition(" ")
    if last.endswith(("s", "x", "z", "ch", "sh")):
        last += "es"
    elif last.endswith("y") and last[-2:-1] not in ("a", "e", "i", "o", "u", ""):
        last = last[:-1] + "ies"
    else:
        last += "s"
    return f"{head} {last}".strip()


def release_identity(name: str, seed: int) -> str:
    """What makes two releases different in their query ids: the release name and the master seed."""
    return f"{name}/seed={int(seed)}"


def query_id(image_id: str, question: str, image_sha256: str = "", release: str = "") -> str:
    """16 hex digits of sha256(release identity, image id, image sha256, question): content-addressed, so a query
    of another release, or of the same release with another image, never shares an id (the image id alone is a
    position, `standard-ee-00000-v0-i00`, which every release reuses). Empty hash / identity: hand-made tables."""
    key = "\x1f".join((release, image_id, image_sha256, question))
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def query_ids(
    image_ids: pl.Series, questions: pl.Series, image_sha256: pl.Series | None = None, release: str = ""
) -> pl.Series:
    """`query_id` of each row, as a column: one sha256 call per query is the only per-row Python left (the hex
    digits are made for all of them at once)."""
    sha = hashlib.sha256
    images = pl.lit("") if image_sha256 is None else image_sha256.fill_null("")
    parts = [pl.lit(release), image_ids, images, questions]
    keys = pl.select(pl.concat_str(parts, separator="\x1f")).to_series().cast(pl.Binary).to_list()
    digests = b"".join([sha(k).digest()[:8] for k in keys])
    return pl.Series("query_id", np.frombuffer(digests.hex().encode(), dtype="S16")).cast(pl.String)


def check_query_ids(queries: pl.DataFrame, release: str, seed: int) -> bool:
    """True when the table's ids are content-addressed for this release (it has `image_sha256` and every id is
    `query_id` of its row); False for a table without image hashes; InputError naming the first id made for
    another release, seed or image (a queries table packaged under the wrong release)."""
    if "image_sha256" not in queries.columns or queries.height == 0:
        return False
    identity = release_identity(release, seed)
    expected = query_ids(queries["image_id"], queries["question"], queries["image_sha256"], identity)
    wrong = queries.filter(queries["query_id"] != expected)
    if wrong.height:
        raise InputError(
            f"queries table: query_id {wrong['query_id'][0]!r} is not the id of its row for release {release!r} "
            f"seed {seed} ({wrong.height} of {queries.height} ids): made for another release, seed or image"
        )
    return True


class NegativeSampler:
    """Objects to ask about as absent, per strategy, from the concept graph.

    Orders depend only on the truth objects, so they are computed once per object pair and reused by every
    image of its scenes (100,000 images cost seconds, not minutes).
    """

    def __init__(self, nodes: pl.DataFrame, edges: pl.DataFrame, hallu_edges: pl.DataFrame | None = None):
        self.adj = neighbours(edges.filter(pl.col("source") != pl.col("target")))
        self.hallu: dict[str, list[tuple[str, int]]] = {}
        for s, t, w in hallu_edges.iter_rows() if hallu_edges is not None else []:
            self.hallu.setdefault(s, []).append((t, int(w)))
        self.nodes = sorted(nodes["node"].to_list())
        # ODE's virtual nodes (tire, drain, hot) and names that are no noun are never the object of a question. They
        # stay in the graph's orders and in the lists a seeded draw runs over (so every other draw is the one it
        # was) and are skipped; G_H may name objects the graph lacks, for which the lexicon alone decides.
        graph = set(self.nodes)
        foreign = {t for targets in self.hallu.values() for t, _ in targets} - graph
        self.barred = (graph - askable_nodes(nodes)) | {t for t in foreign if not noun(t).askable}
        # "No" only where the picture can show it: a thing, never stuff (sky, wall, grass), a scene, a part or an
        # abstract concept (typed concept lexicon, halluflow.ode.concepts); and never what the prompt implies
        # (`implied`: hypernyms, hyponyms, wholes, parts, an environment's typical contents).
        lexicon = read_concepts()
        self.not_things = {
            n: concept(n, lexicon).kind
            for n in graph | foreign
            if not concept(n, lexicon).thing and n not in self.barred
        }
        self.implications = Implications(lexicon)
        # (strategy, rule: a concept kind or "implied by the prompt") -> candidates skipped, counted as drawn
        self.removed: dict[tuple[str, str], int] = {}
        freq = dict(zip(nodes["node"], nodes["frequency"]))
        self.popular = sorted(self.nodes, key=lambda n: (-freq[n], n))
        self._orders: dict[tuple, list[str]] = {}

    def _weights_to(self, truth: tuple[str, ...]) -> dict[str, list[int]]:
        per: dict[str, list[int]] = {}
        for t in truth:
            for other, w in self.adj.get(t, []):
                per.setdefault(other, []).append(w)
        return per

    def order(self, strategy: str, truth: tuple[str, ...], rng: np.random.Generator | None = None) -> list[str]:
        if strategy == "random":
            # POPE random: uniform over all objects, a fresh draw per image
            return [self.nodes[i] for i in rng.permutation(len(self.nodes))]
        key = (strategy, truth)
        if key not in self._orders:
            if strategy == "graph_neighbour":
                # ODE: neighbours of the truth objects by descending edge weight (strongest link to any of them)
                per = self._weights_to(truth)
                self._orders[key] = sorted(per, key=lambda n: (-max(per[n]), n))
            elif strategy == "adversarial":
                # POPE adversarial: objects co-occurring most with the ground-truth objects altogether
                per = self._weights_to(truth)
                self._orders[key] = sorted(per, key=lambda n: (-sum(per[n]), n))
            elif strategy == "popular":
                self._orders[key] = self.popular
            elif strategy == "hallucination":
                # ODE's G_H: objects annotators marked as likely hallucinated next to the truth objects
                per: dict[str, int] = {}
                for t in truth:
                    for other, w in self.hallu.get(t, []):
                        per[other] = per.get(other, 0) + w
                self._orders[key] = sorted(per, key=lambda n: (-per[n], n))
            elif strategy == "unlinked":
                linked = set(self._weights_to(truth))
                self._orders[key] = [n for n in self.nodes if n not in linked]
            else:
                raise ConfigError(
                    f"config key 'ode.queries.strategies': unknown strategy {strategy!r}; "
                    f"known: {', '.join(STRATEGIES)}"
                )
        return self._orders[key]

    def implied(self, truth) -> frozenset[str]:
        return self.implications.implied(tuple(truth))

    def _skip(self, n: str, exclude: set[str], implied: frozenset[str], strategy: str) -> bool:
        if n in exclude or n in self.barred:
            return True
        rule = self.not_things.get(n) or ("implied by the prompt" if n in implied else None)
        if rule:
            key = (strategy, rule)
            self.removed[key] = self.removed.get(key, 0) + 1
        return rule is not None

    def candidates(self, strategy: str, truth, exclude: set[str], k: int, rng=None) -> list[str]:
        if k <= 0:
            return []
        out, implied = [], self.implied(truth)
        for n in self.order(strategy, tuple(truth), rng):
            if not self._skip(n, exclude, implied, strategy):
                out.append(n)
                if len(out) == k:
                    break
        return out


SPARE_CANDIDATES = 3  # `ode.prompts.detect_candidates`: candidates declared beyond those a strategy asks


def declared_candidates(
    sampler: NegativeSampler,
    truth: tuple[str, ...],
    strategies,
    negatives_per_image: int,
    counterfactual_per_image: int,
    spare: int,
    synonyms: dict[str, set[str]],
    rng: np.random.Generator | None,
) -> list[tuple[str, str]]:
    """The ordered (object, strategy) candidates of one image's "no" questions, decided before detection.

    Each strategy declares its first k·(i+1) + `spare` objects (i its place in `strategies`: the objects earlier
    strategies ask are skipped, so they cannot exhaust its list), never a truth object nor one of its synonyms;
    then `counterfactual_per_image` + `spare` objects never co-occurring with the truth objects, drawn at random
    (strategy "fictional"). The detector is prompted with all of them (`image_vocabularies`); `pick_candidates`
    then takes, in this order, those it did not see. The same seed, graph and config give the same list at
    prompt time and at query time (the per-image generator is drawn in this fixed order)."""
    block = set(truth) | {other for o in truth for other in synonyms.get(o, ())}
    out = []
    for i, strategy in enumerate(strategies):
        n = negatives_per_image * (i + 1) + spare if negatives_per_image > 0 else 0
        out += [(o, strategy) for o in sampler.candidates(strategy, truth, block, n, rng)]
    if counterfactual_per_image > 0:
        implied = sampler.implied(truth)
        # (the whole pool is filtered: its count is of pool members left out, per image)
        pool = [o for o in sampler.order("unlinked", tuple(truth)) if not sampler._skip(o, block, implied, "fictional")]
        n = min(counterfactual_per_image + spare, len(pool))
        # in draw order: the first ones are the question, the rest stand by for an object the detector sees
        out += [(pool[int(i)], "fictional") for i in (rng.choice(len(pool), size=n, replace=False) if n else [])]
    return out


def pick_candidates(
    declared: list[tuple[str, str]],
    seen: set[str],
    negatives_per_image: int,
    counterfactual_per_image: int,
    vocabulary: set[str] | None = None,
) -> tuple[list[tuple[str, str]], list[str]]:
    """(negatives as (object, strategy), counterfactual objects) of one image: the declared candidates in order,
    skipping an object the detector saw (`seen`: detected at or above the exclusion threshold, with synonyms),
    one an earlier strategy already asks and, when the detector's `vocabulary` of the image is known, any object
    it was not prompted with. A strategy whose candidates run out asks fewer questions."""
    asked: set[str] = set()
    used: dict[str, int] = {}
    negatives, counterfactual = [], []
    for obj, strategy in declared:
        if obj in seen or obj in asked or (vocabulary is not None and obj not in vocabulary):
            continue
        if strategy == "fictional":
            if len(counterfactual) < counterfactual_per_image:
                counterfactual.append(obj)
                asked.add(obj)
        elif used.get(strategy, 0) < negatives_per_image:
            negatives.append((obj, strategy))
            used[strategy] = used.get(strategy, 0) + 1
            asked.add(obj)
    return negatives, counterfactual


def _planner(nodes, edges, hallu_edges, scenes, question_style) -> tuple[NegativeSampler, dict[str, set[str]]]:
    """The sampler and synonym groups the candidates are declared with (the same at prompt and query time)."""
    sampler = NegativeSampler(nodes, edges, hallu_edges)
    if question_style != "grammatical":
        return sampler, {}
    names = set(nodes["node"].to_list()) | set(scenes["object_a"].to_list()) | set(scenes["object_b"].to_list())
    return sampler, _synonym_groups(sorted(n for n in names if n is not None))


def image_vocabularies(
    images: pl.DataFrame,
    scenes: pl.DataFrame,
    nodes: pl.DataFrame,
    edges: pl.DataFrame,
    *,
    seed: int,
    negatives_per_image: int = 2,
    strategies: list[str] | tuple[str, ...] = ("graph_neighbour",),
    counterfactual_per_image: int = 1,
    hallu_edges: pl.DataFrame | None = None,
    question_style: str = "grammatical",
    spare: int = SPARE_CANDIDATES,
) -> dict[str, list[str]]:
    """image_id → the detector's vocabulary for the image (images: image_id, scene_id): the scene's two objects,
    then every candidate of `declared_candidates`, each once. make_queries asks "no" only about these, so every
    object a question of the image names is one the detector was asked about."""
    _check_strategies(strategies, hallu_edges)
    by_scene = {r["scene_id"]: (r["object_a"], r["object_b"]) for r in scenes.iter_rows(named=True)}
    sampler, synonyms = _planner(nodes, edges, hallu_edges, scenes, question_style)
    ids = images["image_id"].to_list()
    out = {}
    for image_id, scene_id, rng in zip(ids, images["scene_id"].to_list(), _image_generators(seed, ids)):
        if scene_id not in by_scene:
            raise InputError(f"image {image_id}: scene {scene_id!r} not in the scenes table")
        truth = by_scene[scene_id]
        declared = declared_candidates(
            sampler, truth, strategies, negatives_per_image, counterfactual_per_image, spare, synonyms, rng
        )
        out[image_id] = list(dict.fromkeys([*truth, *(o for o, _ in declared)]))
    return out


def no_object_questions(queries: pl.DataFrame) -> pl.DataFrame:
    """The questions stating that an object is absent: "no" existence questions of every strategy and the
    counterfactual object questions (not the attribute or count ones, whose object is in the image)."""
    return queries.filter(
        (pl.col("truth") == "no")
        & pl.col("query_type").is_in(["existence", "counterfactual"])
        & pl.col("attribute_kind").is_null()
    )


def unverified_truths(queries: pl.DataFrame, detections: pl.DataFrame, exclusion_threshold: float) -> pl.DataFrame:
    """The "no" existence and counterfactual-object questions whose truth the detector did not check, with a
    `problem`: the object is not in the vocabulary the detection table records for the image (or the image has no
    detection rows at all), or the detector scored it at or above the exclusion threshold. Empty for a verified
    release. Counted from the files: queries.parquet and detections/*.parquet of every round (the round an image
    was accepted on is the last one with its id and a recorded vocabulary)."""
    for col in ("image_id", "vocabulary", "label", "score"):
        if col not in detections.columns:
            raise InputError(f"detection table: missing column {col!r} (made before vocabularies were recorded)")
    asked = no_object_questions(queries).select("query_id", "image_id", "question", "target")
    with_attempt = (
        detections if "attempt" in detections.columns else detections.with_columns(pl.lit(0).alias("attempt"))
    )
    last = with_attempt.select(pl.col("attempt").max().over("image_id") == pl.col("attempt"))
    rows = with_attempt.filter(last.to_series())
    vocab = (
        rows.select("image_id", pl.col("vocabulary").list.eval(pl.element().str.to_lowercase()))
        .unique("image_id", keep="first")
        .explode("vocabulary")
        .rename({"vocabulary": "_label"})
        .with_columns(pl.lit(True).alias("_prompted"))
    )
    best = (
        rows.filter(pl.col("label").is_not_null())
        .group_by("image_id", pl.col("label").str.to_lowercase().alias("_label"))
        .agg(pl.col("score").max().alias("_score"))
    )
    checked = (
        asked.with_columns(pl.col("target").str.to_lowercase().alias("_label"))
        .join(vocab.unique(), on=["image_id", "_label"], how="left")
        .join(best, on=["image_id", "_label"], how="left")
    )
    return (
        checked.with_columns(
            pl.when(pl.col("_prompted").is_null())
            .then(pl.lit("not in the detector's vocabulary of the image"))
            .when(pl.col("_score") >= exclusion_threshold)
            .then(
                pl.format(
                    "detected at score {} (exclusion threshold {})",
                    pl.col("_score").round(3),
                    pl.lit(exclusion_threshold),
                )
            )
            .alias("problem")
        )
        .filter(pl.col("problem").is_not_null())
        .select("query_id", "image_id", "question", "target", "problem")
        .sort("image_id", "query_id")
    )


def existence_question(obj: str, lexicon: dict | None = None) -> str:
    """The grammatical existence question about an object, by its noun kind: "Is there a urinal in the picture?",
    "Is there grass in the picture?", "Are there jeans in the picture?"."""
    entry = noun(obj, lexicon)
    return EXISTENCE_BY_KIND.get(entry.kind, EXISTENCE).format(article=entry.article or article(obj), object=obj)


def _object_table(objects: set[str], node_rows: dict, style: str) -> pl.DataFrame:
    """Per distinct object (a few hundred, not one per image): its existence question, plural (null for a noun
    that is never counted), the verb it takes ("Is" / "Are") and its node type."""
    names = sorted(o for o in objects if o is not None)
    if style == "ode_code":
        existence = [EXISTENCE.format(article=article(o), object=o) for o in names]
        plurals, verbs = [plural(o) for o in names], ["Is"] * len(names)
    else:
        lexicon = read_lexicon()
        entries = [noun(o, lexicon) for o in names]
        existence = [existence_question(o, lexicon) for o in names]
        plurals = [e.plural if e.countable else None for e in entries]
        verbs = ["Are" if e.kind == "plural" else "Is" for e in entries]
    return pl.DataFrame(
        {
            "object": names,
            "existence": existence,
            "plural": plurals,
            "be": verbs,
            "node_type": [node_rows.get(o, {}).get("type") for o in names],
        },
        schema={
            "object": pl.String,
            "existence": pl.String,
            "plural": pl.String,
            "be": pl.String,
            "node_type": pl.String,
        },
    )


def _fill(template: str, **values: pl.Expr) -> pl.Expr:
    """A str.format-style template as a polars expression; placeholders take expressions."""
    parts = re.split(r"\{(\w+)\}", template)  # placeholders a template lacks are not used ("be" in ODE's wording)
    return pl.concat_str([pl.lit(p) if i % 2 == 0 else values[p] for i, p in enumerate(parts) if p != ""])


def _scene_rows(
    scenes: pl.DataFrame,
    objects: pl.DataFrame,
    generative_prompt: str,
    templates: dict,
    count_negatives: tuple[str, ...] | None,
) -> pl.DataFrame:
    """Rows every image of a scene shares, keyed (section, pos) so they interleave with the per-image rows:
    section 0 = generative + existence "yes", section 2 = attribute truth/contrast (+ the assumed-one counts of
    ODE's code when `count_negatives` is given)."""

    def obj(side):
        return objects.select(
            pl.col("object").alias(f"object_{side}"),
            pl.col("existence").alias(f"ex_{side}"),
            pl.col("plural").alias(f"pl_{side}"),
            pl.col("be").alias(f"be_{side}"),
            pl.col("node_type").alias(f"type_{side}"),
        )

    sc = scenes.join(obj("a"), on="object_a", how="left").join(obj("b"), on="object_b", how="left")
    null = pl.lit(None, pl.String)

    def block(section, pos, query_type, question, truth, target, attribute_kind, strategy, keep=None):
        frame = sc.select(
            pl.col("scene_id"),
            pl.lit(section, pl.Int32).alias("section"),
            pl.lit(pos, pl.Int32).alias("pos"),
            pl.lit(query_type).alias("query_type"),
            question.alias("question"),
            truth.alias("truth"),
            target.alias("target"),
            attribute_kind.alias("attribute_kind"),
            strategy.alias("strategy"),
            (pl.lit(True) if keep is None else keep).alias("_keep"),
        )
        return frame.filter(pl.col("_keep")).drop("_keep")

    blocks = [block(0, 0, "generative", pl.lit(generative_prompt), null, null, null, null)]
    for i, side in enumerate("ab"):
        blocks.append(
            block(
                0,
                1 + i,
                "existence",
                pl.col(f"ex_{side}"),
                pl.lit("yes"),
                pl.col(f"object_{side}"),
                null,
                pl.lit("truth"),
            )
        )
    for i, side in enumerate("ab"):
        o, attr = pl.col(f"object_{side}"), pl.col(f"attribute_{side}")
        kind, contrast = pl.col(f"attribute_{side}_kind"), pl.col(f"attribute_{side}_contrast")
        asked = attr.is_not_null() & (attr != "") & kind.is_in(["state", "action"])

        be = pl.col(f"be_{side}")

        def attribute_question(word, kind=kind, o=o, be=be):
            return (
                pl.when(kind == "state")
                .then(_fill(templates["state"], object=o, attribute=word, be=be))
                .otherwise(_fill(templates["action"], object=o, attribute=word, be=be))
            )

        blocks.append(
            block(2, 2 * i, "attribute", attribute_question(attr), pl.lit("yes"), o, kind, pl.lit("truth"), asked)
        )
        blocks.append(
            block(
                2,
                2 * i + 1,
                "attribute",
                attribute_question(contrast),
                pl.lit("no"),
                o,
                kind,
                pl.lit("contrast"),
                asked & contrast.is_not_null() & (contrast != "") & (contrast != attr),
            )
        )
    for i, side in enumerate("ab") if count_negatives is not None else ():
        o, entity = pl.col(f"object_{side}"), pl.col(f"type_{side}") == "entity"
        base = 1000 * (i + 1)
        blocks.append(
            block(
                2,
                base,
                "count",
                _fill(templates["count_one"], object=o),
                pl.lit("yes"),
                o,
                pl.lit("count"),
                pl.lit("truth"),
                entity,
            )
        )
        for j, number in enumerate(count_negatives):
            blocks.append(
                block(
                    2,
                    base + 1 + j,
                    "count",
                    _fill(templates["count_many"], number=pl.lit(number), plural=pl.col(f"pl_{side}")),
                    pl.lit("no"),
                    o,
                    pl.lit("count"),
                    pl.lit("truth"),
                    entity,
                )
            )
    return pl.concat(blocks)


def _count_rows(
    images: pl.DataFrame, used: pl.DataFrame, objects: pl.DataFrame, count_negatives: tuple[str, ...]
) -> pl.DataFrame:
    """Count questions of each image from its detector box counts: "yes" for the counted number, "no" for the
    configured other numbers. Asked only where the merged boxes agree with the prompt's count (`PROMPT_COUNT`:
    the prompt names one of each count noun, "a dog and a frisbee"), so two boxes of a dog (a second dog, or
    one dog boxed twice) give no count question; environments are not counted."""
    wrong = []
    for word in count_negatives:
        if word not in NUMBER_WORDS:
            raise ConfigError(
                f"config key 'ode.queries.count_negatives': {word!r} is not a number word "
                f"({', '.join(NUMBER_WORDS[1:])})"
            )
        wrong.append(NUMBER_WORDS.index(word))
    numbers = pl.DataFrame({"j": list(range(len(wrong))), "n": wrong}, schema={"j": pl.Int32, "n": pl.Int64})
    frames = []
    for i, side in enumerate("ab"):
        per = (
            images.select("img", "si", pl.col(f"count_{side}").alias("count"))
            .join(
                used.select(
                    pl.int_range(pl.len(), dtype=pl.Int64).alias("si"), pl.col(f"object_{side}").alias("object")
                ),
                on="si",
                how="left",
            )
            .join(objects.select("object", "plural", "node_type"), on="object", how="left")
            # count nouns only: no "Are there two rices?"; a mass noun or a plural has no plural to count with
            .filter(
                (pl.col("node_type") == "entity") & pl.col("plural").is_not_null() & (pl.col("count") == PROMPT_COUNT)
            )
        )
        asked = pl.concat(
            [
                per.with_columns(pl.lit(-1, pl.Int32).alias("j"), pl.col("count").alias("n")),
                per.join(numbers, how="cross").filter(pl.col("n") != pl.col("count")),
            ]
        )
        word = pl.col("n").replace_strict(dict(enumerate(NUMBER_WORDS)), return_dtype=pl.String)
        frames.append(
            asked.select(
                "img",
                (2_000_000 + 1000 * (i + 1) + 1 + pl.col("j")).cast(pl.Int64).alias("key"),
                pl.lit("count").alias("query_type"),
                pl.when(pl.col("n") == 1)
                .then(_fill(COUNT_ONE, object=pl.col("object")))
                .otherwise(_fill(COUNT_MANY, number=word, plural=pl.col("plural")))
                .alias("question"),
                pl.when(pl.col("n") == pl.col("count")).then(pl.lit("yes")).otherwise(pl.lit("no")).alias("truth"),
                pl.col("object").alias("target"),
                pl.lit("count").alias("attribute_kind"),
                pl.lit("truth").alias("strategy"),
            )
        )
    return pl.concat(frames)


def _image_generators(seed: int, image_ids: list[str]):
    """One generator per image, the same stream as sampling.derived_rng(seed, "queries", image_id).

    The canonical JSON that io.stable_hash would hash is assembled from a shared prefix and each id as JSON, and
    the seed goes in as its 32-bit words (what SeedSequence makes of the integer itself: low word first, no
    leading zero words) straight to PCG64, skipping numpy's slower integer conversion and default_rng's wrapper.
    """
    prefix = canonical_json([seed, "queries", ""])[: -len('""]')]  # '[3, "queries", '
    sha, generator, pcg64, words32 = hashlib.sha256, np.random.Generator, np.random.PCG64, np.uint32
    for image_id in image_ids:
        n = int(sha(f"{prefix}{json_string(image_id)}]".encode()).hexdigest()[:16], 16)
        yield generator(pcg64(np.array([n & 0xFFFFFFFF, n >> 32] if n >> 32 else [n], dtype=words32)))


def _synonym_groups(names: list[str]) -> dict[str, set[str]]:
    """name → every name of its synonym class (CHAIR's table: man, woman, boy ... are all `person`)."""
    from .scoring import ConceptMatcher, default_synonyms

    matcher = ConceptMatcher((), default_synonyms())
    by_class: dict[tuple, set[str]] = {}
    for n in names:
        by_class.setdefault(matcher.synonym_class(n), set()).add(n)
    return {n: by_class[matcher.synonym_class(n)] for n in names}


def _check_strategies(strategies, hallu_edges) -> None:
    for s in strategies:
        if s not in STRATEGIES:
            raise ConfigError(
                f"config key 'ode.queries.strategies': unknown strategy {s!r}; known: {', '.join(STRATEGIES)}"
            )
    if "hallucination" in strategies and (hallu_edges is None or hallu_edges.height == 0):
        raise ConfigError(
            "config key 'ode.queries.strategies': 'hallucination' needs a graph source with "
            "hallucination-prone objects (AMBER annotations or the shipped seed)"
        )


def make_queries(
    accepted: pl.DataFrame,
    scenes: pl.DataFrame,
    nodes: pl.DataFrame,
    edges: pl.DataFrame,
    *,
    seed: int,
    generative_prompt: str = "Please describe this picture.",
    negatives_per_image: int = 2,
    strategies: list[str] | tuple[str, ...] = ("graph_neighbour",),
    count_negatives: list[str] | tuple[str, ...] = ("two", "three"),
    counterfactual_per_image: int = 1,
    counterfactual_attributes: bool = True,
    hallu_edges: pl.DataFrame | None = None,
    question_style: str = "grammatical",
    release: str | None = None,
    spare: int = SPARE_CANDIDATES,
    report: dict | None = None,
) -> pl.DataFrame:
    """Queries table (docs/data-contracts.md), one block of queries per accepted image.

    `report`, when given, receives what the meaning rules removed (`no_rule_report`): per rule the "no"
    candidates skipped over all images (stuff, scene, part, abstract, unknown, implied by the prompt) and the
    counterfactual attribute questions not asked for want of a word that fits.

    Query ids are content-addressed (`query_id`): `release` (the release name; with `seed` its identity) and the
    accepted table's `sha256` column (each image's file hash, then also written as `image_sha256`) go into them.

    question_style `grammatical` (default): one template per kind, count truths from the detector's box counts
    (`count_a`, `count_b` of the accepted table), "no" objects never a synonym of an object in the image, and
    attribute counterfactuals only beside the scene's own attribute of that kind, from the cleaned vocabulary.
    `ode_code`: ODE's released code (AMBER's wording, mined words as they are, "one" assumed).

    "No" objects (every strategy's and the counterfactual ones) come from `declared_candidates`, the list the
    detector was prompted with (`image_vocabularies`, `spare` = `ode.prompts.detect_candidates`): in its order,
    skipping the objects detected at or above the exclusion threshold (`detected`) and, when the accepted table
    has the detection table's `vocabulary` of each image, any object the detector was not prompted with.

    The questions every image of a scene shares are built once per scene with polars expressions and repeated
    for each of its images; per image only the seeded draws remain (random negatives, counterfactual object and
    attribute words: one numpy generator per image keeps a release's bytes independent of its size), and the
    deterministic negatives are computed once per (objects, detected objects) combination.
    """
    _check_strategies(strategies, hallu_edges)
    if question_style not in QUESTION_STYLES:
        raise ConfigError(
            f"config key 'ode.queries.question_style': unknown value {question_style!r}; known: "
            f"{', '.join(QUESTION_STYLES)}"
        )
    grammatical = question_style == "grammatical"
    templates = {**ATTRIBUTE, "count_one": COUNT_ONE, "count_many": COUNT_MANY} if grammatical else ODE_CODE
    acc = accepted.sort("image_id")
    counts = [c for c in ("count_a", "count_b") if c in acc.columns]
    if grammatical and len(counts) < 2:
        log.warning("accepted table has no detector box counts (count_a, count_b): no count questions")
    hashed = "sha256" in acc.columns
    acc = acc.select(
        "image_id",
        "scene_id",
        *(["sha256"] if hashed else []),
        (pl.col("detected") if "detected" in acc.columns else pl.lit(None, pl.List(pl.String))).alias("detected"),
        (pl.col("vocabulary") if "vocabulary" in acc.columns else pl.lit(None, pl.List(pl.String))).alias("vocabulary"),
        *[
            (pl.col(c) if c in acc.columns else pl.lit(None, pl.Int64)).cast(pl.Int64).alias(c)
            for c in ("count_a", "count_b")
        ],
    )
    missing = acc.join(scenes.select("scene_id"), on="scene_id", how="anti")
    if missing.height:
        first = missing.row(0, named=True)
        raise InputError(f"accepted image {first['image_id']}: scene {first['scene_id']!r} not in the scenes table")
    if acc.height == 0:
        return pl.DataFrame(schema=QUERY_SCHEMA)
    used = scenes.join(acc.select("scene_id").unique(), on="scene_id", how="semi")
    node_rows = {r["node"]: r for r in nodes.iter_rows(named=True)}
    sampler, synonyms = _planner(nodes, edges, hallu_edges, scenes, question_style)
    if grammatical:
        vocab = {"state": set(), "action": set()}
        for r in node_rows.values():
            for mined in ("state", "action"):
                for p in r[f"{mined}_pairs"] or []:
                    for w in p.split("/"):
                        cleaned = clean_word(w, mined) if w else None
                        if cleaned:
                            vocab[cleaned[0]].add(cleaned[1])
        vocab = {k: sorted(v) for k, v in vocab.items()}
    else:
        vocab = {
            kind: sorted({w for r in node_rows.values() for p in r[f"{kind}_pairs"] or [] for w in p.split("/")} - {""})
            for kind in ("state", "action")
        }
    objects_a, objects_b = used["object_a"].to_list(), used["object_b"].to_list()
    scene_index = {sid: i for i, sid in enumerate(used["scene_id"].to_list())}
    scene_attrs = [
        list(
            zip(
                used[f"attribute_{s}"].to_list(),
                used[f"attribute_{s}_kind"].to_list(),
                used[f"attribute_{s}_contrast"].to_list(),
            )
        )
        for s in "ab"
    ]

    # Per image only what depends on its detections or its own generator; everything else is cached.
    neg_img, neg_pos, neg_obj, neg_strategy = [], [], [], []
    cfo_img, cfo_pos, cfo_obj = [], [], []
    cfa_img, cfa_pos, cfa_question, cfa_target, cfa_kind = [], [], [], [], []
    per_scene_candidates: dict[int, list] = {}  # scene -> declared candidates, when no draw is seeded per image
    foreign: dict[tuple, list] = {}  # (object, kind) -> attribute words it never has
    seeded_candidates = "random" in strategies or counterfactual_per_image > 0
    draws = seeded_candidates or counterfactual_attributes
    image_ids = acc["image_id"].to_list()
    image_scene = [scene_index[sid] for sid in acc["scene_id"].to_list()]
    generators = _image_generators(seed, image_ids) if draws else iter(lambda: None, 0)

    removed: dict[tuple[str, str], int] = {}  # (strategy, rule) -> "no" candidates it skipped, over all images

    def declared(si, rng):
        # the list the detector was prompted with (image_vocabularies): same seed, graph and config
        before = dict(sampler.removed)
        out = declared_candidates(
            sampler, truth_of[si], strategies, negatives_per_image, counterfactual_per_image, spare, synonyms, rng
        )
        delta = {k: v - before.get(k, 0) for k, v in sampler.removed.items() if v != before.get(k, 0)}
        return out, delta

    def attribute_pool(si, side):
        obj = truth_of[si][side]
        node = node_rows.get(obj, {})
        attr, kind, contrast = scene_attrs[side][si]
        if grammatical:
            # beside the scene's own attribute of that kind only: the image shows the object doing / being that,
            # so a word the graph never gives the object is a reliable "no"
            if kind not in ("state", "action") or not attr:
                return obj, kind, []
            if (obj, kind) not in foreign:
                own = node_attribute_forms(node)
                foreign[(obj, kind)] = [w for w in vocab[kind] if w not in own]
            # of the same exclusive type as the prompt's attribute and fitting the object's class (a red car: "Is
            # the car blue?", never "Is the car hiking?"), nothing the prompt's environment implies ("wet" at sea)
            cls = "scene" if concept(obj).kind == "scene" else concept(obj).cls
            implied = {w for o in truth_of[si] for w in IMPLIED_BY_ENVIRONMENT.get(o, ())}
            return obj, kind, counterfactual_forms(attr, cls, foreign[(obj, kind)], {contrast} - {None}, implied)
        kind = kind or ("action" if node.get("action_pairs") else "state")
        if (obj, kind) not in foreign:
            own = {w for p in node.get(f"{kind}_pairs") or [] for w in p.split("/")}
            foreign[(obj, kind)] = [w for w in vocab[kind] if w not in own]
        return obj, kind, foreign[(obj, kind)]

    truth_of = list(zip(objects_a, objects_b))
    lexicon = read_lexicon() if grammatical else {}

    def verb_of(obj):
        return "Are" if grammatical and noun(obj, lexicon).kind == "plural" else "Is"

    attribute_pools = (
        [(attribute_pool(si, 0), attribute_pool(si, 1)) for si in range(len(truth_of))]
        if counterfactual_attributes
        else []
    )
    vocabularies = acc["vocabulary"].to_list()
    unprompted = unfit_attributes = 0
    for idx, (si, detected, vocabulary, rng) in enumerate(
        progress(
            zip(image_scene, acc["detected"].to_list(), vocabularies, generators), desc="queries", total=acc.height
        )
    ):
        if seeded_candidates:
            candidates, delta = declared(si, rng)
        elif si in per_scene_candidates:
            candidates, delta = per_scene_candidates[si]
        else:
            candidates, delta = per_scene_candidates[si] = declared(si, rng)
        for rule, n in delta.items():
            removed[rule] = removed.get(rule, 0) + n
        # an object of the image under another name ("man" beside "person") must not be asked as absent
        seen = set(detected or ())
        seen |= {other for o in list(seen) for other in synonyms.get(o, ())}
        prompted = None if vocabulary is None else set(vocabulary)
        picked_all, cf_objects = pick_candidates(
            candidates, seen, negatives_per_image, counterfactual_per_image, prompted
        )
        if prompted is not None:
            unprompted += sum(1 for o, _ in candidates if o not in prompted and o not in seen)
        for j, (o, strategy) in enumerate(picked_all):
            neg_img.append(idx), neg_pos.append(j), neg_obj.append(o), neg_strategy.append(strategy)
        for j, o in enumerate(cf_objects):
            cfo_img.append(idx), cfo_pos.append(j), cfo_obj.append(o)
        if counterfactual_attributes:
            for side, (obj, kind, words) in enumerate(attribute_pools[si]):
                if not words and kind in ("state", "action") and scene_attrs[side][si][0]:
                    unfit_attributes += 1
                if words:
                    word = words[int(rng.integers(len(words)))]
                    cfa_img.append(idx), cfa_pos.append(side), cfa_kind.append(kind), cfa_target.append(obj)
                    cfa_question.append(templates[kind].format(object=obj, attribute=word, be=verb_of(obj)))
    if unprompted:
        log.warning(
            "%d declared 'no' candidates are not in their image's detector vocabulary (config changed after "
            "detection?): skipped, never asked",
            unprompted,
        )

    if report is not None:
        report.update(no_rule_report(removed, unfit_attributes))
    if removed or unfit_attributes:
        log.info("meaning rules: %s", no_rule_report(removed, unfit_attributes))
    objects = _object_table(set(objects_a) | set(objects_b) | set(neg_obj) | set(cfo_obj), node_rows, question_style)
    existence = objects.select("object", "existence")
    row_schema = {
        "img": pl.Int64,
        "key": pl.Int64,
        "query_type": pl.String,
        "question": pl.String,
        "truth": pl.String,
        "target": pl.String,
        "attribute_kind": pl.String,
        "strategy": pl.String,
    }
    # The shared rows of each image's scene, repeated per image by index arithmetic (no join on strings).
    shared = (
        _scene_rows(used, objects, generative_prompt, templates, None if grammatical else tuple(count_negatives))
        .with_columns(pl.col("scene_id").replace_strict(scene_index, return_dtype=pl.Int64).alias("si"))
        .sort("si", "section", "pos")
    )
    per_scene = np.bincount(shared["si"].to_numpy(), minlength=used.height)
    first_row = np.concatenate([[0], np.cumsum(per_scene)[:-1]])
    counts = per_scene[np.asarray(image_scene, dtype=np.int64)]
    img_of_row = np.repeat(np.arange(len(image_scene), dtype=np.int64), counts)
    starts = np.repeat(first_row[np.asarray(image_scene, dtype=np.int64)] - (np.cumsum(counts) - counts), counts)
    shared = shared[starts + np.arange(counts.sum(), dtype=np.int64)].with_columns(
        pl.Series("img", img_of_row), (pl.col("section") * 1_000_000 + pl.col("pos")).cast(pl.Int64).alias("key")
    )

    def per_image(img, pos, section, query_type, question, truth, target, attribute_kind, strategy):
        return pl.DataFrame(
            {
                "img": img,
                "key": [section * 1_000_000 + p for p in pos],
                "query_type": query_type,
                "question": question,
                "truth": truth,
                "target": target,
                "attribute_kind": attribute_kind,
                "strategy": strategy,
            },
            schema=row_schema,
        )

    existence_of = dict(existence.iter_rows())
    blocks = [
        shared.select(list(row_schema)).cast(row_schema),
        per_image(
            neg_img, neg_pos, 1, "existence", [existence_of[o] for o in neg_obj], "no", neg_obj, None, neg_strategy
        ),
        per_image(
            cfo_img, cfo_pos, 3, "counterfactual", [existence_of[o] for o in cfo_obj], "no", cfo_obj, None, "fictional"
        ),
        per_image(cfa_img, cfa_pos, 4, "counterfactual", cfa_question, "no", cfa_target, cfa_kind, "fictional"),
    ]
    if grammatical:
        images_si = acc.select(
            pl.int_range(pl.len(), dtype=pl.Int64).alias("img"),
            pl.Series("si", image_scene, dtype=pl.Int64),
            "count_a",
            "count_b",
        )
        blocks.append(_count_rows(images_si, used, objects, tuple(count_negatives)).cast(row_schema))
    rows = pl.concat(blocks).sort("img", "key")
    # ODE asks a question once per image, from whichever block produced it first. Repeats are rare (only odd
    # graphs or configs), so they are found on a 64-bit hash and confirmed on the text itself.
    maybe = pl.struct("img", pl.col("question").hash()).is_duplicated()
    if rows.select(maybe.any()).item():
        rows = rows.filter(~maybe | pl.struct("img", "question").is_first_distinct())
    img = rows["img"].to_numpy()
    image_id = acc["image_id"].gather(img)
    si = pl.Series(image_scene, dtype=pl.Int64).gather(img)
    scene_cols = used.select("scene_id", "distribution", "pair_kind", "object_a", "object_b")[si]
    return (
        pl.DataFrame(
            {
                "query_id": query_ids(
                    image_id,
                    rows["question"],
                    acc["sha256"].gather(img) if hashed else None,
                    "" if release is None else release_identity(release, seed),
                ),
                "image_id": image_id,
                "image": ("images/" + acc["image_id"] + ".png").gather(img),
                "scene_id": scene_cols["scene_id"],
                "distribution": scene_cols["distribution"],
                "pair_kind": scene_cols["pair_kind"],
                "task": rows.select(
                    pl.when(pl.col("query_type") == "generative")
                    .then(pl.lit("generative"))
                    .otherwise(pl.lit("discriminative"))
                ).to_series(),
                "query_type": rows["query_type"],
                "attribute_kind": rows["attribute_kind"],
                "question": rows["question"],
                "truth": rows["truth"],
                "target": rows["target"],
                "objects": scene_cols.select(pl.concat_list("object_a", "object_b")).to_series(),
                "strategy": rows["strategy"],
                "detected": acc["detected"].fill_null([]).gather(img),
                # the image each id was made from: answers and `score compare` check it against the file they read
                **({"image_sha256": acc["sha256"].gather(img)} if hashed else {}),
            }
        )
        .cast({**QUERY_SCHEMA, **({"image_sha256": pl.String} if hashed else {})})
        .rechunk()
    )


NO_RULES = ("stuff", "scene", "part", "abstract", "unknown", "implied by the prompt")


def no_rule_report(removed: dict[tuple[str, str], int], unfit_attributes: int) -> dict:
    """What the meaning rules removed, in a fixed order (the DATACARD's and the manifest's table): per strategy
    the "no" candidates skipped per rule over all images (for `fictional`, the counterfactual pool's members left
    out), and the counterfactual attribute questions not asked (the prompt's attribute has no other value of its
    exclusive type that fits the object: a person's "laughing" is no counterfactual of "sitting")."""
    strategies = sorted({s for s, _ in removed})
    return {
        "no_candidates_removed": {s: {rule: int(removed.get((s, rule), 0)) for rule in NO_RULES} for s in strategies},
        "counterfactual_attributes_not_asked": int(unfit_attributes),
    }


def _attribute_word_problem(word: str, kind: str, table: dict) -> str | None:
    known = {form: k for k, form in table.values() if k in ("state", "action") and form}
    if not re.fullmatch(r"[a-z]+(-[a-z]+)?", word) or word in NUMBER_WORDS:
        return f"{word!r} is not an attribute word"
    if word in known:
        return None if known[word] == kind else f"{word!r} is a {known[word]} word, asked as a {kind}"
    if kind == "action" and not word.endswith("ing"):
        return f"action {word!r} is not a gerund"
    if kind == "state" and word.endswith("ing"):
        return f"state {word!r} reads as an action"
    return None


def question_problem(
    query_type: str,
    attribute_kind: str | None,
    question: str,
    truth: str | None,
    target: str | None,
    table: dict | None = None,
    lexicon: dict | None = None,
    concepts: dict | None = None,
    types: dict | None = None,
) -> str | None:
    """Why a question is not one of the grammatical templates (docs/ode.md), or None when it is. The noun
    lexicon (halluflow.ode.nouns) says which article, verb and plural the target takes, and whether it may be
    asked about or counted at all."""
    table = read_attribute_words() if table is None else table
    if query_type == "generative":
        return None if question else "empty prompt"
    if truth not in ("yes", "no"):
        return f"truth {truth!r} is not yes/no"
    if not target or re.search(r"\d|\s\s", question):
        return "no target, a digit or a double space"
    entry = noun(target, read_lexicon() if lexicon is None else lexicon)
    if not entry.askable:
        return f"{target!r} is {'a virtual node of ODE' if entry.virtual else 'no noun'}: never asked about"
    known = concept(target, concepts)
    concept_kind = known.kind
    attribute_class = "scene" if concept_kind == "scene" else known.cls
    if concept_kind == "abstract":
        return f"{target!r} is not visual (an activity, a sound, an event): never asked about"
    if concept_kind == "none":
        return f"{target!r} is no concept a picture shows (a misspelling or no noun): never asked about"
    if truth == "no" and query_type in ("existence", "counterfactual") and attribute_kind is None and not known.thing:
        return f"'no' about {target!r}, {NOT_A_THING.get(concept_kind, concept_kind)}: only a thing is asked as absent"
    if query_type in ("existence", "counterfactual") and attribute_kind is None:
        want = existence_question(target, lexicon)
        return None if question == want else f"not the existence template {want!r}"
    if query_type in ("attribute", "counterfactual") and attribute_kind in ATTRIBUTE:
        head = f"{'Are' if entry.kind == 'plural' else 'Is'} the {target} "
        word = question[len(head) : -1] if question.startswith(head) and question.endswith("?") else ""
        if not word or " " in word:
            return f"not the {attribute_kind} template '{head}<{attribute_kind}>?'"
        # form, then meaning: the word must fit what the object is (typed attribute and concept lexicons)
        problem = _attribute_word_problem(word, attribute_kind, table)
        if problem is None and concept_kind not in ("abstract", "none"):
            problem = attribute_fit_problem(word, attribute_class, attribute_kind, types)
        return problem
    if query_type == "count":
        if not entry.countable:
            return f"count question on {target!r}, a {entry.kind} noun (never counted)"
        if question == COUNT_ONE.format(object=target):
            return None
        many = re.fullmatch(r"Are there (\w+) (.+)\?", question)
        if many and many.group(1) in NUMBER_WORDS[2:] and many.group(2) == entry.plural:
            return None
        return "not a count template ('Is there one <object>?' / 'Are there <number> <objects>?')"
    return f"unknown query type {query_type!r} / attribute kind {attribute_kind!r}"


def invalid_questions(queries: pl.DataFrame) -> pl.DataFrame:
    """The queries whose question breaks the grammatical templates, with a `problem` column; also every
    (image, counted object) that has not exactly one "yes" count. Empty for a valid release."""
    table, lexicon, concepts, types = read_attribute_words(), read_lexicon(), read_concepts(), read_attribute_types()
    keys = ["query_type", "attribute_kind", "question", "truth", "target"]
    distinct = queries.select(keys).unique()
    problems = distinct.with_columns(
        pl.Series(
            "problem",
            [
                question_problem(*r, table=table, lexicon=lexicon, concepts=concepts, types=types)
                for r in distinct.rows()
            ],
            dtype=pl.String,
        )
    )
    bad = queries.join(problems.filter(pl.col("problem").is_not_null()), on=keys, how="inner", nulls_equal=True).select(
        "query_id", "image_id", *keys, "problem"
    )
    if "objects" in queries.columns:
        # a "no" object the prompt implies (a hypernym, hyponym, part or whole of a prompt object, what its
        # environment shows): the picture may well show it
        asked = no_object_questions(queries).select("query_id", "image_id", *keys, "objects")
        pairs = asked.select("target", "objects").unique()
        implied = pairs.filter(
            pl.Series(
                [no_object_problem(t, o or ()) == "implied by the prompt" for t, o in pairs.rows()], dtype=pl.Boolean
            )
        )
        if implied.height:
            bad = pl.concat(
                [
                    bad,
                    asked.join(implied, on=["target", "objects"], how="semi").select(
                        "query_id",
                        "image_id",
                        *keys,
                        pl.lit("'no' about an object the prompt implies").alias("problem"),
                    ),
                ]
            )
    yes_counts = (
        queries.filter(pl.col("query_type") == "count")
        .group_by("image_id", "target")
        .agg((pl.col("truth") == "yes").sum().alias("n_yes"))
        .filter(pl.col("n_yes") != 1)
    )
    if yes_counts.height:
        bad = pl.concat(
            [
                bad,
                yes_counts.select(
                    pl.lit(None, pl.String).alias("query_id"),
                    "image_id",
                    pl.lit("count").alias("query_type"),
                    pl.lit("count").alias("attribute_kind"),
                    pl.lit(None, pl.String).alias("question"),
                    pl.lit(None, pl.String).alias("truth"),
                    "target",
                    pl.format("{} 'yes' count questions (one expected)", "n_yes").alias("problem"),
                ),
            ]
        )
    return bad.sort("image_id", "query_id", nulls_last=True)


def detector_candidates(scenes: pl.DataFrame, nodes: pl.DataFrame, edges: pl.DataFrame, k: int) -> dict[str, list[str]]:
    """Per scene: its top-k graph-neighbour candidates (a per-scene view for tests and benchmarks; the workflow
    prompts the detector with `image_vocabularies`, every candidate any question of the image may name)."""
    sampler = NegativeSampler(nodes, edges)
    out = {}
    for r in scenes.iter_rows(named=True):
        truth = [r["object_a"], r["object_b"]]
        out[r["scene_id"]] = sampler.candidates("graph_neighbour", truth, set(truth), k)
    return out
