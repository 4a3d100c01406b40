"""OpenAI-compatible HTTP backend end to end through a REAL local server: retries, failures, reruns, secrets."""

from __future__ import annotations

import time

import polars as pl
import pytest
import yaml
from chat_server import ChatServer
from helpers import make_graph, make_question_release
from PIL import Image

from halluflow.answer import answer_shard
from halluflow.backends.base import VLMRequest
from halluflow.errors import BackendError, ConfigError
from halluflow.models import registry
from halluflow.models.model import ModelUnderTest

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
    return {
        "base_url": server.base_url,
        "model": "prior-over-http",
        "api_key_env": "HALLUFLOW_TEST_API_KEY",
        "timeout_s": 0.4,
        "max_retries": 5,
        "backoff_s": 0.01,
        "backoff_max_s": 0.05,
        "concurrency": 3,
        **extra,
    }


def test_every_transient_fault_is_retried_then_succeeds(server):
    vlm = registry.create("vlm", {"backend": "openai", **client_args(server)})
    server.faults["cloud"] = ["429", "500", "reset", "timeout", "malformed"]
    results = vlm.answer_results(
        [
            VLMRequest("1", "Is there a cloud in the picture?", None),
            VLMRequest("2", "Is there a frisbee in the picture?", None),
        ]
    )
    assert [(r.text, r.error) for r in results] == [("Yes", None), ("No", None)]
    assert results[0].attempts == 6 and server.calls["Is there a cloud in the picture?"] == 6
    assert results[1].attempts == 1


def test_client_errors_are_not_retried_and_answer_raises(server):
    vlm = registry.create("vlm", {"backend": "openai", **client_args(server)})
    server.faults["cloud"] = ["401"]
    result = vlm.answer_results([VLMRequest("1", "Is there a cloud?", None)])[0]
    assert result.error.startswith("HTTP 401") and result.attempts == 1
    # A 401 is the key's, the same for every request: the client sends nothing more.
    posts = server.posts
    again = vlm.answer_results([VLMRequest("2", "Is there a dog?", None)])[0]
    assert again.error.startswith("not sent: ") and "HTTP 401" in again.error and server.posts == posts
    vlm = registry.create("vlm", {"backend": "openai", **client_args(server)})
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


def test_failures_recorded_not_cached_and_rerun_retries_only_them(server, tmp_path, caplog):
    questions = ["Is there a cloud?", "Is there a dog?", "Is there a sky?", "Is there a unicorn?"]
    queries = make_question_release(tmp_path / "release", questions)
    # timeout_s 5: the 12 MB reply must arrive within one attempt even on a loaded machine
    spec = {"name": "remote", "backend": "openai", "args": client_args(server, max_retries=2, timeout_s=5)}
    server.faults["dog"] = ["500"] * 3  # exhausts 1 + 2 retries
    server.faults["sky"] = ["null"]  # an empty success is a failure: retried, never cached as ""
    server.faults["unicorn"] = ["huge"]
    out, cache = tmp_path / "answers" / "000.parquet", tmp_path / "cache"
    settings = {"max_failed_fraction": 1.0, "yes_no_suffix": ""}
    with caplog.at_level("INFO"):
        stats = answer_shard(queries, tmp_path / "release", ModelUnderTest(spec), cache, out, settings=settings)
    assert stats == {"queries": 4, "cache_hits": 0, "new": 3, "failed": 1, "truncated": 1, "empty": 1}
    table = pl.read_parquet(out).sort("query_id")
    assert table["status"].to_list() == ["ok", "failed", "ok", "ok"]
    assert table["error"][1] == "gave up after 3 attempts: HTTP 500"
    assert server.calls["Is there a sky?"] == 2 and table["answer"][2] == "Yes"
    # 12 MB of "yes yes ...": stripped, then cut at max_answer_chars.
    assert table["truncated"][3] and table["original_chars"][3] == 12_000_000 - 1
    assert len(table["answer"][3]) == 10_000
    before = dict(server.calls)
    stats = answer_shard(queries, tmp_path / "release", ModelUnderTest(spec), cache, out, settings=settings)
    assert stats["cache_hits"] == 3 and stats["new"] == 1 and stats["failed"] == 0
    assert {q: server.calls[q] - before.get(q, 0) for q in questions} == {
        "Is there a cloud?": 0,
        "Is there a dog?": 1,
        "Is there a sky?": 0,
        "Is there a unicorn?": 0,
    }
    assert pl.read_parquet(out)["status"].to_list() == ["ok"] * 4
    # The key went over the wire (the server checked it) but is in no output, cache entry or log line.
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in caplog.text
    assert SECRET not in repr(ModelUnderTest(spec).backend.describe().as_dict())


def test_failed_fraction_over_the_limit_fails_the_shard(server, tmp_path):
    queries = make_question_release(tmp_path / "release", ["Is there a cloud?", "Is there a dog?"])
    spec = {"name": "remote", "backend": "openai", "args": client_args(server, max_retries=0)}
    server.faults["dog"] = ["500"]
    with pytest.raises(BackendError, match="1 of 2 requests failed .*query q1: gave up after 1 attempts: HTTP 500"):
        answer_shard(queries, tmp_path / "release", ModelUnderTest(spec), tmp_path / "cache", tmp_path / "a.parquet")


def test_content_parts_are_joined_and_leading_space_stripped_once(server, tmp_path):
    queries = make_question_release(tmp_path / "release", ["Is there a cloud?", "Is there a dog?"])
    server.faults["cloud"] = ["parts"]  # [{"type": "text", "text": "Y"}, {"type": "text", "text": "es"}]
    server.faults["dog"] = ["space"]  # " No", as transformers serve answers
    vlm = registry.create("vlm", {"backend": "openai", **client_args(server)})
    raw = vlm.answer_results([VLMRequest("1", "Is there a cloud?", None), VLMRequest("2", "Is there a dog?", None)])
    assert [r.text for r in raw] == ["Yes", " Yes"]  # the backend hands the server's text on unchanged
    server.faults["cloud"], server.faults["dog"] = ["parts"], ["space"]
    spec = {"name": "remote", "backend": "openai", "args": client_args(server)}
    out = tmp_path / "a.parquet"
    answer_shard(
        queries, tmp_path / "release", ModelUnderTest(spec), tmp_path / "cache", out, settings={"yes_no_suffix": ""}
    )
    assert pl.read_parquet(out).sort("query_id")["answer"].to_list() == ["Yes", "Yes"]


def test_retry_after_follows_rfc_9110_and_is_capped(server, caplog):
    from datetime import datetime, timedelta, timezone
    from email.utils import format_datetime

    from halluflow.backends.openai_http import retry_after_seconds

    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert retry_after_seconds("120") == 120.0
    assert retry_after_seconds(format_datetime(now + timedelta(seconds=90), usegmt=True), now.timestamp()) == 90.0
    assert retry_after_seconds("Thu, 01 Jan 2026 00:00:30 -0000", now.timestamp()) == 30.0
    assert retry_after_seconds(format_datetime(now - timedelta(seconds=5), usegmt=True), now.timestamp()) == 0.0
    with caplog.at_level("INFO", logger="halluflow.backends.openai"):
        for bad in ["soon", "inf", "nan", "-3", "1.5", "1e9", "", "Fri, 99 Foo 2026"]:
            assert retry_after_seconds(bad) is None, bad
    assert "ignoring unparseable Retry-After header 'soon'" in caplog.text
    # Against the server: 100000 s, a garbage value and inf are all survivable and capped by backoff_max_s (0.05).
    vlm = registry.create("vlm", {"backend": "openai", **client_args(server)})
    server.faults["cloud"] = ["429:100000", "429:soon", "429:inf", "429:" + "9" * 400]
    start = time.monotonic()
    result = vlm.answer_results([VLMRequest("1", "Is there a cloud?", None)])[0]
    assert (result.text, result.attempts) == ("Yes", 5) and time.monotonic() - start < 2


def test_one_deadline_covers_a_trickled_body(prior, monkeypatch):
    # 40+ bytes at 0.2 s each would take 9 s; the request must end at timeout_s (0.5 s) however bytes trickle.
    with ChatServer(prior, trickle_s=0.2) as srv:
        vlm = registry.create("vlm", {"backend": "openai", **client_args(srv, api_key_env=None, max_retries=1)})
        srv.faults["cloud"] = ["trickle", "trickle"]
        start = time.monotonic()
        result = vlm.answer_results([VLMRequest("1", "Is there a cloud?", None)])[0]
        elapsed = time.monotonic() - start
    assert result.error.startswith("gave up after 2 attempts: timeout after 0.4 s"), result.error
    assert elapsed < 2 * 0.4 + 0.05 + 0.5, elapsed  # two attempts, one short backoff, scheduling slack


def test_secrets_echoed_by_the_server_are_redacted_everywhere(server, tmp_path, caplog, capsys):
    from halluflow.cli import main

    questions = ["Is there a cloud?", "Is there a dog?"]
    make_question_release(tmp_path / "release", questions)
    server.faults["cloud"] = ["401-echo", "401-echo"]
    spec = {"name": "remote", "backend": "openai", "args": client_args(server)}
    with caplog.at_level("INFO"):
        answer_shard(
            make_question_release(tmp_path / "r2", questions),
            tmp_path / "r2",
            ModelUnderTest(spec),
            tmp_path / "cache",
            tmp_path / "answers.parquet",
            settings={"max_failed_fraction": 1.0},
        )
        labels = tmp_path / "pope.jsonl"
        labels.write_text('{"question_id": 1, "image": "img0.png", "text": "Is there a cloud?", "label": "yes"}\n')
        cfg = tmp_path / "model.yaml"
        cfg.write_text(yaml.safe_dump({"name": "remote", "backend": "openai", "args": client_args(server)}))
        assert (
            main(
                [
                    "answer",
                    "run",
                    "--source",
                    "pope",
                    "--questions",
                    str(labels),
                    "--images",
                    str(tmp_path / "release" / "images"),
                    "--model-config",
                    str(cfg),
                    "--out",
                    str(tmp_path / "cli.jsonl"),
                    "--max-failed-fraction",
                    "1",
                ]
            )
            == 0
        )
    table = pl.read_parquet(tmp_path / "answers.parquet").sort("query_id")
    assert table["error"][0] == 'HTTP 401: {"error": "rejected Authorization: [REDACTED]"}'
    assert "[REDACTED]" in (tmp_path / "cli.jsonl").read_text()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) > 5 and not [p for p in files if SECRET.encode() in p.read_bytes()]
    assert SECRET not in caplog.text + capsys.readouterr().out
    # The key really went to the server, which echoed it back, once per run.
    assert sum(n for q, n in server.calls.items() if "cloud" in q) == 2


def test_a_rejection_shared_by_every_request_stops_the_shard(prior, tmp_path):
    questions = [f"Is there a {o}?" for o in ["cloud", "dog", "sky", "frisbee", "grass", "unicorn"]]
    queries = make_question_release(tmp_path / "release", questions)
    # A strict server rejecting an extra_body key (e.g. top_k) rejects every request alike: the first 422 is
    # checked with one probe request (no images, same arguments), rejected alike, so the rest are never sent.
    with ChatServer(prior, reject_fields=("top_k",)) as srv:
        args = client_args(srv, api_key_env=None, concurrency=1, extra_body={"top_k": 40})
        out = tmp_path / "a.parquet"
        stats = answer_shard(
            queries,
            tmp_path / "release",
            ModelUnderTest({"name": "remote", "backend": "openai", "args": args}),
            tmp_path / "cache",
            out,
            settings={"max_failed_fraction": 1.0, "batch_size": 2, "yes_no_suffix": ""},
        )
    assert stats["failed"] == 6 and srv.posts == 2  # one request + one probe
    errors = pl.read_parquet(out)["error"].to_list()
    first = [e for e in errors if e.startswith("HTTP 422: ")]
    assert len(first) == 1 and "top_k" in first[0]
    rest = [e for e in errors if not e.startswith("HTTP 422: ")]
    assert (
        len(set(rest)) == 1 and rest[0].startswith("not sent: the server rejects every request") and first[0] in rest[0]
    )


def test_identical_per_request_rejections_fail_only_their_requests(server, tmp_path):
    questions = [f"Is there a {o}?" for o in ["cloud", "dog", "sky", "frisbee", "grass", "unicorn"]]
    queries = make_question_release(tmp_path / "release", questions)
    for q in questions[:3]:  # three identical 400s about each request's own image: the others are fine
        server.faults[q] = ["400-too-large"]
    spec = {"name": "remote", "backend": "openai", "args": client_args(server, concurrency=1)}
    out = tmp_path / "a.parquet"
    settings = {"max_failed_fraction": 1.0, "batch_size": 2, "yes_no_suffix": ""}
    stats = answer_shard(
        queries, tmp_path / "release", ModelUnderTest(spec), tmp_path / "cache", out, settings=settings
    )
    assert stats["failed"] == 3 and stats["new"] == 3
    table = pl.read_parquet(out).sort("query_id")
    assert table["status"].to_list() == ["failed"] * 3 + ["ok"] * 3
    assert set(table["error"][:3]) == {'HTTP 400: {"error": {"message": "image too large (max 20 MB)"}}'}
    assert sum(server.calls.values()) == 6 + 1  # every request once, and one probe for the one distinct rejection


def test_unserved_model_fails_once_naming_the_served_ids(prior, tmp_path):
    queries = make_question_release(
        tmp_path / "release", [f"Is there a {o}?" for o in ["cloud", "dog", "sky", "cat", "car"]]
    )
    with ChatServer(prior, models=("org/served-model",)) as srv:
        spec = {
            "name": "remote",
            "backend": "openai",
            "args": client_args(srv, api_key_env=None, model="org/typo-model"),
        }
        with pytest.raises(BackendError) as err:
            answer_shard(
                queries, tmp_path / "release", ModelUnderTest(spec), tmp_path / "cache", tmp_path / "a.parquet"
            )
        assert "model 'org/typo-model' is not served by" in str(err.value)
        assert "GET /models lists 'org/served-model'" in str(err.value) and "\n" not in str(err.value)
        assert srv.posts == 1  # the probe; the queued requests (3 threads) fail without being sent
        ok = registry.create(
            "vlm", {"backend": "openai", **client_args(srv, api_key_env=None, model="org/served-model")}
        )
        assert ok.answer([VLMRequest("1", "Is there a cloud?", None)]) == ["Yes"]


def test_requests_stay_in_flight_across_batch_boundaries(prior, tmp_path):
    questions = [f"Is there a {o}?" for o in ["cloud", "dog", "sky", "frisbee", "grass", "unicorn", "cat", "car"]]
    queries = make_question_release(tmp_path / "release", questions)
    with ChatServer(prior, delay_s=0.2) as srv:
        spec = {
            "name": "remote",
            "backend": "openai",
            "args": client_args(srv, api_key_env=None, concurrency=4, timeout_s=5),
        }
        answer_shard(
            queries,
            tmp_path / "release",
            ModelUnderTest(spec),
            tmp_path / "cache",
            tmp_path / "a.parquet",
            settings={"batch_size": 2},
        )
    # Batches of 2 answered one after another would never have more than 2 requests at the server.
    assert srv.max_in_flight == 4


def test_jitter_differs_between_clients(server):
    a, b = (registry.create("llm", {"backend": "openai", **client_args(server)}).client for _ in range(2))
    assert [a._wait(3, None) for _ in range(4)] != [b._wait(3, None) for _ in range(4)]


def test_arguments_that_cannot_change_an_answer_keep_the_cache(server, tmp_path):
    queries = make_question_release(tmp_path / "release", ["Is there a cloud?", "Is there a dog?"])
    spec = {"name": "remote", "backend": "openai", "args": client_args(server)}
    answer_shard(queries, tmp_path / "release", ModelUnderTest(spec), tmp_path / "cache", tmp_path / "a.parquet")
    posts = server.posts
    other = client_args(server, concurrency=1, timeout_s=3, max_retries=0, backoff_s=0.5, max_reply_bytes=4096)
    spec = {"name": "remote", "backend": "openai", "args": other}
    stats = answer_shard(
        queries, tmp_path / "release", ModelUnderTest(spec), tmp_path / "cache", tmp_path / "b.parquet"
    )
    assert stats["cache_hits"] == 2 and server.posts == posts


def test_an_empty_reply_fails_an_answer_but_is_no_verdict_for_the_llm_roles(server):
    # No fault here is a timeout: a generous timeout_s, so a reply a loaded machine sends late is not retried (the
    # retry would meet no fault and read "Yes"; with 0.4 s that made this test fail on a busy host).
    args = client_args(server, max_retries=1, timeout_s=30)
    server.faults["cloud"] = ["empty", "blank"]  # both attempts of max_retries 1
    vlm = registry.create("vlm", {"backend": "openai", **args})
    result = vlm.respond([VLMRequest("1", "Is there a cloud?", None)])[0]
    assert (
        result.text is None
        and result.error == "gave up after 2 attempts: server reply is empty (no text or only whitespace)"
    )
    assert server.calls["Is there a cloud?"] == 2 and server.faults["cloud"] == []
    # An examiner, parser or judge reads "" as "no verdict" and falls back to its rules: not a failure there, and
    # not retried (a retry would get "Yes").
    server.faults["cloud"] = ["empty"]
    llm = registry.create("llm", {"backend": "openai", **args})
    assert llm.chat([{"role": "user", "content": "Is there a cloud?"}]) == ""
    assert server.calls["Is there a cloud?"] == 3
