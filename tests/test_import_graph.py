"""The import graph of src/halluflow points down (tools/import_graph.py): no cycle, and no import from a lower layer
(core, models/backends, metrics, methods) into a higher one, beyond the listed remainder. The tool itself is checked
on small hand-made trees, so a measurement that missed an edge could not pass."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from helpers import REPO

_spec = importlib.util.spec_from_file_location("import_graph", REPO / "tools" / "import_graph.py")
import_graph = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("import_graph", import_graph)  # dataclasses look their module up there
_spec.loader.exec_module(import_graph)


@pytest.fixture(scope="module")
def measured():
    return import_graph.measure(REPO / "src")


def test_no_cycle_in_the_import_graph(measured):
    assert measured["cycles"] == [], f"import cycles: {measured['cycles']} (python tools/import_graph.py)"


def test_no_upward_import(measured):
    # No module imports (at any level) from a layer above its own: a backend or scorer never reaches into a method
    # or a stage, a method never into a stage.
    pairs = sorted({(u["from"], u["to"]) for u in measured["upward"]})
    assert not pairs, f"imports from a lower layer into a higher one: {pairs} (python tools/import_graph.py)"


def test_every_room_has_a_layer(measured):
    assert measured["unassigned"] == [], "add these modules to tools/import_graph.py LAYER_OF"
    assert measured["rooms"] == measured["modules"] + measured["packages"] > 80


def _tree(root, files: dict[str, str]):
    for rel, text in files.items():
        path = root / "halluflow" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_tool_finds_upward_imports_and_cycles_at_every_level(tmp_path):
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "errors.py": "",
            "answer.py": "from .backends import base\n",
            "backends/__init__.py": "",
            # function level and relative: still an upward import (models -> stages)
            "backends/base.py": "def f():\n    from ..answer import run\n",
            # `from pkg import submodule` points at the submodule; a TYPE_CHECKING import never runs
            "models/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import cli\n",
            "models/a.py": "from halluflow.models import b\n",
            "models/b.py": "import halluflow.models.a\nfrom ..errors import X\n",
            "cli.py": "",
            "stray.py": "",
        },
    )
    m = import_graph.measure(root)
    assert [(u["from"], u["to"], u["level"]) for u in m["upward"]] == [
        ("halluflow.backends.base", "halluflow.answer", "function")
    ]
    assert m["cycles"] == [
        ["halluflow.answer", "halluflow.backends.base"],
        ["halluflow.models.a", "halluflow.models.b"],
    ]
    assert m["cycles_module_level"] == [["halluflow.models.a", "halluflow.models.b"]]
    assert m["edges"]["type"] == 1 and m["unassigned"] == ["halluflow.stray"]
    assert (m["rooms"], m["packages"]) == (10, 3)
    assert "upward imports: 1" in import_graph.report(m)
