"""Request-hash cache of model answers (as lmms-eval `--use_cache` / VLMEvalKit `--reuse`): reruns resume.

One small JSON file per finished request, keyed by the sha256 of the full request (backend, model, revision,
prompt, history, image sha256, generation arguments) and written atomically, so a job killed mid-shard keeps every
answer it finished and a rerun never repeats one. Failed requests are never stored: a rerun retries them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .errors import InputError
from .io import read_json, stable_hash, write_json


def request_key(**fields: Any) -> str:
    """Hash of a request; every field that can change an answer must be passed in."""
    return stable_hash(fields)


class RequestCache:
    """Folder of answers: <root>/<key[:2]>/<key>.json (two-level fan-out keeps directories small)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        if len(key) < 3 or not all(c in "0123456789abcdef" for c in key):
            raise InputError(f"cache key {key!r} is not a hex digest")
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        path = self.path(key)
        if not path.exists():
            return None
        try:
            return read_json(path)
        except InputError:
            # A corrupt entry (disk trouble) is treated as a miss and overwritten by the rerun.
            return None

    def put(self, key: str, record: dict) -> None:
        write_json(self.path(key), {"key": key, **record})

    def __contains__(self, key: str) -> bool:
        return self.path(key).exists()

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("??/*.json")) if self.root.exists() else 0
