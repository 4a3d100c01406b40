"""Secrets proof: an API key in the environment, really sent to a REAL local OpenAI-compatible
server by the workflow's `answer` rule (the server rejects any other key), appears in no log, result, benchmark,
cache entry or Snakemake metadata file, and not in Snakemake's own output, not even in part — on success, on failure,
when the server echoes the Authorization header back in its error body (at paddings that put the key across the
200-character cut) and when its answers quote it.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from chat_server import ChatServer
from helpers import OBJECTS, answer_targets, api_overlay
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

    # The same echo after padding that puts the key across the 200-character cut of an error body, and answers
    # (HTTP 200) that quote the header at several paddings: answers, cache, parquet, logs, metadata stay clean.
    runs = [echo]
    for name, faults in [
        ("api-echo-cut", [f"401-echo:{pad}" for pad in (140, 150, 156, 160, 170, 150, 156, 160)]),
        ("api-echo-ok", [f"echo-200:{pad}" for pad in (0, 140, 150, 156, 160, 170, 199, 5000)]),
    ]:
        with ChatServer(prior, expected_key=SECRET) as server:
            for obj, fault in zip(OBJECTS, faults):
                server.faults[f"a {obj} "] = [fault]
            overlay = api_overlay(workdir, server, name=name, api_key_env=KEY_ENV, max_failed_fraction=1.0)
            runs.append(
                run_snakemake(
                    workdir, *answer_targets(name), "--cores", "2", "--configfile", "config.yaml", str(overlay), env=env
                )
            )
        table = pl.concat([pl.read_parquet(workdir / t) for t in answer_targets(name)])
        if name == "api-echo-ok":
            assert (table["status"] == "ok").all() and table["answer"].str.ends_with("[REDACTED]").all()

    assert (workdir / ".snakemake").is_dir() and list((workdir / "results").rglob("*.json"))  # cache entries
    # Not the key, nor any 8 consecutive characters of it (a key cut in part by a truncation).
    assert files_holding(workdir, SECRET.encode()) == []
    # Pieces that overlap the key's random part (its "sk-halluflow-" prefix is in every file of the workflow).
    start, end = SECRET.index("7c1e"), SECRET.index("-must")
    pieces = {SECRET[i : i + 8] for i in range(start - 7, end)}
    blobs = {p: p.read_bytes() for p in workdir.rglob("*") if p.is_file() and not p.is_symlink()}
    blobs.update({f"output {i}": (p.stdout + p.stderr).encode() for i, p in enumerate((ok, bad, *runs))})
    assert [(str(where), piece) for where, data in blobs.items() for piece in pieces if piece.encode() in data] == []
