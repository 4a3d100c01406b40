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


def test_tags_and_negative_prompts_per_pair_kind_as_ode_has_them():
    df = make_prompts(SCENES, seed=42)
    ee = df.filter(pl.col("scene_id") == "s-ee").row(0, named=True)
    ev = df.filter(pl.col("scene_id") == "s-ev").row(0, named=True)
    # ODE's image generator: both entities equally for entity+entity ...
    assert ee["prompt"] == (
        "a black dog and an egg, (clear and obvious entity)(entity A and entity B is equally important)"
        "(Photography)(best quality)(masterpiece)(concise)(complete body)"
    )
    assert (
        ee["negative_prompt"].startswith("(missing entity)(bad anatomy)") and "(poorly face)" in ee["negative_prompt"]
    )
    # ... the subject and only this environment for entity+environment (never "entity A and entity B")
    assert ev["prompt"] == (
        "a run person in blue sky, (highlight the subject and only this environment)"
        "(Entity as the main body and clear and obvious)(Photography)(best quality)(masterpiece)"
    )
    assert ev["negative_prompt"].startswith("(extra environmental elements)(extra entity)")
    # one kind set, the other left to its default; "" / [] switch a kind off
    custom = make_prompts(
        SCENES,
        seed=42,
        style_tags={"entity_environment": []},
        negative_prompt={"entity_entity": "", "entity_environment": "(extra entity)"},
    )
    assert custom["prompt"].to_list() == [ee["prompt"], "a run person in blue sky"]
    assert custom["negative_prompt"].to_list() == ["", "(extra entity)"]
    with pytest.raises(ConfigError, match="'ode.prompts.style_tags.entity_animal': unknown pair kind"):
        make_prompts(SCENES, seed=42, style_tags={"entity_animal": ["(x)"]})


def _variants(attrs):
    """Scenes of one pair (dog, frisbee): one row per variant with attribute_a as given."""
    rows = []
    for v, attr in enumerate(attrs):
        rows.append(
            {
                **SCENES.row(0, named=True),
                "scene_id": f"standard-ee-00000-v{v}",
                "object_b": "frisbee",
                "attribute_a": attr,
                "attribute_a_kind": "state" if attr else None,
                "attribute_a_contrast": None,
                "variant": v,
            }
        )
    return pl.DataFrame(rows, schema=SCENE_SCHEMA)


def test_repeated_variants_are_skipped_deterministically():
    # a dog with two mined states and a dog with none: v2 and v3 ask for "a dog and a frisbee" once more than v1
    scenes = _variants(["black", None, None, "black"])
    df = make_prompts(scenes, seed=42, style_tags=[], images_per_scene=2)
    assert df["scene_id"].unique(maintain_order=True).to_list() == ["standard-ee-00000-v0", "standard-ee-00000-v1"]
    assert df["prompt"].unique(maintain_order=True).to_list() == ["a black dog and a frisbee", "a dog and a frisbee"]
    # the lowest variant of each prompt stays whatever the table's order; shards are still round-robin
    again = make_prompts(scenes.reverse(), seed=42, style_tags=[], images_per_scene=2)
    assert set(again["image_id"]) == set(df["image_id"]) and again["shard"].to_list() == ["000"] * 4
    # a part template without attribute slots makes every variant of a pair the same prompt: one is drawn
    plain = make_prompts(scenes, seed=42, style_tags=[], templates={"part": "a {object}"})
    assert plain["scene_id"].to_list() == ["standard-ee-00000-v0"]
    # the same prompt in another distribution is another list (ODE keeps one set of prompts per list)
    other = scenes.with_columns(pl.lit("random").alias("distribution"), ("r" + pl.col("scene_id")).alias("scene_id"))
    assert make_prompts(pl.concat([scenes, other]), seed=42, style_tags=[]).height == 4


def test_paper_size_scenes_lose_only_their_repeated_variants():
    from halluflow.ode.graph import build_graph
    from halluflow.ode.sampling import sample_scenes

    nodes, edges = build_graph({"format": "seed"})
    sizes = {
        d: {"entity_entity": 40, "entity_environment": 40} for d in ("standard", "long_tail", "random", "fictional")
    }
    scenes = sample_scenes(nodes, edges, sizes, seed=42, variants=2)
    prompts = make_prompts(scenes, seed=42)
    # every pair keeps at least one variant and no two kept variants of a pair share a prompt
    kept = scenes.filter(pl.col("scene_id").is_in(prompts["scene_id"].to_list()))
    assert kept.select("distribution", "pair_kind", "object_a", "object_b").n_unique() == 320
    assert (
        prompts.join(kept, on="scene_id").select("distribution", "object_a", "object_b", "prompt").is_duplicated().sum()
        == 0
    )
    # the skipped ones are exactly the variants whose attributes repeat the pair's first (seed 42: 24 of 320 pairs)
    attrs = ["attribute_a", "attribute_a_kind", "attribute_b", "attribute_b_kind"]
    pair = ["distribution", "pair_kind", "object_a", "object_b"]
    repeats = scenes.filter(pl.struct(pair + attrs).is_duplicated() & (pl.col("variant") == 1))
    assert repeats.height > 0 and scenes.height - prompts.height == repeats.height
    assert not set(repeats["scene_id"]) & set(prompts["scene_id"])
