"""Atomic file writing, hashing and small readers shared by every stage.

Every output appears complete or not at all: we write to a temporary name in the same folder and
`os.replace` it onto the final path (atomic on POSIX), so a kill -9 never leaves a partial file behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from .errors import InputError


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success rename it onto `path`, on error remove it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # mkstemp creates 0600; give the final file the permissions a plain open() would (release files are shared).
        os.chmod(tmp_path, 0o666 & ~_UMASK)
        os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | os.PathLike, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def dumps_json(obj: Any) -> str:
    """Deterministic JSON (sorted keys, 2-space indent, trailing newline) so reruns are byte-identical."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, default=_json_default) + "\n"


def _json_default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, dumps_json(obj))


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, sort_keys=True, ensure_ascii=False, default=_json_default) + "\n")


def write_parquet(path: str | os.PathLike, df) -> None:
    """Write a polars DataFrame atomically. Statistics off and a fixed compression keep bytes reproducible."""
    with atomic_path(path) as tmp:
        df.write_parquet(tmp, compression="zstd", statistics=False)


def read_text(path: str | os.PathLike) -> str:
    """A UTF-8 text file; InputError naming the file when it is missing, a folder, unreadable or not UTF-8."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, expected a file") from None
    except (OSError, ValueError) as exc:  # permissions, a name too long, an embedded NUL byte
        raise InputError(f"{str(path)[:200]}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}, line {line})") from None


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply") from None


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Read JSON Lines; a file that is one JSON array is accepted too (POPE's A-OKVQA/GQA label files)."""
    path = Path(path)
    text = read_text(path)
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
        except RecursionError:
            raise InputError(f"{path}: JSON nested too deeply") from None
        if not all(isinstance(r, dict) for r in data):
            raise InputError(f"{path}: expected a JSON array of objects")
        return data
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise InputError(f"{path}:{lineno}: JSON nested too deeply") from None
        if not isinstance(row, dict):
            raise InputError(f"{path}:{lineno}: expected a JSON object per line")
        rows.append(row)
    return rows


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_json(obj: Any) -> str:
    """The JSON text stable_hash hashes: sorted keys, numpy scalars as numbers."""
    return json.dumps(obj, sort_keys=True, default=_json_default)


def stable_hash(obj: Any) -> str:
    """sha256 of the canonical JSON of `obj`: request-cache keys, query ids, shard assignment."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()


def safe_join(root: str | os.PathLike, relative: str) -> Path:
    """Join `relative` under `root`, refusing paths that escape it (`../../etc/passwd`, absolute paths)."""
    root_path = Path(root).resolve()
    try:
        candidate = (root_path / relative).resolve()
    except (OSError, ValueError) as exc:  # an embedded NUL byte, a name too long, a symlink loop
        raise InputError(f"path {str(relative)[:80]!r} under {root} is not usable ({exc})") from None
    if candidate != root_path and root_path not in candidate.parents:
        raise InputError(f"image path {relative!r} escapes its folder {root}")
    return candidate


def open_rgb(path: str | os.PathLike, what: str = "image"):
    """Decode an image fully as RGB; InputError naming the file when it is missing, not an image, or truncated.

    PIL opens a truncated PNG lazily and only fails at decode time with a bare OSError ("image file is truncated");
    every reader goes through here so a corrupt file is reported by name instead of as a traceback.
    """
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    try:
        with Image.open(path) as im:
            return im.convert("RGB")
    except FileNotFoundError:
        raise InputError(f"{what} {path}: file not found") from None
    except UnidentifiedImageError:
        raise InputError(f"{what} {path}: not a readable image") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        # SyntaxError: PIL's "broken PNG file"; OSError: truncated data; ValueError/bomb: absurd headers.
        raise InputError(f"{what} {path}: corrupt or truncated image ({exc})") from None
