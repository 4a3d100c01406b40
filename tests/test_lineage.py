"""`halluflow release diff` and the lineage helpers, on hand-made releases whose differences can be counted."""

from __future__ import annotations

import json

import polars as pl
import pytest
from helpers import make_lineage_release

from halluflow.cli import main
from halluflow.errors import InputError
from halluflow.ode.lineage import ancestor_pairs, diff_releases, lineage, pair_key


def test_diff_counts_by_hand(tmp_path, capsys):
    a = make_lineage_release(
        tmp_path,
        "a",
        [("standard", "dog", "frisbee"), ("standard", "car", "road"), ("fictional", "fish", "sky")],
        edges=[("dog", "frisbee", 5), ("car", "road", 9), ("fish", "water", 2)],
    )
    b = make_lineage_release(
        tmp_path,
        "b",
        [("standard", "frisbee", "dog"), ("standard", "cat", "sofa"), ("fictional", "fish", "desk")],
        edges=[("dog", "frisbee", 6), ("car", "road", 9), ("cat", "sofa", 4)],
        parent=a,
    )
    d = diff_releases(a, b)
    std = next(r for r in d["by_distribution"] if r["distribution"] == "standard")
    # dog|frisbee is the same pair whichever object comes first.
    assert (std["pairs_shared"], std["pairs_added"], std["pairs_removed"]) == (1, 1, 1)
    assert (std["concepts_added"], std["concepts_removed"]) == (2, 2)  # +cat +sofa, -car -road
    assert d["pairs"]["added"] == ["cat|sofa", "desk|fish"]
    assert d["graph"] == {"edges_a": 3, "edges_b": 3, "added": 1, "removed": 1, "reweighted": 1}
    assert d["queries"]["b"] == {"existence": 3, "generative": 1}
    assert d["lineage_b"] == ["a"]
    assert main(["release", "diff", str(a), str(b), "--out", str(tmp_path / "d.json")]) == 0
    out = capsys.readouterr().out
    assert "| standard | 2 | 2 | 1 | 1 | 1 | 2 | 2 |" in out and "1 reweighted" in out
    assert json.loads((tmp_path / "d.json").read_text())["pairs"]["removed"] == ["car|road", "fish|sky"]


def test_ancestor_pairs_follow_the_chain(tmp_path):
    a = make_lineage_release(tmp_path, "a", [("standard", "dog", "frisbee")])
    b = make_lineage_release(tmp_path, "b", [("standard", "cat", "sofa")], parent=a)
    assert [e["release"] for e in lineage(b)] == ["b", "a"]
    assert ancestor_pairs(b) == {pair_key("dog", "frisbee"), pair_key("sofa", "cat")}
    with pytest.raises(InputError, match="config key 'ode.lineage.parent'"):
        lineage(tmp_path / "nowhere")


def test_child_release_shares_no_pair_with_its_parent(tmp_path, capsys):
    """Two releases sampled from the shipped graph with the workflow's job function: the child names the parent,
    leaves out every pair the parent used, and `release diff` shows no shared pair."""
    import yaml
    from helpers import REPO

    from halluflow.config import validate_config
    from halluflow.ode.graph import read_seed
    from halluflow.ode.release import package_release
    from halluflow.workflow import ode as jobs

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    validate_config(config)
    sampling = dict(config["ode"]["sampling"])
    sampling["sizes"] = {
        d: {"entity_entity": 6, "entity_environment": 6} for d in ("standard", "long_tail", "random", "fictional")
    }
    nodes, edges = read_seed(REPO / "resources" / "graph_seed")
    nodes.write_parquet(tmp_path / "nodes.parquet")
    edges.write_parquet(tmp_path / "edges.parquet")

    def release(name, parent):
        scenes_path = tmp_path / name / "scenes.parquet"
        jobs.sample_scenes(
            str(tmp_path / "nodes.parquet"),
            str(tmp_path / "edges.parquet"),
            sampling,
            seed=7,
            scenes=str(scenes_path),
            lineage={"parent": parent, "exclude_ancestor_pairs": True},
        )
        scenes = pl.read_parquet(scenes_path)
        empty = pl.DataFrame(
            schema={
                "image_id": pl.String,
                "scene_id": pl.String,
                "path": pl.String,
                "distribution": pl.String,
                "pair_kind": pl.String,
            }
        )
        rel = tmp_path / name / "release"
        package_release(
            rel,
            root=tmp_path / name,
            accepted=empty,
            queries=pl.DataFrame(
                schema={
                    "query_id": pl.String,
                    "image_id": pl.String,
                    "query_type": pl.String,
                    "truth": pl.String,
                    "distribution": pl.String,
                    "pair_kind": pl.String,
                    "objects": pl.List(pl.String),
                }
            ),
            scenes=scenes,
            images=[],
            detections=[],
            config={},
            seed=7,
            name=name,
            parent=str(parent) if parent else None,
        )
        # The release keeps only scenes with accepted images; for the lineage test every sampled scene counts.
        scenes.write_parquet(rel / "scenes.parquet")
        return rel, scenes

    parent, p_scenes = release("r1", None)
    child, c_scenes = release("r2", parent)
    same_seed_twin, _ = release("r3", None)
    pairs = lambda df: {pair_key(a, b) for a, b in df.select("object_a", "object_b").iter_rows()}  # noqa: E731
    assert pairs(p_scenes) and pairs(c_scenes)
    assert not pairs(p_scenes) & pairs(c_scenes)
    assert pairs(p_scenes) == release_pairs_of(same_seed_twin)  # same seed, no parent: the same pairs again
    manifest = json.loads((child / "manifest.json").read_text())
    assert manifest["lineage"]["parent"] == "r1" and [a["release"] for a in manifest["lineage"]["ancestors"]] == ["r1"]
    d = diff_releases(parent, child)
    assert d["pairs"]["shared"] == [] and all(r["pairs_shared"] == 0 for r in d["by_distribution"])


def release_pairs_of(rel):
    from halluflow.ode.lineage import release_pairs

    return release_pairs(rel)


def test_lineage_holds_when_ancestor_folders_move_or_vanish(tmp_path):
    """The failing example: the grandparent's folder moved, and the exclusion set shrank to the parent's pairs
    without a word. The manifest now carries every ancestor's pair list, so only the parent's folder is read."""
    a = make_lineage_release(tmp_path, "a", [("standard", "dog", "frisbee"), ("random", "car", "road")])
    b = make_lineage_release(tmp_path, "b", [("standard", "cat", "sofa")], parent=a)
    c = make_lineage_release(tmp_path, "c", [("standard", "bus", "stop")], parent=b)
    full = {"dog|frisbee", "car|road", "cat|sofa", "bus|stop"}
    assert ancestor_pairs(c) == full
    entry = lineage(c)[2]
    assert entry["release"] == "a" and entry["pairs"] == ["car|road", "dog|frisbee"] and entry["n_pairs"] == 2
    (tmp_path / "a").rename(tmp_path / "moved-a")
    assert ancestor_pairs(c) == full  # was {"cat|sofa", "bus|stop"} when ancestors were read from disk
    import shutil

    shutil.rmtree(tmp_path / "moved-a")
    assert ancestor_pairs(c) == full


def test_an_old_manifest_without_pair_lists_reads_the_folder_or_says_it_is_gone(tmp_path):
    a = make_lineage_release(tmp_path, "a", [("standard", "dog", "frisbee")])
    b = make_lineage_release(tmp_path, "b", [("standard", "cat", "sofa")], parent=a)
    # a manifest written before the pair lists: ancestors with n_pairs only
    manifest = json.loads((b / "manifest.json").read_text())
    for e in manifest["lineage"]["ancestors"]:
        del e["pairs"]
    (b / "manifest.json").write_text(json.dumps(manifest))
    c = make_lineage_release(tmp_path, "c", [("standard", "bus", "stop")], parent=b)
    assert ancestor_pairs(c) == {"dog|frisbee", "cat|sofa", "bus|stop"}
    # the child's manifest carries the pairs read from the old ancestor's folder: later moves no longer matter
    assert json.loads((c / "manifest.json").read_text())["lineage"]["ancestors"][1]["pairs"] == ["dog|frisbee"]
    (tmp_path / "a").rename(tmp_path / "moved-a")
    with pytest.raises(InputError) as err:
        lineage(b)
    message = str(err.value)
    assert "config key 'ode.lineage.parent'" in message and "ancestor 'a' is not at" in message
    assert "\n" not in message
    # an edited list that disagrees with its count is refused, not trusted
    m = json.loads((c / "manifest.json").read_text())
    m["lineage"]["ancestors"][0]["pairs"] = []
    (c / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(InputError, match="ancestor 'b' lists 0 pairs but n_pairs 1"):
        lineage(c)


def _band_by_hand(edges, nodes, kind, n, band=4.0):
    """The graph's top band written out without the library: heaviest pairs of the kind, ceil(band * n) of them."""
    import math

    types = dict(zip(nodes["node"], nodes["type"]))
    want = {"entity_entity": ["entity", "entity"], "entity_environment": ["entity", "environment"]}[kind]
    weights = {}
    for s, t, w in edges.select("source", "target", "weight").iter_rows():
        if s != t and w > 0 and sorted([types[s], types[t]]) == want:
            weights["|".join(sorted([s, t]))] = max(weights.get("|".join(sorted([s, t])), 0), w)
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))
    return ranked[: max(n, math.ceil(band * n))], weights


def test_datacard_states_how_far_standard_drifted_over_generations(tmp_path):
    """Eight generations of exclude_ancestor_pairs on the shipped graph: Standard's median co-occurrence falls
    while the graph's top band stays, and each DATACARD says both numbers (they were never reported)."""
    import statistics

    import yaml
    from helpers import REPO

    from halluflow.config import validate_config
    from halluflow.ode.graph import read_seed
    from halluflow.ode.release import package_release
    from halluflow.workflow import ode as jobs

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    validate_config(config)
    nodes, edges = read_seed(REPO / "resources" / "graph_seed")
    nodes.write_parquet(tmp_path / "nodes.parquet")
    edges.write_parquet(tmp_path / "edges.parquet")
    empty = pl.DataFrame(schema={"image_id": pl.String, "scene_id": pl.String, "path": pl.String})
    queries = pl.DataFrame(schema={"query_id": pl.String, "image_id": pl.String, "query_type": pl.String})
    parent, medians, used = None, [], []
    for g in range(9):
        scenes_path = tmp_path / f"g{g}" / "scenes.parquet"
        jobs.sample_scenes(
            str(tmp_path / "nodes.parquet"),
            str(tmp_path / "edges.parquet"),
            config["ode"]["sampling"],
            seed=42,
            scenes=str(scenes_path),
            lineage={"parent": parent, "exclude_ancestor_pairs": True},
        )
        scenes = pl.read_parquet(scenes_path)
        rel = tmp_path / f"g{g}" / "release"
        manifest = package_release(
            rel,
            root=tmp_path / f"g{g}",
            accepted=empty.with_columns(pl.lit("standard").alias("distribution"), pl.lit("x").alias("pair_kind")),
            queries=queries,
            scenes=scenes,
            images=[],
            detections=[],
            config={"ode": config["ode"]},
            seed=42,
            name=f"g{g}",
            parent=str(parent) if parent else None,
            graph=(nodes, edges),
        )
        scenes.write_parquet(rel / "scenes.parquet")  # every sampled pair counts for the next generation
        drift = {d["pair_kind"]: d for d in manifest["lineage"]["standard_drift"]}["entity_entity"]
        # the same numbers by hand
        std = scenes.filter((pl.col("distribution") == "standard") & (pl.col("pair_kind") == "entity_entity"))
        mine = {"|".join(sorted(p)) for p in std.select("object_a", "object_b").iter_rows()}
        band, weights = _band_by_hand(edges, nodes, "entity_entity", len(mine))
        assert drift["n_pairs"] == len(mine) and drift["band_size"] == len(band)
        assert drift["median_weight"] == statistics.median(weights[p] for p in mine)
        assert drift["band_median_weight"] == statistics.median(w for _, w in band)
        before = set()
        for a in manifest["lineage"]["ancestors"]:
            before |= set(a["pairs"])
        assert drift["band_used_by_ancestors"] == sum(p in before for p, _ in band)
        card = (rel / "DATACARD.md").read_text()
        assert (
            f"Standard entity-entity: {len(mine)} pairs, median co-occurrence {drift['median_weight']:g}" in card
            and f"against {drift['band_median_weight']:g} in the graph's top band of {len(band)} pairs" in card
        ), card
        medians.append((drift["median_weight"], drift["band_median_weight"], drift["median_rank"]))
        used.append(drift["band_used_by_ancestors"])
        parent = rel
    # the band's pairs get used up and Standard slides down the ranking: on the shipped graph with the default
    # sizes, entity-entity median co-occurrence 33 (rank 3) in generation 0, 17 (rank 13.5) in generation 8,
    # against the top band's 28.5 throughout
    assert used == sorted(used) and used[0] == 0 and used[-1] >= 7
    (first, band, first_rank), (last, _, last_rank) = medians[0], medians[-1]
    assert first >= band > last and last_rank > 3 * first_rank
    assert f"Parent g7 (chain g7 → g6 → g5 → g4 → g3 → g2 → g1 → g0); {len(before)} concept pairs" in card


def test_diff_counts_ids_that_name_different_content(tmp_path, capsys):
    """Positional ids (the old scheme) reused by a child for other images show up in `release diff`."""
    a = make_lineage_release(tmp_path, "a", [("standard", "dog", "frisbee")])
    b = make_lineage_release(tmp_path, "b", [("standard", "cat", "sofa")], parent=a)
    c = make_lineage_release(tmp_path, "c", [("standard", "bus", "stop")])
    for rel, rows in (
        (
            a,
            [
                ("q1", "Is there a dog in the picture?", "yes", "h1"),
                ("q2", "Please describe this picture.", None, "h1"),
            ],
        ),
        (
            b,
            [
                ("q1", "Is there a cat in the picture?", "yes", "h2"),
                ("q2", "Please describe this picture.", None, "h2"),
            ],
        ),
        (c, [("q9", "Is there a bus in the picture?", "yes", "h3")]),
    ):
        pl.DataFrame(rows, schema=["query_id", "question", "truth", "image_sha256"], orient="row").with_columns(
            pl.lit("existence").alias("query_type")
        ).write_parquet(rel / "queries.parquet")
    d = diff_releases(a, b)
    assert d["query_ids"] == {
        "shared": 2,
        "shared_with_different_content": 2,  # q1: other question and image; q2: same prompt, other image
        "compared": ["question", "truth", "image_sha256"],
    }
    assert d["b_descends_from_a"] is True and diff_releases(a, c)["b_descends_from_a"] is False
    assert diff_releases(a, c)["query_ids"]["shared"] == 0
    assert main(["release", "diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "Query ids in both: 2, 2 of them naming different content (question, truth, image_sha256)." in out
    assert "B descends from A (A's manifest is in B's lineage)." in out
