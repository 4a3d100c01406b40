"""CEDI on a REAL evaluatee: the tiny random SmolVLM stand-in through the transformers backend (processor, history
replay, generate), resolved like the answer stage does (`build:` folder under the models cache). Same seed → byte-
identical transcripts and grades; every output says stand_in."""

from __future__ import annotations

import json

import polars as pl
import pytest

from halluflow.backends.transformers_vlm import build_tiny_smolvlm
from halluflow.cedi.pipeline import examine_model, grade_model
from halluflow.models.standins import build_standin, register_builder


@pytest.fixture(scope="module")
def models_cache(tmp_path_factory):
    register_builder("smolvlm", build_tiny_smolvlm)
    cache = tmp_path_factory.mktemp("models")
    build_standin("smolvlm", cache / "tiny-vlm", seed=0)
    return cache


def test_real_standin_vlm_deterministic_transcripts(ode_release, models_cache, tmp_path):  # noqa: F811
    release, graph = ode_release
    spec = {
        "name": "tiny-vlm",
        "backend": "transformers",
        "stand_in": True,
        "build": {"builder": "smolvlm"},
        "args": {"device": "cpu", "batch_size": 8},
    }
    cfg = {
        "seed": 3,
        "cedi": {
            "images": 1,
            "examiners": ["cedi", "caption"],
            "history": ["with", "without"],
            "max_rounds": 7,
            "max_new_tokens": 4,
        },
    }
    outs = []
    for k in range(2):
        d = tmp_path / str(k)
        n = examine_model(cfg, spec, release, graph, d / "t.parquet", d / "truth.json", models_cache=models_cache)
        grade_model(cfg, d / "t.parquet", d / "truth.json", graph, d / "g.json", d / "p.parquet", d / "pred.json")
        outs.append([(d / f).read_bytes() for f in ("t.parquet", "truth.json", "g.json", "p.parquet", "pred.json")])
    assert outs[0] == outs[1]
    df = pl.read_parquet(tmp_path / "0" / "t.parquet")
    assert n == df.height and df["stand_in"].all()
    cedi = df.filter(pl.col("examiner") == "cedi")
    # both history modes: END once the truth graph is covered (from round 6), else the max_rounds cap of 7
    per = cedi.group_by("conversation_id").agg(pl.len().alias("n"), pl.col("end_reason").first())
    assert per.height == 2 and set(per["end_reason"]) <= {"coverage", "switch", "max_rounds"}
    assert all(n == 7 if why == "max_rounds" else 6 <= n < 7 for n, why in per.select("n", "end_reason").iter_rows())
    assert json.loads((tmp_path / "0" / "truth.json").read_text())["model"]["stand_in"] is True


@pytest.mark.slow  # runs Snakemake: stand-in build, CEDI examine and grade
def test_workflow_on_a_visual_genome_file(tmp_path):
    """`cedi.source: visual_genome` through Snakemake: a generated VG-format scene_graphs.json and placeholder images,
    no ODE stage in the DAG (the target pulls only the stand-in build, cedi_examine and cedi_grade)."""
    import yaml
    from helpers import write_vg
    from workflow_utils import copy_workflow, jobs_run, run_snakemake

    work = copy_workflow(tmp_path / "clone")
    sg_file, images = write_vg(tmp_path / "vg")
    overlay = {
        "cedi": {
            "source": "visual_genome",
            "scene_graphs": str(sg_file),
            "images_dir": str(images),
            "models": ["tiny-smolvlm"],
            "images": 2,
            "examiners": ["cedi"],
            "history": ["with"],
            "max_rounds": 6,
            "min_end_round": 6,
            "max_new_tokens": 4,
            "ged_normalizer": 150,
        }
    }
    (work / "vg.yaml").write_text(yaml.safe_dump(overlay))
    target = "results/ode-demo/cedi/tiny-smolvlm/grades.json"
    plan = run_snakemake(work, "-n", "--configfile", "config.yaml", "vg.yaml", "--", target)
    planned = jobs_run(plan)
    assert {"cedi_examine", "cedi_grade"} <= set(planned)
    assert not {"synthesize", "detect", "package_release", "build_graph"} & set(planned)
    proc = run_snakemake(work, "--cores", "1", "--configfile", "config.yaml", "vg.yaml", "--", target)
    assert jobs_run(proc).get("cedi_grade") == 1
    grades = json.loads((work / target).read_text())
    truth = json.loads((work / "results/ode-demo/cedi/tiny-smolvlm/truth_graphs.json").read_text())
    assert truth["source"] == "visual_genome" and len(truth["graphs"]) == 2
    assert set(truth["graphs"]) <= {"101", "102", "103"}
    assert grades["settings"]["source"] == "visual_genome" and grades["stand_in"] is True
    assert grades["ged_normalized"] == pytest.approx(grades["ged"] / 150, abs=1e-6)
    assert grades["summary"]["cedi/with"]["exact_fraction"] == 1.0
