"""The CLI table and the backend registries: unknown names list the known ones; missing extras name the pip extra."""

from __future__ import annotations

import importlib.util

import pytest

from halluflow import cli
from halluflow.cli.command import text
from halluflow.errors import ConfigError, MissingExtraError
from halluflow.models import registry


def test_top_level_help_lists_groups(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    for group in ("release", "score", "sg", "fuzz", "report"):
        assert group in out


def test_every_cli_module_exists_and_has_examples():
    for group, module in cli.GROUPS.items():
        assert importlib.util.find_spec(f"halluflow.cli.{module}") is not None, f"{group}: module {module} missing"
    for group, command in cli.commands():
        assert callable(command.configure) and callable(command.run), f"{group} {command.name}"
        assert "halluflow" in (text(command.epilog) or ""), f"{group} {command.name}: --help needs examples"


def test_unknown_backend_lists_known_names():
    with pytest.raises(ConfigError, match="known: .*blind"):
        registry.VLMS.resolve("nope")


def test_missing_extra_names_the_extra():
    reg = registry.Registry("vlm")
    reg.register("x", "vllm.nonexistent_module:Thing")
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    with pytest.raises(MissingExtraError, match=r"halluflow\[vllm\]"):
        reg.resolve("x")


def test_builtin_backends_import():
    for role, reg in registry.REGISTRIES.items():
        for name in reg.names():
            if name == "vllm":
                continue
            assert isinstance(reg.resolve(name), type), f"{role} {name}"


def test_help_imports_no_heavy_library():
    """`halluflow --help` and `halluflow score pope --help` start without polars, numpy, tqdm or torch (their
    import is most of the start-up time; bench numbers are in the README, speed is not asserted here)."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom halluflow.cli import main\n"
        "for argv in ([], ['--help'], ['score', 'pope', '--help']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "print(sorted(m for m in ('polars', 'numpy', 'tqdm', 'torch', 'pyarrow', 'PIL') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_every_scorer_takes_out():
    """The README: every scorer writes its JSON with --out (score ghr and sg ged had none)."""
    import argparse

    scorers = [(g, c) for g, c in cli.commands() if g == "score" or (g, c.name) == ("sg", "ged")]
    assert {c.name for _, c in scorers} >= {"pope", "chair", "amber", "caos", "compare", "ghr", "ged"}
    for group, command in scorers:
        parser = argparse.ArgumentParser()
        command.configure(parser)
        assert "--out" in parser._option_string_actions, f"{group} {command.name} has no --out"


def test_standin_help_lists_every_kind_of_the_builder_table(capsys):
    """`halluflow --help` and `halluflow standin --help` list the kinds from the builder table itself: a kind
    registered later shows up too (the old one-line help named 4 of the kinds it builds)."""
    from halluflow.models import standins

    assert len(standins.builder_kinds()) >= 9
    standins.register_builder("zz_help_kind", lambda out, seed, **cfg: None)
    try:
        kinds = standins.builder_kinds()
        assert cli.main([]) == 0
        top = " ".join(capsys.readouterr().out.split())  # argparse wraps the help column
        with pytest.raises(SystemExit) as exit_info:
            cli.main(["standin", "--help"])
        assert exit_info.value.code == 0
        own = capsys.readouterr().out
    finally:
        standins._BUILDERS.pop("zz_help_kind")
    assert ", ".join(kinds) in top and f"kinds: {', '.join(kinds)}" in own


def test_registry_refuses_a_class_of_another_role_in_one_line():
    from halluflow.backends.base import VLM

    class NotAnLLM(VLM):
        def answer(self, requests):
            return []

        def describe(self):
            raise NotImplementedError

    reg = registry.Registry("llm", "halluflow.backends.base:LLM")
    with pytest.raises(
        ConfigError, match=r"^llm backend 'v': \S+NotAnLLM does not subclass halluflow\.backends\.base\.LLM"
    ):
        reg.register("v", NotAnLLM)
    reg.register("prior", "halluflow.backends.prior:LanguagePriorVLM")  # a string entry is checked when created
    with pytest.raises(ConfigError, match="LanguagePriorVLM does not subclass"):
        reg.create("prior")
    assert "\n" not in str(pytest.raises(ConfigError, reg.resolve, "prior").value)
    assert all(reg.base_cls for reg in registry.REGISTRIES.values())
