"""The CLI's layout: argparse and the command hooks live only in halluflow/cli; every command's --help works; an
alias is the same command under an older name.

The layout checks read the source with `ast` (no import of the checked modules)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from halluflow import cli

SRC = Path(__file__).resolve().parents[1] / "src" / "halluflow"
CLI_HOOKS = {"configure": "parser", "run": "args"}  # a command hook: configure(parser) / run(args)


def _domain_modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "cli" not in p.relative_to(SRC).parts[:1])


def _imported(path: Path, node: ast.AST) -> list[str]:
    """Absolute module names an import statement names (relative ones resolved against `path`)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if not node.level:
        base = node.module or ""
    else:
        parts = ["halluflow", *path.relative_to(SRC).with_suffix("").parts]
        package = parts if parts[-1] == "__init__" else parts[:-1]
        package = [p for p in package if p != "__init__"][: len(package) - node.level + 1 or None]
        base = ".".join([*package, *([node.module] if node.module else [])])
    return [base] + [f"{base}.{a.name}" for a in node.names]


def test_the_scan_sees_every_domain_module_and_resolves_relative_imports():
    modules = _domain_modules()
    assert SRC / "metrics" / "pope.py" in modules and SRC / "cli" / "score.py" not in modules
    node = ast.parse("from .. import cli").body[0]
    assert "halluflow.cli" in _imported(SRC / "metrics" / "pope.py", node)
    node = ast.parse("from .cli.argtypes import fraction").body[0]
    assert "halluflow.cli.argtypes" in _imported(SRC / "answer.py", node)


def test_no_domain_module_parses_arguments_or_imports_the_cli():
    found = []
    for path in _domain_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(SRC)
        for node in ast.walk(tree):
            for name in _imported(path, node):
                if name == "argparse" or name.startswith("argparse.") or name.split(".")[:2] == ["halluflow", "cli"]:
                    found.append(f"{where}:{node.lineno} imports {name}")
            if isinstance(node, ast.FunctionDef) and node.name in CLI_HOOKS:
                first = node.args.args[0].arg if node.args.args else None
                if first == CLI_HOOKS[node.name]:
                    found.append(f"{where}:{node.lineno} defines {node.name}({first})")
            if isinstance(node, ast.Name) and node.id in ("CLI_DESCRIPTION", "CLI_EPILOG"):
                found.append(f"{where}:{node.lineno} names {node.id}")
    assert found == []


def test_every_group_module_declares_its_commands_once():
    names = [(group, c.name) for group, c in cli.commands()]
    assert len(names) == len(set(names))
    assert ("score", "pope") in names and ("release", "export") in names
    assert all(cli.group_commands(group) for group in cli.GROUPS)


@pytest.mark.parametrize(("group", "name"), [(g, c.name) for g, c in cli.commands()])
def test_every_command_has_a_working_help(group, name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([group, name, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: halluflow {group} {name}") and "examples:" in out


def test_an_alias_is_the_same_command_and_listed_as_one(tmp_path, capsys):
    aliases = [(g, c) for g, c in cli.commands() if c.alias_of]
    assert ("fuzz", "convert", "export") in [(g, c.name, c.alias_of) for g, c in aliases]
    for group, alias in aliases:
        target = next(c for c in cli.group_commands(group) if c.name == alias.alias_of and not c.alias_of)
        assert alias.run is target.run and alias.configure is target.configure
    with pytest.raises(SystemExit):
        cli.main(["fuzz", "--help"])
    assert "(alias of export)" in " ".join(capsys.readouterr().out.split())

    labels = tmp_path / "pope.json"
    rows = [
        {"question_id": i, "image": f"COCO_val2014_{i:012d}.jpg", "text": f"Is there a {o} in the image?", "label": lab}
        for i, (o, lab) in enumerate([("dog", "yes"), ("cat", "no"), ("car", "yes")], 1)
    ]
    labels.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    written = {}
    for verb in ("export", "convert"):
        out = tmp_path / f"{verb}.json"
        assert cli.main(["fuzz", verb, "--source", "pope", "--input", str(labels), "--out", str(out)]) == 0
        written[verb] = out.read_bytes()
    assert written["export"] == written["convert"] and len(json.loads(written["export"])) == 3
    assert capsys.readouterr().out.splitlines() == [
        f"3 UniHall instances -> {tmp_path / 'export.json'}",
        f"3 UniHall instances -> {tmp_path / 'convert.json'}",
    ]
