"""Every shipped config is proven offline: each `configs/<name>.yaml` has a `configs/offline/<name>.yaml` override that
swaps real weights (or a remote server) for the offline stand-ins (or a local `transformers serve`) and shrinks the
sizes. Each config plans alone (with its override: tests/test_config.py), and each override runs for real at tiny
size.

The runs share one scratch clone (the stand-in models and the demo release are built once) and take the targets
that exercise what the config changes; configs/openai-server.yaml runs its whole default target against a real
server (tests/served.py).
"""

from __future__ import annotations

import json

import polars as pl
import pytest
import yaml
from served import LLM_ID, VLM_ID
from workflow_utils import REPO, copy_workflow, run_snakemake

pytestmark = pytest.mark.slow  # runs Snakemake (still part of CI's plain `pytest -q`)

CONFIGS = sorted(p.stem for p in (REPO / "configs").glob("*.yaml"))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("configs"))


def configfiles(name: str, *extra: str) -> list[str]:
    return ["--configfile", f"configs/{name}.yaml", f"configs/offline/{name}.yaml", *extra]


def test_every_config_has_an_offline_override():
    assert CONFIGS == ["cedi", "ode-paper", "openai-server", "samf"] or len(CONFIGS) > 4
    overrides = sorted(p.stem for p in (REPO / "configs" / "offline").glob("*.yaml"))
    assert overrides == CONFIGS
    for name in CONFIGS:
        text = (REPO / "configs" / "offline" / f"{name}.yaml").read_text()
        assert text.startswith(f"# OFFLINE TRY-OUT of configs/{name}.yaml: try a config before renting GPUs")
        assert f"--configfile configs/{name}.yaml configs/offline/{name}.yaml" in text  # the command to run it


@pytest.mark.parametrize("name", CONFIGS)
def test_config_plans_without_its_override(workdir, name):
    # With its override each config is planned by tests/test_config.py and run below; alone it must plan too
    # (a config that only works with the try-out's sizes or stand-ins would be a broken config).
    plan = run_snakemake(workdir, "-n", "--cores", "1", "--configfile", f"configs/{name}.yaml")
    assert "Job stats:" in plan.stdout + plan.stderr


def test_ode_paper_offline(workdir):
    out = "results/ode-paper-offline"
    run_snakemake(
        workdir, f"{out}/release/manifest.json", f"{out}/metrics/prior.json", "--cores", "2", *configfiles("ode-paper")
    )
    manifest = json.loads((workdir / out / "release" / "manifest.json").read_text())
    assert "stand_in" in json.dumps(manifest)  # the release says plainly it was cut with stand-ins
    queries = pl.read_parquet(workdir / out / "release" / "queries.parquet")
    # The paper's pair lists (8 = 4 distributions x 2 pair kinds), shrunk to one pair each, one image per scene.
    assert queries["image"].n_unique() <= 8 and queries.height > 0
    assert json.loads((workdir / out / "metrics" / "prior.json").read_text())["n_answers"] == queries.height


def test_cedi_offline(workdir):
    target = "results/ode-demo/cedi/tiny-smolvlm/grades.json"
    run_snakemake(workdir, target, "--cores", "2", *configfiles("cedi"))
    turns = pl.read_parquet(workdir / "results/ode-demo/cedi/tiny-smolvlm/transcripts.parquet")
    assert set(turns["question_writer"]) == {"llm"} and turns.height >= 3
    assert json.loads((workdir / target).read_text())


def test_samf_offline(workdir):
    target = "results/ode-demo/fuzz/prior/comparison.json"
    run_snakemake(workdir, target, "--cores", "2", *configfiles("samf"))
    summary = json.loads((workdir / target).read_text())
    assert summary


def test_openai_server_offline_against_transformers_serve(workdir, served):
    override = yaml.safe_load((REPO / "configs/offline/openai-server.yaml").read_text())
    assert override["models"][0]["args"]["model"] == VLM_ID and override["llm"]["model"] == LLM_ID
    # The shipped override points at port 8000; this test's server listens on a free port.
    text = (
        (REPO / "configs/offline/openai-server.yaml").read_text().replace("http://127.0.0.1:8000/v1", served.base_url)
    )
    (workdir / "openai-local.yaml").write_text(text)
    vlm_before, llm_before = served.requests_for(VLM_ID), served.requests_for(LLM_ID)
    run_snakemake(
        workdir,
        "--cores",
        "2",
        "--resources",
        "api_calls=1",
        "--configfile",
        "configs/openai-server.yaml",
        "openai-local.yaml",
    )
    out, model = workdir / "results/ode-demo", "tiny-smolvlm-served"
    answers = pl.read_parquet(out / f"answers/{model}/000.parquet")
    assert (answers["status"] == "ok").all() and answers.height > 10
    assert all(a == a.strip() for a in answers["answer"])
    turns = pl.read_parquet(out / f"cedi/{model}/transcripts.parquet")
    assert set(turns["question_writer"]) == {"llm"}
    caos = json.loads((out / f"caos/{model}.json").read_text())
    assert caos["extractor"] == "llm" and caos["oracle"]
    assert (out / f"fuzz/{model}/comparison.json").exists()
    # Every role really went over HTTP: the model under test, CEDI, SAMF and the CAOS oracle ask the served VLM;
    # the CEDI question writer + parser, SAMF judge and CAOS extractor ask the served LLM.
    assert served.requests_for(VLM_ID) - vlm_before > answers.height
    assert served.requests_for(LLM_ID) - llm_before >= 3
