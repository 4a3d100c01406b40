"""The one write path, hashing and the input readers shared by every stage and command.

Every output appears complete or not at all: we write to a temporary name in the same folder and
`os.replace` it onto the final path (atomic on POSIX), so a kill -9 never leaves a partial file behind. Before that,
the target is checked: a device node, FIFO or folder is never replaced by a regular file, a file the command reads
is never overwritten, and a name taken from data never resolves outside the folder the command owns.

Readers take files, pipes, FIFOs and /dev/stdin alike (a stream is read once, into memory), split JSON Lines on
'\\n' only, and name the user's file in every error. Every read is capped (MAX_INPUT_BYTES; a stream is refused as
soon as it passes the cap, so /dev/zero or an endless pipe never fills memory) and a device other than a terminal is
refused. Files that are never a stream (a release's manifest.json) are read by read_regular_bytes: regular files
only, opened without blocking (a FIFO in their place is refused, never waited on), with their own cap.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from .errors import InputError

# A lone UTF-16 surrogate (JSON "\ud800" decodes to one) cannot be encoded as UTF-8: the cache, the parquet and the
# logs would all fail on it, so reply texts carry U+FFFD in its place.
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def scrub_surrogates(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


# ------------------------------------------------------------------------------------------------ the write path
# What the running command reads (its input files and folders, set by the CLI) and the folder it owns. Every writer
# goes through atomic_path, which refuses a target that is one of those inputs or lies outside the owned folder.
_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("halluflow_io_scope", default=None)


class _Scope:
    def __init__(self, inputs: dict[str, str]):
        self.input_files: dict[str, str] = {}  # realpath -> how the user named it
        self.input_folders: dict[str, str] = {}
        for shown, path in inputs.items():
            real = os.path.realpath(path)
            (self.input_folders if os.path.isdir(real) else self.input_files)[real] = shown
        self.read: set[str] = set()  # realpaths read during the command (inside an input folder they are inputs too)
        self.owned: list[Path] = []
        self.streams: dict[str, bytes] = {}  # pipes and FIFOs read so far, by the name they were given


@contextlib.contextmanager
def command_scope(inputs: dict[str, str | os.PathLike]) -> Iterator[None]:
    """Run a command with `inputs` ({shown name: path}, e.g. {"--labels": "l.json"}) protected from its writes."""
    token = _SCOPE.set(_Scope({k: os.fspath(v) for k, v in inputs.items() if os.path.exists(v)}))
    try:
        yield
    finally:
        _SCOPE.reset(token)


@contextlib.contextmanager
def owned_folder(root: str | os.PathLike) -> Iterator[Path]:
    """Inside this block every atomic write must resolve into `root` (names taken from data cannot escape it)."""
    scope = _SCOPE.get()
    token = None
    if scope is None:
        token = _SCOPE.set(scope := _Scope({}))
    resolved = Path(os.path.realpath(root))
    scope.owned.append(resolved)
    try:
        yield resolved
    finally:
        scope.owned.remove(resolved)
        if token is not None:
            _SCOPE.reset(token)


def _note_read(path: str | os.PathLike) -> None:
    scope = _SCOPE.get()
    if scope is not None:
        with contextlib.suppress(OSError, ValueError):
            scope.read.add(os.path.realpath(path))


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def not_regular(path: str | os.PathLike) -> str | None:
    """What `path` is when it exists and is not a regular file ("a folder", "a FIFO (named pipe)", ...), else None."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None if not os.path.islink(path) else "a dangling symbolic link"
    except (OSError, ValueError) as exc:
        return f"not usable ({getattr(exc, 'strerror', None) or exc})"
    return next((what for test, what in _KINDS if test(mode)), None)


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def check_target(path: str | os.PathLike, within: str | os.PathLike | None = None, folder: bool = False) -> Path:
    """The real path a writer may replace, or InputError (one line naming `path`): it must be a regular file or a new
    path (`folder`: or a folder), not an input of the running command, and inside the owned folder (and `within`)."""
    shown = str(path)[:200]
    kind = not_regular(path)
    if kind and not (folder and kind == "a folder"):
        raise InputError(f"{shown}: exists and is {kind}, not a regular file; refusing to write over it")
    try:
        real = Path(os.path.realpath(path))  # a symlink to a file: that file is replaced, the link stays a link
    except (OSError, ValueError) as exc:
        raise InputError(f"{shown}: not a usable path ({getattr(exc, 'strerror', None) or exc})") from None
    scope = _SCOPE.get()
    if scope is not None:
        key = str(real)
        if key in scope.input_files:
            raise InputError(
                f"{shown}: is also the input {scope.input_files[key]} of this command; refusing to overwrite it"
            )
        if key in scope.read and real.exists():
            folder_of = next((s for f, s in scope.input_folders.items() if _within(real, Path(f))), None)
            if folder_of is not None:
                raise InputError(
                    f"{shown}: is an input read from {folder_of} by this command; refusing to overwrite it"
                )
    roots = [*(scope.owned if scope is not None else []), *([Path(os.path.realpath(within))] if within else [])]
    for root in roots:
        if not _within(real, root):
            raise InputError(f"{shown}: resolves outside the folder {root} this command writes into; refused")
    return real


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, within: str | os.PathLike | None = None) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success rename it onto `path`, on error remove it.

    The target is checked first (check_target): a device, FIFO or folder is never replaced by a regular file, an
    input of the command is never overwritten, a name from data never lands outside the owned folder. What is at
    `path` stays untouched until the new file is complete. An OSError names `path`, never the temporary file."""
    shown = Path(path)
    path = check_target(path, within)
    tmp_path = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
        os.close(fd)
        tmp_path = Path(tmp)
        yield tmp_path
        # mkstemp creates 0600; give the final file the permissions a plain open() would (release files are shared).
        os.chmod(tmp_path, 0o666 & ~_UMASK)
        os.replace(tmp_path, path)
    except BaseException as exc:
        if tmp_path is not None:
            with contextlib.suppress(FileNotFoundError):
                tmp_path.unlink()
        if isinstance(exc, OSError) and (exc.filename in (None, str(tmp_path), str(path)) or _is_part(exc, path)):
            # the user's file, not ".<name>.XXXX.part", in the one error line
            raise OSError(exc.errno, exc.strerror or str(exc), str(shown)) from None
        raise


def _is_part(exc: OSError, path: Path) -> bool:
    """Whether the failed call named a temporary file of `path` (mkstemp fails before it returns the name: a
    read-only file system, a full disk)."""
    name = os.path.basename(str(exc.filename or ""))
    return name.startswith(f".{path.name}.") and name.endswith(".part")


def replace_folder(built: str | os.PathLike, dest: str | os.PathLike) -> None:
    """Move the complete folder `built` onto `dest`; the old `dest` is set aside first and deleted only once the new
    one is in place (a failure in between puts it back), so finished work is never lost to a half-done rebuild."""
    built, dest = Path(built), Path(dest)
    old = None
    if dest.exists() or dest.is_symlink():
        old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        if old.exists():
            shutil.rmtree(old)
        os.rename(dest, old)
    try:
        os.rename(built, dest)
    except BaseException:
        if old is not None:
            os.rename(old, dest)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def building_folder(dest: str | os.PathLike, stage: str = "building") -> Iterator[Path]:
    """A fresh hidden folder beside `dest` (".<name>.<stage>") to build into, every write kept inside it; on success
    it replaces `dest` whole (replace_folder), on any error it is removed and `dest` stays exactly as it was."""
    dest = Path(dest)
    tmp = dest.with_name(f".{dest.name}.{stage}")
    if tmp.exists():  # left by a build that was killed
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        with owned_folder(tmp):
            yield tmp
        replace_folder(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def link_or_copy(src: str | os.PathLike, dst: str | os.PathLike, within: str | os.PathLike | None = None) -> None:
    """Hard-link `src` to `dst` (a copy across file systems), through the same checks as every write."""
    with atomic_path(dst, within) as tmp:
        tmp.unlink()
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copyfile(src, tmp)


def safe_name(name: str, what: str) -> str:
    """`name` when it is one plain file name (it becomes a folder or file name under an output); else InputError."""
    if (
        not isinstance(name, str)
        or not name.strip()
        or name in (".", "..")
        or any(c in name for c in "/\\\0")
        or not name.isprintable()
        or len(name.encode("utf-8", "surrogatepass")) > 255
    ):
        raise InputError(
            f"{what} {ascii(name)[:80]}: not a plain file name (no '/', '\\', '..', NUL or control characters)"
        )
    return name


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
        try:
            df.write_parquet(tmp, compression="zstd", statistics=False)
        except OSError:
            raise
        except Exception as exc:  # polars reports a failed write (a full disk) as ComputeError: the OSError it is
            code = re.search(r"os error (\d+)", str(exc))
            if code is None:
                raise
            raise OSError(int(code.group(1)), os.strerror(int(code.group(1))), str(tmp)) from None


MAX_INPUT_BYTES = 4 << 30
"""The largest input file or stream any reader takes (4 GiB; COCO's or Visual Genome's largest annotation files are
under 1 GiB): past it the read stops with one line instead of filling memory. HALLUFLOW_MAX_INPUT_BYTES overrides."""


def max_input_bytes() -> int:
    value = os.environ.get("HALLUFLOW_MAX_INPUT_BYTES", "")
    return int(value) if value.isdigit() and int(value) > 0 else MAX_INPUT_BYTES


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} bytes"


def _read_fd(fd: int, path: str | os.PathLike, limit: int) -> bytes:
    """Read `fd` to its end, at most `limit` bytes (InputError naming `path` past it)."""
    chunks, total = [], 0
    while True:
        block = os.read(fd, min(1 << 20, limit + 1 - total))
        if not block:
            return b"".join(chunks)
        chunks.append(block)
        total += len(block)
        if total > limit:
            raise InputError(f"{str(path)[:200]}: larger than {_size(limit)}, the most halluflow reads of one input")


def _open_error(path: str | os.PathLike, exc: Exception) -> InputError:
    if isinstance(exc, FileNotFoundError):
        return InputError(f"{str(path)[:200]}: file not found")
    if isinstance(exc, IsADirectoryError):
        return InputError(f"{str(path)[:200]}: is a folder, expected a file")
    # permissions, a name too long, an embedded NUL byte, a symlink loop
    return InputError(f"{str(path)[:200]}: cannot be read ({getattr(exc, 'strerror', None) or exc})")


def read_bytes(path: str | os.PathLike, max_bytes: int | None = None) -> bytes:
    """The bytes of an input file, pipe, FIFO or /dev/stdin (read once, to the end, at most `max_bytes`: default
    MAX_INPUT_BYTES); InputError naming the file when it is missing, a folder, a device (/dev/zero: never a
    terminal), larger than the cap, or unreadable."""
    path = Path(path)
    limit = max_input_bytes() if max_bytes is None else max_bytes
    scope = _SCOPE.get()
    stream = scope is not None and is_stream(path)
    if stream and str(path) in scope.streams:  # a pipe gives its bytes once: a second reader gets the same ones
        return scope.streams[str(path)]
    try:
        fd = os.open(path, os.O_RDONLY)
    except (OSError, ValueError) as exc:
        raise _open_error(path, exc) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputError(f"{str(path)[:200]}: is a folder, expected a file")
        if (stat.S_ISCHR(mode) and not os.isatty(fd)) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
            kind = next(what for test, what in _KINDS if test(mode))
            raise InputError(f"{str(path)[:200]}: is {kind}, not a file or pipe; refusing to read it")
        if stat.S_ISREG(mode) and os.fstat(fd).st_size > limit:
            raise InputError(
                f"{str(path)[:200]}: {_size(os.fstat(fd).st_size)}, larger than {_size(limit)}, the most halluflow "
                "reads of one input"
            )
        data = _read_fd(fd, path, limit)
    except OSError as exc:
        raise _open_error(path, exc) from None
    finally:
        os.close(fd)
    if stream:
        scope.streams[str(path)] = data
    _note_read(path)
    return data


def read_regular_bytes(path: str | os.PathLike, max_bytes: int, what: str = "") -> bytes:
    """The bytes of a regular file only (a release's manifest.json, which is never a stream): opened without
    blocking, so a FIFO in its place is refused at once, never waited on; a device (a link to /dev/zero), a socket
    or a folder is refused, and so is a file larger than `max_bytes`. `what` says what the file is in the line."""
    path = Path(path)
    label = f"{str(path)[:200]}" + (f" ({what})" if what else "")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError) as exc:
        raise _open_error(path, exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((w for test, w in _KINDS if test(info.st_mode)), "not a regular file")
            raise InputError(f"{label}: is {kind}, not a regular file; refusing to read it")
        if info.st_size > max_bytes:
            raise InputError(f"{label}: {_size(info.st_size)}, larger than the {_size(max_bytes)} allowed")
        data = _read_fd(fd, path, max_bytes)
    except OSError as exc:
        raise _open_error(path, exc) from None
    finally:
        os.close(fd)
    _note_read(path)
    return data


def is_stream(path: str | os.PathLike) -> bool:
    """True for a pipe, FIFO, device or /dev/stdin: it can be read once only, so it is read into memory first."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode) and not stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def decode_utf8(data: bytes, path: str | os.PathLike) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}, line {line})") from None


def read_text(path: str | os.PathLike) -> str:
    """A UTF-8 text file; InputError naming the file when it is missing, a folder, unreadable or not UTF-8."""
    return decode_utf8(read_bytes(path), path)


def read_parquet(path: str | os.PathLike, columns: list[str] | None = None):
    """A parquet table (a file, pipe or FIFO) as a polars DataFrame; InputError naming the file when it is missing
    or not a readable parquet file (truncated, another format), so every CLI command and job log says which."""
    import polars as pl

    path = Path(path)
    if is_stream(path):
        from io import BytesIO

        source = BytesIO(read_bytes(path))
    elif not path.exists():
        raise InputError(f"{path}: file not found")
    elif path.is_dir():
        raise InputError(f"{path}: is a folder, expected a parquet file")
    else:
        source = path
    try:
        table = pl.read_parquet(source, columns=columns)
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: not a readable parquet file ({reason})") from None
    _note_read(path)
    return table


def parquet_columns(path: str | os.PathLike) -> list[str]:
    """The column names of a parquet file (InputError naming it when it is not one)."""
    import polars as pl

    path = Path(path)
    if is_stream(path) or not path.is_file():
        return read_parquet(path).columns
    try:
        return list(pl.read_parquet_schema(path))
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: not a readable parquet file ({reason})") from None


MAX_JSON_DEPTH = 64
"""The deepest nesting any JSON halluflow reads from outside may have (server bodies, results, imports): every
document halluflow writes or reads is a few levels deep, so a deeper one is refused in one line before parsing."""

# one token at a time (an escape pair, a quote, a bracket), strings tracked by a flag: a pattern matching a whole
# string held a backtracking mark per character or escape (a 5 MB JSON string: ~570 MB of memory)
_JSON_TOKENS = re.compile(r'\\.|["\[\]{}]', re.DOTALL)


def json_depth(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """The nesting depth of a JSON text (strings skipped), stopping as soon as it passes `limit`: linear time, no
    recursion, so a 200,000-deep body costs a scan, not a RecursionError."""
    depth = deepest = 0
    in_string = False
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token == '"':
            in_string = not in_string
        elif in_string or len(token) == 2:  # inside a string, or an escape (outside a string: invalid JSON)
            continue
        elif token in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif token in "]}":
            depth -= 1
    return deepest


def loads_json(text: str | bytes, what: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The one decoding guard for JSON from outside: `what` names the source (a file, a server) in the one-line
    InputError raised for invalid JSON or nesting deeper than `max_depth`."""
    if isinstance(text, bytes | bytearray):
        text = decode_utf8(bytes(text), what)
    if json_depth(text, max_depth) > max_depth:
        raise InputError(f"{what}: JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{what}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:  # pragma: no cover - the depth scan refuses such text first
        raise InputError(f"{what}: JSON nested too deeply") from None


def read_json(path: str | os.PathLike, max_bytes: int | None = None, regular: bool = False) -> Any:
    """A JSON file through the decoding guard (loads_json). `regular`: a regular file only, never a stream or device
    (read_regular_bytes; `max_bytes` then defaults to MAX_INPUT_BYTES too)."""
    path = Path(path)
    if regular:
        data = read_regular_bytes(path, max_input_bytes() if max_bytes is None else max_bytes)
    else:
        data = read_bytes(path, max_bytes)
    return loads_json(decode_utf8(data, path), str(path))


def read_jsonl(path: str | os.PathLike, text: str | None = None) -> list[dict]:
    """Read JSON Lines; a file that is one JSON array is accepted too (POPE's A-OKVQA/GQA label files).
    `text`: the file's content when the caller has read it already (a pipe can be read once only).
    Lines end at '\\n' only: U+2028 or a form feed inside a JSON string is text, not a line break."""
    path = Path(path)
    if text is None:
        text = read_text(path)
    stripped = text.lstrip()
    if stripped.startswith("["):
        data = loads_json(stripped, str(path))
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise InputError(f"{path}: expected a JSON array of objects")
        return data
    rows = []
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        if json_depth(line) > MAX_JSON_DEPTH:
            raise InputError(f"{path}:{lineno}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
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
