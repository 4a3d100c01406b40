"""The `halluflow` command line: one table of commands, each a module with `configure(parser)` and `run(args)`.

Modules are imported only when their command runs, so `halluflow score pope` never imports torch.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys

from . import __version__
from .errors import HalluflowError
from .io import check_target, command_scope
from .progress import configure_logging

# (group, command, module, one-line help). A module provides configure(parser) and run(args) -> int.
COMMANDS: list[tuple[str, str, str, str]] = [
    ("release", "verify", "halluflow.ode.release", "check every file of a release against its manifest.json"),
    (
        "release",
        "diff",
        "halluflow.ode.lineage",
        "pairs, concepts, graph edges and queries added/removed between two releases",
    ),
    (
        "release",
        "export",
        "halluflow.ode.export",
        "write a release as llava / sharegpt / dpo training data, an lmms-eval task or a VLMEvalKit dataset",
    ),
    (
        "release",
        "contamination",
        "halluflow.ode.contamination",
        "Fréchet distance and near-duplicates of a release vs real images",
    ),
    (
        "release",
        "audit",
        "halluflow.ode.audit",
        "re-judge every yes/no item (second detector, VLM oracle); annotation page; label-error rates",
    ),
    (
        "release",
        "validity",
        "halluflow.ode.validity",
        "per-model scores on an ODE release vs a real-image set (POPE, AMBER) on shared concepts; rank correlations",
    ),
    (
        "import",
        "lmms-eval",
        "halluflow.imports.lmms_eval",
        "lmms-eval --log_samples JSONL -> halluflow answers JSONL (scored by score pope / the release scorer)",
    ),
    (
        "import",
        "vlmevalkit",
        "halluflow.imports.vlmevalkit",
        "VLMEvalKit prediction xlsx/tsv -> halluflow answers JSONL (scored by score pope / the release scorer)",
    ),
    ("graph", "build", "halluflow.ode.graph", "build the weighted concept graph from AMBER/COCO/VG/table annotations"),
    ("score", "pope", "halluflow.metrics.pope", "POPE accuracy/precision/recall/F1/yes-ratio of yes/no answers"),
    ("score", "chair", "halluflow.metrics.chair", "CHAIR_s / CHAIR_i of captions against COCO objects"),
    (
        "score",
        "amber",
        "halluflow.metrics.amber",
        "AMBER generative (CHAIR, Cover, Hal, Cog) and discriminative scores",
    ),
    ("score", "caos", "halluflow.caos.scores", "CAOS_T / CAOS_X / CAOS_K context-aware object similarities"),
    (
        "score",
        "compare",
        "halluflow.metrics.uncertainty",
        "bootstrap confidence intervals per model and paired model comparisons",
    ),
    ("score", "ghr", "halluflow.samf.metrics", "UniHall GHR and risk-weighted GHR of answers"),
    ("sg", "ged", "halluflow.cedi.grader", "graph edit distance between a truth and a predicted scene graph"),
    ("align", "human", "halluflow.align", "agreement of metrics with human labels (accuracy, F1, kappa, r, rho)"),
    (
        "docs",
        "metrics",
        "halluflow.metrics.catalogue",
        "write docs/metrics.md from the metric catalogue (or --check it)",
    ),
    ("fuzz", "operators", "halluflow.samf.operators", "list the SAMF mutation operators"),
    ("fuzz", "mutate", "halluflow.samf.mutate_cli", "mutate one UniHall instance with one operator"),
    ("fuzz", "convert", "halluflow.samf.convert", "turn ODE queries / POPE / AMBER items into UniHall instances"),
    ("report", "build", "halluflow.report", "build the HTML summary for existing result folders"),
    (
        "report",
        "paper",
        "halluflow.report.papers",
        "render one paper's page (ODE, CAOS, CEDI, SAMF layout) from its paper-section JSON files",
    ),
    (
        "standin",
        "build",
        "halluflow.models.standins",
        "build a tiny random stand-in model offline, one of: {standin_kinds}",
    ),
    ("answer", "run", "halluflow.answer", "ask one model POPE / AMBER / ODE questions (cached, resumable, retried)"),
    (
        "models",
        "fetch",
        "halluflow.models.fetch",
        "stage every weight a config names into one cache for offline jobs and write the lock (or --check it)",
    ),
    (
        "plan",
        "estimate",
        "halluflow.plan",
        "jobs, images, requests, tokens and GPU-hours per stage of a config, before anything runs",
    ),
]

EPILOG = """examples:
  halluflow release verify results/ode-demo/release
  halluflow score pope --answers answers.jsonl --labels coco_pope_popular.json
  halluflow score chair --captions captions.jsonl --truth truth.jsonl
  halluflow sg ged --truth truth_sg.json --pred pred_sg.json
  halluflow plan --configfile configs/ode-paper.yaml
run `halluflow GROUP COMMAND --help` for the options and examples of each command."""


def _help(text: str) -> str:
    """A command's one-line help. The stand-in kinds are read from the builder table (halluflow.models.standins), so the
    list cannot drift from what `standin build` builds; the import happens only when a help text is shown."""
    if "{standin_kinds}" in text:
        from .models.standins import builder_kinds

        text = text.replace("{standin_kinds}", ", ".join(builder_kinds()))
    return text


def _build_top_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="halluflow",
        description="Measure hallucination in vision-language models (ODE, CAOS, CEDI, UniHall/SAMF, POPE, CHAIR, AMBER).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"halluflow {__version__}")
    groups = parser.add_subparsers(dest="group", metavar="GROUP")
    by_group: dict[str, list[tuple[str, str, str]]] = {}
    for group, name, module, help_text in COMMANDS:
        by_group.setdefault(group, []).append((name, module, _help(help_text)))
    for group, commands in by_group.items():
        summary = "; ".join(f"{n}: {h}" for n, _, h in commands)
        # argparse %-formats help strings: a literal '%' ("95% intervals") must be doubled or --help crashes
        gp = groups.add_parser(group, help=summary.replace("%", "%%"), description=summary)
        sub = gp.add_subparsers(dest="command", metavar="COMMAND")
        for name, _module, help_text in commands:
            sub.add_parser(name, help=help_text.replace("%", "%%"), add_help=False)
    return parser


# argparse dests that name what a command writes. Every other argument that names an existing file or folder is an
# input of the command: the write path (halluflow.io.atomic_path) refuses to overwrite it.
OUTPUT_DESTS = frozenset({"out", "cache", "seed_out", "per_caption", "markdown"})


def _input_paths(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, str]:
    """{how the user named it ("--labels", "release"): path} for every non-output argument holding a string."""
    inputs = {}
    for action in parser._actions:  # argparse's own list of the arguments (no public accessor)
        value = getattr(args, action.dest, None)
        if action.dest in OUTPUT_DESTS or value is None:
            continue
        name = action.option_strings[-1] if action.option_strings else action.dest
        for i, item in enumerate(value if isinstance(value, list) else [value]):
            if isinstance(item, str) and item and "\0" not in item:
                inputs[name + (f"[{i}]" if isinstance(value, list) else "")] = item
    return inputs


def _check_outputs(args: argparse.Namespace) -> None:
    for dest in sorted(OUTPUT_DESTS & set(vars(args))):
        value = getattr(args, dest)
        if isinstance(value, str) and value:
            check_target(value, folder=True)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # A group with one command may be called without its command name: `halluflow align --human ...`.
    single = {g: [c for c in COMMANDS if c[0] == g] for g in {c[0] for c in COMMANDS}}
    if argv and len(single.get(argv[0], [])) == 1 and argv[1:2] != [single[argv[0]][0][1]]:
        argv.insert(1, single[argv[0]][0][1])
    positional = [a for a in argv if not a.startswith("-")]
    match = None
    if len(positional) >= 2:
        match = next(
            (c for c in COMMANDS if c[0] == positional[0] and c[1] == positional[1] and argv[:2] == positional[:2]),
            None,
        )
    if match is None:
        top = _build_top_parser()  # only for help and errors: a command's own run never builds it
        if not argv:
            top.print_help()
            return 0
        top.parse_args(argv)  # prints help / errors for groups and unknown commands
        top.print_help()
        return 2
    group, name, module_name, help_text = match
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(
        prog=f"halluflow {group} {name}",
        description=getattr(module, "CLI_DESCRIPTION", None) or _help(help_text),
        epilog=getattr(module, "CLI_EPILOG", None),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    module.configure(parser)
    args = parser.parse_args(argv[2:])
    configure_logging()
    try:
        with command_scope(_input_paths(parser, args)):
            _check_outputs(args)  # before any work: an --out that is an input or a device is refused up front
            return int(module.run(args) or 0)
    except HalluflowError as exc:
        print(f"halluflow: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # an output path that is a folder, a full or read-only disk: name the file, no traceback
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"halluflow: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1


# Groups whose commands only read files, compute and print or write (atomically) their result. The console script
# runs them without the cyclic garbage collector and ends their process without the interpreter's teardown (freeing a
# million-row frame and hundreds of modules: 40-50 ms of a 0.5 s `score pope`), as mypy does.
FAST_EXIT_GROUPS = frozenset({"score"})


def entry() -> None:
    """The `halluflow` console script: `main()`, with the fast start and exit of FAST_EXIT_GROUPS."""
    argv = sys.argv[1:]
    fast = bool(argv) and argv[0] in FAST_EXIT_GROUPS
    if fast:
        # Reading a large JSON file makes hundreds of thousands of dicts and lists, none of them cyclic garbage,
        # which the collector would scan again and again (json.loads of a 100k-record AMBER file: 74 ms with it,
        # 48 ms without). A scorer makes no garbage cycles worth collecting before its process ends.
        gc.disable()
    code = main(argv)
    if not fast:
        sys.exit(code)
    import logging

    logging.shutdown()
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # `halluflow score pope ... | head -1`: the reader left, as Python reports it
        code = code or 120
    except OSError as exc:  # a full disk behind `> file`: said, not lost
        print(f"halluflow: error: writing the output: {exc.strerror or exc}", file=sys.stderr)
        code = code or 1
    try:
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code)


if __name__ == "__main__":
    entry()
