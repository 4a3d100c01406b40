"""Concept graph: hand-checkable co-occurrence counts per format, and conformance with ODE's released graph."""

from __future__ import annotations

import csv
import json

import networkx as nx
import polars as pl
import pytest
from helpers import shared_data

from halluflow.errors import InputError
from halluflow.ode.graph import (
    Annotations,
    build_graph,
    build_tables,
    read_amber,
    read_coco,
    read_seed,
    read_table,
    read_visual_genome,
    write_graph,
    write_seed,
)

ENVS = {"sky", "grass"}


def _edges(df):
    return {(s, t): w for s, t, w in df.iter_rows()}


def test_weight_counts_each_image_once_per_pair():
    # image 1 lists dog twice: dog-sky still counts 1 for that image.
    ann = Annotations(images=[["dog", "dog", "sky"], ["dog", "sky", "cat"], ["cat"]])
    nodes, edges = build_tables(ann, ENVS)
    assert _edges(edges) == {("dog", "sky"): 2, ("cat", "dog"): 1, ("cat", "sky"): 1}
    assert dict(zip(nodes["node"], nodes["frequency"])) == {"cat": 2, "dog": 2, "sky": 2}
    assert dict(zip(nodes["node"], nodes["type"])) == {"cat": "entity", "dog": "entity", "sky": "environment"}
    # edges sorted by weight then name; source < target
    assert edges.row(0) == ("dog", "sky", 2)
    assert all(s < t for s, t, _ in edges.iter_rows())


def test_ode_anchor_weighting_reproduces_2n_minus_1_and_self_loops():
    ann = Annotations(images=[["dog", "dog", "sky"], ["dog", "sky"]])
    _, edges = build_tables(ann, ENVS, weighting="ode_anchor")
    # ordered position pairs: image 1 gives dog-sky 4, dog-dog 2; image 2 dog-sky 2 -> minus one per edge
    assert _edges(edges) == {("dog", "sky"): 5, ("dog", "dog"): 1}
    with pytest.raises(InputError, match="weighting 'x'"):
        build_tables(ann, ENVS, weighting="x")


def test_amber_reader_mines_consecutive_attribute_pairs(tmp_path):
    ann_file = tmp_path / "annotations.json"
    ann_file.write_text(
        json.dumps(
            [
                {"id": 1, "type": "generative", "truth": ["dog", "grass"], "hallu": ["cat"]},
                {"id": 2, "type": "discriminative-attribute-state", "truth": "yes"},
            ]
        )
    )
    q = tmp_path / "attr.json"
    q.write_text(
        json.dumps(
            [
                {"id": 5, "image": "AMBER_1.jpg", "query": "Is the grass green in this image?"},
                {"id": 6, "image": "AMBER_1.jpg", "query": "Is the grass blue in this image?"},
                {
                    "id": 7,
                    "image": "AMBER_1.jpg",
                    "query": "Does the dog ride a bike in this image?",
                },  # multi-word: skipped
                {"id": 8, "image": "AMBER_1.jpg", "query": "Does the dog run in this image?"},
                {"id": 9, "image": "AMBER_1.jpg", "query": "Does the dog sit in this image?"},
                {"id": 10, "image": "AMBER_1.jpg", "query": "Is there one dog in this image?"},
            ]
        )
    )
    nodes, edges = build_tables(read_amber(ann_file, q), ENVS)
    rows = {r["node"]: r for r in nodes.iter_rows(named=True)}
    assert rows["grass"]["state_pairs"] == ["green/blue"] and rows["grass"]["states"] == ["green"]
    assert rows["dog"]["action_pairs"] == ["run/sit"] and rows["dog"]["actions"] == ["run"]
    assert _edges(edges) == {("dog", "grass"): 1}


def test_coco_vg_and_table_readers(tmp_path):
    coco = tmp_path / "instances.json"
    coco.write_text(
        json.dumps(
            {
                "images": [{"id": 1}, {"id": 2}],
                "categories": [{"id": 1, "name": "dog"}, {"id": 2, "name": "frisbee"}],
                "annotations": [
                    {"image_id": 1, "category_id": 1},
                    {"image_id": 1, "category_id": 2},
                    {"image_id": 1, "category_id": 1},
                    {"image_id": 2, "category_id": 1},
                ],
            }
        )
    )
    _, edges = build_tables(read_coco(coco), ENVS)
    assert _edges(edges) == {("dog", "frisbee"): 1}

    vg = tmp_path / "objects.json"
    vg.write_text(
        json.dumps(
            [
                {"image_id": 1, "objects": [{"names": ["Man"]}, {"names": ["horse"]}]},
                {"image_id": 2, "objects": [{"names": ["man"]}, {"names": ["horse"]}]},
            ]
        )
    )
    attrs = tmp_path / "attributes.json"
    attrs.write_text(
        json.dumps([{"image_id": 1, "attributes": [{"names": ["horse"], "attributes": ["brown", "very tall"]}]}])
    )
    nodes, edges = build_tables(read_visual_genome(vg, attrs), ENVS)
    assert _edges(edges) == {("horse", "man"): 2}
    assert nodes.filter(pl.col("node") == "horse")["states"].to_list() == [["brown"]]

    long = tmp_path / "objects.csv"
    long.write_text("image_id,object\na,dog\na,sky\nb,dog\n")
    assert _edges(build_tables(read_table(long), ENVS)[1]) == {("dog", "sky"): 1}
    wide = tmp_path / "objects.tsv"
    wide.write_text("img\tobjs\n1\tdog;sky;cat\n2\tcat;sky\n")
    assert _edges(build_tables(read_table(wide, "img", "objs"), ENVS)[1]) == {
        ("cat", "sky"): 2,
        ("dog", "sky"): 1,
        ("cat", "dog"): 1,
    }
    with pytest.raises(InputError, match="objects.tsv: column 'image_id' not found"):
        read_table(wide)


def test_bad_inputs_name_the_file(tmp_path):
    bad = tmp_path / "a.json"
    bad.write_text('{"annotations": []}')
    with pytest.raises(InputError, match="lacks 'categories'"):
        read_coco(bad)
    with pytest.raises(InputError, match="not found"):
        build_graph({"format": "amber", "path": str(tmp_path / "missing.json")})
    with pytest.raises(InputError, match="needs 'path'"):
        build_graph({"format": "coco"})


def test_seed_roundtrip_and_graphml(tmp_path):
    ann = Annotations(images=[["dog", "sky"], ["dog", "sky", "cat"]], state_pairs={"dog": [("black", "white")]})
    nodes, edges = build_tables(ann, ENVS)
    write_seed(nodes, edges, tmp_path / "seed")
    n2, e2 = read_seed(tmp_path / "seed")
    assert n2.equals(nodes) and e2.equals(edges)
    write_graph(nodes, edges, tmp_path / "g")
    g = nx.read_graphml(tmp_path / "g" / "graph.graphml")
    assert g["dog"]["sky"]["weight"] == 2 and g.nodes["sky"]["type"] == "environment"


def test_shipped_seed_is_the_default_graph():
    nodes, edges = build_graph({"format": "seed"})
    assert (nodes.height, edges.height) == (315, 4353)
    assert edges.row(0) == ("cloud", "sky", 224)


def _ode_tables():
    folder = shared_data("ode-iridescent-y")
    with open(folder / "ode_graph_T_edges.tsv") as fh:
        ode_edges = {tuple(sorted((r["a"], r["b"]))): int(r["frequency"]) for r in csv.DictReader(fh, delimiter="\t")}
    with open(folder / "ode_graph_T_nodes.tsv") as fh:
        ode_nodes = {r["node"]: r for r in csv.DictReader(fh, delimiter="\t")}
    return ode_nodes, ode_edges


def test_conformance_with_odes_released_graph():
    amber = shared_data("amber", "data")
    ode_nodes, ode_edges = _ode_tables()
    source = {
        "format": "amber",
        "path": str(amber / "annotations.json"),
        "attribute_queries": str(amber / "query" / "query_discriminative-attribute.json"),
    }
    nodes, edges = build_graph(source, weighting="ode_anchor")
    # ODE's own numbers: 315 nodes, 4,364 edges, sky-cloud 447 -- every edge weight identical
    assert nodes.height == 315 and edges.height == 4364
    assert _edges(edges) == ode_edges
    assert _edges(edges)[("cloud", "sky")] == 447
    for r in nodes.iter_rows(named=True):
        ode = ode_nodes[r["node"]]
        assert ";".join(r["state_pairs"]) == ode["state_pairs"], r["node"]
        assert ";".join(r["action_pairs"]) == ode["action_pairs"], r["node"]
        assert ode["type"] in (r["type"], "virtual"), r["node"]
    # paper weighting: images in which both occur; for pairs without repeats ODE's weight is 2 * images - 1
    nodes_p, edges_p = build_graph(source)
    paper = _edges(edges_p)
    assert len(paper) == 4353 and paper[("cloud", "sky")] == 224
    assert sum(2 * paper[k] - 1 == v for k, v in ode_edges.items() if k in paper) == 4283
    # the shipped seed is exactly this graph
    seed_nodes, seed_edges = build_graph({"format": "seed"})
    assert seed_edges.equals(edges_p) and seed_nodes.equals(nodes_p)


def test_cli_builds_graph_from_a_table(tmp_path, capsys):
    from halluflow.cli import main

    table = tmp_path / "objs.tsv"
    table.write_text("img\tobjs\n1\tdog;sky\n2\tdog;sky;cat\n")
    assert (
        main(
            [
                "graph",
                "build",
                "--format",
                "table",
                "--path",
                str(table),
                "--image-column",
                "img",
                "--object-column",
                "objs",
                "--out",
                str(tmp_path / "g"),
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out) == {
        "nodes": 3,
        "edges": 3,
        "hallu_edges": 0,
        "top_edge": {"source": "dog", "target": "sky", "weight": 2},
    }
    assert pl.read_parquet(tmp_path / "g" / "edges.parquet").height == 3
    assert main(["graph", "build", "--format", "coco"]) == 1  # no --path: one-line error, non-zero exit


def test_shipped_seed_regenerates_byte_identically(tmp_path, repo):
    from halluflow.cli import main

    amber = shared_data("amber", "data")
    assert (
        main(
            [
                "graph",
                "build",
                "--format",
                "amber",
                "--path",
                str(amber / "annotations.json"),
                "--attribute-queries",
                str(amber / "query" / "query_discriminative-attribute.json"),
                "--seed-out",
                str(tmp_path),
            ]
        )
        == 0
    )
    for name in ("nodes.tsv", "edges.tsv", "hallu_edges.tsv"):
        assert (tmp_path / name).read_bytes() == (repo / "resources" / "graph_seed" / name).read_bytes()


def test_extra_sources_merge_and_add_up(tmp_path):
    from halluflow.ode.graph import build_graph_from_config

    table = tmp_path / "traffic.csv"
    table.write_text("image_id,object\n1,car\n1,sky\n2,car\n2,cloud\n")
    nodes, edges = build_graph_from_config(
        {
            "source": {"format": "seed"},
            "environments": None,
            "weighting": "images",
            "extra_sources": [{"format": "table", "path": str(table)}],
        }
    )
    weight = {(s, t): w for s, t, w in edges.iter_rows()}
    seed_nodes, seed_edges = build_graph({"format": "seed"})
    seed_w = {(s, t): w for s, t, w in seed_edges.iter_rows()}
    # each table image adds one to its pair: car-sky (image 1), car-cloud (image 2); other edges unchanged
    assert weight[("car", "sky")] == seed_w.get(("car", "sky"), 0) + 1
    assert weight[("car", "cloud")] == seed_w.get(("car", "cloud"), 0) + 1
    # the config's graph also corrects or drops misspelt words (resources/vocab/spelling.tsv): seegull -> seagull,
    # earing -> earring, showerpuff -> shower puff; doghole and electrombile dropped with their edges
    from halluflow.ode.graph import correct_spelling

    seed_nodes, seed_edges, applied = correct_spelling(seed_nodes, seed_edges)
    seed_w = {(s, t): w for s, t, w in seed_edges.iter_rows()}
    assert applied == {"doghole": "", "earing": "earring", "electrombile": "", "seegull": "seagull",
                       "showerpuff": "shower puff"}  # fmt: skip
    assert not {"seegull", "doghole"} & set(nodes["node"]) and "seagull" in set(nodes["node"])
    assert weight[("cloud", "sky")] == 224 and len(weight) == len(seed_w | {("car", "sky"): 0, ("car", "cloud"): 0})
    seed_car = seed_nodes.filter(pl.col("node") == "car").row(0, named=True)
    car = nodes.filter(pl.col("node") == "car").row(0, named=True)
    assert car["frequency"] == seed_car["frequency"] + 2 and car["state_pairs"] == seed_car["state_pairs"]


def test_hallucination_graph_matches_odes_h_graph():
    from collections import Counter

    from halluflow.ode.graph import build_hallu_edges, hallu_graph

    ann = Annotations(images=[["sky", "dog", "dog"], ["dog"]], hallu=[["cat", "sky"], ["cat"]])
    assert {(s, t): w for s, t, w in build_hallu_edges(ann).iter_rows()} == {
        ("dog", "cat"): 2,
        ("dog", "sky"): 1,
        ("sky", "cat"): 1,
    }  # sky -> sky is no edge
    amber = shared_data("amber", "data")
    folder = shared_data("ode-iridescent-y")
    with open(folder / "ode_graph_H_edges.tsv") as fh:
        ode = {frozenset((r["a"], r["b"])): int(r["frequency"]) for r in csv.DictReader(fh, delimiter="\t")}
    directed = hallu_graph({"format": "amber", "path": str(amber / "annotations.json")}, "ode_anchor")
    undirected = Counter()
    for s, t, w in directed.iter_rows():
        undirected[frozenset((s, t))] += w  # ODE stores G_H in an undirected networkx graph
    assert len(ode) == 5391 and dict(undirected) == ode
    seed = hallu_graph({"format": "seed"})
    assert seed.equals(hallu_graph({"format": "amber", "path": str(amber / "annotations.json")}))
    assert seed.height == 6286 and hallu_graph({"format": "coco", "path": "x"}).height == 0
