"""Docs true to the code: every repository path and every `halluflow.…` module or attribute that README.md and
docs/*.md name in code spans exists. Checked by reading the tree and the modules' source (ast), not by importing
halluflow, so a renamed function or a moved module fails here before a reader follows a dead name."""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP = (
    "src/",
    "rules/",
    "scripts/",
    "tools/",
    "bench/",
    "configs/",
    "schemas/",
    "resources/",
    "tests/",
    "docs/",
    "envs/",
    "profiles/",
    "report/",
)
SPAN = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"^(?:%s)[A-Za-z0-9_./-]*$" % "|".join(re.escape(t) for t in TOP))
DOTTED = re.compile(r"^halluflow(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:\(\))?$")


def named(kind: re.Pattern) -> list[tuple[str, str]]:
    found = set()
    for doc in DOCS:
        for span in SPAN.findall(doc.read_text(encoding="utf-8")):
            span = span.strip()
            placeholder = "*" in span or "<" in span or re.search(r"(^|/)X(\.|/|$)", span)
            if kind.match(span) and not placeholder:
                found.add((doc.relative_to(ROOT).as_posix(), span))
    return sorted(found)


@lru_cache(maxsize=None)
def top_level_names(module_file: Path) -> frozenset[str]:
    """Names a module defines or imports at its top level, plus class members as Class.member."""
    tree = ast.parse(module_file.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        names.add(f"{node.name}.{item.name}")
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        names.add(f"{node.name}.{item.target.id}")
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


# package-data names the wheel maps onto top-level folders (pyproject.toml's package-dir)
MAPPED = {"halluflow._resources": ROOT / "resources", "halluflow._schemas": ROOT / "schemas"}


def resolves(dotted: str) -> bool:
    if dotted in MAPPED:
        return MAPPED[dotted].is_dir() and dotted in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    parts = dotted.removesuffix("()").split(".")
    # the longest prefix that is a module or package, then the rest as attributes of it
    for cut in range(len(parts), 0, -1):
        base = SRC.joinpath(*parts[:cut])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if not module.is_file():
            continue
        rest = parts[cut:]
        if not rest:
            return True
        names = top_level_names(module)
        if ".".join(rest[:2]) in names or (len(rest) == 1 and rest[0] in names):
            return True
        # a submodule named as an attribute of a package (halluflow.ode.nouns)
        return base.is_dir() and (base / f"{rest[0]}.py").is_file() and len(rest) == 1
    return False


PATHS = named(PATH)
DOTTED_NAMES = named(DOTTED)


def test_the_docs_name_things_at_all():
    assert len(PATHS) > 30 and len(DOTTED_NAMES) > 15, "the scan found too few names: is the pattern still right?"


@pytest.mark.parametrize("doc, path", PATHS)
def test_named_paths_exist(doc, path):
    assert (ROOT / path.rstrip("/")).exists(), f"{doc} names `{path}`, which is not in the tree"


@pytest.mark.parametrize("doc, name", DOTTED_NAMES)
def test_named_modules_and_functions_exist(doc, name):
    assert resolves(name), f"{doc} names `{name}`, which no module defines"


def test_the_checker_fails_on_dead_names():
    assert resolves("halluflow.io.read_json") and resolves("halluflow.models.model.Model")
    assert not resolves("halluflow.io.read_jsonn") and not resolves("halluflow.benchmarks.score_answers")
