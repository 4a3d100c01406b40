"""Prompts: ODE's templates, one seed per image, round-robin shards, style tags that do not accumulate."""

from __future__ import annotations

import polars as pl
import pytest

from halluflow.errors import ConfigError
from halluflow.ode.prompts import image_seed, make_prompts
from halluflow.ode.sampling import SCENE_SCHEMA

SCENES = pl.DataFrame(
    [
        {
            "scene_id": "s-ee",
            "distribution": "standard",
            "pair_kind": "entity_entity",
            "object_a": "dog",
            "object_b": "egg",
            "attribute_a": "black",
            "attribute_a_kind": "state",
            "attribute_a_contrast": "white",
            "attribute_b": None,
            "attribute_b_kind": None,
            "attribute_b_contrast": None,
            "cooccurrence": 3,
            "variant": 0,
        },
        {
            "scene_id": "s-ev",
            "distribution": "fictional",
            "pair_kind": "entity_environment",
            "object_a": "person",
            "object_b": "sky",
            "attribute_a": "run",
            "attribute_a_kind": "action",
            "attribute_a_contrast": "sit",
            "attribute_b": "blue",
            "attribute_b_kind": "state",
            "attribute_b_contrast": "gray",
            "cooccurrence": 0,
            "variant": 0,
        },
    ],
    schema=SCENE_SCHEMA,
)


def test_templates_and_tags():
    df = make_prompts(
        SCENES,
        seed=42,
        images_per_scene=3,
        shards=2,
        style_tags=["(Photography)"],
        negative_prompt="(deformed)",
        extra_labels={"s-ee": ["cat", "dog"]},
    )
    assert df.height == 6
    first = df.row(0, named=True)
    assert first["prompt"] == "a black dog and an egg, (Photography)"
    # sky is a mass noun (the noun lexicon): no article, as in "Is there sky in the picture?"
    assert df.filter(pl.col("scene_id") == "s-ev")["prompt"][0] == "a run person in blue sky, (Photography)"
    # anchor bug: tags grew image after image; here every image of a scene has the same prompt
    assert df.filter(pl.col("scene_id") == "s-ee")["prompt"].n_unique() == 1
    assert df["negative_prompt"].unique().to_list() == ["(deformed)"]
    assert df["shard"].to_list() == ["000", "001", "000", "001", "000", "001"]
    assert df["image_id"].to_list()[:3] == ["s-ee-i00", "s-ee-i01", "s-ee-i02"]
    assert first["detect_labels"] == ["dog", "egg", "cat"]


def test_seeds_are_per_image_and_stable():
    df = make_prompts(SCENES, seed=42, images_per_scene=2)
    assert df["seed"].n_unique() == 4
    assert df["seed"][0] == image_seed(42, "s-ee-i00")
    # the seed depends on master seed + image id only: reordering/resharding never changes it
    swapped = make_prompts(SCENES.reverse(), seed=42, images_per_scene=2, shards=3)
    assert dict(zip(swapped["image_id"], swapped["seed"])) == dict(zip(df["image_id"], df["seed"]))
    assert make_prompts(SCENES, seed=43, images_per_scene=2)["seed"][0] != df["seed"][0]
    assert 0 <= min(df["seed"]) and max(df["seed"]) < 2**31


def test_custom_templates_and_errors():
    df = make_prompts(SCENES, seed=1, templates={"entity_entity": "{b} next to {a}", "part": "{object}"}, style_tags=[])
    assert df["prompt"][0] == "egg next to dog"
    with pytest.raises(ConfigError, match="templates.part': unknown placeholder 'colour'"):
        make_prompts(SCENES, seed=1, templates={"part": "{colour} {object}"})
    with pytest.raises(ConfigError, match="images_per_scene"):
        make_prompts(SCENES, seed=1, images_per_scene=0)


def test_tables_are_byte_identical_across_runs(tmp_path):
    from halluflow.io import write_parquet
    from halluflow.ode.graph import build_graph
    from halluflow.ode.queries import detector_candidates
    from halluflow.ode.sampling import sample_scenes

    nodes, edges = build_graph({"format": "seed"})
    sizes = {d: {"entity_entity": 3, "entity_environment": 3} for d in ("standard", "long_tail", "random", "fictional")}
    for run in ("a", "b"):
        scenes = sample_scenes(nodes, edges, sizes, seed=42, variants=2)
        prompts = make_prompts(
            scenes, seed=42, images_per_scene=2, shards=3, extra_labels=detector_candidates(scenes, nodes, edges, 3)
        )
        write_parquet(tmp_path / run / "scenes.parquet", scenes)
        write_parquet(tmp_path / run / "prompts.parquet", prompts)
    for name in ("scenes.parquet", "prompts.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
