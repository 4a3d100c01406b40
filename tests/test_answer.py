"""The answer stage: shard assignment, cache resume after a crash, missing images, contract columns; a job whose every
request is cached imports no model library; the job's thread count reaches torch however torch was imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from helpers import make_graph, make_release
from PIL import Image

from halluflow.answer import STOP_AFTER_ENV, SimulatedCrash, answer_shard, shard_of
from halluflow.backends.transformers_vlm import build_tiny_smolvlm
from halluflow.cache import RequestCache
from halluflow.errors import ConfigError, InputError
from halluflow.models.model import ModelUnderTest
from halluflow.models.standins import build_standin, register_builder

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def release(tmp_path):
    return make_release(tmp_path / "release")


@pytest.fixture
def prior_spec(tmp_path):
    return {"name": "prior", "backend": "prior", "args": {"graph": str(make_graph(tmp_path)), "threshold": 0.3}}


def test_shards_are_stable_and_cover_every_query():
    ids = [f"query-{i}" for i in range(400)]
    shards = [shard_of(q, 4) for q in ids]
    assert shards == [shard_of(q, 4) for q in ids]
    assert set(Counter(shards)) == {0, 1, 2, 3} and min(Counter(shards).values()) > 70
    assert shard_of("q00", 1) == 0


def test_prior_answers_with_contract_columns_and_reproducible_bytes(tmp_path, release, prior_spec):
    out = tmp_path / "answers" / "prior" / "000.parquet"
    stats = answer_shard(release, tmp_path / "release", ModelUnderTest(prior_spec), tmp_path / "c1", out)
    assert stats["queries"] == 6 and stats["new"] == 6 and stats["failed"] == 0
    table = pl.read_parquet(out)
    for column in ("query_id", "model", "answer", "status", "error", "request_hash", "stand_in", "latency_s"):
        assert column in table.columns
    # grass|dog 8/10, frisbee|dog 3/10, unicorn|sky 0, cloud|sky 30/50, sky|cloud 30/40 against threshold 0.3.
    assert dict(zip(table["query_id"], table["answer"])) == {
        "q00": "Yes",
        "q01": "Yes",
        "q02": "No",
        "q03": "The picture shows a dog, a grass and a frisbee.",
        "q04": "Yes",
        "q05": "Yes",
    }
    assert set(table["status"]) == {"ok"} and not table["stand_in"].any()
    # A fresh run with a fresh cache gives the same bytes (no timestamps, no latencies by default).
    out2 = tmp_path / "again.parquet"
    answer_shard(release, tmp_path / "release", ModelUnderTest(prior_spec), tmp_path / "c2", out2)
    assert out.read_bytes() == out2.read_bytes()


def test_crash_mid_shard_then_rerun_repeats_no_cached_request(tmp_path, release, prior_spec, monkeypatch):
    cache, out = tmp_path / "cache", tmp_path / "a.parquet"
    settings = {"batch_size": 2}
    monkeypatch.setenv(STOP_AFTER_ENV, "3")
    with pytest.raises(SimulatedCrash):
        answer_shard(release, tmp_path / "release", ModelUnderTest(prior_spec), cache, out, settings=settings)
    assert len(RequestCache(cache)) == 3 and not out.exists()
    monkeypatch.delenv(STOP_AFTER_ENV)
    stats = answer_shard(release, tmp_path / "release", ModelUnderTest(prior_spec), cache, out, settings=settings)
    assert (stats["cache_hits"], stats["new"]) == (3, 3)
    model = ModelUnderTest(prior_spec)
    stats = answer_shard(release, tmp_path / "release", model, cache, out, settings=settings)
    assert (stats["cache_hits"], stats["new"]) == (6, 0)
    assert not model.loaded  # a fully cached shard never loads the model


def test_cache_key_changes_with_prompt_and_generation(tmp_path, release, prior_spec):
    cache = tmp_path / "cache"
    answer_shard(release, tmp_path / "release", ModelUnderTest(prior_spec), cache, tmp_path / "a.parquet")
    stats = answer_shard(
        release,
        tmp_path / "release",
        ModelUnderTest(prior_spec),
        cache,
        tmp_path / "b.parquet",
        settings={"yes_no_suffix": " Reply Yes or No."},
    )
    assert stats["cache_hits"] == 1  # only the generative prompt is unchanged
    changed = {**prior_spec, "args": {**prior_spec["args"], "threshold": 0.9}}
    stats = answer_shard(release, tmp_path / "release", ModelUnderTest(changed), cache, tmp_path / "c.parquet")
    assert stats["cache_hits"] == 0
    # An argument the backend does not take is refused in one line before anything runs (the prior has no
    # batch_size); cache keys leaving out arguments that cannot change answers are tested with the openai backend.
    batchy = {**prior_spec, "args": {**prior_spec["args"], "batch_size": 99}}
    with pytest.raises(ConfigError, match="model 'prior' .*unknown argument 'batch_size'"):
        ModelUnderTest(batchy)


def test_shards_partition_the_queries(tmp_path, release, prior_spec):
    ids = []
    for shard in range(3):
        out = tmp_path / f"{shard:03d}.parquet"
        answer_shard(
            release, tmp_path / "release", ModelUnderTest(prior_spec), tmp_path / "cache", out, shard=shard, n_shards=3
        )
        ids += pl.read_parquet(out)["query_id"].to_list()
    assert sorted(ids) == sorted(release["query_id"])


def test_missing_and_escaping_images_are_reported(tmp_path, release, prior_spec):
    (tmp_path / "release" / "images" / "img1.png").unlink()
    (tmp_path / "release" / "images" / "img2.png").unlink()
    with pytest.raises(InputError, match=r"2 image\(s\) missing under .*: images/img1.png, images/img2.png"):
        answer_shard(release, tmp_path / "release", ModelUnderTest(prior_spec), tmp_path / "c", tmp_path / "a.parquet")
    bad = release.with_columns(pl.lit("../../etc/passwd").alias("image"))
    with pytest.raises(InputError, match="escapes its folder"):
        answer_shard(bad, tmp_path / "release", ModelUnderTest(prior_spec), tmp_path / "c", tmp_path / "a.parquet")


HEAVY = ("torch", "transformers", "diffusers")

# The job as Snakemake runs it: scripts/rule.py hands halluflow.workflow.run a snakemake object.
JOB = """
import json, sys, types
from snakemake.iocontainers import InputFiles, OutputFiles, Params, Wildcards
from halluflow.workflow import run
a = json.loads(sys.argv[1])
smk = types.SimpleNamespace(
    rule="answer",
    input=InputFiles(fromdict={"source": [a["manifest"]], "weights": [], "graph": []}),
    output=OutputFiles(fromdict={"answers": a["out"]}),
    params=Params(fromdict={"spec": a["spec"], "answer": {"source": {"kind": "ode", "path": None}}, "shards": 1,
                            "cache": a["cache"]}),
    wildcards=Wildcards(fromdict={"model": a["spec"]["name"], "shard": "000"}),
    log=[a["log"]],
    threads=1,
)
stats = run(smk)
print(json.dumps({"stats": stats, "heavy": sorted(m for m in a["heavy"] if m in sys.modules)}))
"""


def _job(tmp_path: Path, name: str, spec: dict) -> tuple[dict, Path]:
    out = tmp_path / f"{name}.parquet"
    args = {
        "manifest": str(tmp_path / "release" / "manifest.json"),
        "out": str(out),
        "spec": spec,
        "cache": str(tmp_path / "cache" / spec["name"]),
        "log": str(tmp_path / f"{name}.log"),
        "heavy": HEAVY,
    }
    proc = subprocess.run(
        [sys.executable, "-c", JOB, json.dumps(args)], capture_output=True, text=True, cwd=tmp_path, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:] + (tmp_path / f"{name}.log").read_text(encoding="utf-8")[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), out


def _entries(cache: Path) -> dict[str, bytes]:
    return {str(p.relative_to(cache)): p.read_bytes() for p in sorted(cache.rglob("*")) if p.is_file()}


def test_tiny_standin_vlm_through_the_stage(tmp_path, release):
    register_builder("smolvlm", build_tiny_smolvlm)
    folder = build_standin("smolvlm", tmp_path / "models" / "tiny-smolvlm", seed=0)
    spec = {
        "name": "tiny-smolvlm",
        "backend": "transformers",
        "stand_in": True,
        "build": {"builder": "smolvlm"},
        "args": {"model": str(folder), "batch_size": 4},
    }
    out = tmp_path / "answers.parquet"
    cache = tmp_path / "cache" / spec["name"]
    stats = answer_shard(release, tmp_path / "release", ModelUnderTest(spec), cache, out)
    assert stats["new"] == 6
    table = pl.read_parquet(out)
    assert table["stand_in"].all() and set(table["status"]) == {"ok"}
    assert '"max_new_tokens": 6' in table.filter(pl.col("query_id") == "q00")["generation"][0]
    assert '"max_new_tokens": 24' in table.filter(pl.col("query_id") == "q03")["generation"][0]
    filled = _entries(cache)
    assert filled

    # The same shard again, as Snakemake runs its job (a fresh process, halluflow.workflow.run): every request is
    # cached, so no model library is imported (a job pays torch only when it runs a model), and nothing it writes
    # differs from the job that asked the model.
    (tmp_path / "release" / "manifest.json").write_text("{}", encoding="utf-8")
    again, out2 = _job(tmp_path, "again", spec)
    assert again["stats"]["cache_hits"] == 6 and again["stats"]["new"] == 0
    assert again["heavy"] == [], f"a cache-only answer job imported {again['heavy']}"
    assert out2.read_bytes() == out.read_bytes()
    assert _entries(cache) == filled


def test_cli_answers_pope_questions_and_the_pope_scorer_reads_them(tmp_path, capsys):
    import json

    from halluflow.cli import main

    graph = make_graph(tmp_path / "graph")
    images = tmp_path / "images"
    images.mkdir()
    labels = []
    for i, (obj, label) in enumerate([("cloud", "yes"), ("frisbee", "no"), ("dog", "yes"), ("unicorn", "no")]):
        Image.new("RGB", (8, 8), (i, i, i)).save(images / f"COCO_{i}.jpg")
        labels.append(
            {"question_id": i + 1, "image": f"COCO_{i}.jpg", "text": f"Is there a {obj} in the image?", "label": label}
        )
    (tmp_path / "labels.json").write_text(json.dumps(labels))  # A-OKVQA/GQA style: one JSON array
    out = tmp_path / "answers.jsonl"
    argv = [
        "answer",
        "run",
        "--source",
        "pope",
        "--questions",
        str(tmp_path / "labels.json"),
        "--images",
        str(images),
        "--backend",
        "prior",
        "--arg",
        f"graph={graph}",
        "--arg",
        "threshold=0.15",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    # No scene context in POPE: the prior uses marginal frequency / max (cloud 40/50, frisbee 4/50, dog 10/50, unicorn 1/50).
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["question_id"], r["answer"]) for r in rows] == [(1, "Yes"), (2, "No"), (3, "Yes"), (4, "No")]
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["new"] == 4
    assert main(argv) == 0  # rerun: everything from the cache
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["cache_hits"] == 4
    assert main(["score", "pope", "--answers", str(out), "--labels", str(tmp_path / "labels.json")]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["accuracy"] == 1.0 and metrics["n"] == 4


def test_cli_bad_arg_is_one_line_error(tmp_path, capsys):
    from halluflow.cli import main

    (tmp_path / "q.jsonl").write_text('{"question_id": 1, "image": "a.jpg", "text": "Is there a dog in the image?"}\n')
    code = main(
        [
            "answer",
            "run",
            "--source",
            "pope",
            "--questions",
            str(tmp_path / "q.jsonl"),
            "--images",
            str(tmp_path),
            "--backend",
            "prior",
            "--arg",
            "graph",
            "--out",
            str(tmp_path / "o.jsonl"),
        ]
    )
    assert code == 1 and "--arg 'graph': expected KEY=VALUE" in capsys.readouterr().err


def _pope_questions(tmp_path, n=3):
    import json

    images = tmp_path / "images"
    images.mkdir(exist_ok=True)
    for i in range(n):
        Image.new("RGB", (8, 8), (i, i, i)).save(images / f"c{i}.jpg")
    path = tmp_path / "q.jsonl"
    path.write_text(
        "".join(
            json.dumps({"question_id": i, "image": f"c{i}.jpg", "text": "Is there a dog in the image?", "label": "yes"})
            + "\n"
            for i in range(n)
        )
    )
    return path, images


def test_cli_all_failed_run_writes_failures_and_exits_nonzero(tmp_path, capsys):
    """Every request fails (nothing listens on the port): the answers are written as status failed, the command
    exits 1 with one line, and the POPE scorer refuses them instead of printing accuracy 0.5 / recall 1.0."""
    import json

    from halluflow.cli import main

    questions, images = _pope_questions(tmp_path)
    out = tmp_path / "a.jsonl"
    argv = [
        "answer",
        "run",
        "--source",
        "pope",
        "--questions",
        str(questions),
        "--images",
        str(images),
        "--backend",
        "openai",
        "--arg",
        "base_url=http://127.0.0.1:9/v1",
        "--arg",
        "model=m",
        "--arg",
        "max_retries=0",
        "--arg",
        "timeout_s=5",
        "--out",
        str(out),
    ]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "answer run" in err and "3 of 3 answers failed or are empty" in err and "Traceback" not in err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["status"] for r in rows] == ["failed"] * 3 and all(r["error"] for r in rows)
    assert main(argv + ["--max-failed-fraction", "1"]) == 0  # the user accepts them: exit 0, still recorded
    capsys.readouterr()
    assert main(["score", "pope", "--answers", str(out), "--labels", str(questions)]) == 1
    assert "3 of 3 answers failed" in capsys.readouterr().err


def test_cli_refuses_a_release_that_fails_verification(tmp_path, capsys):
    from halluflow.cli import main

    make_release(tmp_path / "release")  # queries and images, but no manifest.json
    code = main(
        [
            "answer",
            "run",
            "--source",
            "ode",
            "--questions",
            str(tmp_path / "release"),
            "--backend",
            "blind",
            "--out",
            str(tmp_path / "o.jsonl"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and "fails verification" in err and "manifest.json" in err and err.count("\n") == 1
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("damage", ["garbage", "no_answer", "array", "folder"])
def test_cache_heals_unreadable_entries(tmp_path, release, prior_spec, damage, caplog):
    """A damaged cache entry is logged, treated as a miss, asked again and rewritten: the rerun succeeds."""
    import shutil

    out = tmp_path / "out" / "000.parquet"
    answer_shard(release, tmp_path / "release", ModelUnderTest(prior_spec), tmp_path / "cache", out)
    first = pl.read_parquet(out)
    entry = sorted((tmp_path / "cache").glob("??/*.json"))[0]
    if damage == "garbage":
        entry.write_bytes(b"\xff\x00garbage")
    elif damage == "no_answer":
        entry.write_text('{"latency_s": 1}')
    elif damage == "array":
        entry.write_text('["yes"]')
    else:
        entry.unlink()
        entry.mkdir()
        (entry / "stray").write_text("x")
    stats = answer_shard(release, tmp_path / "release", ModelUnderTest(prior_spec), tmp_path / "cache", out)
    assert (stats["cache_hits"], stats["new"]) == (5, 1)
    assert "ignoring unreadable entry" in caplog.text
    assert entry.is_file() and RequestCache(tmp_path / "cache").get(entry.stem)["answer"]
    assert pl.read_parquet(out)["answer"].to_list() == first["answer"].to_list()
    shutil.rmtree(tmp_path / "out")


@pytest.mark.parametrize("how", ["read_only", "a_file"])
def test_unwritable_cache_is_one_clear_error(tmp_path, release, prior_spec, how):
    import os

    cache = tmp_path / "cache"
    if how == "read_only":
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders")
        cache.mkdir()
        cache.chmod(0o500)
    else:
        cache.write_text("not a folder")
    try:
        with pytest.raises(InputError, match=r"request cache .*cache: not writable .*pass another --cache"):
            answer_shard(release, tmp_path / "release", ModelUnderTest(prior_spec), cache, tmp_path / "o.parquet")
    finally:
        if cache.is_dir():
            cache.chmod(0o700)
    assert not (tmp_path / "o.parquet").exists()


def test_cache_put_on_a_read_only_entry_folder_is_one_clear_error(tmp_path, monkeypatch):
    cache = RequestCache(tmp_path / "cache")
    key = "ab" + "0" * 62

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("halluflow.cache.write_json", refuse)
    with pytest.raises(InputError, match=r"request cache .*cannot write ab0+\.json \(Permission denied\)"):
        cache.put(key, {"answer": "yes"})


def test_a_swapped_release_image_stops_the_shard_before_any_request(tmp_path, prior_spec):
    """The workflow answers only the images the release states: one swapped for another valid PNG is one line."""
    from halluflow.io import sha256_file

    release = make_release(tmp_path / "release")
    stated = {f"images/img{i}.png": sha256_file(tmp_path / "release" / "images" / f"img{i}.png") for i in range(3)}
    release = release.with_columns(pl.col("image").replace_strict(stated).alias("image_sha256"))
    out = tmp_path / "answers.parquet"
    answer_shard(release, tmp_path / "release", ModelUnderTest(prior_spec), tmp_path / "c1", out)  # intact: fine
    Image.new("RGB", (32, 24), (1, 2, 3)).save(tmp_path / "release" / "images" / "img1.png")
    out2 = tmp_path / "answers2.parquet"
    with pytest.raises(InputError, match=r"img1\.png: not the image the release was packaged with"):
        answer_shard(release, tmp_path / "release", ModelUnderTest(prior_spec), tmp_path / "c2", out2)
    assert not out2.exists() and not (tmp_path / "c2").exists()


def test_set_threads_reaches_torch_imported_before_or_after(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from halluflow import devices
    from halluflow.models import registry

    before = torch.get_num_threads()
    for var in devices.THREAD_VARS:
        monkeypatch.setenv(var, "7")
    try:
        devices.set_threads(3)  # torch imported: set now
        assert torch.get_num_threads() == 3 and all(os.environ[v] == "3" for v in devices.THREAD_VARS)
        torch.set_num_threads(1)  # as if torch had been imported after set_threads, with its own default
        registry.create("vlm", {"backend": "prior", "graph": str(make_graph(tmp_path)), "threshold": 0.3})
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
        monkeypatch.setattr(devices, "_THREADS", None)
