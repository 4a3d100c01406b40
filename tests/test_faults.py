"""Workflow-level fault proof: an OpenAI-compatible model under test, served by a REAL local HTTP
server (tests/chat_server.py), faces 429 / 500 / connection reset / timeout / malformed JSON through the workflow's
`answer` rule. Transient faults are retried with backoff; a request that keeps failing is recorded as failed, never
cached, and a rerun retries only it: no finished request is repeated, nothing else is lost.

Unit-level retry tests live in tests/test_openai_http.py; this file runs Snakemake.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from chat_server import ChatServer
from PIL import Image
from test_backends_prior import make_graph
from workflow_utils import copy_workflow, jobs_run, run_snakemake

from halluflow import registry

# Objects of make_graph's vocabulary; one POPE question each (two answer shards split them by query-id hash).
OBJECTS = ["dog", "frisbee", "grass", "unicorn", "sky", "cloud", "cat", "car"]
SUFFIX = " Answer yes or no."
RELEASE = "faults"

pytestmark = pytest.mark.slow  # runs Snakemake (still part of CI's plain `pytest -q`)


def write_pope_set(root: Path) -> Path:
    """A POPE-format static set: label JSONL + one small PNG per question (the images really travel as data URLs)."""
    images = root / "images"
    images.mkdir(parents=True)
    rng = np.random.default_rng(0)
    lines = []
    for i, obj in enumerate(OBJECTS):
        name = f"img{i}.png"
        Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)).save(images / name)
        lines.append(
            json.dumps(
                {
                    "question_id": i,
                    "image": name,
                    "text": f"Is there a {obj} in the image?",
                    "label": "yes" if i % 2 else "no",
                }
            )
        )
    (root / "pope.jsonl").write_text("\n".join(lines) + "\n")
    return root


def api_overlay(workdir: Path, server: ChatServer, name: str = "api", api_key_env: str | None = None, **answer) -> Path:
    """A --configfile that swaps the models under test for one HTTP model answering the static POPE set."""
    overlay = {
        "release": RELEASE,
        "models": [
            {
                "name": name,
                "backend": "openai",
                "stand_in": False,
                "args": {
                    "base_url": server.base_url,
                    "model": "prior-over-http",
                    "api_key_env": api_key_env,
                    "timeout_s": 1.0,  # generous: a loaded CI machine must not time out a normal reply
                    "max_retries": 3,
                    "backoff_s": 0.01,
                    "backoff_max_s": 0.05,
                    "concurrency": 2,
                },
            }
        ],
        "answer": {
            "source": {"kind": "pope", "path": "static/pope.jsonl", "images": "static/images", "annotations": None},
            **answer,
        },
        # Other stages name the default models; they are not part of this proof.
        "samf": {"enabled": False, "models": None},
        "cedi": {"enabled": False, "models": None},
    }
    path = workdir / f"overlay-{name}.yaml"
    path.write_text(yaml.safe_dump(overlay))
    return path


def answer_targets(model: str = "api") -> list[str]:
    return [f"results/{RELEASE}/answers/{model}/{shard:03d}.parquet" for shard in range(2)]


@pytest.fixture(scope="module")
def prior(tmp_path_factory):
    graph = make_graph(tmp_path_factory.mktemp("graph"))
    return registry.create("vlm", {"backend": "prior", "graph": str(graph)})


@pytest.fixture
def workdir(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    write_pope_set(work / "static")
    return work


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
