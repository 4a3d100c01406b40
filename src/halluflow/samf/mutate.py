"""One SAMF mutation of one UniHall instance read from a file (UniHall/SAMF paper, Appendix C.1).

`mutate_file` is what `halluflow fuzz mutate` runs: it picks the instance, loads the distractor images and returns
the mutated instance (mutation_inf filled); fuzzed images go to OUT/fuzzed/.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import InputError
from ..io import read_json
from .operators import mutate_instance
from .schema import load_instances, validate_instance


def mutate_file(
    instance_path: str | os.PathLike,
    op: str,
    level: int,
    seed: int,
    out: str | os.PathLike,
    *,
    instance_id: str | None = None,
    images: str | os.PathLike | None = None,
    distractors: Sequence[str | os.PathLike] = (),
) -> dict:
    """The instance of `instance_path` (one object, or `instance_id` of a list) mutated by `op` at `level`; image
    paths resolve under `images` (default: the file's folder)."""
    if Path(out).exists() and not Path(out).is_dir():
        raise InputError(f"--out {out}: is a file; give a folder (fuzzed images go to OUT/fuzzed/)")
    path = Path(instance_path)
    data = read_json(path)
    if isinstance(data, list):
        items = load_instances(path)
        if instance_id is None and len(items) != 1:
            raise InputError(f"{path}: holds {len(items)} instances; pick one with --id")
        matches = [i for i in items if instance_id is None or i["instance_id"] == instance_id]
        if not matches:
            raise InputError(f"{path}: no instance {instance_id}")
        instance = matches[0]
    else:
        instance = validate_instance(data)
    from PIL import Image

    loaded = []
    for d in distractors:
        if not Path(d).exists():
            raise InputError(f"--distractors: {d} not found")
        with Image.open(d) as im:
            loaded.append(im.convert("RGB"))
    images_root = Path(images) if images else path.parent
    return mutate_instance(instance, [(op, level)], seed, images_root, out, loaded)
