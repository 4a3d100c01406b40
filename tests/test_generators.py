"""Several text-to-image models in one release (`synthesis.generators`): shards split by share, every image and
query records its generator, and the metrics break down by generator — run through the real workflow on two tiny
random FLUX stand-ins (different seeds)."""

from __future__ import annotations

import json

import polars as pl
import pytest
import yaml
from workflow_utils import copy_workflow, run_snakemake

from halluflow.errors import ConfigError
from halluflow.models import generators, shard_generators

BASE = {
    "model": "black-forest-labs/FLUX.1-dev",
    "backend": "diffusers",
    "steps": 4,
    "stand_in": {"enabled": True, "builder": "flux", "name": "tiny-flux", "seed": 0, "args": {}},
}


def test_shards_split_by_share():
    two = {
        **BASE,
        "generators": [
            {"name": "a", "share": 3},
            {"name": "b", "share": 1, "steps": 8, "stand_in": {"name": "tiny-flux-b", "seed": 1}},
        ],
    }
    per_shard = [g["name"] for g in shard_generators(two, 8)]
    assert per_shard == ["a"] * 6 + ["b"] * 2
    b = generators(two)[1]
    assert b["steps"] == 8 and b["stand_in"] == {
        "enabled": True,
        "builder": "flux",
        "name": "tiny-flux-b",
        "seed": 1,
        "args": {},
    }
    assert [g["name"] for g in shard_generators(BASE, 2)] == ["tiny-flux", "tiny-flux"]
    assert [
        g["name"]
        for g in shard_generators({**two, "generators": [{"name": "a", "share": 100}, {"name": "b", "share": 1}]}, 3)
    ] == ["a", "a", "b"]  # each gets a shard
    with pytest.raises(ConfigError, match="synthesis.generators"):
        shard_generators(two, 1)


OVERRIDE = {
    "release": "two-generators",
    "shards": {"images": 2, "answers": 1},
    "ode": {
        "sampling": {
            "sizes": {
                d: {"entity_entity": 1, "entity_environment": 1}
                for d in ("standard", "long_tail", "random", "fictional")
            }
        },
        "filter": {"keep_threshold": 0.0, "balance": False},
    },
    "synthesis": {
        "steps": 2,
        "height": 64,
        "width": 64,
        "call_args": {"max_sequence_length": 64},
        "generators": [
            {"name": "flux-a", "share": 1, "stand_in": {"name": "tiny-flux-a", "seed": 0}},
            {"name": "flux-b", "share": 1, "stand_in": {"name": "tiny-flux-b", "seed": 1}},
        ],
    },
    "models": [{"name": "prior", "backend": "prior", "stand_in": False, "args": {"threshold": 0.1}}],
    "caos": {"enabled": False},
    "diagnosis": {"enabled": False},
    "cedi": {"enabled": False},
    "samf": {"enabled": False},
    "report": {"enabled": False},
}


@pytest.mark.slow  # runs the ODE stage through Snakemake with two generators
def test_release_by_two_generators_has_metrics_by_generator(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    (work / "two.yaml").write_text(yaml.safe_dump(OVERRIDE))
    out = work / "results" / "two-generators"
    run_snakemake(
        work,
        "--cores",
        "2",
        "--configfile",
        "config.yaml",
        "two.yaml",
        "--",
        "results/two-generators/metrics/prior.json",
        env={"OMP_NUM_THREADS": "1"},
    )
    images = pl.concat([pl.read_parquet(p) for p in sorted((out / "images").glob("*.parquet"))])
    assert sorted(images["generator"].unique()) == ["flux-a", "flux-b"]
    # Each generator's images come from its own stand-in folder.
    assert {g: m.split("/")[-1] for g, m in images.select("generator", "model").unique().iter_rows()} == {
        "flux-a": "tiny-flux-a",
        "flux-b": "tiny-flux-b",
    }
    queries = pl.read_parquet(out / "queries" / "queries.parquet")
    assert queries["generator"].null_count() == 0
    metrics = json.loads((out / "metrics" / "prior.json").read_text())
    by_gen = metrics["by_generator"]
    assert set(by_gen) == set(queries["generator"].unique())
    # The blocks partition the answers.
    n = {g: queries.filter(pl.col("generator") == g).height for g in by_gen}
    assert sum(n.values()) == metrics["n_answers"]
    manifest = json.loads((out / "release" / "manifest.json").read_text())
    assert {m["model"].split("/")[-1] for m in manifest["models"] if m["role"] == "synthesizer"} == {
        "tiny-flux-a",
        "tiny-flux-b",
    }
