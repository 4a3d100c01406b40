"""Release exports (`halluflow release export`), the release folder as a Hugging Face dataset, and the
contamination check (`halluflow release contamination`)."""

from __future__ import annotations

import importlib.util
import io
import json
import shutil

import polars as pl
import pytest
import yaml
from PIL import Image

from halluflow.cli import main
from halluflow.io import sha256_bytes
from halluflow.ode.release import package_release, verify_release


def _png(colour, size=(12, 10)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def release(tmp_path):
    """A packaged release: two images (dog+frisbee, car+road), yes/no and generative queries."""
    root = tmp_path / "results"
    pngs = {"s1-i00": _png((200, 30, 30)), "s2-i00": _png((30, 30, 200), (16, 9))}
    (root / "images" / "000").mkdir(parents=True)
    for image_id, data in pngs.items():
        (root / "images" / "000" / f"{image_id}.png").write_bytes(data)
    images = pl.DataFrame(
        {
            "image_id": list(pngs),
            "scene_id": ["s1", "s2"],
            "path": [f"images/000/{i}.png" for i in pngs],
            "sha256": [sha256_bytes(d) for d in pngs.values()],
            "model": ["tiny-flux"] * 2,
            "revision": [None] * 2,
            "stand_in": [True] * 2,
        }
    )
    accepted = images.select("image_id", "scene_id", "path").with_columns(
        pl.Series("distribution", ["standard", "fictional"]), pl.lit("entity_entity").alias("pair_kind")
    )
    scenes = accepted.select("scene_id", "distribution", "pair_kind")
    q = [
        ("q1", "s1-i00", "existence", "discriminative", "Is there a dog in the image?", "yes", ["dog", "frisbee"]),
        ("q2", "s1-i00", "existence", "discriminative", "Is there a cat in the image?", "no", ["dog", "frisbee"]),
        ("q3", "s1-i00", "generative", "generative", "Describe this image.", None, ["dog", "frisbee"]),
        ("q4", "s2-i00", "existence", "discriminative", "Is there a car in the image?", "yes", ["car", "road"]),
        ("q5", "s2-i00", "generative", "generative", "Describe this image.", None, ["car", "road"]),
    ]
    queries = pl.DataFrame(
        q, schema=["query_id", "image_id", "query_type", "task", "question", "truth", "objects"], orient="row"
    ).with_columns(
        pl.format("images/{}.png", pl.col("image_id")).alias("image"),
        pl.when(pl.col("image_id") == "s1-i00")
        .then(pl.lit("standard"))
        .otherwise(pl.lit("fictional"))
        .alias("distribution"),
        pl.lit("entity_entity").alias("pair_kind"),
    )
    rel = tmp_path / "rel" / "release"
    package_release(
        rel,
        root=root,
        accepted=accepted,
        queries=queries,
        scenes=scenes,
        images=[images],
        detections=[],
        config={"release": "demo"},
        seed=1,
        name="demo",
    )
    return rel


def test_release_folder_loads_with_datasets(release, tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets", reason="pip install 'halluflow[export]' for datasets")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf" / "datasets"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert verify_release(release) == []  # the hub files are listed in the manifest
    ds = datasets.load_dataset(str(release), cache_dir=str(tmp_path / "hf" / "datasets"))["test"]
    assert ds.num_rows == 5
    assert type(ds.features["image"]).__name__ == "Image"
    row = next(r for r in ds if r["query_id"] == "q4")
    assert row["truth"] == "yes" and row["image"].size == (16, 9)
    assert row["objects"] == ["car", "road"]


def test_llava_and_sharegpt_hold_only_verified_truths(release, tmp_path):
    out = tmp_path / "llava"
    assert main(["release", "export", str(release), "--format", "llava", "--out", str(out)]) == 0
    records = json.loads((out / "llava.json").read_text())
    assert [r["id"] for r in records] == ["s1-i00", "s2-i00"]
    conv = records[0]["conversations"]
    assert conv[0] == {"from": "human", "value": "<image>\nIs there a dog in the image?"}
    assert [t["value"] for t in conv if t["from"] == "gpt"] == ["Yes.", "No.", "The image shows a dog and a frisbee."]
    assert (out / "images" / "s1-i00.png").read_bytes() == (release / "images" / "s1-i00.png").read_bytes()
    assert "STAND-IN" in (out / "DATACARD.md").read_text()
    out2 = tmp_path / "sharegpt"
    assert main(["release", "export", str(release), "--format", "sharegpt", "--out", str(out2)]) == 0
    sg = json.loads((out2 / "sharegpt.json").read_text())
    assert sg[1]["messages"][0] == {"role": "user", "content": "<image>Is there a car in the image?"}
    assert sg[1]["images"] == ["images/s2-i00.png"]


def test_dpo_pairs_come_from_hallucinated_answers_only(release, tmp_path, monkeypatch):
    answers = pl.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4", "q5"],
            "model": ["m"] * 5,
            "answer": ["Yes", "Yes, there is a cat.", "A dog, a frisbee and a cat.", "", "A car on a road."],
            "status": ["ok", "ok", "ok", "failed", "ok"],
            "parsed": ["yes", "yes", None, None, None],
            "hallucinated": [False, True, True, None, False],
        }
    )
    path = tmp_path / "answers.parquet"
    answers.write_parquet(path)
    out = tmp_path / "dpo"
    assert main(["release", "export", str(release), "--format", "dpo", "--answers", str(path), "--out", str(out)]) == 0
    pairs = json.loads((out / "dpo.json").read_text())
    assert [(p["id"], p["chosen"], p["rejected"]) for p in pairs] == [
        ("q2", "No.", "Yes, there is a cat."),
        ("q3", "The image shows a dog and a frisbee.", "A dog, a frisbee and a cat."),
    ]
    datasets = pytest.importorskip("datasets", reason="pip install 'halluflow[export]' for datasets")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    ds = datasets.load_dataset("json", data_files=str(out / "dpo.json"), cache_dir=str(tmp_path / "hf"))["train"]
    assert ds.num_rows == 2 and set(ds.column_names) >= {"prompt", "chosen", "rejected", "images"}


def test_lmms_eval_task_folder(release, tmp_path):
    out = tmp_path / "tasks"
    assert (
        main(["release", "export", str(release), "--format", "lmms-eval", "--out", str(out), "--task", "ode_demo"]) == 0
    )

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: ("function", loader.construct_scalar(node)))
    task = yaml.load((out / "ode_demo" / "ode_demo.yaml").read_text(), Loader=Loader)
    assert task["task"] == "ode_demo" and task["dataset_path"] == str(release.resolve())
    assert task["process_results"] == ("function", "utils.process_results")
    spec = importlib.util.spec_from_file_location("ode_utils", out / "ode_demo" / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    docs = [{"truth": "yes"}, {"truth": "no"}, {"truth": "yes"}, {"truth": "no"}]
    preds = ["Yes, there is.", "No.", "", "Yes"]  # the empty answer is unknown, not "yes"
    items = [utils.process_results(d, [p])["ode_accuracy"] for d, p in zip(docs, preds)]
    assert items[2]["pred"] is None
    assert utils.aggregate_accuracy(items) == pytest.approx(2 / 3)
    assert utils.aggregate_precision(items) == pytest.approx(1 / 2)


def test_export_bad_inputs_are_one_line(release, tmp_path, capsys):
    assert main(["release", "export", str(tmp_path), "--format", "llava", "--out", str(tmp_path / "o")]) == 1
    assert "not a release folder" in capsys.readouterr().err
    assert main(["release", "export", str(release), "--format", "dpo", "--out", str(tmp_path / "o")]) == 1
    assert "--format dpo needs --answers" in capsys.readouterr().err


def test_contamination_flags_a_copied_reference_image(release, tmp_path, one_torch_thread):
    pytest.importorskip("transformers")
    ref = tmp_path / "reference"
    (ref / "val").mkdir(parents=True)
    for i, colour in enumerate([(10, 200, 10), (240, 240, 0), (0, 120, 120)]):
        (ref / "val" / f"r{i}.png").write_bytes(_png(colour, (20, 14)))
    shutil.copyfile(release / "images" / "s2-i00.png", ref / "copied.png")
    out = tmp_path / "cont"
    assert main(["release", "contamination", str(release), "--reference", str(ref), "--out", str(out)]) == 0
    result = json.loads((out / "contamination.json").read_text())
    assert result["stand_in"] is True and "STAND-IN" in result["note"]
    assert [f["image_id"] for f in result["flagged"]] == ["s2-i00"]
    assert result["flagged"][0]["nearest_reference"] == "copied.png" and result["flagged"][0]["identical_file"]
    assert result["n_release"] == 2 and result["n_reference"] == 4
    assert result["frechet_distance"] is not None and result["frechet_distance"] >= 0
    assert (out / "projection.png").stat().st_size > 1000
    table = pl.read_parquet(out / "contamination.parquet")
    assert table.filter(pl.col("image_id") == "s1-i00")["flagged"].to_list() == [False]


def test_frechet_distance_by_hand():
    import numpy as np

    from halluflow.ode.contamination import frechet_distance

    a = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 2.0]])
    # Same covariance, means (1,1) and (4,5): distance = |mu_a - mu_b|^2 = 9 + 16 = 25.
    assert frechet_distance(a, a + [3.0, 4.0]) == pytest.approx(25.0, abs=1e-6)
    assert frechet_distance(a, a) == pytest.approx(0.0, abs=1e-6)
