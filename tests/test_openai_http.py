"""OpenAI-compatible HTTP backend end to end through a REAL local server: retries, failures, reruns, secrets."""

from __future__ import annotations

import polars as pl
import pytest
from PIL import Image

from halluflow import registry
from halluflow.answer import ModelUnderTest, answer_shard
from halluflow.backends.base import VLMRequest
from halluflow.errors import BackendError, ConfigError
from halluflow.io import write_parquet

from chat_server import ChatServer
from test_backends_prior import make_graph

SECRET = "sk-test-9f8e7d6c5b4a-never-write-me"


@pytest.fixture
def prior(tmp_path):
    return registry.create("vlm", {"backend": "prior", "graph": str(make_graph(tmp_path / "graph"))})


@pytest.fixture
def server(prior, monkeypatch):
    monkeypatch.setenv("HALLUFLOW_TEST_API_KEY", SECRET)
    with ChatServer(prior, expected_key=SECRET, stall_s=1.0) as srv:
        yield srv


def client_args(server, **extra):
    return {"base_url": server.base_url, "model": "prior-over-http", "api_key_env": "HALLUFLOW_TEST_API_KEY",
            "timeout_s": 0.4, "max_retries": 5, "backoff_s": 0.01, "backoff_max_s": 0.05, "concurrency": 3, **extra}


def test_every_transient_fault_is_retried_then_succeeds(server):
    vlm = registry.create("vlm", {"backend": "openai", **client_args(server)})
    server.faults["cloud"] = ["429", "500", "reset", "timeout", "malformed"]
    results = vlm.answer_results([VLMRequest("1", "Is there a cloud in the picture?", None),
                                  VLMRequest("2", "Is there a frisbee in the picture?", None)])
    assert [(r.text, r.error) for r in results] == [("Yes", None), ("No", None)]
    assert results[0].attempts == 6 and server.calls["Is there a cloud in the picture?"] == 6
    assert results[1].attempts == 1


def test_client_errors_are_not_retried_and_answer_raises(server):
    vlm = registry.create("vlm", {"backend": "openai", **client_args(server)})
    server.faults["cloud"] = ["401"]
    result = vlm.answer_results([VLMRequest("1", "Is there a cloud?", None)])[0]
    assert result.error.startswith("HTTP 401") and result.attempts == 1
    server.faults["cloud"] = ["500"] * 6
    with pytest.raises(BackendError, match="request 1: gave up after 6 attempts: HTTP 500"):
        vlm.answer([VLMRequest("1", "Is there a cloud?", None)])


def test_missing_key_env_names_the_variable(server, monkeypatch):
    monkeypatch.delenv("HALLUFLOW_TEST_API_KEY")
    with pytest.raises(ConfigError, match="HALLUFLOW_TEST_API_KEY"):
        registry.create("vlm", {"backend": "openai", **client_args(server)})


def test_images_travel_as_data_urls_and_llm_role_works(server, tmp_path):
    img = tmp_path / "a.png"
    Image.new("RGB", (8, 8), (1, 2, 3)).save(img)
    vlm = registry.create("vlm", {"backend": "openai", **client_args(server)})
    vlm.answer([VLMRequest("1", "Is there a dog?", str(img), history=(("Hi", "Hello"),))])
    messages = server.bodies[-1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[0]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
    llm = registry.create("llm", {"backend": "openai", **client_args(server)})
    assert llm.chat([{"role": "user", "content": "Is there a cloud?"}]) == "Yes"
    assert server.bodies[-1]["max_tokens"] == 64 and server.bodies[-1]["temperature"] == 0.0


def make_release(folder, questions):
    (folder / "images").mkdir(parents=True)
    rows = []
    for i, q in enumerate(questions):
        Image.new("RGB", (16, 16), (i * 40 % 255, 0, 0)).save(folder / "images" / f"img{i}.png")
        rows.append({"query_id": f"q{i}", "image": f"images/img{i}.png", "question": q, "task": "discriminative"})
    write_parquet(folder / "queries.parquet", pl.DataFrame(rows))
    return pl.DataFrame(rows)


def test_failures_recorded_not_cached_and_rerun_retries_only_them(server, tmp_path, caplog):
    questions = ["Is there a cloud?", "Is there a dog?", "Is there a sky?", "Is there a unicorn?"]
    queries = make_release(tmp_path / "release", questions)
    spec = {"name": "remote", "backend": "openai", "args": client_args(server, max_retries=2)}
    server.faults["dog"] = ["500"] * 3  # exhausts 1 + 2 retries
    server.faults["sky"] = ["null"]
    server.faults["unicorn"] = ["huge"]
    out, cache = tmp_path / "answers" / "000.parquet", tmp_path / "cache"
    settings = {"max_failed_fraction": 1.0, "yes_no_suffix": ""}
    with caplog.at_level("INFO"):
        stats = answer_shard(queries, tmp_path / "release", ModelUnderTest(spec), cache, out, settings=settings)
    assert stats == {"queries": 4, "cache_hits": 0, "new": 3, "failed": 1, "truncated": 1, "empty": 2}
    table = pl.read_parquet(out).sort("query_id")
    assert table["status"].to_list() == ["ok", "failed", "ok", "ok"]
    assert table["error"][1] == "gave up after 3 attempts: HTTP 500"
    assert table["answer"][2] == "" and table["truncated"][3] and table["original_chars"][3] == 12_000_000 - 1  # "yes " × 3M, trailing space stripped
    assert len(table["answer"][3]) == 10_000
    before = dict(server.calls)
    stats = answer_shard(queries, tmp_path / "release", ModelUnderTest(spec), cache, out, settings=settings)
    assert stats["cache_hits"] == 3 and stats["new"] == 1 and stats["failed"] == 0
    assert {q: server.calls[q] - before.get(q, 0) for q in questions} == {
        "Is there a cloud?": 0, "Is there a dog?": 1, "Is there a sky?": 0, "Is there a unicorn?": 0}
    assert pl.read_parquet(out)["status"].to_list() == ["ok"] * 4
    # The key went over the wire (the server checked it) but is in no output, cache entry or log line.
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in caplog.text
    assert SECRET not in repr(ModelUnderTest(spec).backend.describe().as_dict())


def test_failed_fraction_over_the_limit_fails_the_shard(server, tmp_path):
    queries = make_release(tmp_path / "release", ["Is there a cloud?", "Is there a dog?"])
    spec = {"name": "remote", "backend": "openai", "args": client_args(server, max_retries=0)}
    server.faults["dog"] = ["500"]
    with pytest.raises(BackendError, match="1 of 2 requests failed .*query q1: gave up after 1 attempts: HTTP 500"):
        answer_shard(queries, tmp_path / "release", ModelUnderTest(spec), tmp_path / "cache", tmp_path / "a.parquet")
