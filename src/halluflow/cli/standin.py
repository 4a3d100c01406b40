"""`halluflow standin build`: tiny random stand-in models, built offline."""

from __future__ import annotations

from typing import Any

from .command import Command

_BUILD_DESCRIPTION = (
    "Build a tiny random stand-in model offline (the same builders the workflow's build_standin_* rules use)."
)


_BUILD_EPILOG_TEMPLATE = """kinds: {kinds}
examples:
  halluflow standin build flux resources/models/tiny-flux
  halluflow standin build owlv2 /tmp/tiny-owl --seed 1 --arg image_size=96 --arg patch_size=16
  halluflow standin build yolo /tmp/tiny-yolo --arg 'names=["dog","cat"]'
  halluflow standin build llava_next /tmp/tiny-llava-next --arg image_size=64
The folder loads with the real classes (DiffusionPipeline / AutoModelForZeroShotObjectDetection / ultralytics.YOLO /
AutoModelForImageTextToText)
and carries {marker}, so every output made with it is marked stand_in."""


def _build_epilog() -> str:
    # Computed when shown, so it lists every kind registered by then, never a stale copy.
    from halluflow.models.standins import MARKER, builder_kinds

    return _BUILD_EPILOG_TEMPLATE.format(kinds=", ".join(builder_kinds()), marker=MARKER)


def _build_help() -> str:
    # The kinds are read from the builder table, so the list cannot drift from what `standin build` builds.
    from halluflow.models.standins import builder_kinds

    return "build a tiny random stand-in model offline, one of: " + ", ".join(builder_kinds())


def _configure_build(parser) -> None:
    parser.add_argument("kind", help="stand-in kind (see the list below)")
    parser.add_argument(
        "out", help="folder to create (an existing stand-in folder or empty folder is replaced; any other is refused)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights (default 0)")
    parser.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="builder setting; VALUE is parsed as JSON when it can be (repeatable)",
    )


def _run_build(args) -> int:
    import json

    from halluflow.errors import ConfigError
    from halluflow.models.standins import build_standin

    cfg: dict[str, Any] = {}
    for item in args.arg:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--arg {item!r}: expected KEY=VALUE")
        try:
            cfg[key] = json.loads(value)
        except json.JSONDecodeError:
            cfg[key] = value
    path = build_standin(args.kind, args.out, seed=args.seed, **cfg)
    print(path)
    return 0


_BUILD = Command(
    "build",
    _build_help,
    _configure_build,
    _run_build,
    description=_BUILD_DESCRIPTION,
    epilog=_build_epilog,
)

COMMANDS = (_BUILD,)
