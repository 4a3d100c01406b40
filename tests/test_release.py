"""Release packaging: deterministic manifest, DATACARD stand-in warning, and `halluflow release verify`."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import polars as pl
import pytest
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
    for image_id, data in pngs.items():
        (root / "images" / "000").mkdir(parents=True, exist_ok=True)
        (root / "images" / "000" / f"{image_id}.png").write_bytes(data)
    images = pl.DataFrame(
        {
            "image_id": list(pngs),
            "scene_id": ["a", "b"],
            "path": [f"images/000/{i}.png" for i in pngs],
            "sha256": [sha256_bytes(d) for d in pngs.values()],
            "model": ["tiny-flux", "tiny-flux"],
            "revision": ["r1", "r1"],
            "stand_in": [True, True],
        }
    )
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
    assert "keep threshold 0.0 (below the paper's 0.65: images were NOT checked for their objects)" in card
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
