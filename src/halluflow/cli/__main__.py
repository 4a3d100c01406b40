"""`python -m halluflow.cli ...`: the same as the `halluflow` console script."""

from . import entry

entry()
