"""halluflow.forked: a value computed in a forked helper equals the plain call's, and every way the helper can fail
ends in the plain call (its value or its error). The helper only forks from a single-threaded process, and a pytest
worker has threads, so the forking cases run in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from halluflow.forked import Forked, can_fork

_SCRIPT = r"""
import json, os, sys, threading
from halluflow.forked import Forked, can_fork

parent = os.getpid()
out = {"can_fork": can_fork()}

def read(n):
    rows = [{"id": i, "type": "generative" if i % 3 else "yes", "x": [1.5, None, True, "é" * (i % 4)]} for i in range(n)]
    return {"in_child": os.getpid() != parent, "rows": rows}

with Forked(read, 50_000) as f:
    out["forked"] = f.forked
    value = f.result()
out["in_child"] = value["in_child"]
out["equal"] = value["rows"] == read(50_000)["rows"]

def dies():
    if os.getpid() != parent:
        os._exit(3)
    return "computed here"

with Forked(dies) as f:
    out["died"] = f.result()

def fails(path):
    raise ValueError(f"{path}: not valid JSON")

try:
    with Forked(fails, "a.json") as f:
        f.result()
except ValueError as exc:
    out["error"] = str(exc)

def unsendable():
    return {"in_child": os.getpid() != parent, "object": object()}

with Forked(unsendable) as f:
    out["unsendable_in_child"] = f.result()["in_child"]

f = Forked(read, 200_000)  # more than the pipe holds: the child waits for a reader that never comes
pid = f._pid
f.close()  # closes the pipe (the child's write fails, it exits) and reaps it
try:
    os.waitpid(pid, os.WNOHANG)
    out["reaped"] = False
except ChildProcessError:
    out["reaped"] = True

import signal
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reaped by the system: no exit status to read
with Forked(read, 1000) as f:
    out["value_without_status"] = f.result()["rows"] == read(1000)["rows"]
with Forked(dies) as f:
    out["died_without_status"] = f.result()
signal.signal(signal.SIGCHLD, signal.SIG_DFL)

real_fork = os.fork
def fork_fails():
    raise BlockingIOError(11, "Resource temporarily unavailable")
os.fork = fork_fails
with Forked(read, 10) as f:
    out["forked_when_fork_fails"] = f.forked
    out["value_when_fork_fails"] = f.result()["rows"] == read(10)["rows"]
os.fork = real_fork

stop = threading.Event()
t = threading.Thread(target=stop.wait)
t.start()
out["can_fork_with_a_thread"] = can_fork()
with Forked(read, 10) as f:
    out["forked_with_a_thread"] = f.forked
    out["value_with_a_thread"] = f.result()["rows"] == read(10)["rows"]
stop.set()
t.join()
print(json.dumps(out))
"""


def test_forked_helper_in_a_fresh_process():
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    # every case but the first gives the plain call's result whether or not a child ran
    assert out["died"] == "computed here"
    assert out["error"] == "a.json: not valid JSON"
    assert out["unsendable_in_child"] is False
    assert out["can_fork_with_a_thread"] is False and out["forked_with_a_thread"] is False
    assert out["value_with_a_thread"] is True
    assert out["forked_when_fork_fails"] is False and out["value_when_fork_fails"] is True
    assert out["value_without_status"] is True and out["died_without_status"] == "computed here"
    if not out["can_fork"]:
        pytest.skip("this machine cannot run the helper (no fork, no /proc, or a single CPU): computed in process")
    assert out["forked"] and out["in_child"] and out["equal"]
    assert out["reaped"]


def test_no_fork_in_a_threaded_process():
    """A pytest worker (or any caller with a thread) computes in process: forking it could deadlock the child."""
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert not can_fork()
        with Forked(os.getpid) as f:
            assert not f.forked and f.result() == os.getpid()
    finally:
        stop.set()
        t.join()
