"""Config validation: unknown keys and wrong types stop with a message naming the key; defaults are filled."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from halluflow.config import load_config, load_schema, validate_config
from halluflow.errors import ConfigError


def _walk(schema: dict, path: str = ""):
    for key, sub in (schema.get("properties") or {}).items():
        yield f"{path}{key}", sub
        if isinstance(sub, dict):
            yield from _walk(sub, f"{path}{key}.")
            if isinstance(sub.get("items"), dict):
                yield from _walk(sub["items"], f"{path}{key}[].")


def test_default_config_is_valid(repo):
    config = load_config(repo / "config.yaml")
    assert config["release"]
    assert config["shards"]["images"] >= 1


def test_every_schema_key_has_description_and_default():
    missing = [
        path
        for path, sub in _walk(load_schema())
        if "description" not in sub or ("default" not in sub and "[]" not in path)
    ]
    assert not missing, f"schema keys without description/default: {missing}"


@pytest.mark.parametrize(
    "patch, expected",
    [
        ({"bogus": 1}, "'bogus': unknown key"),
        ({"seed": "abc"}, "'seed': 'abc' is not of type 'integer'"),
        ({"shards": {"images": 0}}, "'shards.images'"),
        ({"shards": {"answerz": 2}}, "'shards.answerz': unknown key"),
    ],
)
def test_bad_config_names_the_key(repo, patch, expected):
    config = yaml.safe_load((repo / "config.yaml").read_text())
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    with pytest.raises(ConfigError) as info:
        validate_config(config)
    assert expected in str(info.value)


def test_defaults_are_filled():
    config = {"release": "x"}
    validate_config(config)
    assert config["seed"] == 42
    assert config["shards"] == {"images": 2, "answers": 2}


def test_snakemake_stops_before_any_job_on_bad_config(repo, tmp_path):
    bad = tmp_path / "bad.yaml"
    config = yaml.safe_load((repo / "config.yaml").read_text())
    config["seed"] = "not-a-number"
    bad.write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--configfile", str(bad), "--directory", str(tmp_path),
         "--snakefile", str(repo / "Snakefile")],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode != 0
    assert "config key 'seed'" in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()
