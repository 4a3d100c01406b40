"""Scene sampling of ODE (Tu, Hu, Sang, CVPR 2025, §3.2 "four distributions"; code: github Iridescent-y/ODE
`concept_composer.py`).

Standard = pairs drawn from the high-co-occurrence band, weighted by edge weight (ODE's code takes the top edges,
so a new seed would leave them unchanged); Long-tail = lowest non-zero edges; Random = pairs drawn uniformly from the
co-occurring pairs the other lists did not take (ODE's uniform node pairs are mostly never-seen pairs, i.e.
Fictional by another name); Fictional = pairs with zero co-occurrence; each as entity+entity and entity+environment
lists. Unlike ODE's code, Random never leaks entity+entity pairs into the entity+environment list and Fictional
entity+environment is not capped. ODE's virtual nodes (tire, drain, hot) are never drawn.
"""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl

from ..errors import ConfigError
from ..io import stable_hash
from .attributes import attribute_fit_problem, clean_pair, counterfactual_forms, read_attribute_types
from .concepts import concept
from .nouns import askable_nodes

DISTRIBUTIONS = ("standard", "long_tail", "random", "fictional")
PAIR_KINDS = ("entity_entity", "entity_environment")
KIND_SHORT = {"entity_entity": "ee", "entity_environment": "ev"}
ATTRIBUTE_KINDS = ("state", "action")
RANDOM_POOLS = ("cooccurring", "all")

SCENE_SCHEMA = {
    "scene_id": pl.String,
    "distribution": pl.String,
    "pair_kind": pl.String,
    "object_a": pl.String,
    "object_b": pl.String,
    "attribute_a": pl.String,
    "attribute_a_kind": pl.String,
    "attribute_a_contrast": pl.String,
    "attribute_b": pl.String,
    "attribute_b_kind": pl.String,
    "attribute_b_contrast": pl.String,
    "cooccurrence": pl.Int64,
    "variant": pl.Int64,
}


def derived_rng(seed: int, *parts) -> np.random.Generator:
    # One independent stream per (distribution, pair kind, ...): resizing one list never reshuffles another.
    return np.random.default_rng(int(stable_hash([seed, *parts])[:16], 16))


def _candidate_pairs(kind: str, entities: list[str], environments: list[str]) -> list[tuple[str, str]]:
    """All unordered pairs of a kind, oriented (entity, entity) sorted or (entity, environment)."""
    if kind == "entity_entity":
        return list(itertools.combinations(entities, 2))
    return list(itertools.product(entities, environments))


def _by_weight(pairs: list[tuple[str, str]], weights: dict, rng, descending: bool) -> list[tuple[str, str]]:
    # Ties (hundreds of weight-1 edges) are broken by a seeded shuffle, not by name: alphabetical tie-breaks
    # would make the long tail all "air-conditioning" and "airport".
    order = rng.permutation(len(pairs))
    shuffled = [pairs[i] for i in order]
    sign = -1 if descending else 1
    return sorted(shuffled, key=lambda p: sign * weights[frozenset(p)])


def select_pairs(
    distribution: str,
    kind: str,
    n: int,
    entities: list[str],
    environments: list[str],
    weights: dict,
    rng: np.random.Generator,
    *,
    standard_band: float = 4.0,
    random_pool: str = "cooccurring",
    taken: set | None = None,
    exclude: set | None = None,
    barred: set | None = None,
) -> list[tuple[str, str]]:
    """n pairs of one distribution and pair kind.

    standard_band: Standard draws from the `standard_band * n` heaviest pairs with probability proportional to
    the edge weight (1 = ODE's code: exactly the n heaviest). random_pool: `cooccurring` draws Random uniformly
    from pairs seen together at least once and not `taken` by Standard or Long-tail; `all` = ODE's code (any pair).
    barred: objects never drawn (ODE's virtual nodes). They stay in the candidate lists the seeded orders and draws
    run over and are skipped there, so leaving them out changes no other pair of a release.
    """
    barred = barred or set()

    def allowed(pair):
        return barred.isdisjoint(pair)

    if n == 0:
        return []
    candidates = _candidate_pairs(kind, entities, environments)
    if exclude:  # pairs an ancestor release used (lineage): a child release is new
        candidates = [p for p in candidates if frozenset(p) not in exclude]
    if distribution in ("standard", "long_tail"):
        pool = _by_weight(
            [p for p in candidates if weights.get(frozenset(p), 0) > 0],
            weights,
            rng,
            descending=distribution == "standard",
        )
        pool = [p for p in pool if allowed(p)]
        if distribution == "standard" and standard_band > 1 and len(pool) > n:
            band = pool[: max(n, int(np.ceil(standard_band * n)))]
            w = np.array([weights[frozenset(p)] for p in band], dtype=float)
            picked = sorted(rng.choice(len(band), size=n, replace=False, p=w / w.sum()))
            chosen = [band[i] for i in picked]  # band order: heaviest first
        else:
            chosen = pool[:n]
    elif distribution in ("random", "fictional"):
        if distribution == "fictional":
            pool = [p for p in candidates if frozenset(p) not in weights]
        elif random_pool == "all":
            pool = candidates
        elif random_pool == "cooccurring":
            pool = [p for p in candidates if weights.get(frozenset(p), 0) > 0 and frozenset(p) not in (taken or ())]
        else:
            raise ConfigError(
                f"config key 'ode.sampling.random_pool': unknown value {random_pool!r}; known: "
                f"{', '.join(RANDOM_POOLS)}"
            )
        picks = list(rng.choice(len(pool), size=min(n, len(pool)), replace=False)) if pool else []
        chosen = [pool[i] for i in picks if allowed(pool[i])]
        if len(chosen) < len(picks):
            # a barred pair drawn: further draws among the allowed pairs not drawn yet fill its place
            drawn = set(picks)
            rest = [p for i, p in enumerate(pool) if i not in drawn and allowed(p)]
            more = rng.choice(len(rest), size=min(len(picks) - len(chosen), len(rest)), replace=False) if rest else []
            chosen += [rest[i] for i in more]
    else:
        raise ConfigError(
            f"config key 'ode.sampling.sizes.{distribution}': unknown distribution; known: {', '.join(DISTRIBUTIONS)}"
        )
    if len(chosen) < n:
        raise ConfigError(
            f"config key 'ode.sampling.sizes.{distribution}.{kind}': asked for {n} pairs but the graph has "
            f"only {len(chosen)} {distribution} {kind} pairs"
            + (
                " (co-occurring pairs not in Standard or Long-tail; random_pool: all draws from any pair)"
                if distribution == "random" and random_pool == "cooccurring"
                else ""
            )
        )
    return chosen


def _attribute_options(node: dict, kinds: tuple[str, ...], clean: bool = True) -> list[tuple[str, str, str]]:
    """(word, kind, contrast) options of a node: the true member of each mined (true, contrast) pair, cleaned to
    its kind's form (an adjective for states, a gerund for actions; counts and nouns left out) unless `clean` is
    off (ODE's code: the mined words as they are)."""
    options = []
    if not clean:
        for kind in kinds:
            seen = set()
            for pair in node.get(f"{kind}_pairs") or []:
                word, _, contrast = pair.partition("/")
                if word and word not in seen:
                    seen.add(word)
                    options.append((word, kind, contrast or None))
        return options
    seen = set()
    cls = _attribute_class(node.get("node") or "")
    for mined_kind in ATTRIBUTE_KINDS:
        for pair in node.get(f"{mined_kind}_pairs") or []:
            option = clean_pair(pair, mined_kind)
            # a word mined as a state may be an action ("sit"), so the kind filter applies after cleaning; the word
            # must fit the object's class (typed attribute lexicon: no "hiking truck", no "gloomy chair")
            if option and option[1] in kinds and option[0] not in seen:
                if attribute_fit_problem(option[0], cls, option[1]) is not None:
                    continue
                seen.add(option[0])
                form, kind, contrast = option
                # the mined contrast is asked "no" only where it rules the word out (same exclusive type, fits)
                typed = form in read_attribute_types()  # a word of another graph source: the mined pair stands
                if contrast and typed and not counterfactual_forms(form, cls, [contrast], set(), set()):
                    contrast = None
                options.append((form, kind, contrast))
    return options


def _attribute_class(name: str) -> str:
    """The class attributes are typed by (halluflow.ode.concepts): a thing's or stuff's class, "scene", a part's."""
    entry = concept(name)
    return "scene" if entry.kind == "scene" else entry.cls


def _pick_attributes(options: list, variants: int, rng) -> list[tuple | None]:
    """Distinct attributes per variant while they last; variants beyond the options get none."""
    if not options:
        return [None] * variants
    order = rng.permutation(len(options))
    return [options[order[v]] if v < len(options) else None for v in range(variants)]


def sample_scenes(
    nodes: pl.DataFrame,
    edges: pl.DataFrame,
    sizes: dict,
    seed: int,
    variants: int = 1,
    attribute_kinds: tuple[str, ...] = ATTRIBUTE_KINDS,
    standard_band: float = 4.0,
    random_pool: str = "cooccurring",
    clean_attributes: bool = True,
    exclude: set | None = None,
) -> pl.DataFrame:
    """Scenes table (docs/data-contracts.md): one row per (pair, attribute variant). See select_pairs for
    `standard_band` and `random_pool`; `exclude` = unordered pairs (frozensets) never to draw (an ancestor's)."""
    if variants < 1:
        raise ConfigError("config key 'ode.sampling.variants': must be at least 1")
    node_rows = {r["node"]: r for r in nodes.iter_rows(named=True)}
    entities = sorted(n for n, r in node_rows.items() if r["type"] == "entity")
    environments = sorted(n for n, r in node_rows.items() if r["type"] == "environment")
    # ODE's virtual nodes (tire, drain, hot: typed so by the graph or the noun lexicon) and names that are no noun
    # are never drawn: a prompt would ask for "a hot" and a question about it
    barred = set(node_rows) - askable_nodes(nodes)
    # nor is what no picture shows (abstract concepts: "sailing", "tennis", "sound"; concept lexicon)
    barred |= {n for n in node_rows if concept(n).kind in ("abstract", "none")}
    weights = {frozenset((s, t)): int(w) for s, t, w in edges.iter_rows() if s != t}
    rows = []
    taken: set[frozenset] = set()  # Standard and Long-tail pairs, which Random leaves to them
    for distribution in DISTRIBUTIONS:
        per_kind = sizes.get(distribution, {})
        for kind in PAIR_KINDS:
            n = int(per_kind.get(kind, 0))
            rng = derived_rng(seed, "pairs", distribution, kind)
            pairs = select_pairs(
                distribution,
                kind,
                n,
                entities,
                environments,
                weights,
                rng,
                standard_band=standard_band,
                random_pool=random_pool,
                taken=taken,
                exclude=exclude,
                barred=barred,
            )
            if distribution in ("standard", "long_tail"):
                taken |= {frozenset(p) for p in pairs}
            for index, (a, b) in enumerate(pairs):
                arng = derived_rng(seed, "attributes", distribution, kind, a, b)
                attrs_a = _pick_attributes(
                    _attribute_options(node_rows[a], attribute_kinds, clean_attributes), variants, arng
                )
                attrs_b = _pick_attributes(
                    _attribute_options(node_rows[b], attribute_kinds, clean_attributes), variants, arng
                )
                for v in range(variants):
                    at_a, at_b = attrs_a[v], attrs_b[v]
                    rows.append(
                        {
                            "scene_id": f"{distribution}-{KIND_SHORT[kind]}-{index:05d}-v{v}",
                            "distribution": distribution,
                            "pair_kind": kind,
                            "object_a": a,
                            "object_b": b,
                            "attribute_a": at_a[0] if at_a else None,
                            "attribute_a_kind": at_a[1] if at_a else None,
                            "attribute_a_contrast": at_a[2] if at_a else None,
                            "attribute_b": at_b[0] if at_b else None,
                            "attribute_b_kind": at_b[1] if at_b else None,
                            "attribute_b_contrast": at_b[2] if at_b else None,
                            "cooccurrence": weights.get(frozenset((a, b)), 0),
                            "variant": v,
                        }
                    )
    return pl.DataFrame(rows, schema=SCENE_SCHEMA) if rows else pl.DataFrame(schema=SCENE_SCHEMA)
