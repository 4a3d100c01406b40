"""Secrets proof: an API key in the environment, really sent to a REAL local OpenAI-compatible
server by the workflow's `answer` rule (the server rejects any other key), appears in no log, result, benchmark,
cache entry or Snakemake metadata file, and not in Snakemake's own output — on success, on failure, and when the
server echoes the Authorization header back in its error body.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from chat_server import ChatServer
from test_faults import OBJECTS, answer_targets, api_overlay, prior, workdir  # noqa: F401 (fixtures)
from workflow_utils import run_snakemake

KEY_ENV = "HALLUFLOW_SECRET_TEST_KEY"
pytestmark = pytest.mark.slow  # runs Snakemake (still part of CI's plain `pytest -q`)

SECRET = "sk-halluflow-7c1e2a9b0d4f-must-never-be-written"


def files_holding(root: Path, needle: bytes) -> list[str]:
    """Every file under root (logs, results, caches, .snakemake metadata) whose bytes contain the needle."""
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
            hits.append(str(path.relative_to(root)))
    return hits


def test_api_key_is_sent_but_never_written(workdir, prior):  # noqa: F811
    env = {KEY_ENV: SECRET}
    with ChatServer(prior, expected_key=SECRET) as server:
        overlay = api_overlay(workdir, server, api_key_env=KEY_ENV)
        ok = run_snakemake(
            workdir, *answer_targets(), "--cores", "2", "--configfile", "config.yaml", str(overlay), env=env
        )
        bodies = len(server.bodies)
    table = pl.concat([pl.read_parquet(workdir / t) for t in answer_targets()])
    # Every request passed the server's key check (a wrong or missing key gets HTTP 401 and a failed shard).
    assert (table["status"] == "ok").all() and bodies == table.height

    # A server that rejects the key: the 401 failures are logged, the key still is not.
    with ChatServer(prior, expected_key="another-key") as server:
        overlay = api_overlay(workdir, server, name="api-rejected", api_key_env=KEY_ENV)
        bad = run_snakemake(
            workdir,
            *answer_targets("api-rejected"),
            "--cores",
            "2",
            "--configfile",
            "config.yaml",
            str(overlay),
            env=env,
            check=False,
        )
    assert bad.returncode != 0
    logs = "\n".join(p.read_text() for p in (workdir / "logs").rglob("*.log"))
    assert "HTTP 401" in logs

    # A proxy that quotes the request's Authorization header in its 401 body: the key comes back from the server
    # and must be redacted before the answer table's error column, the job log or Snakemake's output see it.
    with ChatServer(prior, expected_key=SECRET) as server:
        for obj in OBJECTS:
            server.faults[f"a {obj} "] = ["401-echo"]
        overlay = api_overlay(workdir, server, name="api-echo", api_key_env=KEY_ENV, max_failed_fraction=1.0)
        echo = run_snakemake(
            workdir, *answer_targets("api-echo"), "--cores", "2", "--configfile", "config.yaml", str(overlay), env=env
        )
    table = pl.concat([pl.read_parquet(workdir / t) for t in answer_targets("api-echo")])
    assert (table["status"] == "failed").all()
    assert table["error"].str.contains("rejected Authorization: [REDACTED]", literal=True).any()

    assert (workdir / ".snakemake").is_dir() and list((workdir / "results").rglob("*.json"))  # cache entries
    assert files_holding(workdir, SECRET.encode()) == []
    for proc in (ok, bad, echo):
        assert SECRET not in proc.stdout + proc.stderr
