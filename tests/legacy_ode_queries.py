"""make_queries as it was before vectorisation (per-image Python loop), frozen as the reference its polars
version must match byte for byte (tests/test_queries.py) and the baseline bench/bench_dag.py times it against."""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl

from halluflow.errors import ConfigError, InputError
from halluflow.ode.graph import neighbours
from halluflow.progress import progress
from halluflow.ode.sampling import derived_rng

STRATEGIES = ("graph_neighbour", "random", "popular", "adversarial", "hallucination")

EXISTENCE = "Is there {article} {object} in the picture?"
# ODE asks "Is the {obj} {attr} ...?" for both kinds; AMBER's action words are bare verbs ("run"), so
# actions read "Does the dog run in the picture?" as in AMBER's own questions.
ATTRIBUTE = {"state": "Is the {object} {attribute} in the picture?",
             "action": "Does the {object} {attribute} in the picture?"}
COUNT_ONE = "Is there one {object} in the picture?"
COUNT_MANY = "Are there {number} {plural} in the picture?"

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


def query_id(image_id: str, question: str) -> str:
    """16 hex digits of sha256(image id, question): stable across runs, shards and releases."""
    return hashlib.sha256(f"{image_id}\x1f{question}".encode()).hexdigest()[:16]


class NegativeSampler:
    """Objects to ask about as absent, per strategy, from the concept graph.

    Orders depend only on the truth objects, so they are computed once per object pair and reused by every
    image of its scenes (100,000 images cost seconds, not minutes).
    """

    def __init__(self, nodes: pl.DataFrame, edges: pl.DataFrame, hallu_edges: pl.DataFrame | None = None):
        self.adj = neighbours(edges.filter(pl.col("source") != pl.col("target")))
        self.hallu: dict[str, list[tuple[str, int]]] = {}
        for s, t, w in (hallu_edges.iter_rows() if hallu_edges is not None else []):
            self.hallu.setdefault(s, []).append((t, int(w)))
        self.nodes = sorted(nodes["node"].to_list())
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
                raise ConfigError(f"config key 'ode.queries.strategies': unknown strategy {strategy!r}; "
                                  f"known: {', '.join(STRATEGIES)}")
        return self._orders[key]

    def candidates(self, strategy: str, truth, exclude: set[str], k: int, rng=None) -> list[str]:
        if k <= 0:
            return []
        out = []
        for n in self.order(strategy, tuple(truth), rng):
            if n not in exclude:
                out.append(n)
                if len(out) == k:
                    break
        return out

    def never_cooccurring(self, truth, exclude: set[str], k: int, rng: np.random.Generator) -> list[str]:
        """Counterfactual objects: never annotated with any truth object (zero co-occurrence), drawn at random."""
        pool = [n for n in self.order("unlinked", tuple(truth)) if n not in exclude]
        if k <= 0 or not pool:
            return []
        return [pool[i] for i in sorted(rng.choice(len(pool), size=min(k, len(pool)), replace=False))]


def make_queries(accepted: pl.DataFrame, scenes: pl.DataFrame, nodes: pl.DataFrame, edges: pl.DataFrame, *,
                 seed: int, generative_prompt: str = "Please describe this picture.", negatives_per_image: int = 2,
                 strategies: list[str] | tuple[str, ...] = ("graph_neighbour",),
                 count_negatives: list[str] | tuple[str, ...] = ("two", "three"), counterfactual_per_image: int = 1,
                 counterfactual_attributes: bool = True, hallu_edges: pl.DataFrame | None = None) -> pl.DataFrame:
    """Queries table (docs/data-contracts.md), one block of queries per accepted image."""
    for s in strategies:
        if s not in STRATEGIES:
            raise ConfigError(f"config key 'ode.queries.strategies': unknown strategy {s!r}; known: {', '.join(STRATEGIES)}")
    scene_rows = {r["scene_id"]: r for r in scenes.iter_rows(named=True)}
    node_rows = {r["node"]: r for r in nodes.iter_rows(named=True)}
    if "hallucination" in strategies and (hallu_edges is None or hallu_edges.height == 0):
        raise ConfigError("config key 'ode.queries.strategies': 'hallucination' needs a graph source with "
                          "hallucination-prone objects (AMBER annotations or the shipped seed)")
    sampler = NegativeSampler(nodes, edges, hallu_edges)
    vocab = {kind: sorted({w for r in node_rows.values() for p in r[f"{kind}_pairs"] or [] for w in p.split("/")}
                          - {""})
             for kind in ("state", "action")}
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
            rows.append((query_id(image_id, question), image_id, f"images/{image_id}.png", scene["scene_id"],
                         scene["distribution"], scene["pair_kind"],
                         "generative" if query_type == "generative" else "discriminative", query_type,
                         attribute_kind, question, truth_value, target, truth[0], truth[1], strategy))

        add("generative", generative_prompt, None)
        for obj in truth:
            add("existence", EXISTENCE.format(article=article(obj), object=obj), "yes", obj, strategy="truth")
        exclude = set(truth) | detected
        for strategy in strategies:
            # Each strategy skips objects an earlier one already asked, so every strategy adds its own questions.
            picked = sampler.candidates(strategy, truth, exclude, negatives_per_image, rng)
            exclude |= set(picked)
            for obj in picked:
                add("existence", EXISTENCE.format(article=article(obj), object=obj), "no", obj, strategy=strategy)
        for side in ("a", "b"):
            obj, attr, kind = scene[f"object_{side}"], scene[f"attribute_{side}"], scene[f"attribute_{side}_kind"]
            if attr and kind in ATTRIBUTE:
                add("attribute", ATTRIBUTE[kind].format(object=obj, attribute=attr), "yes", obj, kind, "truth")
                contrast = scene[f"attribute_{side}_contrast"]
                if contrast and contrast != attr:
                    add("attribute", ATTRIBUTE[kind].format(object=obj, attribute=contrast), "no", obj, kind,
                        "contrast")
        for obj in truth:
            if node_rows.get(obj, {}).get("type") != "entity":
                continue  # counting an environment ("two skies") is not a meaningful question
            add("count", COUNT_ONE.format(object=obj), "yes", obj, "count", "truth")
            for number in count_negatives:
                add("count", COUNT_MANY.format(number=number, plural=plural(obj)), "no", obj, "count", "truth")
        for obj in sampler.never_cooccurring(truth, exclude, counterfactual_per_image, rng):
            add("counterfactual", EXISTENCE.format(article=article(obj), object=obj), "no", obj,
                strategy="fictional")
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
                    add("counterfactual", ATTRIBUTE[kind].format(object=obj, attribute=word), "no", obj, kind,
                        "fictional")
    # Scalars go in row-wise; the `objects` list column is assembled in one vectorised step (building a Python
    # list per row through polars costs more than everything else here).
    flat = {**{k: v for k, v in QUERY_SCHEMA.items() if k != "objects"}, "_a": pl.String, "_b": pl.String}
    order = [c for c in QUERY_SCHEMA if c not in ("objects", "strategy")] + ["_a", "_b", "strategy"]
    df = pl.DataFrame(rows, schema={c: flat[c] for c in order}, orient="row")
    return df.with_columns(pl.concat_list("_a", "_b").alias("objects")).select(list(QUERY_SCHEMA))


