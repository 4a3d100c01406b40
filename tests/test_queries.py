"""Queries: ODE's question set on a hand-made graph; negatives per strategy; detected objects never asked absent."""

from __future__ import annotations

import polars as pl
import pytest

from halluflow.errors import ConfigError, InputError
from halluflow.ode.graph import Annotations, build_tables
from halluflow.ode.queries import detector_candidates, make_queries, plural
from halluflow.ode.sampling import SCENE_SCHEMA

IMAGES = ([["dog", "frisbee", "grass"]] * 5 + [["dog", "ball"]] * 3 + [["frisbee", "person"]] * 4
          + [["dog", "person"]] * 2 + [["cup", "table"]] * 2 + [["bed"]])
ANN = Annotations(images=IMAGES, state_pairs={"dog": [("black", "white")], "cup": [("red", "blue")]},
                  action_pairs={"dog": [("run", "sit")], "person": [("walk", "jump")]})
NODES, EDGES = build_tables(ANN, {"grass"})
SCENES = pl.DataFrame([{
    "scene_id": "s1", "distribution": "standard", "pair_kind": "entity_entity", "object_a": "dog",
    "object_b": "frisbee", "attribute_a": "run", "attribute_a_kind": "action", "attribute_a_contrast": "sit",
    "attribute_b": None, "attribute_b_kind": None, "attribute_b_contrast": None, "cooccurrence": 5, "variant": 0,
}, {
    "scene_id": "s2", "distribution": "fictional", "pair_kind": "entity_environment", "object_a": "cup",
    "object_b": "grass", "attribute_a": "red", "attribute_a_kind": "state", "attribute_a_contrast": "blue",
    "attribute_b": None, "attribute_b_kind": None, "attribute_b_contrast": None, "cooccurrence": 0, "variant": 0,
}], schema=SCENE_SCHEMA)
ACCEPTED = pl.DataFrame({"image_id": ["s1-i00", "s2-i00"], "scene_id": ["s1", "s2"],
                         "detected": [["dog", "grass"], []]})


def table(q, image="s1-i00"):
    sub = q.filter(pl.col("image_id") == image)
    return list(zip(sub["query_type"], sub["question"], sub["truth"], sub["strategy"]))


def test_odes_question_set_for_one_image():
    q = make_queries(ACCEPTED, SCENES, NODES, EDGES, seed=1)
    rows = table(q)
    assert rows[0] == ("generative", "Please describe this picture.", None, None)
    assert ("existence", "Is there a dog in the picture?", "yes", "truth") in rows
    # graph neighbours of dog/frisbee by weight: grass 5 (detected -> excluded), person 4, ball 3
    negatives = [r for r in rows if r[0] == "existence" and r[2] == "no"]
    assert negatives == [("existence", "Is there a person in the picture?", "no", "graph_neighbour"),
                         ("existence", "Is there a ball in the picture?", "no", "graph_neighbour")]
    assert ("attribute", "Does the dog run in the picture?", "yes", "truth") in rows
    assert ("attribute", "Does the dog sit in the picture?", "no", "contrast") in rows
    assert [r[1] for r in rows if r[0] == "count"] == [
        "Is there one dog in the picture?", "Are there two dogs in the picture?", "Are there three dogs in the picture?",
        "Is there one frisbee in the picture?", "Are there two frisbees in the picture?",
        "Are there three frisbees in the picture?"]
    # counterfactual object: the only nodes never co-occurring with dog or frisbee are bed, cup, table
    cf = [r for r in rows if r[0] == "counterfactual" and r[1].startswith("Is there")]
    assert len(cf) == 1 and cf[0][1].split()[3] in {"bed", "cup", "table"} and cf[0][2] == "no"
    # counterfactual attribute: never one of the object's own mined words
    cf_attr = q.filter((pl.col("query_type") == "counterfactual") & (pl.col("target") == "dog"))
    assert cf_attr.height == 1 and cf_attr["question"][0].split()[3] not in {"run", "sit"}
    assert q["query_id"].n_unique() == q.height
    assert set(q["image"]) == {"images/s1-i00.png", "images/s2-i00.png"}
    assert q.filter(pl.col("image_id") == "s1-i00")["objects"][0].to_list() == ["dog", "frisbee"]


def test_environment_objects_are_not_counted_and_states_use_is():
    q = make_queries(ACCEPTED, SCENES, NODES, EDGES, seed=1)
    rows = table(q, "s2-i00")
    assert ("attribute", "Is the cup red in the picture?", "yes", "truth") in rows
    assert ("attribute", "Is the cup blue in the picture?", "no", "contrast") in rows
    assert not any("grass" in r[1] for r in rows if r[0] == "count")


def test_pope_strategies_add_distinct_negatives():
    q = make_queries(ACCEPTED.head(1), SCENES, NODES, EDGES, seed=1, negatives_per_image=1,
                     strategies=["graph_neighbour", "adversarial", "popular"])
    negs = [(r[1].split()[3], r[3]) for r in table(q) if r[0] == "existence" and r[2] == "no"]
    # graph_neighbour: person (weight 4); adversarial (sum of weights) skips person: ball (3);
    # popular (images: dog 10, frisbee 9, person 6, grass 5, ball 3, cup 2, table 2, bed 1) -> cup (tie by name)
    assert negs == [("person", "graph_neighbour"), ("ball", "adversarial"), ("cup", "popular")]
    with pytest.raises(ConfigError, match="strategies': unknown strategy 'nearest'"):
        make_queries(ACCEPTED, SCENES, NODES, EDGES, seed=1, strategies=["nearest"])


def test_deterministic_and_bad_scene():
    a = make_queries(ACCEPTED, SCENES, NODES, EDGES, seed=3, strategies=["random"])
    b = make_queries(ACCEPTED, SCENES, NODES, EDGES, seed=3, strategies=["random"])
    assert a.equals(b)
    with pytest.raises(InputError, match="scene 's1' not in the scenes table"):
        make_queries(ACCEPTED, SCENES.tail(1), NODES, EDGES, seed=1)


def test_detector_candidates_and_plural():
    assert detector_candidates(SCENES.head(1), NODES, EDGES, 3) == {"s1": ["grass", "person", "ball"]}
    assert [plural(w) for w in ("bus", "box", "bench", "sky", "toy", "traffic light")] == [
        "buses", "boxes", "benches", "skies", "toys", "traffic lights"]


def test_hallucination_strategy_uses_g_h():
    hallu = pl.DataFrame({"source": ["dog", "frisbee", "dog"], "target": ["cat", "cat", "leash"], "weight": [2, 2, 3]},
                         schema={"source": pl.String, "target": pl.String, "weight": pl.Int64})
    q = make_queries(ACCEPTED.head(1), SCENES, NODES, EDGES, seed=1, strategies=["hallucination"], hallu_edges=hallu)
    negs = [(r[1].split()[3], r[3]) for r in table(q) if r[0] == "existence" and r[2] == "no"]
    assert negs == [("cat", "hallucination"), ("leash", "hallucination")]  # cat 2 + 2 = 4 > leash 3
    with pytest.raises(ConfigError, match="'hallucination' needs a graph source"):
        make_queries(ACCEPTED, SCENES, NODES, EDGES, seed=1, strategies=["hallucination"])


def _release_inputs(n_images: int):
    """The shipped graph, paper-like scene lists and accepted images with a few detected candidates each."""
    import numpy as np

    from halluflow.ode.graph import DEFAULT_SEED_DIR, read_seed
    from halluflow.ode.sampling import DISTRIBUTIONS, sample_scenes

    nodes, edges = read_seed(DEFAULT_SEED_DIR)
    scenes = sample_scenes(nodes, edges, {d: {"entity_entity": 6, "entity_environment": 6} for d in DISTRIBUTIONS},
                           seed=5, variants=2)
    cands = detector_candidates(scenes, nodes, edges, 3)
    rng = np.random.default_rng(0)
    ids, sids, det = [], [], []
    for i in range(n_images):
        r = scenes.row(i % scenes.height, named=True)
        labels = [r["object_a"], r["object_b"], *cands[r["scene_id"]]]
        ids.append(f"{r['scene_id']}-i{i // scenes.height:02d}")
        sids.append(r["scene_id"])
        det.append(sorted(lab for lab in labels if rng.random() < 0.3))
    return pl.DataFrame({"image_id": ids, "scene_id": sids, "detected": det}), scenes, nodes, edges


@pytest.mark.parametrize("options", [
    {},
    {"strategies": ["graph_neighbour", "random", "popular", "adversarial"], "counterfactual_per_image": 3},
    {"strategies": ["hallucination", "popular"], "negatives_per_image": 3, "counterfactual_per_image": 2},
    {"counterfactual_per_image": 0, "counterfactual_attributes": False, "negatives_per_image": 0,
     "count_negatives": ["two", "four", "ten"], "generative_prompt": "Describe the image in detail."},
])
def test_vectorised_make_queries_writes_the_same_bytes_as_the_per_image_loop(options, tmp_path):
    from legacy_ode_queries import make_queries as per_image_loop

    from halluflow.io import write_parquet
    from halluflow.ode.graph import DEFAULT_SEED_DIR, hallu_graph

    accepted, scenes, nodes, edges = _release_inputs(300)
    hallu = hallu_graph({"format": "seed", "path": str(DEFAULT_SEED_DIR)})
    old = per_image_loop(accepted, scenes, nodes, edges, seed=11, hallu_edges=hallu, **options)
    new = make_queries(accepted, scenes, nodes, edges, seed=11, hallu_edges=hallu, **options)
    write_parquet(tmp_path / "old.parquet", old)
    write_parquet(tmp_path / "new.parquet", new.drop("detected"))  # the one column the loop did not write
    assert old.height > 300 * 5
    assert (tmp_path / "old.parquet").read_bytes() == (tmp_path / "new.parquet").read_bytes()


def test_vectorised_make_queries_edge_cases():
    from legacy_ode_queries import make_queries as per_image_loop

    empty = make_queries(ACCEPTED.clear(), SCENES, NODES, EDGES, seed=1)
    assert empty.height == 0 and empty.drop("detected").schema == per_image_loop(
        ACCEPTED.clear(), SCENES, NODES, EDGES, seed=1).schema
    no_detections = ACCEPTED.drop("detected")
    new = make_queries(no_detections, SCENES, NODES, EDGES, seed=1)
    assert new.drop("detected").equals(per_image_loop(no_detections, SCENES, NODES, EDGES, seed=1))
    assert new["detected"].list.len().sum() == 0
    # the same object on both sides asks each shared question once, as the loop did
    twin = SCENES.with_columns(pl.col("object_a").alias("object_b"))
    assert make_queries(ACCEPTED, twin, NODES, EDGES, seed=1).drop("detected").equals(
        per_image_loop(ACCEPTED, twin, NODES, EDGES, seed=1))
