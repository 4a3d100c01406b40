"""One command of the `halluflow` CLI: its name, help, `configure(parser)` and `run(args)`.

Each group module (halluflow/cli/<group>.py) lists its commands as `COMMANDS`; halluflow.cli reads the table from
there, so a command is declared once.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable

# A help text, or a function making it when shown (a list read from a registry must not go stale).
Text = str | Callable[[], str]


def text(value: Text | None) -> str | None:
    """The text of a help/description/epilog field (calling it when it is computed on demand)."""
    return value() if callable(value) else value


@dataclasses.dataclass(frozen=True)
class Command:
    name: str
    help: Text
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: Text | None = None
    epilog: Text | None = None
    alias_of: str | None = None  # the command's own name when this is an older spelling kept working

    def alias(self, name: str) -> Command:
        """The same command under an older name: same configure and run, listed as "(alias of ...)"."""
        return dataclasses.replace(self, name=name, alias_of=self.name)

    def help_text(self) -> str:
        own = text(self.help) or ""
        return f"(alias of {self.alias_of}) {own}" if self.alias_of else own
