"""make_queries as it was before vectorisation (its per-image Python loop; the negative sampler is shared), frozen
as the reference its polars version must match byte for byte in ODE's wording (tests/test_queries.py) and the
baseline bench/bench_dag.py times it against. Its "no" objects are drawn as make_queries draws them since the
detector is prompted with them beforehand (`declared_candidates`, then `pick_candidates`)."""

from __future__ import annotations

import polars as pl

from halluflow.errors import ConfigError, InputError
from halluflow.ode.queries import QUERY_SCHEMA as ODE_QUERY_SCHEMA
from halluflow.ode.queries import NegativeSampler, article, declared_candidates, pick_candidates, plural, query_id
from halluflow.ode.sampling import derived_rng
from halluflow.progress import progress

STRATEGIES = ("graph_neighbour", "random", "popular", "adversarial", "hallucination")

EXISTENCE = "Is there {article} {object} in the picture?"
# ODE asks "Is the {obj} {attr} ...?" for both kinds; AMBER's action words are bare verbs ("run"), so
# actions read "Does the dog run in the picture?" as in AMBER's own questions.
ATTRIBUTE = {
    "state": "Is the {object} {attribute} in the picture?",
    "action": "Does the {object} {attribute} in the picture?",
}
COUNT_ONE = "Is there one {object} in the picture?"
COUNT_MANY = "Are there {number} {plural} in the picture?"

# the loop wrote every column but `detected`
QUERY_SCHEMA = {k: v for k, v in ODE_QUERY_SCHEMA.items() if k != "detected"}


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
    spare: int = 3,
) -> pl.DataFrame:
    """Queries table (docs/data-contracts.md), one block of queries per accepted image."""
    for s in strategies:
        if s not in STRATEGIES:
            raise ConfigError(
                f"config key 'ode.queries.strategies': unknown strategy {s!r}; known: {', '.join(STRATEGIES)}"
            )
    scene_rows = {r["scene_id"]: r for r in scenes.iter_rows(named=True)}
    node_rows = {r["node"]: r for r in nodes.iter_rows(named=True)}
    if "hallucination" in strategies and (hallu_edges is None or hallu_edges.height == 0):
        raise ConfigError(
            "config key 'ode.queries.strategies': 'hallucination' needs a graph source with "
            "hallucination-prone objects (AMBER annotations or the shipped seed)"
        )
    sampler = NegativeSampler(nodes, edges, hallu_edges)
    vocab = {
        kind: sorted({w for r in node_rows.values() for p in r[f"{kind}_pairs"] or [] for w in p.split("/")} - {""})
        for kind in ("state", "action")
    }
    foreign_words: dict[tuple[str, str], list[str]] = {}  # (object, kind) -> attribute words it never has
    rows: list[tuple] = []
    for img in progress(accepted.sort("image_id").iter_rows(named=True), desc="queries", total=accepted.height):
        scene = scene_rows.get(img["scene_id"])
        if scene is None:
            raise InputError(f"accepted image {img['image_id']}: scene {img['scene_id']!r} not in the scenes table")
        image_id = img["image_id"]
        truth = [scene["object_a"], scene["object_b"]]
        detected = set(img.get("detected") or [])
        seen_questions: set[str] = set()
        # One generator per image, drawn in a fixed order: random negatives, counterfactual object, attributes.
        rng = derived_rng(seed, "queries", image_id)

        def add(query_type, question, truth_value, target=None, attribute_kind=None, strategy=None):
            if question in seen_questions:
                return
            seen_questions.add(question)
            rows.append(
                (
                    query_id(image_id, question),
                    image_id,
                    f"images/{image_id}.png",
                    scene["scene_id"],
                    scene["distribution"],
                    scene["pair_kind"],
                    "generative" if query_type == "generative" else "discriminative",
                    query_type,
                    attribute_kind,
                    question,
                    truth_value,
                    target,
                    truth[0],
                    truth[1],
                    strategy,
                )
            )

        add("generative", generative_prompt, None)
        for obj in truth:
            add("existence", EXISTENCE.format(article=article(obj), object=obj), "yes", obj, strategy="truth")
        declared = declared_candidates(
            sampler, tuple(truth), strategies, negatives_per_image, counterfactual_per_image, spare, {}, rng
        )
        picked, fictional = pick_candidates(declared, detected, negatives_per_image, counterfactual_per_image)
        for obj, strategy in picked:
            add("existence", EXISTENCE.format(article=article(obj), object=obj), "no", obj, strategy=strategy)
        for side in ("a", "b"):
            obj, attr, kind = scene[f"object_{side}"], scene[f"attribute_{side}"], scene[f"attribute_{side}_kind"]
            if attr and kind in ATTRIBUTE:
                add("attribute", ATTRIBUTE[kind].format(object=obj, attribute=attr), "yes", obj, kind, "truth")
                contrast = scene[f"attribute_{side}_contrast"]
                if contrast and contrast != attr:
                    add(
                        "attribute", ATTRIBUTE[kind].format(object=obj, attribute=contrast), "no", obj, kind, "contrast"
                    )
        for obj in truth:
            if node_rows.get(obj, {}).get("type") != "entity":
                continue  # counting an environment ("two skies") is not a meaningful question
            add("count", COUNT_ONE.format(object=obj), "yes", obj, "count", "truth")
            for number in count_negatives:
                add("count", COUNT_MANY.format(number=number, plural=plural(obj)), "no", obj, "count", "truth")
        for obj in fictional:
            add("counterfactual", EXISTENCE.format(article=article(obj), object=obj), "no", obj, strategy="fictional")
        if counterfactual_attributes:
            for side in ("a", "b"):
                obj = scene[f"object_{side}"]
                node = node_rows.get(obj, {})
                kind = scene[f"attribute_{side}_kind"] or ("action" if node.get("action_pairs") else "state")
                if (obj, kind) not in foreign_words:
                    own = {w for p in node.get(f"{kind}_pairs") or [] for w in p.split("/")}
                    foreign_words[(obj, kind)] = [w for w in vocab[kind] if w not in own]
                pool = foreign_words[(obj, kind)]
                if pool:
                    word = pool[int(rng.integers(len(pool)))]
                    add(
                        "counterfactual",
                        ATTRIBUTE[kind].format(object=obj, attribute=word),
                        "no",
                        obj,
                        kind,
                        "fictional",
                    )
    # Scalars go in row-wise; the `objects` list column is assembled in one vectorised step (building a Python
    # list per row through polars costs more than everything else here).
    flat = {**{k: v for k, v in QUERY_SCHEMA.items() if k != "objects"}, "_a": pl.String, "_b": pl.String}
    order = [c for c in QUERY_SCHEMA if c not in ("objects", "strategy")] + ["_a", "_b", "strategy"]
    df = pl.DataFrame(rows, schema={c: flat[c] for c in order}, orient="row")
    return df.with_columns(pl.concat_list("_a", "_b").alias("objects")).select(list(QUERY_SCHEMA))
