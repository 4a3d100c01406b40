"""Config validation: unknown keys and wrong types stop with a message naming the key; defaults are filled."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from helpers import REPO

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
        [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "--configfile",
            str(bad),
            "--directory",
            str(tmp_path),
            "--snakefile",
            str(repo / "Snakefile"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    assert "config key 'seed'" in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


# ---- meaning of the config: names, cross-references, bounds (halluflow.config.check_semantics) ----


def _default(repo) -> dict:
    return yaml.safe_load((repo / "config.yaml").read_text())


def _dry_run(tmp_path, *configfiles) -> subprocess.CompletedProcess:
    """`snakemake -n` in a scratch clone (relative resource paths resolve there, as in a user's clone)."""
    from workflow_utils import copy_workflow, run_snakemake

    work = copy_workflow(tmp_path / "wf")
    files = []
    for i, config in enumerate(configfiles):
        if isinstance(config, dict):
            (work / f"override{i}.yaml").write_text(yaml.safe_dump(config))
            config = f"override{i}.yaml"
        files.append(str(config))
    return run_snakemake(work, "-n", "--configfile", "config.yaml", *files, check=False, timeout=300)


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c["models"].__setitem__(0, {**c["models"][0], "name": "a/b"}), "'models.0.name'"),
        (lambda c: c["models"].__setitem__(0, {**c["models"][0], "name": "two words"}), "'models.0.name'"),
        (lambda c: c["models"].__setitem__(0, {**c["models"][0], "name": ".."}), "'models.0.name'"),
        (
            lambda c: c["models"].__setitem__(1, {**c["models"][1], "name": c["models"][0]["name"]}),
            "'models.1.name': duplicate model name",
        ),
        (lambda c: c.__setitem__("release", ".."), "'release'"),
        (lambda c: c.__setitem__("release", "."), "'release'"),
        (lambda c: c["cedi"].__setitem__("models", ["nope"]), "'cedi.models.0': no model named 'nope'"),
        (lambda c: c["samf"].__setitem__("models", ["prior", "gone"]), "'samf.models.1': no model named 'gone'"),
        (lambda c: c["samf"].__setitem__("models", "some"), "'samf.models': 'some'"),
        (lambda c: c["caos"]["oracle"].__setitem__("members", ["ghost"]), "'caos.oracle.members.0'"),
        (lambda c: c["caos"].__setitem__("llm", {"model": "org/x"}), "'caos.llm.backend'"),
        (lambda c: c["cedi"].__setitem__("llm", {"backend": "ollama"}), "'cedi.llm.backend'"),
        (lambda c: c["cedi"].__setitem__("source", "visual_genome"), "'cedi.scene_graphs': required"),
        (lambda c: c["shards"].__setitem__("images", 100_000_000), "'shards.images'"),
        (
            lambda c: c["answer"].__setitem__("source", {"kind": "pope", "path": "labels.json"}),
            "'answer.source.images'",
        ),
    ],
)
def test_config_meaning_names_the_key(repo, mutate, key):
    config = _default(repo)
    mutate(config)
    with pytest.raises(ConfigError) as info:
        validate_config(config)
    assert key in str(info.value)
    assert "\n" not in str(info.value)


def test_dotted_model_names_plan_every_method(repo, tmp_path):
    config = {
        "models": [
            {"name": "qwen2.5-vl-7b", "backend": "prior"},
            {"name": "llava-v1.6-7b", "backend": "prior", "args": {"threshold": 0.2}},
        ]
    }
    proc = _dry_run(tmp_path, config)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    for name in ("qwen2.5-vl-7b", "llava-v1.6-7b"):
        for path in (
            f"caos/{name}.json",
            f"diagnosis/{name}.png",
            f"cedi/{name}/grades.json",
            f"fuzz/{name}/comparison.json",
            f"metrics/{name}.json",
            f"answers/{name}/000.parquet",
        ):
            assert f"results/ode-demo/{path}" in out, path
    assert "tiny-smolvlm" not in out  # the demo's models are replaced, not inherited by cedi.models / samf.models


def test_openai_config_plans_without_inheriting_demo_lists(repo, tmp_path):
    proc = _dry_run(tmp_path, "configs/openai-server.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = [m["name"] for m in yaml.safe_load((repo / "configs" / "openai-server.yaml").read_text())["models"]]
    assert any(f"cedi/{n}/grades.json" in proc.stdout for n in names)


def test_method_models_all_and_skip(repo):
    from halluflow.config import method_models

    config = validate_config(_default(repo))
    everyone = [m["name"] for m in config["models"]]
    skipping = [m["name"] for m in config["models"] if "cedi" in m["skip"]]
    assert skipping, "the demo keeps its slow baseline out of CEDI through `skip`"
    assert method_models(config, "cedi") == [n for n in everyone if n not in skipping]
    assert method_models(config, "caos") == everyone
    config["cedi"]["models"] = [everyone[-1]]
    assert method_models(config, "cedi") == [everyone[-1]]


# ---- the one model resolver (halluflow.models.resolve) ----


@pytest.mark.parametrize(
    "spec, gpu_config, gpu, folder, build",
    [
        (
            {"name": "v", "backend": "transformers", "build": {"builder": "smolvlm"}, "args": {"device": "cpu"}},
            True,
            False,
            "resources/models/v",
            "build_standin_vlm",
        ),
        (
            {
                "name": "q",
                "backend": "transformers",
                "args": {"model": "Qwen/Qwen2.5-VL-7B-Instruct", "device": "cuda"},
            },
            False,
            True,
            None,
            None,
        ),
        (
            {"name": "a", "backend": "transformers", "args": {"model": "org/x", "device": "auto"}},
            True,
            True,
            None,
            None,
        ),
        (
            {"name": "a", "backend": "transformers", "args": {"model": "org/x", "device": "auto"}},
            False,
            False,
            None,
            None,
        ),
        (
            {"name": "b", "backend": "blind", "args": {}},
            False,
            False,
            "resources/models/smollm2-135m-instruct",
            "build_local_llm",
        ),
        ({"name": "s", "backend": "vllm", "args": {"model": "org/x"}}, False, True, None, None),
        (
            {"name": "o", "backend": "openai", "args": {"model": "gpt", "base_url": "http://127.0.0.1:8000/v1"}},
            True,
            False,
            None,
            None,
        ),
    ],
)
def test_resolver(spec, gpu_config, gpu, folder, build):
    from halluflow.models import resolve

    resolved = resolve(spec, gpu_available=gpu_config)
    assert (resolved.gpu, resolved.folder, resolved.build_rule) == (gpu, folder, build)
    assert resolved.api == (spec["backend"] == "openai")
    if build == "build_standin_vlm":
        assert resolved.args["model"] == folder and resolved.inputs() == [folder]


def test_model_under_test_uses_the_resolver(tmp_path):
    from halluflow.models.model import ModelUnderTest

    spec = {"name": "v", "backend": "transformers", "build": {"builder": "smolvlm"}, "args": {}}
    assert ModelUnderTest(spec, models_cache=tmp_path).args["model"] == str(tmp_path / "v")
    prior = ModelUnderTest({"name": "p", "backend": "prior"}, graph_dir="g")
    assert prior.args["graph"] == "g"


CONFIGS = sorted(p.name for p in (REPO / "configs").glob("*.yaml"))


@pytest.mark.parametrize("name", CONFIGS)
def test_every_shipped_config_plans(tmp_path, name):
    """`snakemake -n --configfile config.yaml configs/X.yaml [configs/offline/X.yaml]` plans without error (the
    offline override, where one exists, swaps hub models for ones that load without network)."""
    files = [f"configs/{name}"]
    if (REPO / "configs" / "offline" / name).exists():
        files.append(f"configs/offline/{name}")
    proc = _dry_run(tmp_path, *files)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Nothing to be done" not in proc.stdout + proc.stderr


def test_unihall_file_is_not_read_while_planning(tmp_path):
    """The training groups of a UniHall source come from samf_instances' split (a checkpoint): planning never opens
    the user's file, so even a file that is not JSON yet plans (and samf_instances reports it when it runs)."""
    unihall = tmp_path / "unihall.json"
    unihall.write_text("not json yet")
    proc = _dry_run(tmp_path, {"samf": {"source": {"format": "unihall", "path": str(unihall)}}})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "samf_instances" in proc.stdout
