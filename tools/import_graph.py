"""Measure the import graph of src/halluflow: rooms, layers, upward imports and cycles.

Every `import` / `from ... import` of a halluflow module is read with `ast` (nothing is imported or run), and
classified by where it sits: module level (runs when the importing module loads), function level (inside a def or
class body: runs when called; the usual way to defer a heavy or circular import) or type-only (under
`if TYPE_CHECKING:`, never runs; left out of every count but the edge total). `from pkg import name` points at
`pkg.name` when that is a module of the tree, else at `pkg`; a submodule's implicit load of its parent package is
not an edge (it is how Python works, not a choice of the code).

Rooms: every module (`x.py`) and package (`x/__init__.py`) of the tree. Layers, lowest first:
  core     errors, io, config, config_types, config_section, progress, cache, devices, resources, forked, the package's __init__
  models   halluflow.models (resolver, registries, stand-ins, the Model wrapper) and halluflow.backends
           (before the model package: models, models_fetch, registry, standins)
  metrics  halluflow.metrics (scorers and answer parsers) and align (metric-human agreement statistics)
  methods  halluflow.ode, caos, cedi, samf (one paper each)
  stages   answer, sources, plan, report, imports, cli, snakemake_glue, workflow, validity (workflow stages, CLI)
models and metrics share one rank: a backend may use the failed-answer rule and a scorer may build an embedder,
but neither may reach up into a method or a stage. An upward import is an import (any level) from a module of a
lower rank into one of a higher rank (`backends.evaluatee -> answer`). A cycle is a strongly connected component
of more than one module, counted on the graph of all runtime imports (module and function level) and, separately,
of module-level imports only (the cycles that can break an import at load time).

    python tools/import_graph.py [SRC]     # SRC: the folder holding halluflow/ (default: src) or a repo root
    python tools/import_graph.py SRC --json
Exit status 0 always (a measurement); tests/test_import_graph.py turns the counts into a check.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "halluflow"
LAYERS = ("core", "models", "metrics", "methods", "stages")
RANK = {"core": 0, "models": 1, "metrics": 1, "methods": 2, "stages": 3}
# First dotted part below halluflow -> layer; anything not named here is reported as unassigned.
LAYER_OF = {
    **dict.fromkeys(
        ["errors", "io", "config", "config_types", "progress", "cache", "devices", "resources", "forked", "secrets"],
        "core",
    ),
    "config_section": "core",  # the runtime of the generated config_types
    # models_fetch, registry and standins: the model layer's modules before it became one package
    **dict.fromkeys(["models", "backends", "models_fetch", "registry", "standins"], "models"),
    **dict.fromkeys(["metrics", "align"], "metrics"),
    **dict.fromkeys(["ode", "caos", "cedi", "samf"], "methods"),
    # benchmarks: the answer stage's sources behind one protocol (queries, peer-format answers, scoring)
    **dict.fromkeys(
        [
            "answer",
            "sources",
            "benchmarks",
            "plan",
            "report",
            "imports",
            "cli",
            "snakemake_glue",
            "workflow",
            "validity",
        ],
        "stages",
    ),
}


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    level: str  # "module", "function" or "type"
    line: int


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "core"  # halluflow/__init__.py: the version
    return LAYER_OF.get(parts[1], "unassigned")


def find_root(path: Path) -> Path:
    """The folder holding halluflow/: SRC itself, SRC/src, or SRC (a package folder named halluflow)."""
    for candidate in (path, path / "src"):
        if (candidate / PACKAGE / "__init__.py").exists():
            return candidate
    if path.name == PACKAGE and (path / "__init__.py").exists():
        return path.parent
    raise SystemExit(f"{path}: no {PACKAGE}/__init__.py here or under src/")


def modules(root: Path) -> dict[str, Path]:
    out = {}
    for file in sorted((root / PACKAGE).rglob("*.py")):
        rel = file.relative_to(root).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = file
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module):
    """(node, level) for every import, level as this module classifies it."""

    def walk(node, level):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, level
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                yield from walk(child, "function" if level == "module" else level)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), "type")
                for stmt in child.orelse:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), level)
            else:
                yield from walk(child, level)

    yield from walk(tree, "module")


def edges(root: Path) -> tuple[dict[str, Path], list[Edge]]:
    mods = modules(root)
    found = []
    for name, file in mods.items():
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
        package = name if file.name == "__init__.py" else name.rpartition(".")[0]
        for node, level in _imports(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base_parts = package.split(".")
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in mods else base)
            for target in targets:
                # `import halluflow.a.b` names the deepest module of the tree it reaches
                while target and target not in mods and "." in target:
                    target = target.rpartition(".")[0]
                if target in mods and target != name:
                    found.append(Edge(name, target, level, node.lineno))
    return mods, sorted(set(found), key=lambda e: (e.src, e.dst, e.level, e.line))


def cycles(nodes, edge_list: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative), each sorted, largest first."""
    graph: dict[str, set[str]] = {n: set() for n in nodes}
    for e in edge_list:
        graph[e.src].add(e.dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out, key=lambda c: (-len(c), c))


def measure(path: str | Path) -> dict:
    root = find_root(Path(path))
    mods, found = edges(root)
    runtime = [e for e in found if e.level != "type"]
    upward = [e for e in runtime if RANK.get(layer(e.src), 0) < RANK.get(layer(e.dst), 0)]
    packages = sorted(n for n, f in mods.items() if f.name == "__init__.py")
    return {
        "root": str(root),
        "rooms": len(mods),
        "modules": len(mods) - len(packages),
        "packages": len(packages),
        "rooms_per_layer": {lay: sum(layer(m) == lay for m in mods) for lay in (*LAYERS, "unassigned")},
        "unassigned": sorted(m for m in mods if layer(m) == "unassigned"),
        "edges": {lvl: sum(e.level == lvl for e in found) for lvl in ("module", "function", "type")},
        "upward": [
            {"from": e.src, "to": e.dst, "level": e.level, "line": e.line, "layers": f"{layer(e.src)}->{layer(e.dst)}"}
            for e in upward
        ],
        "upward_pairs": len({(e.src, e.dst) for e in upward}),
        "cycles": cycles(mods, runtime),
        "cycles_module_level": cycles(mods, [e for e in runtime if e.level == "module"]),
    }


def report(m: dict) -> str:
    lines = [
        f"import graph of {m['root']}/{PACKAGE}",
        f"rooms: {m['rooms']} ({m['modules']} modules + {m['packages']} packages)  per layer: "
        + ", ".join(f"{k} {v}" for k, v in m["rooms_per_layer"].items() if v),
        f"imports between rooms: {m['edges']['module']} module-level, {m['edges']['function']} function-level, "
        f"{m['edges']['type']} type-only",
        f"upward imports: {len(m['upward'])} ({m['upward_pairs']} module pairs; "
        f"{sum(u['level'] == 'module' for u in m['upward'])} module-level, "
        f"{sum(u['level'] == 'function' for u in m['upward'])} function-level)",
    ]
    lines += [f"  {u['from']} -> {u['to']}  [{u['layers']}, {u['level']}, line {u['line']}]" for u in m["upward"]]
    lines.append(
        f"cycles (strongly connected components > 1): {len(m['cycles'])} over all runtime imports, "
        f"{len(m['cycles_module_level'])} over module-level imports"
    )
    lines += [f"  {' <-> '.join(c)}" for c in m["cycles"]]
    if m["unassigned"]:
        lines.append(f"unassigned to a layer: {', '.join(m['unassigned'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", nargs="?", default="src", help="folder holding halluflow/, or a repo root")
    parser.add_argument("--json", action="store_true", help="print the measurement as JSON")
    args = parser.parse_args(argv)
    measured = measure(args.src)
    print(json.dumps(measured, indent=1) if args.json else report(measured))
    return 0


if __name__ == "__main__":
    sys.exit(main())
