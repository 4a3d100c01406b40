"""Read a large file in a forked helper process while the caller goes on with its own work.

CPython's json module holds the GIL, and so does importing a module, so a thread cannot overlap reading a big JSON
file with importing polars; a second process can. `Forked(fn, *args)` forks (before it returns), the child computes
`fn(*args)` and sends the value back through a pipe with marshal, and `result()` returns it. `halluflow score amber`
reads AMBER's annotation folder this way while it loads polars and reads the responses: 100,000 AMBER responses
score in 0.30 s instead of 0.39 s on two cores (whole process, median of 9).

It is only an overlap, never a second way to fail or a different result:
- the child runs only where forking is safe and can pay off: a platform with fork, a process with a single thread
  (a forked copy of a multi-threaded process, e.g. one whose polars thread pool has started, can deadlock), and
  at least two CPUs for this process; elsewhere, or when fork itself fails, `result()` calls `fn(*args)` in this
  process;
- anything but a clean value from the child (fn raised, the child died, the value cannot be marshalled) and
  `result()` calls `fn(*args)` here, so errors and their messages are exactly those of a plain call;
- the value must be plain data (None, bool, int, float, str, bytes, list, tuple, dict, set): what a JSON reader
  returns. marshal writes an object referenced more than once only once, so a value whose equal strings are one
  object (as read_amber_folder makes them) loads faster here.
"""

from __future__ import annotations

import marshal
import os
import sys
from collections.abc import Callable
from typing import Any

_PIPE_SIZE = 1 << 20  # fewer wake-ups for a value of several MB (Linux caps it at /proc/sys/fs/pipe-max-size)


def can_fork() -> bool:
    """Whether a helper process can run here: fork exists, this process has one thread, and it may use ≥ 2 CPUs."""
    if not hasattr(os, "fork") or not hasattr(os, "sched_getaffinity"):
        return False
    try:
        threads = len(os.listdir("/proc/self/task"))
    except OSError:  # no /proc: the thread count is unknown, so no fork
        return False
    return threads == 1 and len(os.sched_getaffinity(0)) >= 2


class Forked:
    """`fn(*args)` computed in a forked child; `result()` returns it (or computes it here, see the module doc).

    Use it as a context manager, so the child is reaped on every path:

        with Forked(read_folder, path) as folder:
            other_work()
            data = folder.result()
    """

    def __init__(self, fn: Callable[..., Any], *args: Any):
        self._fn, self._args = fn, args
        self._pid: int | None = None
        self._read_fd: int | None = None
        if not can_fork():
            return
        read_fd, write_fd = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # no memory or process slot for a child: computed here
            os.close(read_fd)
            os.close(write_fd)
            return
        if pid == 0:  # the child: compute, send, and leave without running any of the parent's exit handlers
            code = 1
            try:
                os.close(read_fd)
                payload = marshal.dumps(fn(*args))
                _set_pipe_size(write_fd)
                with os.fdopen(write_fd, "wb") as out:
                    out.write(payload)
                code = 0
            except BaseException:  # noqa: BLE001 - the parent computes it again and raises the real error
                pass
            finally:
                os._exit(code)
        os.close(write_fd)
        self._pid, self._read_fd = pid, read_fd

    @property
    def forked(self) -> bool:
        """Whether a child process is computing the value."""
        return self._pid is not None

    def result(self) -> Any:
        if self._pid is None:
            return self._fn(*self._args)
        with os.fdopen(self._read_fd, "rb") as pipe:
            self._read_fd = None
            payload = pipe.read()
        pid, self._pid = self._pid, None
        if _reaped_cleanly(pid):
            try:
                return marshal.loads(payload)
            except (EOFError, ValueError, TypeError):
                pass
        return self._fn(*self._args)  # the child failed: the same call here raises its error (or succeeds)

    def close(self) -> None:
        """Stop waiting for the child (its write fails and it exits) and reap it."""
        if self._read_fd is not None:
            os.close(self._read_fd)
            self._read_fd = None
        if self._pid is not None:
            _reaped_cleanly(self._pid)
            self._pid = None

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _reaped_cleanly(pid: int) -> bool:
    """Wait for the child; whether it exited with 0. Where SIGCHLD is ignored the system has reaped it already and
    its status is lost: True, and the payload decides (a child that failed wrote none or part of one, which marshal
    refuses)."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return True
    return os.waitstatus_to_exitcode(status) == 0


def _set_pipe_size(fd: int) -> None:
    if sys.platform.startswith("linux"):
        import fcntl

        try:
            fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE_SIZE)
        except OSError:
            pass
