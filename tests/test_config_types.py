"""Typed config sections (halluflow.config_types): generated from the schema and current, exact round trips for the
shipped configs, schema defaults for a partial section, errors naming the key, frozen instances and tuple arrays."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from helpers import REPO

from halluflow.config import load_schema, read_config_file, validate_config
from halluflow.config_types import Caos, Config, Llm, ModelsItem, OdeFilter, OdeGraph, Samf, Scoring
from halluflow.errors import ConfigError
from halluflow.plan import merged_config

CONFIGS = sorted(p.name for p in (REPO / "configs").glob("*.yaml"))


def test_generated_module_is_current(tmp_path):
    """config_types.py is what tools/gen_config_types.py writes from today's schema (regenerate after a change)."""
    out = tmp_path / "config_types.py"
    subprocess.run([sys.executable, str(REPO / "tools" / "gen_config_types.py"), "--out", str(out)], check=True)
    current = (REPO / "src" / "halluflow" / "config_types.py").read_text(encoding="utf-8")
    assert out.read_text(encoding="utf-8") == current, "run `python tools/gen_config_types.py` and commit the result"


def test_default_config_round_trips(repo):
    validated = validate_config(read_config_file(repo / "config.yaml"))
    config = Config.from_dict(validated)
    assert config.to_dict() == validated
    assert Config.from_dict(config) is config
    assert config.ode.filter.keep_threshold == validated["ode"]["filter"]["keep_threshold"]


@pytest.mark.parametrize("name", CONFIGS)
def test_shipped_configs_round_trip(name):
    """Every configs/*.yaml layered on config.yaml as the workflow runs it (with its offline override, if any)."""
    files = [str(REPO / "configs" / name)]
    if (REPO / "configs" / "offline" / name).exists():
        files.append(str(REPO / "configs" / "offline" / name))
    validated = merged_config(files, base=REPO / "config.yaml")
    config = Config.from_dict(validated)
    assert config.to_dict() == validated
    for key, value in validated.items():
        if isinstance(value, dict):
            section = getattr(config, key)
            assert type(section).from_dict(value) == section
            assert section.to_dict() == value


def test_partial_section_gets_the_schema_defaults():
    schema = load_schema()["properties"]["ode"]["properties"]["filter"]["properties"]
    section = OdeFilter.from_dict({"keep_threshold": 0.5})
    assert section.keep_threshold == 0.5
    assert section.exclusion_threshold == schema["exclusion_threshold"]["default"]
    assert section.balance == schema["balance"]["default"]
    caos = Caos.from_dict({})
    assert caos.to_dict() == validate_config({})["caos"]
    assert Caos.from_dict(caos) is caos
    # nested sections and array entries are completed too; the caller's mapping is left as it was
    given = {"extra_sources": [{"format": "coco"}]}
    graph = OdeGraph.from_dict(given)
    assert given == {"extra_sources": [{"format": "coco"}]}
    assert graph.source.format == "seed"
    assert graph.extra_sources[0].format == "coco" and graph.extra_sources[0].separator == ";"


def test_backend_branch_keys_round_trip():
    """llm's keys beyond the common ones depend on the backend (if/then/else): only the branch that applies is
    filled in, the other branch's fields hold None and to_dict leaves them out."""
    openai = Llm.from_dict({"backend": "openai"})
    assert openai.max_retries == 5 and openai.device is None
    assert "device" not in openai.to_dict() and Llm.from_dict(openai.to_dict()) == openai
    local = Llm.from_dict({})
    assert local.device == "cpu" and local.max_retries is None and "max_retries" not in local.to_dict()


@pytest.mark.parametrize(
    ("cls", "value", "key"),
    [
        (OdeFilter, {"keep_treshold": 0.5}, "ode.filter.keep_treshold"),
        (OdeFilter, {"keep_threshold": "high"}, "ode.filter.keep_threshold"),
        (OdeGraph, {"extra_sources": [{"format": "seed", "pth": "x"}]}, "ode.graph.extra_sources.0.pth"),
        (Samf, {"ghr": {"tau": 1}}, "samf.ghr.tau"),
        (Llm, {"backend": "openai", "dtype": "auto"}, "llm"),
        (ModelsItem, {"name": "m", "backend": "prior", "devise": "cpu"}, "models.*.devise"),
        (Config, {"scoring": {"bootstrap": {"resample": 10}}}, "scoring.bootstrap.resample"),
    ],
)
def test_unknown_or_wrong_key_names_the_key(cls, value, key):
    with pytest.raises(ConfigError, match=rf"^config key '{key}'"):
        cls.from_dict(value)


def test_not_a_mapping_names_the_section():
    with pytest.raises(ConfigError, match=r"^config key 'scoring': expected a mapping"):
        Scoring.from_dict(["bootstrap"])


def test_sections_are_frozen_and_arrays_are_tuples():
    config = Config.from_dict(validate_config({"models": [{"name": "p", "backend": "prior"}]}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.seed = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.ode.filter.keep_threshold = 1.0
    assert isinstance(config.models, tuple) and isinstance(config.models[0], ModelsItem)
    assert isinstance(config.ode.queries.strategies, tuple)
    assert isinstance(config.caos.oracle.members, tuple)
    with pytest.raises(TypeError):
        config.models[0].args["x"] = 1  # open mappings are read-only views
    assert config.to_dict()["models"][0]["args"] == {}


def test_no_defaults_in_the_dataclasses():
    """Defaults live only in the schema: no field of a section class has a default."""
    import halluflow.config_types as config_types

    for name in config_types.__all__:
        for field in dataclasses.fields(getattr(config_types, name)):
            assert field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING, (name, field)


def test_direct_construction_is_keyword_only_and_complete():
    """Built by hand (no schema pass), a section still needs every field by name; equal sections hash alike."""
    reference = OdeFilter.from_dict({"keep_threshold": 0.5})
    section = OdeFilter(**reference.to_dict())
    assert section == reference and hash(section) == hash(reference)
    fields = ", ".join(f"{k}={v!r}" for k, v in reference.to_dict().items())
    assert repr(section) == f"OdeFilter({fields})"
    with pytest.raises(TypeError, match="missing fields"):
        OdeFilter(keep_threshold=0.5)
    with pytest.raises(TypeError):
        OdeFilter(*reference.to_dict().values())
    assert dataclasses.replace(section, balance=not section.balance).balance is not section.balance
