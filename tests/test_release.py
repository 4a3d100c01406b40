"""Release packaging: deterministic manifest, DATACARD stand-in warning, and `halluflow release verify`."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import polars as pl
import pytest
from helpers import write_synthesized_images
from PIL import Image

from halluflow.cli import main
from halluflow.errors import InputError
from halluflow.io import sha256_bytes
from halluflow.ode.release import package_release, verify_release


def _png(colour) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def stage(tmp_path):
    """A results/<release> folder with two synthesized images, one of them accepted."""
    root = tmp_path / "results"
    pngs = {"a-i00": _png((255, 0, 0)), "b-i00": _png((0, 0, 255))}
    images = write_synthesized_images(root, pngs, ["a", "b"], revision="r1")
    detections = pl.DataFrame(
        {
            "image_id": ["a-i00"],
            "label": ["dog"],
            "score": [0.9],
            "model": ["tiny-owl"],
            "revision": [None],
            "stand_in": [True],
        }
    )
    accepted = pl.DataFrame(
        {
            "image_id": ["a-i00"],
            "scene_id": ["a"],
            "distribution": ["standard"],
            "pair_kind": ["entity_entity"],
            "path": ["images/000/a-i00.png"],
        }
    )
    scenes = pl.DataFrame(
        {
            "scene_id": ["a", "b"],
            "distribution": ["standard", "random"],
            "pair_kind": ["entity_entity", "entity_entity"],
        }
    )
    queries = pl.DataFrame(
        {
            "query_id": ["q2", "q1"],
            "image_id": ["a-i00", "a-i00"],
            "distribution": ["standard"] * 2,
            "pair_kind": ["entity_entity"] * 2,
            "query_type": ["existence", "generative"],
            "question": ["Is there a dog in the picture?", "Please describe this picture."],
            "truth": ["yes", None],
            "objects": [["dog", "cat"], ["dog", "cat"]],
        }
    )
    rejected = pl.DataFrame({"image_id": ["b-i00"], "reason": ["object_a 'cup' max score 0.100 < keep threshold 0.65"]})
    kwargs = dict(
        root=root,
        accepted=accepted,
        rejected=rejected,
        queries=queries,
        scenes=scenes,
        images=[images],
        detections=[detections],
        config={"release": "t", "seed": 7, "ode": {"filter": {"keep_threshold": 0.0, "exclusion_threshold": 0.6}}},
        seed=7,
        name="t",
    )
    return tmp_path, kwargs


def test_release_contents_and_determinism(stage):
    tmp, kwargs = stage
    m1 = package_release(tmp / "one" / "release", **kwargs)
    m2 = package_release(tmp / "two" / "release", **kwargs)
    one, two = tmp / "one" / "release", tmp / "two" / "release"
    assert (one / "manifest.json").read_bytes() == (two / "manifest.json").read_bytes()
    assert sorted(m1["files"]) == [
        "DATACARD.md",
        "README.md",
        "images/a-i00.png",
        "metadata.jsonl",
        "queries.jsonl",
        "queries.parquet",
        "scenes.parquet",
    ]
    assert m1 == m2 and m1["stand_ins_used"] is True
    assert {(m["role"], m["model"]) for m in m1["models"]} == {("synthesizer", "tiny-flux"), ("detector", "tiny-owl")}
    assert str(tmp) not in (one / "manifest.json").read_text()  # no absolute paths
    assert (one / "images" / "a-i00.png").read_bytes() == (tmp / "results/images/000/a-i00.png").read_bytes()
    assert pl.read_parquet(one / "scenes.parquet")["scene_id"].to_list() == ["a"]
    lines = [json.loads(x) for x in (one / "queries.jsonl").read_text().splitlines()]
    assert [x["query_id"] for x in lines] == ["q1", "q2"]
    card = (one / "DATACARD.md").read_text()
    assert "STAND-IN" in card and "| standard | entity_entity | 1 | 2 |" in card
    assert "keep threshold 0.0: every image is kept whatever the detector scores, so images were NOT checked" in card
    assert "- images rejected by the detector filter: 1\n  - object_a below keep threshold: 1" in card
    assert m1["counts"]["by_query_type"] == [
        {"query_type": "existence", "yes": 1, "no": 0, "open": 0},
        {"query_type": "generative", "yes": 0, "no": 0, "open": 1},
    ]
    assert verify_release(one) == []
    assert not list(tmp.glob("one/.release*"))  # the build folder was renamed into place


def test_altered_image_fails_packaging(stage):
    tmp, kwargs = stage
    (tmp / "results/images/000/a-i00.png").write_bytes(_png((0, 255, 0)))
    with pytest.raises(InputError, match="a-i00: images/000/a-i00.png does not match the sha256"):
        package_release(tmp / "r", **kwargs)
    assert not (tmp / "r").exists()


def test_verify_cli_names_each_problem(stage, capsys):
    tmp, kwargs = stage
    rel = tmp / "release"
    package_release(rel, **kwargs)
    assert main(["release", "verify", str(rel)]) == 0
    assert capsys.readouterr().out.startswith("ok: 7 files")
    data = bytearray((rel / "images" / "a-i00.png").read_bytes())
    data[20] ^= 0x01  # flip one bit of one image
    (rel / "images" / "a-i00.png").write_bytes(bytes(data))
    (rel / "notes.txt").write_text("extra")
    (rel / "queries.jsonl").unlink()
    assert main(["release", "verify", str(rel)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "images/a-i00.png: sha256 differs from manifest",
        "queries.jsonl: missing",
        "notes.txt: not listed in manifest",
    ]


def test_verify_as_installed_command(stage):
    tmp, kwargs = stage
    rel = tmp / "release"
    package_release(rel, **kwargs)
    (rel / "scenes.parquet").write_bytes(b"x")
    proc = subprocess.run(
        [sys.executable, "-m", "halluflow.cli", "release", "verify", str(rel)], capture_output=True, text=True
    )
    assert proc.returncode == 1 and proc.stdout.strip() == "scenes.parquet: sha256 differs from manifest"
    assert verify_release(tmp / "nowhere") == [f"{tmp / 'nowhere'}: not a folder"]
    (rel / "manifest.json").write_text("{")
    assert "not valid JSON" in verify_release(rel)[0]


def test_rejections_of_regeneration_rounds_are_counted_per_attempt():
    from halluflow.ode.release import rejection_kind

    assert rejection_kind("attempt 2: object_a 'dog' max score 0.100 < keep threshold 0.65") == (
        "object_a below keep threshold (attempt 2)"
    )
    assert rejection_kind("object_b 'cat' max score 0.1 < keep threshold 0.65; image file x missing") == (
        "object_b below keep threshold + image file missing"
    )


def test_a_failed_repackaging_leaves_the_old_release_whole(stage):
    """Finished work is never deleted before its replacement is complete: the old release (manifest.json included)
    survives a packaging that fails half-way, and a successful one leaves no set-aside copy behind."""
    tmp, kwargs = stage
    rel = tmp / "r" / "release"
    package_release(rel, **kwargs)
    before = {p.relative_to(rel).as_posix(): p.read_bytes() for p in rel.rglob("*") if p.is_file()}
    (tmp / "results/images/000/a-i00.png").write_bytes(_png((0, 255, 0)))  # fails at the image check
    with pytest.raises(InputError, match="does not match the sha256"):
        package_release(rel, **kwargs)
    assert {p.relative_to(rel).as_posix(): p.read_bytes() for p in rel.rglob("*") if p.is_file()} == before
    assert verify_release(rel) == [] and sorted(p.name for p in (tmp / "r").iterdir()) == ["release"]
    (tmp / "results/images/000/a-i00.png").write_bytes(_png((255, 0, 0)))
    package_release(rel, **kwargs)
    assert verify_release(rel) == [] and sorted(p.name for p in (tmp / "r").iterdir()) == ["release"]


def test_a_release_name_with_a_path_is_refused_before_anything_is_written(stage):
    tmp, kwargs = stage
    with pytest.raises(InputError, match="release name '../x': not a plain file name"):
        package_release(tmp / "r" / "release", **{**kwargs, "name": "../x"})
    assert not (tmp / "r").exists()


def _make_queries_job(tmp_path, root, images, out, release):
    """The workflow's make_queries job on a release built by `_parent_and_child` (graph files in tmp_path)."""
    import yaml
    from helpers import REPO

    from halluflow.workflow import release as jobs

    jobs.make_queries(
        accepted=str(root / "accepted.parquet"),
        scenes=str(root / "scenes" / "scenes.parquet"),
        nodes=str(tmp_path / "nodes.parquet"),
        edges=str(tmp_path / "edges.parquet"),
        hallu=str(tmp_path / "hallu.parquet"),
        settings=yaml.safe_load((REPO / "config.yaml").read_text())["ode"]["queries"],
        seed=42,
        queries=str(out),
        images=[str(p) for p in images],
        release=release,
    )


def _parent_and_child(tmp_path):
    """A parent and a child release built with the workflow's job functions on the shipped graph: the child names
    the parent. Every image of the child has the same positional id as one of the parent's and, as a stand-in that
    ignores its prompt would make, the very same bytes: only the release identity can tell their queries apart."""
    import yaml
    from helpers import REPO

    from halluflow.config import validate_config
    from halluflow.ode.graph import hallu_graph, read_seed
    from halluflow.workflow import ode as jobs

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    validate_config(config)
    nodes, edges = read_seed(REPO / "resources" / "graph_seed")
    nodes.write_parquet(tmp_path / "nodes.parquet")
    edges.write_parquet(tmp_path / "edges.parquet")
    hallu_graph({"format": "seed"}).write_parquet(tmp_path / "hallu.parquet")
    out, parent = {}, None
    for name in ("rel-a", "rel-b"):
        root = tmp_path / name
        jobs.sample_scenes(
            str(tmp_path / "nodes.parquet"),
            str(tmp_path / "edges.parquet"),
            config["ode"]["sampling"],
            seed=42,
            scenes=str(root / "scenes" / "scenes.parquet"),
            lineage={"parent": parent, "exclude_ancestor_pairs": True},
        )
        scenes = pl.read_parquet(root / "scenes" / "scenes.parquet")
        ids = [f"{s}-i00" for s in scenes["scene_id"]]
        paths = [f"images/000/{i}.png" for i in ids]
        for k, path in enumerate(paths):
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(_png((k * 7 % 256, 40, 90)))  # the same bytes in both releases
        images = pl.DataFrame(
            {
                "image_id": ids,
                "scene_id": scenes["scene_id"],
                "path": paths,
                "sha256": [sha256_bytes((root / p).read_bytes()) for p in paths],
                "model": "tiny-flux",
                "revision": None,
                "stand_in": True,
            }
        )
        images.write_parquet(root / "images" / "000.parquet")
        accepted = images.select("image_id", "scene_id", "path").join(
            scenes.select("scene_id", "distribution", "pair_kind", "object_a"), on="scene_id"
        )
        accepted = accepted.with_columns(
            pl.concat_list("object_a").alias("detected"), pl.lit(1).alias("count_a"), pl.lit(1).alias("count_b")
        ).drop("object_a")
        accepted.write_parquet(root / "accepted.parquet")
        _make_queries_job(tmp_path, root, [root / "images" / "000.parquet"], root / "queries.parquet", name)
        manifest = package_release(
            root / "release",
            root=root,
            accepted=accepted,
            queries=pl.read_parquet(root / "queries.parquet"),
            scenes=scenes,
            images=[images],
            detections=[],
            config={"ode": config["ode"]},
            seed=42,
            name=name,
            parent=str(parent) if parent else None,
            graph=(nodes, edges),
        )
        out[name] = (root / "release", pl.read_parquet(root / "release" / "queries.parquet"), manifest)
        parent = root / "release"
    return out


def test_parent_and_child_share_no_query_id_and_compare_refuses_them(tmp_path, capsys):
    from halluflow.ode.queries import query_id
    from halluflow.ode.scoring import score_answers

    rel = _parent_and_child(tmp_path)
    (_, qa, _), (child, qb, mb) = rel["rel-a"], rel["rel-b"]
    assert mb["lineage"]["parent"] == "rel-a" and mb["ids"]["content_addressed"] is True
    assert mb["ids"]["release_identity"] == "rel-b/seed=42" and verify_release(child) == []
    shared_positions = set(qa["image_id"]) & set(qb["image_id"])
    assert len(shared_positions) == qb["image_id"].n_unique()  # every child image id is also a parent image id
    # the failing example: ids of (image id, question) repeat for different content across the two releases
    old = lambda q: {query_id(i, t) for i, t in q.select("image_id", "question").iter_rows()}  # noqa: E731
    assert len(old(qa) & old(qb)) >= len(shared_positions)  # at least every image's "Please describe ..." prompt
    assert not set(qa["query_id"]) & set(qb["query_id"])
    # the ids are what the manifest says they are: recomputed from each row
    for q, name in ((qa, "rel-a"), (qb, "rel-b")):
        assert q["query_id"].n_unique() == q.height
        again = [
            query_id(i, t, h, f"{name}/seed=42")
            for i, t, h in q.select("image_id", "question", "image_sha256").iter_rows()
        ]
        assert again == q["query_id"].to_list()
    # other bytes under the same release and image id: another id
    row = qa.row(0, named=True)
    assert query_id(row["image_id"], row["question"], "0" * 64, "rel-a/seed=42") != row["query_id"]
    card = (child / "DATACARD.md").read_text()
    assert "Query ids are content-addressed" in card and "Parent rel-a (chain rel-a)" in card
    capsys.readouterr()
    assert main(["release", "diff", str(rel["rel-a"][0]), str(child)]) == 0
    out = capsys.readouterr().out
    assert "Query ids in both: 0, 0 of them naming different content" in out and "B descends from A" in out

    def scores(queries, model, flip_every=0):
        answers = pl.DataFrame(
            {
                "query_id": queries["query_id"],
                "model": model,
                "answer": [
                    ("No" if t == "yes" else "Yes") if flip_every and k % flip_every == 0 else (t or "A dog.")
                    for k, t in enumerate(queries["truth"].to_list())
                ],
                "status": "ok",
                "image_sha256": queries["image_sha256"],
            }
        )
        path = tmp_path / "scores" / model / "answers.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        score_answers(queries, answers, ["dog"]).write_parquet(path)
        return str(path)

    on_parent, on_child = scores(qa, "m-parent"), scores(qb, "m-child", flip_every=3)
    capsys.readouterr()
    assert main(["score", "compare", "--scores", on_parent, on_child, "--resamples", "50"]) == 1
    err = capsys.readouterr().err
    assert "m-child and m-parent answered different queries" in err and f"{qb.height} of {qb.height} ids" in err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    # two models on the same release pair fine; one whose images changed between answer runs does not
    second = scores(qa, "m-second", flip_every=3)
    assert main(["score", "compare", "--scores", on_parent, second, "--resamples", "50"]) == 0
    capsys.readouterr()
    changed = pl.read_parquet(second).with_columns(
        pl.when(pl.int_range(pl.len()) == 4)
        .then(pl.lit("f" * 64))
        .otherwise(pl.col("image_sha256"))
        .alias("image_sha256")
    )
    changed.write_parquet(second)
    assert main(["score", "compare", "--scores", on_parent, second, "--resamples", "50"]) == 1
    err = capsys.readouterr().err
    assert (
        "has image sha256" in err and "(1 such queries): not the same query, not paired" in err and err.count("\n") == 1
    )


def test_a_queries_table_of_another_release_is_not_packaged(tmp_path):
    rel = _parent_and_child(tmp_path)
    release_dir, queries, _ = rel["rel-a"]
    accepted = pl.read_parquet(tmp_path / "rel-a" / "accepted.parquet")
    images = pl.read_parquet(tmp_path / "rel-a" / "images" / "000.parquet")
    with pytest.raises(InputError, match="is not the id of its row for release 'rel-c' seed 42"):
        package_release(
            tmp_path / "rel-c" / "release",
            root=tmp_path / "rel-a",
            accepted=accepted,
            queries=queries,
            scenes=pl.read_parquet(release_dir / "scenes.parquet"),
            images=[images],
            detections=[],
            config={},
            seed=42,
            name="rel-c",
        )
    assert not (tmp_path / "rel-c").exists()


def test_make_queries_job_refuses_an_accepted_image_without_a_hash(tmp_path):
    _parent_and_child(tmp_path)
    root = tmp_path / "rel-a"
    images = pl.read_parquet(root / "images" / "000.parquet")
    images.slice(1).write_parquet(tmp_path / "partial.parquet")
    with pytest.raises(InputError, match=f"accepted image {images['image_id'][0]} .* is in no image table"):
        _make_queries_job(tmp_path, root, [tmp_path / "partial.parquet"], tmp_path / "q.parquet", "rel-a")
    assert not (tmp_path / "q.parquet").exists()


def test_the_datacard_counts_no_questions_the_detector_did_not_check(stage):
    tmp, kwargs = stage
    detections = kwargs["detections"][0].with_columns(pl.lit(["dog", "cat", "ball", "cup"]).alias("vocabulary"))
    detections = pl.concat(
        [detections, detections.with_columns(pl.lit("Cup").alias("label"), pl.lit(0.7).alias("score"))]
    )
    no = ["ball", "cup", "bed"]  # ball: prompted, not seen; cup: seen at 0.7 >= 0.6; bed: never prompted
    queries = pl.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4"],
            "image_id": ["a-i00"] * 4,
            "distribution": ["standard"] * 4,
            "pair_kind": ["entity_entity"] * 4,
            "query_type": ["existence", "existence", "existence", "counterfactual"],
            "attribute_kind": [None] * 4,
            "question": [f"Is there a {o} in the picture?" for o in ["dog", *no]],
            "truth": ["yes", "no", "no", "no"],
            "target": ["dog", *no],
            "objects": [["dog", "cat"]] * 4,
        }
    )
    m = package_release(tmp / "r" / "release", **{**kwargs, "queries": queries, "detections": [detections]})
    assert m["counts"]["truths_not_checked"] == {"no_object_questions": 3, "not_checked": 2}
    card = (tmp / "r" / "release" / "DATACARD.md").read_text()
    assert "about an object the detector was not prompted with or saw: 2" in card
    # detection tables without a recorded vocabulary (made before it was): no claim either way
    old = package_release(tmp / "o" / "release", **{**kwargs, "queries": queries})
    assert old["counts"]["truths_not_checked"] is None
    assert "not prompted with" not in (tmp / "o" / "release" / "DATACARD.md").read_text()


def test_the_datacard_records_every_threshold_the_negative_prompts_the_domain_and_the_resources(stage, tmp_path):
    """What shaped a release, from its config and inputs: the wording of each keep threshold, whether the negative
    prompts reached the model, the domain, and the sha256 of every table the questions were built from."""
    from halluflow.config import question_resource_files, validate_config
    from halluflow.io import sha256_file

    tmp, kwargs = stage
    config = validate_config(
        {
            "ode": {
                "filter": {"keep_threshold": 0.2, "exclusion_threshold": 0.6},
                "domain": {"categories": ["vehicle"], "category_table": "coco"},
                "prompts": {"negative_prompt": {"entity_environment": ""}},
            },
            "detection": {"box_threshold": 0.1},
        }
    )
    sections = {k: config[k] for k in ("release", "seed", "shards", "ode", "synthesis", "detection")}
    resources = question_resource_files(config)  # the domain's category table shaped the scenes too
    # make_queries' report of what each meaning rule removed (queries/meaning.json)
    meaning = {
        "no_candidates_removed": {
            "graph_neighbour": {
                "stuff": 7,
                "scene": 1,
                "part": 0,
                "abstract": 2,
                "unknown": 0,
                "implied by the prompt": 3,
            }
        },
        "counterfactual_attributes_not_asked": 4,
        "spelling": {"corrected": {"seegull": "seagull"}, "dropped": ["doghole"]},
    }
    kwargs = {**kwargs, "config": sections, "resources": list(resources.values()), "meaning": meaning}
    manifest = package_release(tmp / "r" / "release", **kwargs)
    card = (tmp / "r" / "release" / "DATACARD.md").read_text()
    # what the labels mean: make_queries' report (this hand-made queries table has no question columns to count
    # from; tests/test_queries.py counts a paper-size table's)
    got = manifest["counts"]["meaning"]
    assert got["no_candidates_removed"] == meaning["no_candidates_removed"]
    assert "## What the labels mean" in card and "| graph_neighbour | 7 | 1 | 0 | 2 | 0 | 3 |" in card
    assert "- misspelt graph words (resources/vocab/spelling.tsv): 1 corrected (seegull -> seagull), 1 dropped" in card
    # ODE's code's 0.2 is a threshold, not "no check": fainter detections pass, the images were checked
    assert "keep threshold 0.2: an image is kept when the detector finds each of its objects with at least this" in card
    assert "below the paper's 0.65 (ODE's released code uses 0.2)" in card and "NOT checked" not in card
    assert "Exclusion threshold 0.6: an object detected at or above it is never asked as absent" in card
    assert "Detector box threshold 0.1: weaker boxes are not recorded; at most 50 boxes" in card
    assert "Count questions: boxes at or above the keep threshold (0.2)" in card
    # the tiny FLUX with true_cfg_scale unset drops the negative prompt; the entity+environment one is off
    assert "- Negative prompt, entity+entity: `(missing entity)(bad anatomy)(deformed)" in card
    assert "- Negative prompt, entity+environment: none" in card
    assert (
        "- Negative prompts with generator tiny-flux: DROPPED: a FLUX pipeline uses the negative prompt only when "
        "synthesis.true_cfg_scale > 1 (here unset)." in card
    )
    assert (
        "- Domain (`ode.domain`): categories vehicle (table coco); environments co-occurring with a kept entity kept."
        in card
    )
    # every question resource by its shipped name, with the sha256 of its bytes, in the card and the manifest
    for path in resources.values():
        name = "resources/" + path.split("resources/", 1)[1]
        assert manifest["resources"][name] == sha256_file(path)
        assert f"- `{name}`: {sha256_file(path)}" in card
    assert sorted(manifest["resources"]) == [
        "resources/caos/coco_synonyms.tsv",
        "resources/vocab/attribute_types.tsv",
        "resources/vocab/attribute_words.tsv",
        "resources/vocab/coco_supercategories.tsv",
        "resources/vocab/concepts.tsv",
        "resources/vocab/nouns.tsv",
        "resources/vocab/spelling.tsv",
    ]
    assert str(tmp) not in (tmp / "r" / "release" / "manifest.json").read_text()

    # FLUX with real CFG applies it; the paper's threshold is named as such; no domain = the whole graph
    sections["synthesis"] = {**sections["synthesis"], "true_cfg_scale": 1.5}
    sections["ode"] = {
        **sections["ode"],
        "domain": None,
        "filter": {**sections["ode"]["filter"], "keep_threshold": 0.65},
    }
    package_release(tmp / "p" / "release", **{**kwargs, "config": sections})
    card = (tmp / "p" / "release" / "DATACARD.md").read_text()
    assert "keep threshold 0.65 (the paper's): an image is kept" in card
    assert "generator tiny-flux: applied (FLUX with true_cfg_scale 1.5" in card
    assert "- Domain: the whole concept graph (`ode.domain` unset)." in card
    with pytest.raises(InputError, match="question resource .*missing.tsv: not found"):
        package_release(tmp / "x" / "release", **{**kwargs, "resources": [str(tmp_path / "missing.tsv")]})


# Which rules read each resource that shapes the questions (rules/*.smk inputs).
READERS = {
    "resources/vocab/nouns.tsv": {"sample_scenes", "make_prompts", "make_queries", "package_release"},
    "resources/vocab/attribute_words.tsv": {"sample_scenes", "make_queries", "package_release"},
    "resources/caos/coco_synonyms.tsv": {"make_prompts", "make_queries", "package_release", "score"},
    "resources/graph_seed/hallu_edges.tsv": {"build_graph", "package_release"},
    "resources/vocab/concepts.tsv": {"sample_scenes", "make_prompts", "make_queries", "package_release"},
    "resources/vocab/attribute_types.tsv": {"sample_scenes", "make_queries", "package_release"},
    "resources/vocab/spelling.tsv": {"build_graph", "package_release"},
}


@pytest.mark.slow  # 24 Snakemake dry runs of the whole DAG (about 4 minutes on a loaded two-core machine)
def test_editing_a_question_resource_reruns_the_steps_that_read_it(tmp_path):
    """Every output of a finished run present, then one resource edited: with only one rule allowed to run at a time
    (so a job is never planned because an earlier one would rerun), exactly the rules that read it are planned, each
    for that file."""
    import os
    import time

    from workflow_utils import copy_workflow, run_snakemake

    wf = copy_workflow(tmp_path / "wf")
    targets = ["results/ode-demo/release/manifest.json", "results/ode-demo/metrics/prior.json"]
    summary = run_snakemake(wf, "--summary", *targets).stdout.splitlines()[1:]
    now = time.time()
    for row in summary:
        out, _, _, logs, *_ = row.split("\t")
        for path in [out, *[p for p in logs.split(",") if p and p != "-"]]:
            (wf / path).parent.mkdir(parents=True, exist_ok=True)
            (wf / path).touch()
            os.utime(wf / path, (now, now))
    rules = sorted(set().union(*READERS.values()))

    def planned(rule):
        out = run_snakemake(wf, "-n", *targets, "--rerun-triggers", "mtime", "--allowed-rules", rule)
        return f"rule {rule}:" in out.stdout

    # a rule that does not read the file is planned for nothing, so equality also shows nothing else triggers it
    for resource, readers in READERS.items():
        os.utime(wf / resource, (now + 60, now + 60))
        assert {r for r in rules if planned(r)} == readers, resource
        os.utime(wf / resource, (now - 60, now - 60))


def test_a_stand_in_never_carries_a_hub_revision(stage):
    """The manifest and DATACARD record what was loaded: the stand-in synthesizer's image table still holds the
    revision its config pinned for the real model ("r1"), the release does not repeat it."""
    from halluflow.backends.base import BackendInfo

    tmp, kwargs = stage
    images = kwargs["images"][0]
    assert images["revision"].to_list() == ["r1", "r1"] and images["stand_in"].all()
    real = pl.DataFrame(
        {"image_id": ["a-i00"], "label": ["dog"], "score": [0.9], "model": ["IDEA/gdino"], "revision": ["abc123"]}
    ).with_columns(pl.lit(False).alias("stand_in"))
    manifest = package_release(tmp / "rel" / "release", **{**kwargs, "detections": [kwargs["detections"][0], real]})
    models = {(m["role"], m["model"]): m for m in manifest["models"]}
    assert models["synthesizer", "tiny-flux"]["revision"] is None
    assert models["detector", "IDEA/gdino"]["revision"] == "abc123"  # a real model keeps its revision
    card = (tmp / "rel" / "release" / "DATACARD.md").read_text()
    assert "r1" not in card.split("## Models")[1].split("##")[0]
    assert "- synthesizer: tiny-flux - STAND-IN (random weights built locally; no hub revision)" in card
    assert "- detector: IDEA/gdino (revision abc123)" in card
    # backends describe a stand-in without the config's revision
    info = BackendInfo(
        role="synthesizer", backend="diffusers", model="models/tiny-flux", revision="01aa605f", stand_in=True
    )
    assert info.revision is None and info.as_dict()["revision"] is None
    assert BackendInfo(role="detector", backend="t", model="m", revision="01aa605f").revision == "01aa605f"
