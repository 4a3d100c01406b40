"""The files halluflow ships: the one way library code and the workflow find them.

They are the repository's top-level `resources/` (vocabularies, the seed graph, CAOS's tables) and `schemas/`
folders, mapped into the package as `halluflow._resources` and `halluflow._schemas` when it is built (setup.py,
pyproject.toml `package-dir`). importlib.resources finds them wherever halluflow is installed: inside the wheel's
package folder for a normal install, the checkout's own folders for an editable one (`pip install -e .`). Built-in
defaults come from here; a path a user writes (config, CLI) stays the user's, relative to their working directory.
"""

from __future__ import annotations

import filecmp
import os
from functools import cache
from importlib.resources import files
from pathlib import Path

from .errors import HalluflowError

RESOURCES = "halluflow._resources"
SCHEMAS = "halluflow._schemas"
CONFIG_SCHEMA = "config.schema.yaml"


def resource_path(name: str) -> Path:
    """A shipped resource by its name under resources/, e.g. resource_path("vocab/environments.txt")."""
    return _root(RESOURCES).joinpath(*name.split("/"))


def schema_path(name: str = CONFIG_SCHEMA) -> Path:
    """A shipped schema, by default the workflow config's JSON Schema."""
    return _root(SCHEMAS) / name


def workflow_input(name: str) -> str:
    """A shipped resource named as a workflow input (rule build_graph's default vocabulary and seed tables).

    The workflow's working directory (a checkout, or a copy of the workflow with its top-level resources/) holds the
    same file at resources/<name>: then that relative name, as release manifests have always recorded it. Otherwise
    (a workflow beside an installed wheel, or a copy whose file was edited) the absolute path of the installed file:
    the one the job reads, so Snakemake tracks it. An edited vocabulary is named in the config (ode.graph)."""
    path = resource_path(name)
    local = Path("resources", *name.split("/"))
    if local.is_file() and (local.resolve() == path.resolve() or filecmp.cmp(local, path, shallow=False)):
        return local.as_posix()
    return str(path)


@cache
def _root(package: str) -> Path:
    try:
        root = files(package)
    except ModuleNotFoundError:
        # An editable install made before the folders were mapped (its finder does not know them): reinstalling fixes it.
        raise HalluflowError(
            f"halluflow's package data ({package}) is not installed; reinstall halluflow (`pip install -e .` in a checkout)"
        ) from None
    if not isinstance(root, os.PathLike):
        # Readers open these files by path (polars, csv, open): a zipped install cannot serve them.
        raise HalluflowError(
            f"halluflow's package data ({package}) is not a folder on disk ({root}); install halluflow unzipped"
        )
    return Path(root)
