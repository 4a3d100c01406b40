"""Request-hash cache of model answers (as lmms-eval `--use_cache` / VLMEvalKit `--reuse`): reruns resume.

One small JSON file per finished request, keyed by the sha256 of the full request (backend, model, revision,
prompt, history, image sha256, generation arguments) and written atomically, so a job killed mid-shard keeps every
answer it finished and a rerun never repeats one. Failed requests are never stored: a rerun retries them. Texts are
stored as UTF-8 JSON, lone surrogates replaced (they cannot be encoded).
The cache heals: an entry that cannot be read back (disk trouble, a stray edit, a folder in its place) is logged,
treated as a miss and rewritten by the rerun; a cache folder that cannot be written is one clear error.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from .errors import InputError
from .io import read_json, scrub_surrogates, stable_hash, write_json
from .progress import get_logger

log = get_logger(__name__)


_HEX_KEY = re.compile(r"[0-9a-f]{3,}")


def request_key(**fields: Any) -> str:
    """Hash of a request; every field that can change an answer must be passed in."""
    return stable_hash(fields)


def _encodable(value: Any) -> Any:
    """The record with lone UTF-16 surrogates (from a reply's "\\ud800") replaced by U+FFFD: UTF-8 cannot encode
    them, and a put that raises on every rerun would re-send the request forever."""
    if isinstance(value, str):
        return scrub_surrogates(value)
    if isinstance(value, dict):
        return {k: _encodable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encodable(v) for v in value]
    return value


class RequestCache:
    """Folder of answers: <root>/<key[:2]>/<key>.json (two-level fan-out keeps directories small)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.healed = 0

    def path(self, key: str) -> Path:
        if not _HEX_KEY.fullmatch(key):  # a regex: a per-character check cost ~0.1 ms of every answer
            raise InputError(f"cache key {key!r} is not a hex digest")
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The cached record, or None for a miss; an unreadable entry is a miss (logged, rewritten by put)."""
        path = self.path(key)
        if not path.exists() and not path.is_symlink():
            return None
        try:
            entry = read_json(path)
        except InputError as exc:
            return self._unreadable(path, str(exc))
        if not isinstance(entry, dict):
            return self._unreadable(path, f"a JSON {type(entry).__name__}, not an object")
        if not isinstance(entry.get("answer"), str):
            return self._unreadable(path, "no string 'answer'")
        if entry.get("key", key) != key:
            return self._unreadable(path, f"holds the entry of key {str(entry.get('key'))[:16]}...")
        return entry

    def _unreadable(self, path: Path, why: str) -> None:
        self.healed += 1
        log.warning("request cache: ignoring unreadable entry %s (%s); the request is asked again", path, why)
        return None

    def put(self, key: str, record: dict) -> None:
        path = self.path(key)
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)  # a folder where an entry belongs would block the atomic rename forever
            write_json(path, _encodable({"key": key, **record}))
        except OSError as exc:
            raise InputError(
                f"request cache {self.root}: cannot write {path.name} ({exc.strerror or exc}); "
                "make the folder writable or pass another --cache"
            ) from None

    def check_writable(self) -> None:
        """Fail before any model call when the cache cannot take answers (a read-only folder or disk)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".write-test-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise InputError(
                f"request cache {self.root}: not writable ({exc.strerror or exc}); "
                "make the folder writable or pass another --cache"
            ) from None

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("??/*.json")) if self.root.exists() else 0
