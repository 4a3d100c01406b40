"""`halluflow fuzz mutate`: apply one SAMF operator (UniHall/SAMF paper, Appendix C.1) to one UniHall instance.

Prints the mutated instance (mutation_inf filled) as JSON on stdout; fuzzed images go to OUT/fuzzed/.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..io import dumps_json, read_json
from .operators import LEVELS, OPERATORS, mutate_instance
from .schema import load_instances, validate_instance

CLI_DESCRIPTION = "Mutate one UniHall instance with one SAMF operator at a level 1-5 (seeded, semantic-preserving)."
CLI_EPILOG = """examples:
  halluflow fuzz mutate --instance item.json --op authority_bias_context --level 3 --seed 1 --out fuzz_out
  halluflow fuzz mutate --instance unihall.json --id 120001 --op multi_image_copy_v1 --level 2 --seed 0 --out fuzz_out
image_path is resolved under --images (default: the instance file's folder)."""


def configure(parser) -> None:
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


def run(args) -> int:
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError(f"--out {args.out}: is a file; give a folder (fuzzed images go to OUT/fuzzed/)")
    path = Path(args.instance)
    data = read_json(path)
    if isinstance(data, list):
        items = load_instances(path)
        if args.id is None and len(items) != 1:
            raise InputError(f"{path}: holds {len(items)} instances; pick one with --id")
        matches = [i for i in items if args.id is None or i["instance_id"] == args.id]
        if not matches:
            raise InputError(f"{path}: no instance {args.id}")
        instance = matches[0]
    else:
        instance = validate_instance(data)
    from PIL import Image

    distractors = []
    for d in args.distractors:
        if not Path(d).exists():
            raise InputError(f"--distractors: {d} not found")
        with Image.open(d) as im:
            distractors.append(im.convert("RGB"))
    images_root = Path(args.images) if args.images else path.parent
    out = mutate_instance(instance, [(args.op, args.level)], args.seed, images_root, args.out, distractors)
    print(dumps_json(out), end="")
    return 0
