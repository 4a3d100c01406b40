"""Scene sampling: the four distributions on a hand-made graph, determinism, and the anchor bugs not copied."""

from __future__ import annotations

import polars as pl
import pytest

from halluflow.errors import ConfigError
from halluflow.ode.graph import Annotations, build_graph, build_tables
from halluflow.ode.sampling import sample_scenes

# entities a..e, environments sky, sea; hand-made weights
IMAGES = (
    [["a", "b"]] * 5
    + [["a", "c"]] * 3
    + [["b", "c"]] * 1
    + [["a", "sky"]] * 4
    + [["b", "sky"]] * 1
    + [["c", "sea"]] * 2
    + [["d"], ["e"]]
)
ANN = Annotations(
    images=IMAGES,
    state_pairs={"a": [("red", "blue"), ("big", "small")]},
    action_pairs={"a": [("run", "sit")], "sky": []},
)
NODES, EDGES = build_tables(ANN, {"sky", "sea"})


def sizes(n_ee=1, n_ev=1, **over):
    base = {
        d: {"entity_entity": n_ee, "entity_environment": n_ev} for d in ("standard", "long_tail", "random", "fictional")
    }
    base.update(over)
    return base


def pairs(df, dist, kind):
    sub = df.filter((pl.col("distribution") == dist) & (pl.col("pair_kind") == kind))
    return list(zip(sub["object_a"], sub["object_b"], sub["cooccurrence"]))


def test_standard_and_long_tail_follow_edge_weights():
    # ODE's code: the heaviest edges; the tiny graph has no co-occurring pairs left for Random
    df = sample_scenes(NODES, EDGES, sizes(2, 2), seed=1, standard_band=1, random_pool="all")
    assert pairs(df, "standard", "entity_entity") == [("a", "b", 5), ("a", "c", 3)]
    assert pairs(df, "standard", "entity_environment") == [("a", "sky", 4), ("c", "sea", 2)]
    assert pairs(df, "long_tail", "entity_entity") == [("b", "c", 1), ("a", "c", 3)]
    assert pairs(df, "long_tail", "entity_environment") == [("b", "sky", 1), ("c", "sea", 2)]


def test_fictional_pairs_have_no_edge_and_are_not_capped():
    # entity+entity non-edges among a..e: 10 pairs - 3 edges = 7; entity+environment: 5*2 - 3 = 7
    df = sample_scenes(NODES, EDGES, sizes(0, 0, fictional={"entity_entity": 7, "entity_environment": 7}), seed=3)
    ee, ev = pairs(df, "fictional", "entity_entity"), pairs(df, "fictional", "entity_environment")
    assert len(ee) == 7 and len(ev) == 7
    assert all(w == 0 for *_, w in ee + ev)
    assert {frozenset(p[:2]) for p in ee} == {
        frozenset(p) for p in [("a", "d"), ("a", "e"), ("b", "d"), ("b", "e"), ("c", "d"), ("c", "e"), ("d", "e")]
    }
    with pytest.raises(ConfigError, match="sizes.fictional.entity_entity': asked for 8 pairs but the graph has only 7"):
        sample_scenes(NODES, EDGES, sizes(0, 0, fictional={"entity_entity": 8, "entity_environment": 0}), seed=3)


def test_random_keeps_pair_kinds_apart_and_never_repeats_a_pair():
    df = sample_scenes(
        NODES, EDGES, sizes(0, 0, random={"entity_entity": 10, "entity_environment": 10}), seed=7, random_pool="all"
    )
    types = dict(zip(NODES["node"], NODES["type"]))
    ev = pairs(df, "random", "entity_environment")
    assert all(types[a] == "entity" and types[b] == "environment" for a, b, _ in ev)  # anchor leaked e-e pairs here
    ee = pairs(df, "random", "entity_entity")
    assert all(types[a] == types[b] == "entity" for a, b, _ in ee)
    assert len({frozenset(p[:2]) for p in ee}) == 10 and len({frozenset(p[:2]) for p in ev}) == 10


def test_seeded_and_variants_carry_attributes():
    a = sample_scenes(NODES, EDGES, sizes(2, 2), seed=5, variants=3, standard_band=1, random_pool="all")
    b = sample_scenes(NODES, EDGES, sizes(2, 2), seed=5, variants=3, standard_band=1, random_pool="all")
    assert a.equals(b)
    assert a["scene_id"].n_unique() == a.height == 8 * 2 * 3
    row_a = a.filter(pl.col("scene_id") == "standard-ee-00000-v0").row(0, named=True)
    assert row_a["object_a"] == "a"
    # "a" has 3 attributes (red, big: state; run: action): its 3 variants use each once, with their contrast;
    # actions read as gerunds ("a running a"), the form questions ask about ("Is the dog running?")
    got = a.filter(
        (pl.col("distribution") == "standard") & (pl.col("pair_kind") == "entity_entity") & (pl.col("object_b") == "b")
    )
    assert sorted(zip(got["attribute_a"], got["attribute_a_kind"], got["attribute_a_contrast"])) == [
        ("big", "state", "small"),
        ("red", "state", "blue"),
        ("running", "action", "sitting"),
    ]
    assert got["attribute_b"].null_count() == 3  # "b" has no attributes
    plain = sample_scenes(NODES, EDGES, sizes(1, 1), seed=5, attribute_kinds=())
    assert plain["attribute_a"].null_count() == plain.height


def test_default_seed_graph_default_sizes():
    nodes, edges = build_graph({"format": "seed"})
    df = sample_scenes(nodes, edges, sizes(2, 2), seed=42, standard_band=1)
    assert df.height == 16
    types = dict(zip(nodes["node"], nodes["type"]))
    top = pairs(df, "standard", "entity_environment")
    assert top[0] == ("person", "sky", 119)  # the heaviest entity+environment edge of the seed graph
    assert top[0][2] == max(w for s, t, w in edges.iter_rows() if {types[s], types[t]} == {"entity", "environment"})
    assert all(
        w == 0 for *_, w in pairs(df, "fictional", "entity_entity") + pairs(df, "fictional", "entity_environment")
    )


def test_conformance_with_odes_released_pairs():
    """ODE's released pair lists against our graph: same definitions, and the two anchor bugs we do not copy."""
    import csv
    from collections import Counter

    from helpers import shared_data

    path = shared_data("ode-iridescent-y", "ode_concept_pairs.tsv")
    with open(path) as fh:
        lists: dict = {}
        for r in csv.DictReader(fh, delimiter="\t"):
            lists.setdefault((r["distribution_type"], r["pair_kind"]), []).append((r["object_a"], r["object_b"]))
    nodes, edges = build_graph({"format": "seed"})
    weight = {frozenset((s, t)): w for s, t, w in edges.iter_rows()}
    types = dict(zip(nodes["node"], nodes["type"]))
    assert all(weight.get(frozenset(p), 0) == 0 for k in ("ee", "ev") for p in lists[("Fictional", k)])
    assert all(weight.get(frozenset(p)) == 1 for k in ("ee", "ev") for p in lists[("Longtailed", k)])
    ours = sample_scenes(nodes, edges, sizes(40, 39), seed=42, standard_band=1)
    # Standard = ODE's "Common": our top-40 entity pairs differ from theirs only among pairs tied at the cut-off
    mine = {frozenset(p[:2]) for p in pairs(ours, "standard", "entity_entity")}
    # … once pairs with a concept no picture shows are left out (ODE's "tennis"-"racket": tennis is an activity)
    theirs = {frozenset(p) for p in lists[("Common", "ee")]} - {frozenset(("tennis", "racket"))}
    cutoff = min(weight[p] for p in mine)
    assert all(weight[p] == cutoff for p in mine ^ theirs) and len(mine & theirs) >= 38
    assert all(
        w == 1 for *_, w in pairs(ours, "long_tail", "entity_entity") + pairs(ours, "long_tail", "entity_environment")
    )
    # anchor bugs: their Random e-env list holds 14 entity+entity pairs, their Fictional e-env list stops at 20
    kinds = Counter((types[a], types[b]) for a, b in lists[("Random", "ev")])
    assert kinds[("entity", "entity")] == 14 and len(lists[("Fictional", "ev")]) == 20
    fixed = sample_scenes(
        nodes,
        edges,
        sizes(
            0,
            0,
            random={"entity_entity": 0, "entity_environment": 38},
            fictional={"entity_entity": 0, "entity_environment": 39},
        ),
        seed=42,
        random_pool="all",
    )
    for dist, n in (("random", 38), ("fictional", 39)):
        ev = pairs(fixed, dist, "entity_environment")
        assert len(ev) == n and all(types[a] == "entity" and types[b] == "environment" for a, b, _ in ev)


def _pair_set(df, dist, kind):
    return {frozenset(p[:2]) for p in pairs(df, dist, kind)}


def test_a_new_seed_gives_new_standard_pairs_from_the_high_cooccurrence_band():
    nodes, edges = build_graph({"format": "seed"})
    paper = sizes(40, 40)
    a, b = sample_scenes(nodes, edges, paper, seed=1), sample_scenes(nodes, edges, paper, seed=2)
    legacy = [sample_scenes(nodes, edges, paper, seed=s, standard_band=1) for s in (1, 2)]
    weight = {frozenset((s, t)): w for s, t, w in edges.iter_rows()}
    for kind in ("entity_entity", "entity_environment"):
        # ODE's code: the same top-40 for every seed (up to ties at the cut-off)
        assert len(_pair_set(legacy[0], "standard", kind) & _pair_set(legacy[1], "standard", kind)) >= 38
        mine, theirs = _pair_set(a, "standard", kind), _pair_set(b, "standard", kind)
        assert len(mine) == 40 and len(mine & theirs) <= 30  # a new seed: a new Standard list
        # still the high-co-occurrence band: every pair among the 160 heaviest of its kind
        types = dict(zip(nodes["node"], nodes["type"]))
        want = {"entity_entity": ["entity", "entity"], "entity_environment": ["entity", "environment"]}[kind]
        of_kind = sorted((w for p, w in weight.items() if sorted(types[o] for o in p) == want), reverse=True)
        assert min(weight[p] for p in mine) >= of_kind[159]
        assert sum(weight[p] for p in mine) / 40 > 3 * sum(of_kind) / len(of_kind)


def test_random_is_not_fictional_by_another_name():
    nodes, edges = build_graph({"format": "seed"})
    weight = {frozenset((s, t)): w for s, t, w in edges.iter_rows()}
    df = sample_scenes(nodes, edges, sizes(40, 40), seed=3)
    odes = sample_scenes(nodes, edges, sizes(40, 40), seed=3, random_pool="all")
    for kind in ("entity_entity", "entity_environment"):
        rand = _pair_set(df, "random", kind)
        assert len(rand) == 40 and all(weight.get(p, 0) > 0 for p in rand)  # none is a Fictional pair
        assert not rand & (_pair_set(df, "standard", kind) | _pair_set(df, "long_tail", kind))
    # ODE's uniform node pairs: most entity pairs were never seen together, like Fictional's
    zero = sum(weight.get(p, 0) == 0 for p in _pair_set(odes, "random", "entity_entity"))
    assert zero >= 30
    with pytest.raises(ConfigError, match="random.entity_entity': asked for 2 pairs .* random_pool: all draws"):
        sample_scenes(NODES, EDGES, sizes(2, 2), seed=1)  # Standard + Long-tail took the tiny graph's 3 edges
    with pytest.raises(ConfigError, match="ode.sampling.random_pool': unknown value 'any'"):
        sample_scenes(nodes, edges, sizes(1, 1), seed=3, random_pool="any")


def test_attribute_words_are_cleaned_per_kind():
    """Mined words in the wrong kind, counts and bare verbs: what the seed graph's AMBER-mined pairs hold."""
    from halluflow.ode.sampling import _attribute_options

    node = {
        "state_pairs": ["1/2", "red/blue", "swim/run", "sensory/plain"],
        "action_pairs": ["yellow/white", "swim/walk", "sit/green", "dance/dancing"],
    }
    assert _attribute_options(node, ("state", "action")) == [
        ("red", "state", "blue"),
        ("swimming", "action", "running"),
        ("yellow", "state", "white"),
        ("sitting", "action", None),
        ("dancing", "action", None),
    ]
    assert _attribute_options(node, ("state",)) == [("red", "state", "blue"), ("yellow", "state", "white")]
    # ODE's code: the mined words as they are
    assert _attribute_options(node, ("state", "action"), clean=False)[:2] == [
        ("1", "state", "2"),
        ("red", "state", "blue"),
    ]


def test_virtual_nodes_are_never_drawn_and_leaving_them_out_moves_no_other_pair():
    from halluflow.ode.sampling import derived_rng, select_pairs

    # ODE's virtual nodes (tire, drain, hot) sit in the seed graph's long tail and Fictional pools
    nodes, edges = build_graph({"format": "seed"})
    assert {"tire", "drain", "hot"} <= set(nodes["node"])
    paper = sample_scenes(nodes, edges, sizes(40, 40), seed=42, variants=2)
    drawn = set(paper["object_a"]) | set(paper["object_b"])
    assert not drawn & {"tire", "drain", "hot", "leave"} and len(drawn) > 150
    # a barred object is skipped where the seeded orders and draws met it: every other pair stays where it was
    entities = sorted(n for n, t in zip(nodes["node"], nodes["type"]) if t == "entity")
    weights = {frozenset((s, t)): int(w) for s, t, w in edges.iter_rows() if s != t}
    for distribution, n in (("long_tail", 1500), ("fictional", 2000)):
        free, barred = (
            select_pairs(
                distribution, "entity_entity", n, entities, [], weights, derived_rng(1, distribution), barred=b
            )
            for b in (set(), {"tire", "drain", "hot"})
        )
        hit = [p for p in free if {"tire", "drain", "hot"} & set(p)]
        assert hit, distribution  # the draw without barring does meet them
        assert [p for p in free if p not in hit] == barred[: n - len(hit)]
        assert len(barred) == n and not any({"tire", "drain", "hot"} & set(p) for p in barred)
