"""One task, one reading: a release declares its task (prompt per query kind, generation limits, yes/no reader) and
every tool asks and reads it that way.

The lmms-eval side runs the EXPORTED task as lmms-eval does (test_import.run_lmms_eval: its YAML with `include`
resolved, its dataset loaded by `datasets`, the export's own utils.py executing process_docs / process_results /
the aggregations, and the group row through lmms-eval's group aggregation) - no halluflow code reads those answers.
halluflow's side imports the samples and runs `halluflow score release`; and halluflow's own answer stage asks a
scripted model the same release and the workflow's scorer reads the answers. All three must give the same numbers.
"""

from __future__ import annotations

import json

import polars as pl
import pytest
import yaml
from helpers import png_bytes, write_synthesized_images
from test_import import _Loader, _task_config, _utils, run_lmms_eval

from halluflow.backends.base import VLM, BackendInfo
from halluflow.cli import main
from halluflow.ode.release import package_release

# Every style of answer a model gives (lower / upper / mixed case, tabs, trailing punctuation, refusals, hedges,
# other languages, emoji, a blank one): query id -> (truth, answer).
STYLES = [
    ("yes", "Yes"),
    ("no", "NO"),
    ("yes", "YES."),
    ("no", "Not really"),
    ("no", "no\tcat"),
    ("yes", ""),
    ("no", "No, there is no cat."),
    ("yes", "There is a dog."),
    ("no", "yes!!!"),
    ("yes", "  yes  "),
    ("no", "I cannot answer that."),
    ("yes", "Nein"),
    ("no", "Non"),
    ("yes", "Нет"),
    ("no", "いいえ"),
    ("yes", "👍"),
    ("no", "I'm not sure."),
    ("yes", "No."),
    ("no", "no."),
    ("yes", "Yes,\tthere is one."),
]
ANSWERS = {f"q{i:02d}": text for i, (_, text) in enumerate(STYLES)}
GENERATIVE = {"g1": "A dog and a frisbee.", "g2": "A car on a road near a cat."}
METRICS = ("accuracy", "precision", "recall", "f1", "yes_ratio")


def make_release(tmp_path, answer=None):
    """Two images (standard, fictional), the 20 yes/no questions split between them and one description each."""
    root = tmp_path / "results"
    pngs = {"s1-i00": png_bytes((200, 30, 30)), "s2-i00": png_bytes((30, 30, 200), (16, 9))}
    images = write_synthesized_images(root, pngs, ["s1", "s2"])
    dist = {"s1-i00": "standard", "s2-i00": "fictional"}
    accepted = images.select("image_id", "scene_id", "path").with_columns(
        pl.Series("distribution", list(dist.values())), pl.lit("entity_entity").alias("pair_kind")
    )
    rows = []
    for i, (truth, _) in enumerate(STYLES):
        image = "s1-i00" if i % 2 == 0 else "s2-i00"
        kind = "existence" if i % 3 else "counterfactual"
        rows.append((f"q{i:02d}", image, kind, "discriminative", f"Is there a thing {i} in the image?", truth))
    rows += [(g, im, "generative", "generative", "Describe this image.", None) for g, im in zip(GENERATIVE, pngs)]
    queries = pl.DataFrame(
        rows, schema=["query_id", "image_id", "query_type", "task", "question", "truth"], orient="row"
    ).with_columns(
        pl.format("images/{}.png", pl.col("image_id")).alias("image"),
        pl.col("image_id").replace_strict(dist).alias("distribution"),
        pl.lit("entity_entity").alias("pair_kind"),
        pl.lit(None, pl.String).alias("target"),
        pl.lit(None, pl.String).alias("attribute_kind"),
        pl.when(pl.col("image_id") == "s1-i00")
        .then(pl.lit(["dog", "frisbee"]))
        .otherwise(pl.lit(["car", "road"]))
        .alias("objects"),
    )
    rel = tmp_path / "rel" / "release"
    config = {"release": "t"} | ({"answer": answer} if answer else {})
    package_release(
        rel,
        root=root,
        accepted=accepted,
        queries=queries,
        scenes=accepted.select("scene_id", "distribution", "pair_kind"),
        images=[images],
        detections=[],
        config=config,
        seed=1,
        name="t",
    )
    return rel


class Scripted(VLM):
    """A model under test that answers from a table and records every prompt and limit it was sent."""

    def __init__(self, answers):
        super().__init__()
        self.answers, self.prompts, self.limits = answers, {}, {}

    def describe(self):
        return BackendInfo("vlm", "scripted", "scripted")

    def answer(self, requests):
        for r in requests:
            self.prompts[r.request_id], self.limits[r.request_id] = r.prompt, r.max_new_tokens
        return [self.answers[r.request_id] for r in requests]


def answer_stage(release, tmp_path, answers, settings=None):
    """halluflow's answer stage on the release (the workflow's answer job): (answers parquet, scripted model)."""
    from halluflow.answer import answer_shard
    from halluflow.models.model import ModelUnderTest
    from halluflow.ode.task import release_task
    from halluflow.sources import source_queries

    queries, image_root = source_queries({"kind": "ode", "path": str(release)}, release)
    model = ModelUnderTest({"name": "m", "backend": "blind"})
    model._backend = Scripted(answers)
    out = tmp_path / "answers" / "000.parquet"
    answer_shard(
        queries,
        image_root,
        model,
        tmp_path / "cache",
        out,
        settings={"max_failed_fraction": 1.0, **(settings or {})},
        declared_task=release_task(release),
    )
    return out, model._backend


def _score_release(capsys, answers, release, *extra):
    capsys.readouterr()
    argv = ["score", "release", str(answers), "--release", str(release), "--max-failed-fraction", "1", *extra]
    assert main(argv) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def test_exported_prompt_and_limits_are_the_answer_stage_s(tmp_path, monkeypatch):
    """The exported lmms-eval task's prompt (its YAML's kwargs through its own doc_to_text) and generation limits
    are exactly what halluflow's answer stage sent, for every query; so is the VLMEvalKit TSV's question."""
    release = make_release(tmp_path, {"yes_no_suffix": "\nAnswer with one word: yes or no.", "max_new_tokens": {}})
    out = tmp_path / "tasks"
    assert main(["release", "export", str(release), "--format", "lmms-eval", "--out", str(out), "--task", "t"]) == 0
    utils = _utils(out / "t")
    _, scripted = answer_stage(release, tmp_path, {**ANSWERS, **GENERATIVE, "q05": "yes"})  # suffix: null
    queries = pl.read_parquet(release / "queries.parquet")
    assert len(scripted.prompts) == queries.height
    for name in ("t_all", "t_generative"):
        config = _task_config(out / "t", name)
        kwargs = config["lmms_eval_specific_kwargs"]["default"]
        for doc in queries.filter(pl.col("task") == ("generative" if "generative" in name else "discriminative")).rows(
            named=True
        ):
            assert utils.doc_to_text(doc, kwargs) == scripted.prompts[doc["query_id"]], doc["query_id"]
            assert config["generation_kwargs"]["max_new_tokens"] == scripted.limits[doc["query_id"]]
    assert scripted.prompts["q00"] == "Is there a thing 0 in the image?\nAnswer with one word: yes or no."
    # VLMEvalKit sends the TSV's question as written: it holds the same prompt
    vlm = tmp_path / "vlm"
    assert main(["release", "export", str(release), "--format", "vlmevalkit", "--out", str(vlm), "--task", "t"]) == 0
    import csv
    import sys

    csv.field_size_limit(sys.maxsize)
    with open(vlm / "t_POPE.tsv", newline="", encoding="utf-8") as fh:
        tsv = list(csv.DictReader(fh, delimiter="\t"))
    assert {r["query_id"]: r["question"] for r in tsv} == {q: scripted.prompts[q] for q in ANSWERS}
    # the manifest declares it, and the DATACARD says it
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["task"]["kinds"]["discriminative"]["suffix"] == "\nAnswer with one word: yes or no."
    assert manifest["task"]["kinds"]["discriminative"]["reader"] == "release"
    assert "## Task" in (release / "DATACARD.md").read_text()


def test_every_tool_reads_the_answer_styles_alike(tmp_path, monkeypatch, capsys):
    """lmms-eval's own process_results + aggregation on the exported task == `halluflow score release` on the
    imported samples == the workflow's scorer on halluflow's own answers, per distribution and overall."""
    release = make_release(tmp_path)
    out = tmp_path / "tasks"
    assert main(["release", "export", str(release), "--format", "lmms-eval", "--out", str(out), "--task", "t"]) == 0
    source = (out / "t" / "utils.py").read_text()
    assert "import halluflow" not in source and "from halluflow" not in source  # runs where halluflow is not
    logs = tmp_path / "logs"
    lmms = run_lmms_eval(out, "t", {**ANSWERS, **GENERATIVE}, logs, tmp_path, monkeypatch)

    # lmms-eval's group row: its group aggregation over the group's subtasks, weighted by their sizes
    utils = _utils(out / "t")
    group = yaml.load((out / "t" / "t.yaml").read_text(), Loader=_Loader)
    sizes = {n: len(list((logs / "model-x").glob(f"*_samples_{n}.jsonl"))[0].read_text().splitlines()) for n in lmms}
    for agg in group["aggregate_metric_list"]:
        subtasks = [n for n in group["task"] if agg["metric"] in lmms[n]]
        row = utils.aggregate_group([lmms[n][agg["metric"]] for n in subtasks], [sizes[n] for n in subtasks], True)
        assert row is not None and 0 <= row <= 1

    # halluflow: the imported samples of every subtask, scored by the release scorer
    capsys.readouterr()
    assert (
        main(
            ["import", "lmms-eval", *map(str, sorted(logs.glob("model-x/*.jsonl"))), "--out", str(tmp_path / "a.jsonl")]
        )
        == 0
    )
    imported = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert {r["task_hash"] for r in imported} == {utils.TASK_HASH}
    mine, err = _score_release(capsys, tmp_path / "a.jsonl", release)
    assert mine["task"]["overridden"] is False and mine["task"]["hash"] == utils.TASK_HASH
    assert mine["parser"] == "release" and mine["n_unanswered"] == 0

    # halluflow's own workflow: the answer stage asks the scripted model, the score rule reads its shards
    from halluflow.ode.scoring import run_score

    shard, _ = answer_stage(release, tmp_path, {**ANSWERS, **GENERATIVE})
    nodes = tmp_path / "nodes.parquet"
    pl.DataFrame({"node": ["dog", "frisbee", "car", "road", "cat"]}).write_parquet(nodes)
    flow = run_score(
        [str(shard)],
        str(release / "queries.parquet"),
        str(nodes),
        str(tmp_path / "scores.parquet"),
        str(tmp_path / "metrics.json"),
        "m",
        {},
        release_dir=str(release),
    )
    assert flow["task"]["overridden"] is False and flow["task"]["hash"] == utils.TASK_HASH

    for metric in METRICS:
        assert lmms["t_all"][f"ode_{metric}"] == mine["pope"][metric] == flow["pope"][metric], metric
        for d in ("standard", "fictional"):
            by_dist = (mine["by_distribution"][d]["pope"][metric], flow["by_distribution"][d]["pope"][metric])
            assert lmms[f"t_dist_{d}"][f"ode_{metric}"] == by_dist[0] == by_dist[1], (d, metric)
        for k in ("existence", "counterfactual"):
            assert lmms[f"t_kind_{k}"][f"ode_{metric}"] == mine["by_query_type"][k]["pope"][metric], (k, metric)
    # what the reader could not read is counted and left out, never read as yes: the 20 styles hold one blank
    # answer (failed) and 8 it cannot read (refusal, hedge, other languages, emoji)
    assert mine["pope"]["n_failed"] == flow["pope"]["n_failed"] == 1
    assert mine["n_unknown"] == flow["n_unknown"] == 7
    assert mine["pope"]["n"] == 12
    # the three-way breakdown the command adds: distribution x pair kind x query kind
    assert set(mine["by_distribution_pair_kind_query_type"]) == {
        f"{d}/entity_entity/{k}"
        for d in ("fictional", "standard")
        for k in ("counterfactual", "existence", "generative")
    }


def test_an_override_is_said_and_compare_refuses_to_pair_it(tmp_path, capsys):
    """Another reader or another suffix than the release declares is an override: in the metrics, on stderr, and
    `score compare` refuses to pair answers of different tasks."""
    release = make_release(tmp_path)
    shard, _ = answer_stage(release, tmp_path, {**ANSWERS, **GENERATIVE})
    declared, err = _score_release(capsys, shard, release, "--model", "a", "--scores", str(tmp_path / "a.parquet"))
    assert declared["task"]["overrides"] == [] and "override" not in err
    pope, err = _score_release(
        capsys, shard, release, "--parser", "pope", "--model", "b", "--scores", str(tmp_path / "b.parquet")
    )
    assert pope["task"]["overridden"] and pope["task"]["overrides"] == ["discriminative.reader: 'release' -> 'pope'"]
    assert "task override: discriminative.reader" in err
    assert pope["task"]["hash"] != declared["task"]["hash"]
    # another suffix at the answer stage: recorded in the answers, said by the scorer
    other = tmp_path / "other"
    other.mkdir()
    shard2, _ = answer_stage(release, other, {**ANSWERS, **GENERATIVE}, {"yes_no_suffix": " Yes or no?"})
    asked, err = _score_release(capsys, shard2, release, "--model", "c", "--scores", str(tmp_path / "c.parquet"))
    assert asked["task"]["overrides"] == ["discriminative.suffix: ' Answer yes or no.' -> ' Yes or no?'"]
    assert "task override: discriminative.suffix" in err
    # score compare: answers read under the release's reader and under POPE's, or asked with another suffix, are
    # not paired; the same task is
    capsys.readouterr()
    same = ["score", "compare", "--scores", str(tmp_path / "a.parquet"), str(tmp_path / "a.parquet")]
    for other in ("b", "c"):
        argv = ["score", "compare", "--scores", str(tmp_path / "a.parquet"), str(tmp_path / f"{other}.parquet")]
        assert main(argv) == 1
        assert "under task" in capsys.readouterr().err
    del same


def test_score_release_scores_one_distribution(tmp_path, capsys):
    """`score pope` refuses a part of the labels; `score release` scores one distribution's subtask as it is."""
    release = make_release(tmp_path)
    part = tmp_path / "part.jsonl"
    queries = pl.read_parquet(release / "queries.parquet").filter(pl.col("distribution") == "standard")
    ids = [q for q in queries["query_id"].to_list() if q in ANSWERS]
    part.write_text("".join(json.dumps({"query_id": q, "answer": ANSWERS[q]}) + "\n" for q in ids))
    metrics, _ = _score_release(capsys, part, release)
    assert metrics["n_answers"] == len(ids) and metrics["n_unanswered"] == 22 - len(ids)
    assert set(metrics["by_distribution"]) == {"standard"}
    assert "the answers record no task" in metrics["task"]["note"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"query_id": "zz", "answer": "yes"}) + "\n")
    assert main(["score", "release", str(bad), "--release", str(release)]) == 1
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("answer", [None])
def test_release_without_a_task_is_exported_with_the_defaults(tmp_path, answer):
    from halluflow.ode.task import release_task, task_definition, task_hash

    release = make_release(tmp_path, answer)
    assert task_hash(release_task(release)) == task_hash(task_definition())


def test_metrics_json_states_each_block_s_scale_as_the_catalogue(tmp_path, capsys):
    """POPE's numbers (0-1) and AMBER's (0-100, its own counters) sit side by side in one metrics JSON: the JSON
    says each block's unit, and it is the unit the metric catalogue gives every metric of that block."""
    from halluflow.metrics.catalogue import CATALOGUE

    release = make_release(tmp_path)
    shard, _ = answer_stage(release, tmp_path, {**ANSWERS, **GENERATIVE})
    metrics, _ = _score_release(capsys, shard, release)
    units = metrics["units"]
    assert units["pope"] == "fraction" and units["amber"] == "percent"
    checked = 0
    for m in CATALOGUE:
        block = m.name.split(".")[0]
        if m.document == "metrics" and block in units and m.unit != "count":
            assert m.unit == units[block], m.name
            checked += 1
    assert checked > 30
    assert 0 <= metrics["pope"]["accuracy"] <= 1 and metrics["amber"]["overall"]["accuracy"] > 1


def test_the_report_says_when_a_model_was_not_asked_or_read_as_the_release_declares(tmp_path):
    from halluflow.report.paper_sections import ode_sections

    root = tmp_path / "results" / "rel"
    (root / "metrics").mkdir(parents=True)
    (root / "release").mkdir()
    by = {"standard": {"hallucination_rate": 0.25, "pope": {"f1": 0.5}}}
    task = {"overridden": True, "overrides": ["discriminative.reader: 'release' -> 'pope'"]}
    for m, t in (("a", task), ("b", {"overridden": False, "overrides": []})):
        doc = {"model": m, "by_distribution": by, "parser": "pope" if m == "a" else "release", "task": t}
        (root / "metrics" / f"{m}.json").write_text(json.dumps(doc))
    (root / "release" / "manifest.json").write_text(json.dumps({"config": {}, "files": {}}))
    paths = ode_sections(root, tmp_path / "sections", models=["a", "b"])
    captions = [json.loads(p.read_text())["caption"] for p in paths]
    said = "NOT the release's declared task (an override, metrics task.overrides): a (discriminative.reader:"
    assert captions and all(said in c for c in captions if "parser" in c)
    assert not any("b (" in c for c in captions)


def test_compare_metrics_refuses_releases_read_under_different_tasks(tmp_path, capsys):
    docs = []
    for i, task in enumerate(("aaaa", "aaaa", "bbbb")):
        path = tmp_path / f"r{i}.json"
        path.write_text(json.dumps({"model": "m", "pope": {"accuracy": 0.5 + i / 10}, "task": {"hash": task}}))
        docs.append(str(path))
    assert main(["score", "compare", "--metrics", *docs]) == 1
    err = capsys.readouterr().err
    assert "asked or read under different tasks" in err and "bbbb" in err
    assert main(["score", "compare", "--metrics", *docs[:2]]) == 0


def test_an_export_carries_only_a_reader_it_can_run_without_halluflow(tmp_path, capsys):
    """The exported utils.py must read as halluflow does without importing it: a release whose task names a reader
    with no standalone form is refused in one line, before anything is written."""
    release = make_release(tmp_path)
    manifest = json.loads((release / "manifest.json").read_text())
    manifest["task"]["kinds"]["discriminative"]["reader"] = "lenient"
    (release / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    out = tmp_path / "tasks"
    assert main(["release", "export", str(release), "--format", "lmms-eval", "--out", str(out), "--task", "t"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'lenient', which an exported task cannot carry" in err
    assert not out.exists() or not any(out.rglob("*"))
