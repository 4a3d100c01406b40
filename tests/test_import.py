"""`halluflow import lmms-eval|vlmevalkit`: other tools' per-sample outputs scored by halluflow's own scorers.

The round trips run each tool's side as the tool does it, without the tool (neither is installed here): lmms-eval's
side loads the exported task YAML (include resolved), loads its dataset with `datasets` from the task's relative
dataset_path, applies the exported utils.py (process_docs, process_results, aggregations) and writes the samples
file exactly as lmms-eval's EvaluationTracker.save_results_samples does (doc dropped, one-element response lists
flattened, the per-sample metrics kept). VLMEvalKit's side reads the exported TSV, resolves image references as
ImageBaseDataset does and dumps the predictions as its inference does (every column but the image, plus
`prediction`, fully quoted TSV). Then `import` + `score pope` must equal scoring the answers directly.
"""

from __future__ import annotations

import base64
import csv
import importlib.util
import json
import math
import sys

import polars as pl
import pytest
import yaml

from halluflow.cli import main

# Every kind of text a model gives: plain, with reasons, negated, empty (unknown / failed), odd casing.
ANSWERS = {
    "q1": "Yes, there is a dog.",
    "q2": "No, there is not.",
    "q3": "A dog and a frisbee on grass, next to a cat.",
    "q4": "",
    "q5": "A car on a road.",
}
ANSWERS_2 = {"q1": "no", "q2": "Yes", "q3": "", "q4": "There is a car.", "q5": "A road."}


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def _task_config(folder, name):
    """A task YAML as lmms-eval reads it: `include` merged under the task's own keys."""
    config = yaml.load((folder / f"{name}.yaml").read_text(), Loader=_Loader)
    if "include" in config:
        base = yaml.load((folder / config.pop("include")).read_text(), Loader=_Loader)
        config = {**base, **config}
    return config


def _utils(folder):
    spec = importlib.util.spec_from_file_location(f"utils_{folder.name}", folder / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_lmms_eval(out, task, answers, logs, tmp_path, monkeypatch):
    """What `lmms_eval --include_path . --tasks <task> --log_samples` does with a model that answers `answers`."""
    datasets = pytest.importorskip("datasets", reason="pip install 'halluflow[export]' for datasets")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(out)  # dataset_path is relative to the export folder, where lmms-eval runs
    folder = out / task
    utils = _utils(folder)
    group = yaml.load((folder / f"{task}.yaml").read_text(), Loader=_Loader)
    kind = yaml.load((folder / f"{task}_by_kind.yaml").read_text(), Loader=_Loader)
    results = {}
    for name in [*group["task"], *kind["task"], f"{task}_all"]:
        config = _task_config(folder, name)
        ds = datasets.load_dataset(config["dataset_path"], cache_dir=str(tmp_path / "hf"))[config["test_split"]]
        docs = getattr(utils, config["process_docs"].split(".")[1])(ds)
        process = getattr(utils, config["process_results"].split(".")[1])
        samples, per_metric = [], {}
        for doc_id, doc in enumerate(docs):
            text = answers[doc["query_id"]]
            metrics = process(doc, [text])
            for metric, value in metrics.items():
                per_metric.setdefault(metric, []).append(value)
            sample = {"doc_id": doc_id, "target": str(doc[config["doc_to_target"]]), "filtered_resps": text}
            sample.update({"doc_hash": "x", "input": doc["question"], "token_counts": [None]})
            samples.append({**sample, **metrics})
        results[name] = {
            m["metric"]: getattr(utils, m["aggregation"].split(".")[1])(per_metric[m["metric"]])
            for m in config["metric_list"]
        }
        path = logs / "model-x" / f"20260101T000000_samples_{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in samples))
    monkeypatch.chdir(tmp_path)
    return results


def _answers_file(path, answers, ids):
    path.write_text("".join(json.dumps({"question_id": q, "answer": answers[q]}) + "\n" for q in ids))
    return path


def _pope(capsys, answers, labels, parser="pope"):
    capsys.readouterr()
    argv = ["score", "pope", "--answers", str(answers), "--labels", str(labels), "--parser", parser]
    argv += ["--max-failed-fraction", "1"]  # the empty answer is part of what must round-trip
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _import(capsys, tool, *args):
    capsys.readouterr()
    assert main(["import", tool, *map(str, args)]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("answers", [ANSWERS, ANSWERS_2])
def test_lmms_eval_round_trip_gives_score_pope_numbers(release, tmp_path, monkeypatch, capsys, answers):  # noqa: F811
    out = tmp_path / "tasks"
    assert main(["release", "export", str(release), "--format", "lmms-eval", "--out", str(out), "--task", "t"]) == 0
    logs = tmp_path / "logs"
    results = run_lmms_eval(out, "t", answers, logs, tmp_path, monkeypatch)
    assert not any(isinstance(v, float) and math.isnan(v) for r in results.values() for v in r.values())
    labels = out / "t" / "pope_labels.jsonl"
    yes_no = [json.loads(line)["question_id"] for line in labels.read_text().splitlines()]
    direct = _pope(capsys, _answers_file(tmp_path / "direct.jsonl", answers, yes_no), labels)

    # the release group's yes/no subtasks (the distributions): every yes/no question once
    dist = sorted(logs.glob("model-x/*_samples_t_dist_*.jsonl"))
    summary = _import(capsys, "lmms-eval", *dist, "--out", tmp_path / "imported.jsonl")
    assert summary["n"] == len(yes_no) and summary["model"] == "model-x"
    imported = _pope(capsys, tmp_path / "imported.jsonl", labels)
    assert imported == direct
    # the exported task reads with the release's reader: lmms-eval's aggregation is `score pope --parser release`
    release_reading = _pope(capsys, tmp_path / "imported.jsonl", labels, "release")
    for metric in ("accuracy", "precision", "recall", "f1", "yes_ratio"):
        assert results["t_all"][f"ode_{metric}"] == release_reading[metric], metric

    # every file of the run (the same query in several subtasks, the descriptions too) -> the release scorer
    from halluflow.ode.scoring import ode_metrics, score_answers

    every = sorted(logs.glob("model-x/*.jsonl"))
    summary = _import(capsys, "lmms-eval", *every, "--out", tmp_path / "all.jsonl", "--model", "m")
    assert summary["n"] == len(answers) and summary["n_duplicates"] > 0
    queries = pl.read_parquet(release / "queries.parquet").with_columns(attribute_kind=pl.lit(None, pl.String))
    vocabulary = ["dog", "frisbee", "cat", "car", "road", "grass"]
    back = pl.read_ndjson(tmp_path / "all.jsonl").select("query_id", "model", "answer", "status")
    mine = pl.DataFrame({"query_id": list(answers), "answer": list(answers.values())}).with_columns(
        model=pl.lit("m"), status=pl.lit("ok")
    )
    assert ode_metrics(score_answers(queries, back, vocabulary), "m") == ode_metrics(
        score_answers(queries, mine, vocabulary), "m"
    )


def _vlmevalkit_predictions(tsv, answers, path):
    """VLMEvalKit's inference output for the dataset TSV: its columns without `image`, plus `prediction`."""
    csv.field_size_limit(sys.maxsize)
    with open(tsv, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        columns = [c for c in rows[0] if c != "image"] + ["prediction"]
        writer = csv.writer(fh, delimiter="\t", quoting=csv.QUOTE_ALL)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([row[c] for c in columns[:-1]] + [answers[row["query_id"]]])
    return rows


@pytest.mark.parametrize("parser", ["pope", "vlmevalkit"])
def test_vlmevalkit_round_trip_gives_score_pope_numbers(release, tmp_path, capsys, parser):  # noqa: F811
    out = tmp_path / "vlm"
    assert main(["release", "export", str(release), "--format", "vlmevalkit", "--out", str(out), "--task", "d"]) == 0
    tsv = out / "d_POPE.tsv"
    answers = {**ANSWERS, "q2": "No\nthere is no cat."}  # a newline inside a quoted cell
    rows = _vlmevalkit_predictions(tsv, answers, tmp_path / "model-y" / "model-y_d_POPE.tsv")
    # the image column as ImageBaseDataset reads it: base64, or (<= 64 chars) the index of a row holding it
    images = {r["index"]: r["image"] for r in rows}
    for r in rows:
        data = images[r["image"]] if len(r["image"]) <= 64 else r["image"]
        assert base64.b64decode(data) == (release / "images" / f"{r['image_id']}.png").read_bytes()
    assert {r["answer"] for r in rows} == {"Yes", "No"} and {r["category"] for r in rows} == {"standard", "fictional"}
    labels = out / "pope_labels.jsonl"
    ids = [r["query_id"] for r in rows]
    direct = _pope(capsys, _answers_file(tmp_path / "direct.jsonl", answers, ids), labels, parser)
    summary = _import(capsys, "vlmevalkit", tmp_path / "model-y" / "model-y_d_POPE.tsv", "--out", tmp_path / "a.jsonl")
    assert summary["model"] == "model-y" and summary["n"] == len(ids)
    assert _pope(capsys, tmp_path / "a.jsonl", labels, parser) == direct
    # the dataset runs through VLMEvalKit's own run.py: --data-config names its Y/N class, nothing is imported
    config = json.loads((out / "d_POPE.data_config.json").read_text())
    assert config == {"d_POPE": {"class": "ImageYORNDataset", "dataset": "d_POPE"}}
    # the samples keep the release task's hash (VLMEvalKit copies every column into its predictions)
    hashes = {json.loads(line).get("task_hash") for line in (tmp_path / "a.jsonl").read_text().splitlines()}
    assert hashes == {rows[0]["task_hash"]} and len(rows[0]["task_hash"]) == 16
    card = (out / "DATACARD.md").read_text()
    assert "python run.py --model <model> --data d_POPE --data-config" in card


def test_import_bad_inputs_are_one_line(tmp_path, capsys):
    folder = tmp_path / "m"
    folder.mkdir()
    no_id = folder / "x_samples_pope.jsonl"
    no_id.write_text(json.dumps({"doc_id": 0, "target": "yes", "filtered_resps": "Yes"}) + "\n")
    assert main(["import", "lmms-eval", str(no_id), "--out", str(tmp_path / "a.jsonl")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 1: no query_id or question_id" in err
    clash = folder / "y_samples_t.jsonl"
    clash.write_text(
        "".join(
            json.dumps({"doc_id": i, "filtered_resps": [text], "m": {"query_id": "q1"}}) + "\n"
            for i, text in enumerate(["Yes", "No"])
        )
    )
    assert main(["import", "lmms-eval", str(clash), "--out", str(tmp_path / "a.jsonl")]) == 1
    assert "line 2: question 'q1' has two different answers" in capsys.readouterr().err
    # lmms-eval's own POPE task keys its samples by question_id: that imports too
    pope = folder / "z_samples_pope.jsonl"
    pope.write_text(json.dumps({"doc_id": 0, "filtered_resps": "No", "pope_accuracy": {"question_id": 7}}) + "\n")
    assert main(["import", "lmms-eval", str(pope), "--out", str(tmp_path / "p.jsonl")]) == 0
    assert json.loads((tmp_path / "p.jsonl").read_text())["question_id"] == "7"
    capsys.readouterr()
    pred = folder / "m_d.tsv"
    pred.write_text('"index"\t"answer"\n"0"\t"Yes"\n')
    assert main(["import", "vlmevalkit", str(pred), "--out", str(tmp_path / "v.jsonl")]) == 1
    assert "no 'prediction' column" in capsys.readouterr().err
    xlsx = folder / "m_d.xlsx"
    xlsx.write_bytes(b"not a workbook")
    assert main(["import", "vlmevalkit", str(xlsx), "--out", str(tmp_path / "v.jsonl")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("needs openpyxl" in err or "not a readable xlsx" in err)
    assert not (tmp_path / "a.jsonl").exists() and not (tmp_path / "v.jsonl").exists()


def test_vlmevalkit_xlsx_is_read_with_openpyxl(tmp_path, capsys):
    openpyxl = pytest.importorskip("openpyxl", reason="xlsx prediction files need openpyxl")
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["index", "question", "answer", "query_id", "prediction"])
    sheet.append([0, "Is there a dog?", "Yes", "q1", "Yes."])
    sheet.append([1, "Is there a cat?", "No", "q2", None])
    book.save(tmp_path / "m_d.xlsx")
    _import(capsys, "vlmevalkit", tmp_path / "m_d.xlsx", "--out", tmp_path / "a.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [(r["query_id"], r["answer"]) for r in rows] == [("q1", "Yes."), ("q2", "")]


@pytest.mark.parametrize("response", ["Yes", "No"])
def test_real_lmms_eval_round_trip(release, tmp_path, capsys, response):  # noqa: F811
    """Opt-in: the real lmms-eval (its `dummy` model answers `response` to everything) runs the exported task;
    its samples, imported, score as the same answers do. HALLUFLOW_LMMS_EVAL_PATH = a folder holding an lmms_eval
    install (e.g. `pip install --target DIR lmms-eval`), prepended to this interpreter's PYTHONPATH."""
    import os
    import subprocess

    site = os.environ.get("HALLUFLOW_LMMS_EVAL_PATH")
    if not site:
        pytest.skip("set HALLUFLOW_LMMS_EVAL_PATH to a folder holding lmms-eval to run it for real")
    out = tmp_path / "tasks"
    assert main(["release", "export", str(release), "--format", "lmms-eval", "--out", str(out), "--task", "t"]) == 0
    env = {**os.environ, "PYTHONPATH": site, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", f"response={response}"]
    argv += [
        "--include_path",
        ".",
        "--tasks",
        "t,t_by_kind,t_all",
        "--log_samples",
        "--output_path",
        str(tmp_path / "logs"),
    ]
    run = subprocess.run(argv, cwd=out, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    (results,) = (tmp_path / "logs").rglob("*_results.json")
    assert "NaN" not in results.read_text()
    per_task = json.loads(results.read_text())["results"]
    assert {"t_dist_standard", "t_dist_fictional", "t_kind_existence", "t_generative"} <= set(per_task)
    labels = out / "t" / "pope_labels.jsonl"
    ids = [json.loads(line)["question_id"] for line in labels.read_text().splitlines()]
    direct = _pope(capsys, _answers_file(tmp_path / "direct.jsonl", dict.fromkeys(ids, response), ids), labels)
    dist = sorted((tmp_path / "logs").rglob("*_samples_t_dist_*.jsonl"))
    _import(capsys, "lmms-eval", *dist, "--out", tmp_path / "imported.jsonl", "--model", "dummy")
    assert _pope(capsys, tmp_path / "imported.jsonl", labels) == direct
    assert per_task["t_all"]["ode_accuracy,none"] == direct["accuracy"]
    assert per_task["t_all"]["ode_yes_ratio,none"] == direct["yes_ratio"]
    # the release scorer on every imported samples file gives lmms-eval's numbers, per distribution and overall
    every = sorted((tmp_path / "logs").rglob("*_samples_*.jsonl"))
    _import(capsys, "lmms-eval", *every, "--out", tmp_path / "every.jsonl", "--model", "dummy")
    capsys.readouterr()
    assert main(["score", "release", str(tmp_path / "every.jsonl"), "--release", str(release)]) == 0
    mine = json.loads(capsys.readouterr().out)
    assert mine["task"]["overridden"] is False
    for metric in ("accuracy", "precision", "recall", "f1", "yes_ratio"):
        assert per_task["t_all"][f"ode_{metric},none"] == mine["pope"][metric], metric
        for d in ("standard", "fictional"):
            assert per_task[f"t_dist_{d}"][f"ode_{metric},none"] == mine["by_distribution"][d]["pope"][metric]
    # the group rows aggregate (accuracy and yes-ratio, size-weighted: here the pooled numbers)
    assert per_task["t"]["ode_accuracy,none"] == pytest.approx(mine["pope"]["accuracy"])
    assert per_task["t"]["ode_yes_ratio,none"] == pytest.approx(mine["pope"]["yes_ratio"])
    higher = json.loads(results.read_text())["higher_is_better"]["t_all"]
    assert higher["ode_yes_ratio"] is False and higher["ode_accuracy"] is True


def test_real_vlmevalkit_round_trip(release, tmp_path, capsys):  # noqa: F811
    """Opt-in: VLMEvalKit's own code builds the exported dataset (its ImageYORNDataset named by the exported
    --data-config, the TSV found in $LMUData, images decoded), and its Y/N evaluator (POPE_rating) gives `score pope --parser vlmevalkit`'s numbers
    on the imported predictions. HALLUFLOW_VLMEVALKIT_PATH = a PYTHONPATH under which `import vlmeval` works."""
    import os
    import subprocess

    site = os.environ.get("HALLUFLOW_VLMEVALKIT_PATH")
    if not site:
        pytest.skip("set HALLUFLOW_VLMEVALKIT_PATH to a PYTHONPATH holding VLMEvalKit to run it for real")
    out = tmp_path / "vlm"
    assert main(["release", "export", str(release), "--format", "vlmevalkit", "--out", str(out), "--task", "d"]) == 0
    (tmp_path / "lmu").mkdir()
    (tmp_path / "lmu" / "d_POPE.tsv").write_bytes((out / "d_POPE.tsv").read_bytes())
    pred = tmp_path / "model-v" / "model-v_d_POPE.tsv"
    pred.parent.mkdir()
    # run.py's --data-config route: run.py's own load_data_config + build_dataset_from_cli on the exported JSON when
    # run.py is on the path (a checkout), else what build_dataset_from_config does (the named class, built with the
    # keys its __init__ takes); no module of the export is imported
    script = f"""
import inspect, json
import vlmeval.dataset
from vlmeval.smp import dump
text = open({str(out / "d_POPE.data_config.json")!r}).read()
try:
    import run
except ImportError:
    run = None
if run is not None and hasattr(run, "build_dataset_from_cli"):
    ds = run.build_dataset_from_cli("d_POPE", run.load_data_config(text), {{}})
    print("ROUTE run.py")
else:
    cfg = dict(json.loads(text)["d_POPE"])
    cls = getattr(vlmeval.dataset, cfg.pop("class"))
    ds = cls(**{{k: v for k, v in cfg.items() if k in inspect.signature(cls.__init__).parameters}})
assert type(ds).__name__ == "ImageYORNDataset", type(ds)
assert list(ds.data["question"])[0].endswith(" Answer yes or no."), list(ds.data["question"])[0]
data = ds.data.copy()
for i in range(len(data)):
    ds.dump_image(data.iloc[i])
data["prediction"] = [json.loads({json.dumps(json.dumps(ANSWERS))})[q] for q in data["query_id"]]
data.pop("image")
dump(data, {str(pred)!r})
print("SCORE" + ds.evaluate({str(pred)!r}).to_json(orient="records"))
"""
    env = {**os.environ, "PYTHONPATH": site, "LMUData": str(tmp_path / "lmu"), "PRED_FORMAT": "tsv"}
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("SCORE"))
    overall = next(r for r in json.loads(line[len("SCORE") :]) if r["split"] == "Overall")
    _import(capsys, "vlmevalkit", pred, "--out", tmp_path / "a.jsonl")
    mine = _pope(capsys, tmp_path / "a.jsonl", out / "pope_labels.jsonl", "vlmevalkit")
    assert overall["acc"] == pytest.approx(mine["accuracy"] * 100)
    assert overall["precision"] == pytest.approx(mine["precision"] * 100)
    assert overall["recall"] == pytest.approx(mine["recall"] * 100)
    assert overall["Overall"] == pytest.approx(mine["f1"] * 100)


def test_vlmevalkit_every_pred_format_reads_alike(release, tmp_path, capsys):  # noqa: F811
    """VLMEvalKit writes its predictions as xlsx (default), tsv or json (PRED_FORMAT; its dump of the DataFrame:
    to_excel, to_csv(sep=tab, QUOTE_ALL), json.dump of to_dict('records') with indent 4 and NaN for a missing
    prediction); a csv reads too. Every one imports to the same answers."""
    openpyxl = pytest.importorskip("openpyxl", reason="xlsx prediction files need openpyxl (halluflow[imports])")
    out = tmp_path / "vlm"
    assert main(["release", "export", str(release), "--format", "vlmevalkit", "--out", str(out), "--task", "d"]) == 0
    answers = {**ANSWERS, "q2": "No,\tthere is\nno cat.", "q4": ""}
    rows = _vlmevalkit_predictions(out / "d_POPE.tsv", answers, tmp_path / "m" / "m_d_POPE.tsv")
    columns = [c for c in rows[0] if c != "image"] + ["prediction"]
    records = [
        {**{c: r[c] for c in columns[:-1]}, "index": int(r["index"]), "prediction": answers[r["query_id"]]}
        for r in rows
    ]
    records[-1]["prediction"] = float("nan")  # pandas' missing value, as json.dump writes it
    (tmp_path / "m" / "m_d_POPE.json").write_text(json.dumps(records, indent=4, ensure_ascii=False))
    with open(tmp_path / "m" / "m_d_POPE.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL)
        writer.writerow(columns)
        writer.writerows([[str(rec[c]) for c in columns[:-1]] + [answers[rec["query_id"]]] for rec in records])
    book = openpyxl.Workbook()
    book.active.append(columns)
    for rec in records:
        book.active.append([rec[c] for c in columns[:-1]] + [answers[rec["query_id"]] or None])
    book.save(tmp_path / "m" / "m_d_POPE.xlsx")
    seen = {}
    for suffix in ("tsv", "csv", "json", "xlsx"):
        _import(capsys, "vlmevalkit", tmp_path / "m" / f"m_d_POPE.{suffix}", "--out", tmp_path / f"{suffix}.jsonl")
        seen[suffix] = [json.loads(line) for line in (tmp_path / f"{suffix}.jsonl").read_text().splitlines()]
    expected = [(r["query_id"], answers[r["query_id"]], r["task_hash"]) for r in rows]
    expected[-1] = (*expected[-1][:1], "", expected[-1][2])  # NaN: no prediction
    for suffix, got in seen.items():
        want = expected if suffix == "json" else [(q, answers[q], h) for q, _, h in expected]
        assert [(r["query_id"], r["answer"], r["task_hash"]) for r in got] == want, suffix
    bad = tmp_path / "m" / "bad.json"
    bad.write_text(json.dumps({"prediction": "yes"}))
    assert main(["import", "vlmevalkit", str(bad), "--out", str(tmp_path / "bad.jsonl")]) == 1
    assert "expected a JSON array of prediction records" in capsys.readouterr().err
