"""Every shipped config is proven offline: each `configs/<name>.yaml` has a `configs/offline/<name>.yaml` override that
swaps real weights (or a remote server) for the offline stand-ins (or a local `transformers serve`) and shrinks the
sizes. Each config plans alone (with its override: tests/test_config.py), and each override runs for real at tiny
size.

The runs share one scratch clone, a copy of the default run (the stand-in models and the demo release are reused)
and take the targets that exercise what the config changes. The CAOS, CEDI and SAMF runs then force one job of theirs
to run again and read from its log that every oracle, evaluatee, LLM and judge request was a request-cache hit.
configs/openai-server.yaml runs its whole default target against a real server in tests/test_served.py.
"""

from __future__ import annotations

import json
import re

import polars as pl
import pytest
from workflow_utils import REPO, copy_run, run_snakemake

from halluflow.plan import merged_config, stage_plan

# Runs Snakemake (still part of CI's plain `pytest -q`) in a copy of the default run (conftest WORKER_GROUPS).
pytestmark = pytest.mark.slow

CONFIGS = sorted(p.stem for p in (REPO / "configs").glob("*.yaml"))


@pytest.fixture(scope="module")
def workdir(default_run, tmp_path_factory):
    """A clone where the README's main job has run, as a user has it when trying a config: each config's own steps
    run (its release, its methods), and what it shares with config.yaml (stand-ins, the demo release) is reused."""
    return copy_run(default_run["dir"], tmp_path_factory.mktemp("configs"))


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


def _hub_ids(config):
    """Every hub id (owner/name) a config loads: models, inline oracle members, the LLM blocks."""
    blocks = [m.get("args") or {} for m in config["models"]]
    blocks += [config["llm"], config["caos"]["llm"] or {}, config["cedi"]["llm"] or {}]
    blocks += [(m.get("args") or {}) for m in config["caos"]["oracle"]["members"] if isinstance(m, dict)]
    return {b["model"] for b in blocks if re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", str(b.get("model") or ""))}


@pytest.mark.parametrize("name", CONFIGS)
def test_paper_configs_name_real_models_and_overrides_replace_them(name):
    paper = merged_config([str(REPO / f"configs/{name}.yaml")], base=REPO / "config.yaml")
    assert paper["models"] and not any(m.get("stand_in") for m in paper["models"]), name
    assert not any("resources/models" in str((m.get("args") or {}).get("model")) for m in paper["models"])
    if not stage_plan(paper)["caos"]:  # CAOS runs: its oracle ensemble is configured
        assert paper["caos"]["oracle"]["members"], name
    offline = merged_config(
        [str(REPO / f"configs/{name}.yaml"), str(REPO / f"configs/offline/{name}.yaml")], base=REPO / "config.yaml"
    )
    # the try-out loads nothing from the hub: every model, oracle and LLM role is a stand-in or a local folder
    assert _hub_ids(offline) == set(), name
    assert _hub_ids(paper), name


@pytest.mark.parametrize("name", CONFIGS)
def test_config_plans_without_its_override(workdir, name):
    # With its override each config is planned by tests/test_config.py and run below; alone it must plan too
    # (a config that only works with the try-out's sizes or stand-ins would be a broken config).
    plan = run_snakemake(workdir, "-n", "--cores", "1", "--configfile", f"configs/{name}.yaml")
    assert "Job stats:" in plan.stdout + plan.stderr


def assert_paper_page(workdir, out: str, paper: str, figures: list[str], stand_in: str) -> str:
    """The paper target's page: each named figure embedded, the stand-in banner naming `stand_in`, every section
    file it was built from beside it (rule paper_<paper>, halluflow.report.papers)."""
    page = (workdir / out / "report" / f"paper_{paper}.html").read_text()
    for fig in figures:
        assert re.search(rf'<h3 id="{re.escape(fig)}">[^<]+</h3><figure><img src="data:image/png;base64,', page), fig
    banner = re.search(r'<div class="banner" id="stand-in-banner">([^<]+)</div>', page)
    assert banner and stand_in in banner.group(1)
    sections = sorted((workdir / out / "paper" / paper).glob("*.json"))
    assert sections and all(json.loads(p.read_text())["paper"] == paper for p in sections)
    return page


def test_ode_paper_offline(workdir):
    out = "results/ode-paper-offline"
    run_snakemake(
        workdir,
        f"{out}/release/manifest.json",
        f"{out}/metrics/prior.json",
        "paper_ode",  # the ODE paper's page, from the same run
        "--cores",
        "2",
        *configfiles("ode-paper"),
        env={"HALLUFLOW_PROGRESS_SECONDS": "0.000001"},  # a progress line after every item of every job
    )
    # A cluster log reads from its first line what the job does (logs are files, not terminals: no tqdm bar) ...
    logs = workdir / "logs" / "ode-paper-offline"
    first = {k: (logs / k).read_text().splitlines()[0] for k in ("synthesize/000.log", "detect/000.log")}
    first["answer"] = (logs / "answer" / "prior" / "000.log").read_text().splitlines()[0]
    assert re.search(
        r"synthesize shard 000: \d+ images in \d+ batches of 4, model \S+tiny-flux", first["synthesize/000.log"]
    )
    assert re.search(r"detect shard 000: \d+ images in \d+ batches of 16, model ", first["detect/000.log"])
    assert re.search(r"model prior \(backend prior\) shard 0/1: \d+ queries, \d+ cache hits", first["answer"])
    # ... and how far it is: counts, rate and ETA
    answer_log = (logs / "answer" / "prior" / "000.log").read_text()
    assert re.search(r"answer prior 000: \d+/\d+ it \(\d+\.\d%\), [\d.]+ it/s, elapsed \d+s, ETA \d+s", answer_log)
    manifest = json.loads((workdir / out / "release" / "manifest.json").read_text())
    assert "stand_in" in json.dumps(manifest)  # the release says plainly it was cut with stand-ins
    queries = pl.read_parquet(workdir / out / "release" / "queries.parquet")
    # The paper's pair lists (8 = 4 distributions x 2 pair kinds), shrunk to one pair each, one image per scene.
    assert queries["image"].n_unique() <= 8 and queries.height > 0
    assert json.loads((workdir / out / "metrics" / "prior.json").read_text())["n_answers"] == queries.height
    # ODE's Fig. 6 and one clustered matrix per model (Fig. 8) on the page; Fig. 1/4 and 7 say what to run
    page = assert_paper_page(workdir, out, "ode", ["fig6-fig6", "fig8-fig8_0", "fig8-fig8_1"], "model tiny-smolvlm")
    assert "Not run: set validity.source" in page and "ODE Fig. 9 layout" in page
    _check_finetune_loop(workdir, out)


def _check_finetune_loop(workdir, parent):
    """ODE's fine-tuning loop on the try-out's release (configs/offline/finetune): a child release, the stand-in
    tuned for two steps by SFT and by DPO, both answered and scored on the child beside the base model, the
    before/after section on the child's paper_ode page."""
    child = "results/ode-paper-offline-child"
    overlay = "configs/offline/finetune/ode-paper-child.yaml"
    run_snakemake(workdir, "paper_ode", "--cores", "2", *configfiles("ode-paper", overlay))
    # the fine-tuning section (Fig. 10/11) on the child's ODE page, beside the sections every ODE page has
    assert_paper_page(workdir, child, "ode", ["finetune-fig10_11", "fig6-fig6"], "tiny-smolvlm")

    def pairs(release):
        scenes = pl.read_parquet(workdir / release / "scenes.parquet")
        return {"|".join(sorted(p)) for p in scenes.select("object_a", "object_b").iter_rows()}

    trained_on, evaluated_on = pairs(f"{parent}/release"), pairs(f"{child}/release")
    assert trained_on and evaluated_on and not trained_on & evaluated_on  # the child shares no concept pair
    section = json.loads((workdir / child / "finetune" / "section.json").read_text())
    assert section["paper"] == "ode" and section["stand_ins"] == ["tiny-smolvlm"] and "STAND-IN" in section["caption"]
    table = section["tables"][0]
    assert table["columns"][:5] == ["distribution", "metric", "base", "sft", "dpo"]
    assert {r[0] for r in table["rows"]} >= {"overall", "standard", "fictional"}
    base = json.loads((workdir / child / "metrics" / "tiny-smolvlm.json").read_text())
    overall = {r[1]: r for r in table["rows"] if r[0] == "overall"}
    assert overall["hallucination_rate"][2] == base["hallucination_rate"]  # "before" is the score rule's number
    n_queries = pl.read_parquet(workdir / child / "release" / "queries.parquet").height
    # the weights before and after, read from the folders themselves (not from the job's own hash)
    from safetensors.torch import load_file

    before = load_file(workdir / "resources" / "models" / "tiny-smolvlm" / "model.safetensors")
    for method in ("sft", "dpo"):
        run = workdir / child / "finetune" / "tiny-smolvlm" / method
        record = json.loads((run / "train.json").read_text())
        assert record["steps"] == 2 and record["weights_sha256_before"] != record["weights_sha256_after"]
        assert json.loads((run / "model" / "halluflow_standin.json").read_text())["stand_in"] is True
        after = load_file(run / "model" / "model.safetensors")
        assert after.keys() == before.keys()
        assert any(not (after[k] == before[k]).all() for k in before)
        answers = pl.read_parquet(run / "answers.parquet")
        assert answers.height == n_queries and answers["stand_in"].all()
        assert json.loads((run / "metrics.json").read_text())["n_answers"] == n_queries


def rerun_cache(workdir, target: str, rule: str, log: str, *config: str) -> dict[str, tuple[int, int]]:
    """Force `rule`'s job for `target` to run again with the same config; its log's request counts per caller
    ("cache (<method> <role>): N hits, M sent", halluflow.workflow.run) as {caller: (hits, sent)}."""
    run_snakemake(workdir, target, "--forcerun", rule, "--cores", "1", *config)
    text = (workdir / "logs" / "ode-demo" / log).read_text()
    return {m[1]: (int(m[2]), int(m[3])) for m in re.finditer(r"cache \(([^)]+)\): (\d+) hits, (\d+) sent", text)}


def test_cedi_offline(workdir):
    target = "results/ode-demo/cedi/tiny-smolvlm/grades.json"
    run_snakemake(workdir, target, "paper_cedi", "--cores", "2", *configfiles("cedi"))
    turns = pl.read_parquet(workdir / "results/ode-demo/cedi/tiny-smolvlm/transcripts.parquet")
    assert set(turns["question_writer"]) == {"llm"} and turns.height >= 3
    grades = json.loads((workdir / target).read_text())
    # CEDI's paper page: the radar's axes come from >= 4 graders on the SAME transcripts of >= 3 examiners
    section = json.loads((workdir / "results/ode-demo/cedi/paper/section.json").read_text())
    radar = section["tables"][0]
    rows = [dict(zip(radar["columns"], r)) for r in radar["rows"]]
    assert len({r["grader"] for r in rows}) >= 4 and len({r["examiner"] for r in rows}) >= 3
    for setting in {r["setting"] for r in rows}:
        examiner, history = setting.split("/")
        sel = turns.filter((pl.col("examiner") == examiner) & (pl.col("history") == history))
        block = grades["comparison"][setting]
        assert block["chair"]["n_captions"] + block["chair"]["n_failed"] == sel.height
        assert block["valor"]["conversations"] == sel["conversation_id"].n_unique()
        assert grades["summary"][setting]["turn_hallucination"]["n"] == sel.height
    page = (workdir / "results/ode-demo/report/paper_cedi.html").read_text()
    assert "data:image/png;base64" in page and section["stand_ins"]
    # A rerun of the examiner asks nothing again: the evaluatee's and the LLM's requests are request-cache hits
    transcripts = "results/ode-demo/cedi/tiny-smolvlm/transcripts.parquet"  # the examiner's job alone, not the grader
    counts = rerun_cache(workdir, transcripts, "cedi_examine", "cedi_examine/tiny-smolvlm.log", *configfiles("cedi"))
    assert counts["cedi vlm"][0] > 0 and counts["cedi vlm"][1] == 0, counts
    assert counts["cedi llm"][0] > 0 and counts["cedi llm"][1] == 0, counts


def test_samf_offline(workdir):
    target = "results/ode-demo/fuzz/prior/comparison.json"
    run_snakemake(workdir, target, "paper_samf", "--cores", "2", *configfiles("samf"))
    summary = json.loads((workdir / target).read_text())
    assert summary
    # both controllers side by side on the same instances, per category, static vs fuzzed
    page = assert_paper_page(workdir, "results/ode-demo", "samf", ["categories-categories_prior"], "SAMF")
    for cell in ("hill_climb (heuristic)", "ucb (RL)", '<td class="text">static</td>', '<td class="text">fuzzed</td>'):
        assert cell in page, cell
    assert "Not run: no human labels given" in page  # Table 4 needs samf.agreement.labels
    # A rerun of the standard evaluation reads every judge and verifier reply back from the request cache
    standard = "results/ode-demo/fuzz/prior/standard.parquet"
    counts = rerun_cache(workdir, standard, "samf_standard_eval", "samf_standard_eval/prior.log", *configfiles("samf"))
    assert counts["samf judge llm"][0] > 0 and counts["samf judge llm"][1] == 0, counts


def test_caos_offline(workdir):
    # The oracle path for real: an ensemble of two stand-in VLMs judges every out-of-domain object
    run_snakemake(workdir, "paper_caos", "--cores", "2", *configfiles("caos"))
    doc = json.loads((workdir / "results/ode-demo/caos/prior.json").read_text())
    members = doc["oracle"]["members"]
    assert [m["name"] for m in members] == ["tiny-smolvlm", "tiny-smolvlm-b"] and all(m["stand_in"] for m in members)
    # every out-of-domain object goes to the oracle (with meta-words such as "picture" no longer objects, the
    # offline captions may name none)
    assert doc["objects"]["n_oracle_judged"] == doc["objects"]["n_out_of_domain"]
    page = assert_paper_page(
        workdir, "results/ode-demo", "caos", ["fig3-fig3", "fig4-fig4", "fig5-fig5"], "oracle member tiny-smolvlm-b"
    )
    assert "oracle ensemble [tiny-smolvlm (STAND-IN), tiny-smolvlm-b (STAND-IN)]" in page
    assert "blind-smollm2" not in page  # the default run's third model is not one of this config's models
    # A rerun of one model's CAOS job asks the oracle nothing again: every member's answer is a request-cache hit
    counts = rerun_cache(
        workdir, "results/ode-demo/caos/prior.json", "caos_score", "caos_score/prior.log", *configfiles("caos")
    )
    if doc["objects"]["n_out_of_domain"]:  # the oracle is asked only about out-of-domain objects
        assert counts["caos oracle vlm"][0] > 0 and counts["caos oracle vlm"][1] == 0, counts
    else:
        assert counts.get("caos oracle vlm", (0, 0))[1] == 0, counts
    assert json.loads((workdir / "results/ode-demo/caos/prior.json").read_text()) == doc  # the same judgement
