"""Workflow-level fault proof: an OpenAI-compatible model under test, served by a REAL local HTTP
server (tests/chat_server.py), faces 429 / 500 / connection reset / timeout / malformed JSON through the workflow's
`answer` rule. Transient faults are retried with backoff; a request that keeps failing is recorded as failed, never
cached, and a rerun retries only it: no finished request is repeated, nothing else is lost.

Unit-level retry tests live in tests/test_openai_http.py; this file runs Snakemake.
"""

from __future__ import annotations

import polars as pl
import pytest
from chat_server import ChatServer
from helpers import OBJECTS, answer_targets, api_overlay
from workflow_utils import jobs_run, run_snakemake

# The fixtures `prior` (the model behind the server) and `workdir` (a clone with the static POPE set) are in conftest.py.
SUFFIX = " Answer yes or no."

pytestmark = pytest.mark.slow  # runs Snakemake (still part of CI's plain `pytest -q`)


def question(obj: str) -> str:
    return f"Is there a {obj} in the image?{SUFFIX}"


def test_faults_are_retried_then_failures_rerun_alone(workdir, prior):
    with ChatServer(prior, stall_s=2.5) as server:
        overlay = api_overlay(workdir, server)
        # Transient faults (each fewer than max_retries + 1 attempts) and one request that never gets through.
        server.faults["a dog "] = ["429", "500"]
        server.faults["a frisbee "] = ["reset"]
        server.faults["a grass "] = ["timeout"]
        server.faults["a sky "] = ["malformed"]
        server.faults["a unicorn "] = ["malformed"] * 4  # max_retries 3 -> 4 attempts, all malformed
        first = run_snakemake(
            workdir,
            *answer_targets(),
            "--cores",
            "2",
            "--keep-going",
            "--configfile",
            "config.yaml",
            str(overlay),
            check=False,
        )
        # A shard with a failed request fails its job (max_failed_fraction 0); the other shard still finishes.
        assert first.returncode != 0, first.stderr[-3000:]
        attempts = dict(server.calls)
        assert attempts[question("dog")] == 3 and attempts[question("frisbee")] == 2
        assert attempts[question("grass")] == 2 and attempts[question("sky")] == 2
        assert attempts[question("unicorn")] == 4
        assert all(
            attempts[question(o)] == 1 for o in OBJECTS if o not in {"dog", "frisbee", "grass", "sky", "unicorn"}
        )

        unicorn_id = str(OBJECTS.index("unicorn"))
        logs = "\n".join(p.read_text() for p in (workdir / "logs").rglob("*.log"))
        assert f"query {unicorn_id}: gave up after 4 attempts" in logs, logs[-3000:]
        # The failing shard's table is never left at its final path; the other shard is complete.
        written = [t for t in answer_targets() if (workdir / t).exists()]
        assert len(written) == 1, written
        assert not list((workdir / "results").rglob("*.part"))

        rerun = run_snakemake(workdir, *answer_targets(), "--cores", "2", "--configfile", "config.yaml", str(overlay))
        assert jobs_run(rerun).get("answer") == 1, jobs_run(rerun)  # the finished shard is not rerun
        repeated = {q: n - attempts.get(q, 0) for q, n in server.calls.items() if n != attempts.get(q, 0)}
        assert repeated == {question("unicorn"): 1}, repeated  # only the failed request is asked again

    table = pl.concat([pl.read_parquet(workdir / t) for t in answer_targets()]).sort("query_id")
    assert table.height == len(OBJECTS) and (table["status"] == "ok").all()
    expected = [server.answer({"messages": [{"content": question(o)}]}) for o in OBJECTS]
    assert table["answer"].to_list() == [expected[int(q)] for q in table["query_id"]]


def test_tolerated_failures_are_recorded_then_retried_on_forcerun(workdir, prior):
    with ChatServer(prior) as server:
        overlay = api_overlay(workdir, server, max_failed_fraction=0.5)
        server.faults["a cat "] = ["500"] * 4
        run_snakemake(workdir, *answer_targets(), "--cores", "2", "--configfile", "config.yaml", str(overlay))
        table = pl.concat([pl.read_parquet(workdir / t) for t in answer_targets()])
        failed = table.filter(pl.col("status") == "failed")
        assert failed["query_id"].to_list() == [str(OBJECTS.index("cat"))]
        assert failed["error"][0].startswith("gave up after 4 attempts: HTTP 500"), failed["error"][0]
        assert failed["answer"][0] == ""
        before = dict(server.calls)
        # An accepted shard is up to date for Snakemake; forcing the rule retries only what failed (cache hits).
        run_snakemake(
            workdir,
            *answer_targets(),
            "--cores",
            "2",
            "--forcerun",
            "answer",
            "--configfile",
            "config.yaml",
            str(overlay),
        )
        repeated = {q: n - before.get(q, 0) for q, n in server.calls.items() if n != before.get(q, 0)}
        assert repeated == {question("cat"): 1}, repeated
    table = pl.concat([pl.read_parquet(workdir / t) for t in answer_targets()])
    assert (table["status"] == "ok").all()
