"""Release exports (`halluflow release export`), the release folder as a Hugging Face dataset, and the
contamination check (`halluflow release contamination`)."""

from __future__ import annotations

import importlib.util
import json
import shutil

import polars as pl
import pytest
import yaml
from helpers import png_bytes

from halluflow.cli import main
from halluflow.ode.release import verify_release


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


def _yaml(path):
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: ("function", loader.construct_scalar(node)))
    return yaml.load(path.read_text(), Loader=Loader)


def test_lmms_eval_task_folder(release, tmp_path, monkeypatch):
    out = tmp_path / "tasks"
    assert (
        main(["release", "export", str(release), "--format", "lmms-eval", "--out", str(out), "--task", "ode_demo"]) == 0
    )
    folder = out / "ode_demo"
    # the release group: one subtask per distribution, plus the descriptions (every query answered once)
    group = _yaml(folder / "ode_demo.yaml")
    # the group has a row of its own: accuracy and yes-ratio averaged over the distributions, weighted by size
    aggregate = [
        {"metric": f"ode_{m}", "aggregation": ("function", "utils.aggregate_group"), "weight_by_size": True}
        for m in ("accuracy", "yes_ratio")
    ]
    assert group == {
        "group": "ode_demo",
        "task": ["ode_demo_dist_fictional", "ode_demo_dist_standard", "ode_demo_generative"],
        "aggregate_metric_list": aggregate,
        "metadata": {"version": 1.0},
    }
    assert _yaml(folder / "ode_demo_by_kind.yaml")["task"] == ["ode_demo_kind_existence"]
    template = _yaml(folder / "_default_template_yaml")
    assert template["dataset_path"] == "ode_demo/data"  # relative to the export folder: it moves with it
    # the yes-ratio has no better direction; the other four do
    better = {m["metric"]: m["higher_is_better"] for m in template["metric_list"]}
    assert better == {"ode_accuracy": True, "ode_precision": True, "ode_recall": True, "ode_f1": True} | {
        "ode_yes_ratio": False
    }
    # the release's declared task: its suffix and limits (halluflow's answer stage asks the same)
    assert template["lmms_eval_specific_kwargs"]["default"]["post_prompt"] == " Answer yes or no."
    assert template["generation_kwargs"]["max_new_tokens"] == 6
    sub = _yaml(folder / "ode_demo_dist_standard.yaml")
    assert sub["include"] == "_default_template_yaml"
    assert sub["process_docs"] == ("function", "utils.process_docs_ode_demo_dist_standard")
    gen = _yaml(folder / "ode_demo_generative.yaml")
    assert gen["process_results"] == ("function", "utils.process_generative")
    assert gen["generation_kwargs"]["max_new_tokens"] == 24  # the release task's description length
    # the data folder stands on its own: moved elsewhere, `datasets` still loads it from the relative path
    moved = tmp_path / "elsewhere"
    shutil.copytree(out, moved)
    datasets = pytest.importorskip("datasets", reason="pip install 'halluflow[export]' for datasets")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(moved)
    ds = datasets.load_dataset(template["dataset_path"], cache_dir=str(tmp_path / "hf"))["test"]
    spec = importlib.util.spec_from_file_location("ode_utils", moved / "ode_demo" / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    assert [d["query_id"] for d in utils.process_docs_ode_demo_dist_standard(ds)] == ["q1", "q2"]
    assert [d["query_id"] for d in utils.process_docs_generative(ds)] == ["q3", "q5"]
    docs = [{"query_id": f"q{i}", "truth": t} for i, t in enumerate(["yes", "no", "yes", "no"])]
    preds = ["Yes, there is.", "No.", "", "Yes"]  # the empty answer is failed, not "yes"
    items = [utils.process_results(d, [p])["ode_accuracy"] for d, p in zip(docs, preds)]
    assert items[2]["pred"] == "failed" and items[3]["query_id"] == "q3"
    assert utils.aggregate_accuracy(items) == pytest.approx(2 / 3)
    assert utils.aggregate_precision(items) == pytest.approx(1 / 2)
    assert utils.aggregate_yes_ratio(items) == pytest.approx(2 / 3)
    # an undefined ratio is None (JSON null in results.json), never NaN
    only_no = [utils.process_results(docs[1], ["No."])["ode_precision"]]
    assert utils.aggregate_precision(only_no) is None and utils.aggregate_f1(only_no) is None
    assert json.dumps({"p": utils.aggregate_precision(only_no)}) == '{"p": null}'
    assert utils.aggregate_precision([]) is None and utils.aggregate_described([]) is None
    card = (folder / "DATACARD.md").read_text()
    assert "| `ode_demo_generative` | 2 |" in card and "halluflow import lmms-eval" in card
    assert "halluflow score release answers.jsonl --release" in card


@pytest.mark.parametrize("fmt", ["llava", "sharegpt", "dpo"])
def test_training_exports_register_with_llamafactory(release, tmp_path, fmt):
    answers = pl.DataFrame(
        {
            "query_id": ["q2"],
            "model": ["m"],
            "answer": ["Yes"],
            "status": ["ok"],
            "parsed": ["yes"],
            "hallucinated": [True],
        }
    )
    answers.write_parquet(tmp_path / "answers.parquet")
    out = tmp_path / fmt
    extra = ["--answers", str(tmp_path / "answers.parquet")] if fmt == "dpo" else []
    assert main(["release", "export", str(release), "--format", fmt, "--out", str(out), *extra]) == 0
    info = json.loads((out / "dataset_info.json").read_text())
    ((name, entry),) = info.items()
    assert name == f"halluflow_demo_{fmt}" and entry["file_name"] == f"{fmt}.json"
    records = json.loads((out / entry["file_name"]).read_text())
    column = entry["columns"]["images"]
    # LLaMA-Factory resolves image paths against media_dir, which defaults to the folder of dataset_info.json
    for record in records:
        images = record[column] if isinstance(record[column], list) else [record[column]]
        assert images and all((out / image).is_file() for image in images)
    for key in ("messages", "prompt", "chosen", "rejected"):
        if key in entry["columns"]:
            assert all(entry["columns"][key] in r for r in records), key
    assert "--dataset_dir <this folder>" in (out / "DATACARD.md").read_text()


def test_hub_card_keeps_licence_citation_and_warning_through_push_to_hub(release, tmp_path):
    text = (release / "README.md").read_text()
    assert text.startswith("---\n") and "license: other" in text
    assert "STAND-IN" in text and "## Licence" in text and "Tu, Yahan and Hu, Rui and Sang, Jitao" in text
    assert "# Data card: demo" in text  # the prose, not only the YAML
    hub = pytest.importorskip("huggingface_hub")
    card = hub.DatasetCard(text)
    assert card.data.license == "other" and "stand-in" in card.data.tags
    arrow = pytest.importorskip("datasets.arrow_dataset")
    from datasets import Features, Value
    from datasets.splits import SplitInfo
    from fsspec.implementations.dirfs import DirFileSystem

    # what push_to_hub does to a repository that holds this card: its YAML is updated, its text kept
    new_card, _ = arrow._get_updated_dataset_card(
        fs=DirFileSystem(str(release)),
        config_name="default",
        splits_info=[SplitInfo(name="test", num_bytes=10, num_examples=5)],
        features=Features({"question": Value("string")}),
        data_dir="data",
        set_default=None,
        uploaded_sizes=[10],
        deleted_sizes=[0],
        remove_other_splits=False,
    )
    pushed = str(new_card)
    assert "dataset_info" in pushed and "license: other" in pushed
    assert "WARNING: made with randomly initialised STAND-IN models" in pushed and "@inproceedings{tu2025ode" in pushed


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
        (ref / "val" / f"r{i}.png").write_bytes(png_bytes(colour, (20, 14)))
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


def test_odd_task_names_still_make_valid_python(release, tmp_path):
    """A task name may hold '-' and '.' and start with a digit; the generated functions and modules may not."""
    out = tmp_path / "odd"
    for fmt in ("lmms-eval", "vlmevalkit"):
        assert main(["release", "export", str(release), "--format", fmt, "--out", str(out), "--task", "2025-x.v2"]) == 0
    folder = out / "2025-x.v2"
    utils = compile((folder / "utils.py").read_text(), "utils.py", "exec")
    names = set(utils.co_names)
    for path in folder.glob("2025-x.v2_*.yaml"):
        docs = _yaml(path).get("process_docs")
        assert docs is None or docs[1].split(".")[1] in names, path.name
    # VLMEvalKit runs the dataset through its own run.py: no module of the export is imported
    assert not list(out.glob("*.py"))
    (config,) = out.glob("*.data_config.json")
    assert json.loads(config.read_text()) == {
        "2025-x.v2_POPE": {"class": "ImageYORNDataset", "dataset": "2025-x.v2_POPE"}
    }
