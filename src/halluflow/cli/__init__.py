"""The `halluflow` command line: `halluflow GROUP COMMAND [options]`.

One module per command group (halluflow/cli/<group>.py, named in GROUPS) lists its commands (name, help,
`configure(parser)`, `run(args)`); the domain modules (metrics, caos, ode, samf, ...) export plain functions that take
values and return results, and a command's `run` is a thin call of them. Only the group module of the command that
runs is imported, and it imports its domain modules inside `run`, so `halluflow score pope` never imports torch.

Verbs: `build` makes an artifact from inputs (graph, report, stand-in), `export` writes halluflow data in another
format (a release as training data or peer tasks, benchmark items as UniHall instances), the `import` group reads a
peer's outputs into halluflow's, `score` computes metrics, `verify` / `fetch` / `estimate` / `run` say what they do.
An older spelling stays working as an alias listed in --help as "(alias of ...)": `fuzz convert` (= `fuzz export`).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys

from .. import __version__
from ..errors import HalluflowError, visible
from ..io import check_target, command_scope
from ..progress import configure_logging
from ..secrets import redact
from .command import Command, text

# group -> its module in halluflow.cli, in the order `halluflow --help` lists them.
GROUPS: dict[str, str] = {
    "release": "release",
    "import": "imports",
    "graph": "graph",
    "score": "score",
    "sg": "sg",
    "align": "align",
    "docs": "docs",
    "fuzz": "fuzz",
    "report": "report",
    "standin": "standin",
    "answer": "answer",
    "models": "models",
    "plan": "plan",
}


def group_commands(group: str) -> tuple[Command, ...]:
    """The commands of one group, read from its module (imported here, and only here)."""
    return importlib.import_module(f"{__name__}.{GROUPS[group]}").COMMANDS


def commands() -> list[tuple[str, Command]]:
    """(group, command) for every command and alias, in --help order (imports every group module: for help and
    tests, never on a command's own path)."""
    return [(group, command) for group in GROUPS for command in group_commands(group)]


EPILOG = """examples:
  halluflow release verify results/ode-demo/release
  halluflow score pope --answers answers.jsonl --labels coco_pope_popular.json
  halluflow score chair --captions captions.jsonl --truth truth.jsonl
  halluflow sg ged --truth truth_sg.json --pred pred_sg.json
  halluflow plan --configfile configs/ode-paper.yaml
run `halluflow GROUP COMMAND --help` for the options and examples of each command."""


def _build_top_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="halluflow",
        description="Measure hallucination in vision-language models (ODE, CAOS, CEDI, UniHall/SAMF, POPE, CHAIR, AMBER).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"halluflow {__version__}")
    groups = parser.add_subparsers(dest="group", metavar="GROUP")
    for group in GROUPS:
        listed = group_commands(group)
        summary = "; ".join(f"{c.name}: {c.help_text()}" for c in listed)
        # argparse %-formats help strings: a literal '%' ("95% intervals") must be doubled or --help crashes
        gp = groups.add_parser(group, help=summary.replace("%", "%%"), description=summary)
        sub = gp.add_subparsers(dest="command", metavar="COMMAND")
        for command in listed:
            sub.add_parser(command.name, help=command.help_text().replace("%", "%%"), add_help=False)
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
    listed = group_commands(argv[0]) if argv and argv[0] in GROUPS else ()
    # A group with one command may be called without its command name: `halluflow align --human ...`.
    own = [c for c in listed if c.alias_of is None]
    if len(own) == 1 and argv[1:2] != [own[0].name]:
        argv.insert(1, own[0].name)
    command = None
    if len(argv) >= 2 and not argv[0].startswith("-") and not argv[1].startswith("-"):
        command = next((c for c in listed if c.name == argv[1]), None)
    if command is None:
        top = _build_top_parser()  # only for help and errors: a command's own run never builds it
        if not argv:
            top.print_help()
            return 0
        top.parse_args(argv)  # prints help / errors for groups and unknown commands
        top.print_help()
        return 2
    parser = argparse.ArgumentParser(
        prog=f"halluflow {argv[0]} {command.name}",
        description=text(command.description) or text(command.help),
        epilog=text(command.epilog),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.configure(parser)
    args = parser.parse_args(argv[2:])
    configure_logging()
    try:
        with command_scope(_input_paths(parser, args)):
            _check_outputs(args)  # before any work: an --out that is an input or a device is refused up front
            return int(command.run(args) or 0)
    except HalluflowError as exc:
        print(f"halluflow: error: {visible(redact(str(exc), error=True))}", file=sys.stderr)
        return 1
    except OSError as exc:  # an output path that is a folder, a full or read-only disk: name the file, no traceback
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"halluflow: error: {visible(redact(f'{where}{exc.strerror or exc}', error=True))}", file=sys.stderr)
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
