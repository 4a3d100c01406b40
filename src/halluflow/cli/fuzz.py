"""`halluflow fuzz ...`: UniHall/SAMF operators, one mutation, and benchmark items exported as UniHall instances."""

from __future__ import annotations

import argparse

from .command import Command

_OPERATORS_DESCRIPTION = (
    "List the SAMF mutation operators (UniHall/SAMF paper, Appendix C.1) with modality and difficulty tag."
)


_OPERATORS_EPILOG = """examples:
  halluflow fuzz operators
  halluflow fuzz operators --json"""


def _configure_operators(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print a JSON array instead of a table")


def _run_operators(args) -> int:
    from halluflow.io import dumps_json
    from halluflow.samf.operators import OPERATORS

    rows = [
        {"name": op.name, "modality": op.modality, "difficulty": op.difficulty, "description": op.description}
        for op in OPERATORS.values()
    ]
    if args.json:
        print(dumps_json(rows), end="")
    else:
        for r in rows:
            print(f"{r['name']:<26} {r['modality']:<6} {r['difficulty']:<8} {r['description']}")
    return 0


_MUTATE_DESCRIPTION = "Mutate one UniHall instance with one SAMF operator at a level 1-5 (seeded, semantic-preserving)."


_MUTATE_EPILOG = """examples:
  halluflow fuzz mutate --instance item.json --op authority_bias_context --level 3 --seed 1 --out fuzz_out
  halluflow fuzz mutate --instance unihall.json --id 120001 --op multi_image_copy_v1 --level 2 --seed 0 --out fuzz_out
image_path is resolved under --images (default: the instance file's folder)."""


def _configure_mutate(parser) -> None:
    from halluflow.samf.operators import LEVELS, OPERATORS

    parser.add_argument("--instance", required=True, help="a UniHall instance (JSON object) or a file of instances")
    parser.add_argument("--id", default=None, help="instance_id to pick when the file holds several instances")
    parser.add_argument(
        "--op",
        required=True,
        choices=sorted(OPERATORS),
        metavar="NAME",
        help="operator name (see `halluflow fuzz operators`)",
    )
    parser.add_argument("--level", required=True, type=int, choices=LEVELS, help="intensity 1 (Easy) .. 5 (Extreme)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the operator's random choices")
    parser.add_argument("--out", required=True, help="output folder; fuzzed images are written to OUT/fuzzed/")
    parser.add_argument(
        "--images", default=None, help="folder image_path is relative to (default: the instance file's folder)"
    )
    parser.add_argument("--distractors", nargs="*", default=[], help="other images for multi_image_composition")


def _run_mutate(args) -> int:
    from halluflow.io import dumps_json
    from halluflow.samf.mutate import mutate_file

    out = mutate_file(
        args.instance,
        args.op,
        args.level,
        args.seed,
        args.out,
        instance_id=args.id,
        images=args.images,
        distractors=args.distractors,
    )
    print(dumps_json(out), end="")
    return 0


_EXPORT_DESCRIPTION = (
    "Turn ODE release queries, POPE label files or AMBER items into a UniHall instance file (Appendix B.1)."
)


_EXPORT_EPILOG = """examples:
  halluflow fuzz export --source pope --input coco_pope_popular.json --limit 200 --out unihall.json
  halluflow fuzz export --source amber --input annotations.json --queries query_discriminative.json --out unihall.json
  halluflow fuzz export --source ode --input results/ode-demo/release/queries.parquet --out unihall.json
  halluflow fuzz export --source table --input knowledge_items.jsonl --out unihall.json
image_path keeps the source's relative image names: pass their folder to `fuzz mutate --images` or samf.source.images."""


def _configure_export(parser) -> None:
    parser.add_argument("--source", required=True, choices=["ode", "pope", "amber", "table"], help="format of --input")
    parser.add_argument(
        "--input",
        required=True,
        help="ode: queries.parquet; pope: label file; amber: annotations.json; table: JSONL items of any category",
    )
    parser.add_argument("--queries", default=None, help="amber: the query file (query_discriminative*.json)")
    parser.add_argument(
        "--release", default=None, help="ode: release name recorded in source_inf (default: the folder name)"
    )
    from .argtypes import positive_int

    parser.add_argument(
        "--limit", type=positive_int, default=None, help="keep this many items, round-robin over types (seeded)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the --limit sample")
    parser.add_argument(
        "--risk",
        default="taxonomy",
        type=_risk_arg,
        metavar="1..5|taxonomy",
        help="risk level of every instance, or 'taxonomy' (default): the level of its subtype",
    )
    parser.add_argument("--out", required=True, help="UniHall JSON array to write")


def _risk_arg(text: str):

    if text == "taxonomy":
        return text
    if text.isdigit() and 1 <= int(text) <= 5:
        return int(text)
    raise argparse.ArgumentTypeError(f"{text!r} is not 1..5 or 'taxonomy'")


def _run_export(args) -> int:
    from halluflow.samf.convert import convert_items
    from halluflow.samf.schema import write_instances

    items = convert_items(
        args.source,
        args.input,
        queries=args.queries,
        release=args.release,
        risk=args.risk,
        limit=args.limit,
        seed=args.seed,
    )
    write_instances(args.out, items)
    print(f"{len(items)} UniHall instances -> {args.out}")
    return 0


_OPERATORS = Command(
    "operators",
    "list the SAMF mutation operators",
    _configure_operators,
    _run_operators,
    description=_OPERATORS_DESCRIPTION,
    epilog=_OPERATORS_EPILOG,
)

_MUTATE = Command(
    "mutate",
    "mutate one UniHall instance with one operator",
    _configure_mutate,
    _run_mutate,
    description=_MUTATE_DESCRIPTION,
    epilog=_MUTATE_EPILOG,
)

_EXPORT = Command(
    "export",
    "turn ODE queries / POPE / AMBER items into UniHall instances",
    _configure_export,
    _run_export,
    description=_EXPORT_DESCRIPTION,
    epilog=_EXPORT_EPILOG,
)

COMMANDS = (
    _OPERATORS,
    _MUTATE,
    _EXPORT,
    _EXPORT.alias("convert"),
)
