"""Adaptive concurrency for OpenAI-compatible servers: how many requests one client keeps in flight to one server.

A continuous-batching server (vLLM, SGLang, TGI) decodes up to its batch limit at once, so its throughput grows
with the requests in flight up to that limit and then stays flat while latency grows (its queue), or falls (when
waiting requests slow the running batch), or the server answers 429/503. `ServerWindow` finds that limit per
server (base_url) and shares it between every client and every process that talks to the server.

The control law, per round (one round trip: a round ends once it has lasted the last median latency and has at
least 4 answers):
- slow start: the window starts at `start_concurrency` (16) and grows by three per answer that came back within
  (1 + tol/2) x the baseline latency (x4 per round trip; TCP's slow start doubles) until the first congestion
  signal, so a 256-slot server is reached in two round trips (the overshoot costs one cut, below);
- congestion by latency: a round whose median latency is above (1 + latency_tolerance) x the baseline (the lowest
  round median seen) while its throughput did not rise (<= 1.1 x the best of the last 32 rounds) means the
  server queues: the window is cut to the knee, 1.1 x the best recent throughput x the baseline latency (Little's
  law; BBR's bandwidth-delay product): the server's slots plus 10 % headroom, in one step however far slow start
  overshot (at most to a quarter); a window already at the knee holds, and after three such rounds the baseline
  moves up to the new latency (the requests got slower, e.g. longer answers). Latency that grows WITH throughput
  (a server whose batches slow as they fill) is no congestion: the window keeps growing while throughput rises;
- congestion by refusal: a 429 or 503 cuts the window to 0.9 x the requests that were in flight when it came (the
  server's own admission limit, known at once, instead of several blind halvings after a slow-start overshoot);
  at most one cut per round trip, so one burst of refusals is one episode. `Retry-After` pauses every new request
  to that server until then (capped by backoff_max_s), in every process sharing it; the refused request itself
  is retried as any retryable failure is (its wait honours Retry-After too) and counts as failed only when its
  retries run out;
- steady growth while latency stays flat and the window is actually used (80 % of it in flight): halfway back to
  the admission limit of the last refusal per round, then one more per round up to 10 % past it (CUBIC's idea:
  most rounds are spent just below the known limit, probing it gently), else +5 % per round, up to
  `max_concurrency` (256: vLLM's default max_num_seqs).
Requests that failed otherwise (5xx, timeouts, connection errors) neither grow nor cut the window.

What we took and why we differ. lmms-eval 0.6 (`adaptive_concurrency`) decides every max(4, window) answers from
the failure rate, the rate of rate-limit errors and the p95 latency against an ABSOLUTE target (15 s), +10 % or
x0.7: the target must be known in advance (a 64-slot server at 0.5 s never reaches 15 s of latency, so it grows
blindly into its queue), growth from a small start is slow, and each process decides alone. inspect_ai's adaptive
connections (start 20, slow start doubling, +5 % steady growth, x0.8 per rate-limit episode with a cooldown,
Retry-After extends the cooldown, transient 5xx/timeouts neither grow nor cut) react to rate limits only: against a
server that queues instead of refusing (vLLM does), they grow to their maximum and the queue grows with them. We
keep inspect's slow start, episode debounce, neutral transient errors and Retry-After (which we also apply to
every process); we add the latency signal RELATIVE to a measured baseline and gated on throughput (no target to
know; "grow while throughput rises"), the one-step cut to the knee or to the observed admission limit, fast
recovery toward it, growth only while the window is used (RFC 7661's idea), and one window per server shared
across processes.

Shared across processes: with HALLUFLOW_SERVER_STATE set to a folder (the workflow sets it to the run's
results/<release>/.servers), the window of each server lives in a small JSON file there (named by a hash of the
server address, never its credentials), read and written under an exclusive fcntl lock at most every 50 ms per
process. Each process reports its demand (requests in flight + waiting) and in-flight count; the window is split
max-min fairly by demand, and a newcomer's share is first what the others leave free, so several answer jobs
against one server neither flood it (the sum stays at the window) nor starve (each keeps at least one request and
its fair share within a round trip). Members that died (same host: their pid is gone; another host: silent for
stale_s) are dropped. Without the variable the window is this process's own. A fixed `concurrency` bypasses all
of this: exactly that many requests in flight, as before.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import threading
import time
from pathlib import Path

STATE_ENV = "HALLUFLOW_SERVER_STATE"  # folder of the shared per-server state files; unset = per process
DEFAULT_MAX_CONCURRENCY = 256  # vLLM's default max_num_seqs
DEFAULT_START_CONCURRENCY = 16
DEFAULT_LATENCY_TOLERANCE = 0.5
REFUSAL_CUT = 0.9  # of the requests in flight when a 429/503 came
PROBE_GROWTH = 0.05  # per round, past the last cut's window
SLOW_START_GAIN = 3  # window added per answer within the latency target: x4 per round trip
MIN_ROUND_S = 0.05
MIN_ROUND_ANSWERS = 4
BASELINE_ROUNDS = 32
ROUND_SAMPLES = 512  # latencies kept per round (its median)
FILE_SYNC_S = 0.05
CONGESTION_STATUS = {429, 503}


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def fresh_state(start: float, maximum: int, now: float) -> dict:
    return {
        "limit": float(min(start, maximum)),
        "max": maximum,
        "slow_start": True,
        "history": [],  # [answers per second, median latency] of the last BASELINE_ROUNDS rounds
        "base": None,  # the lowest round median latency seen: the latency of an unqueued request
        "high_at_knee": 0,  # rounds in a row of high latency with the window at or below the knee
        "w_max": None,  # the window at the last congestion cut
        "cut_at": 0.0,
        "cooldown_s": 0.0,
        "pause_until": 0.0,
        "round": _round(now),
        "members": {},
    }


def _round(now: float) -> dict:
    return {"start": now, "latencies": [], "n": 0, "refused": 0, "peak_used": 0}


def baseline(state: dict) -> float | None:
    """The lowest round median latency seen: the latency of an unqueued request. Not a sliding minimum: a queue
    that persists must not become the baseline (TCP Vegas' and BBR's min-RTT problem); it moves up only when the
    latency stays high while the window is already at the knee (the requests themselves got slower)."""
    return state.get("base")


def knee_window(state: dict) -> float | None:
    """The window that keeps the server full without a queue: the best recent throughput times the unqueued latency
    (Little's law at the knee; BBR's bandwidth-delay product)."""
    if not state["history"]:
        return None
    return max(x for x, _ in state["history"]) * baseline(state)


def fold(state: dict, report: dict, now: float, tolerance: float) -> None:
    """Apply one process's report (answers' latencies, refusals, its counts) to the shared state: the control law."""
    latencies, refusals = report["latencies"], report["refusals"]
    if report.get("retry_after"):
        state["pause_until"] = max(state["pause_until"], now + report["retry_after"])
    rnd = state["round"]
    used = sum(m["in_flight"] for m in state["members"].values())
    rnd["peak_used"] = max(rnd["peak_used"], used)
    last = state["history"][-1][1] if state["history"] else MIN_ROUND_S
    if refusals and now - state["cut_at"] >= state["cooldown_s"]:
        held = max(1.0, min(state["limit"], min(refusals)))  # requests in flight when the first refusal came
        state["w_max"] = held
        state["limit"] = max(1.0, held * REFUSAL_CUT)
        state["slow_start"] = False
        _cut(state, now, max(MIN_ROUND_S, last))
        rnd = state["round"]
    rnd["n"] += len(latencies)
    rnd["refused"] += len(refusals)
    room = ROUND_SAMPLES - len(rnd["latencies"])
    rnd["latencies"].extend(latencies[: max(0, room)])
    base = baseline(state)
    if state["slow_start"] and not refusals and used >= 0.5 * state["limit"]:
        target = None if base is None else (1 + tolerance / 2) * base
        state["limit"] += SLOW_START_GAIN * sum(1 for lat in latencies if target is None or lat <= target)
    if rnd["n"] >= MIN_ROUND_ANSWERS and now - rnd["start"] >= max(MIN_ROUND_S, last):
        _end_round(state, now, tolerance)
    state["limit"] = float(min(max(1.0, state["limit"]), state["max"]))


def _cut(state: dict, now: float, cooldown: float) -> None:
    state["cut_at"], state["cooldown_s"] = now, cooldown
    state["round"] = _round(now)


def _end_round(state: dict, now: float, tolerance: float) -> None:
    rnd = state["round"]
    if not rnd["latencies"]:
        return
    m = median(rnd["latencies"])
    # Throughput over the last 3 rounds: answers come back in bursts (a window sent at once returns at once), and
    # one round's count would overstate it, and with it the knee.
    recent = (state.get("recent", []) + [[rnd["n"], max(now - rnd["start"], 1e-6)]])[-3:]
    state["recent"] = recent
    x = sum(n for n, _ in recent) / sum(d for _, d in recent)
    best_before = max((h[0] for h in state["history"]), default=0.0)
    state["history"] = (state["history"] + [[x, m]])[-BASELINE_ROUNDS:]
    state["round"] = _round(now)
    state["base"] = m if state.get("base") is None else min(state["base"], m)
    base = baseline(state)
    limit = state["limit"]
    if rnd["refused"]:
        return  # the refusal already cut the window; no growth in a round that saw one
    if m > (1 + tolerance) * base and x <= 1.1 * best_before:
        # Latency grew and throughput did not: requests queue at the server. Cut to the knee window (+10 %
        # headroom for jitter), at most to a quarter; a window already at or below it holds.
        state["slow_start"] = False
        if now - state["cut_at"] >= state["cooldown_s"]:
            knee = 1.1 * (knee_window(state) or limit)
            if knee < limit:
                state["w_max"] = None  # that window queued: probe up from the knee, no fast recovery toward it
                state["limit"] = max(limit * 0.25, knee)
                state["high_at_knee"] = 0
                _cut(state, now, m)  # the requests sent before the cut come back within about m
            else:
                # The window is not what queues: three such rounds in a row mean the requests themselves got slower
                # (longer answers, a busier server), so the baseline moves to them and growth can resume.
                state["high_at_knee"] = state.get("high_at_knee", 0) + 1
                if state["high_at_knee"] >= 3:
                    state["base"], state["high_at_knee"] = m, 0
        return
    state["high_at_knee"] = 0
    if not state["slow_start"] and rnd["peak_used"] >= 0.8 * limit:
        w_max = state["w_max"]
        if w_max is not None and limit < w_max - 1:
            state["limit"] = limit + max(1.0, (w_max - limit) / 2)
        elif w_max is not None and limit < 1.1 * w_max:
            state["limit"] = limit + 1.0  # just past the admission limit: one request more per round
        else:
            state["limit"] = limit + max(1.0, limit * PROBE_GROWTH)


def shares(state: dict, me: str) -> int:
    """This member's share of the window: max-min fair by demand, and at first only what the others leave free."""
    members = state["members"]
    window = max(1, int(state["limit"]))
    demands = sorted((m["demand"], key) for key, m in members.items())
    left, fair = window, {}
    for i, (demand, key) in enumerate(demands):
        give = min(demand, left / (len(demands) - i))
        fair[key] = give
        left -= give
    mine = fair.get(me, window)
    if mine <= 0:
        mine = 1
    others = sum(m["in_flight"] for key, m in members.items() if key != me)
    return max(1, int(min(mine, window - others) + 1e-9))


class _MemoryStore:
    """The state of one server held by this process alone."""

    def __init__(self):
        self.state: dict | None = None

    def transact(self, update):
        self.state = update(self.state)
        return self.state

    def drop(self, me: str) -> None:
        if self.state is not None:
            self.state["members"].pop(me, None)


class _FileStore:
    """The state of one server in a JSON file shared by processes, read-modified-written under an fcntl lock. A
    file that does not parse (a process killed mid-write) starts the state afresh: it holds no results."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def transact(self, update):
        with open(self.path, "a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                fh.seek(0)
                raw = fh.read()
                try:
                    state = json.loads(raw) if raw else None
                except ValueError:
                    state = None
                state = update(state if isinstance(state, dict) else None)
                fh.seek(0)
                fh.truncate()
                fh.write(json.dumps(state, separators=(",", ":")).encode())
                fh.flush()
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
        return state

    def drop(self, me: str) -> None:
        def remove(state):
            if state is not None:
                state["members"].pop(me, None)
            return state

        try:
            self.transact(remove)
        except OSError:
            pass


def _alive(member: str, now: float, seen: float, stale_s: float) -> bool:
    host, _, rest = member.rpartition("@")
    pid = rest.split(":")[0]
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
    return now - seen < stale_s


class ServerWindow:
    """The requests this process may have in flight to one server right now: acquire() before each attempt,
    release() after it with what happened. Thread-safe; shared by every client of the process that talks to the
    server (window_for)."""

    def __init__(
        self,
        key: str,
        state_dir: str | os.PathLike | None,
        maximum: int = DEFAULT_MAX_CONCURRENCY,
        start: int = DEFAULT_START_CONCURRENCY,
        tolerance: float = DEFAULT_LATENCY_TOLERANCE,
        stale_s: float = 180.0,
    ):
        self.key, self.maximum, self.start, self.tolerance, self.stale_s = key, maximum, start, tolerance, stale_s
        name = hashlib.sha256(key.encode()).hexdigest()[:24] + ".json"
        try:
            self.store = _FileStore(Path(state_dir) / name) if state_dir else _MemoryStore()
        except OSError:  # an unwritable state folder must not stop answering: this process's own window then
            self.store = _MemoryStore()
        self.sync_s = FILE_SYNC_S if isinstance(self.store, _FileStore) else 0.0
        self.me = f"{socket.gethostname()}@{os.getpid()}:{id(self):x}"
        self.cond = threading.Condition()
        self.in_flight = self.waiting = 0
        self.share = max(1, min(start, maximum))
        self.pause_until = 0.0  # wall clock
        self.limit = float(self.share)  # the server's whole window, as last read (for logs and tests)
        self.peak_in_flight = 0
        self._latencies: list[float] = []
        self._refusals: list[int] = []
        self._retry_after = 0.0
        self._synced = 0.0
        self._poller = False
        self._closed = False

    # ---- one request ---------------------------------------------------------------------------------------
    def acquire(self) -> None:
        with self.cond:
            self.waiting += 1
            try:
                while True:
                    if time.monotonic() - self._synced >= self.sync_s:
                        self._sync()
                    pause = self.pause_until - time.time()
                    if self.in_flight < self.share and pause <= 0:
                        break
                    # Releases wake waiters; only one waiter polls (the shared file, a pause's end), so hundreds of
                    # waiting threads cost no CPU.
                    if self._poller:
                        self.cond.wait(5.0)
                        continue
                    self._poller = True
                    try:
                        self.cond.wait(min(max(pause, 0.0) or max(self.sync_s, 0.05), 0.25))
                    finally:
                        self._poller = False
            finally:
                self.waiting -= 1
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            if self.in_flight < self.share and self.waiting:
                self.cond.notify()  # more room (a pause ended, the share grew): wake the next waiter too

    def release(self, latency_s: float | None, status: int | None = None, retry_after: float | None = None) -> None:
        """latency_s: an answered request's latency (None: it failed); status: the HTTP status of a failure."""
        with self.cond:
            self.in_flight -= 1
            if latency_s is not None:
                self._latencies.append(latency_s)
            elif status in CONGESTION_STATUS:
                self._refusals.append(self.in_flight + 1)
                if retry_after:
                    self._retry_after = max(self._retry_after, retry_after)
                    self.pause_until = max(self.pause_until, time.time() + retry_after)
            if self._refusals or time.monotonic() - self._synced >= self.sync_s:
                self._sync()
            self.cond.notify(max(1, self.share - self.in_flight))

    # ---- the shared state ----------------------------------------------------------------------------------
    def _sync(self) -> None:
        report = {"latencies": self._latencies, "refusals": self._refusals, "retry_after": self._retry_after}
        self._latencies, self._refusals, self._retry_after = [], [], 0.0
        demand, in_flight = self.in_flight + self.waiting, self.in_flight

        def update(state):
            now = time.time()
            if state is None or "members" not in state:
                state = fresh_state(self.start, self.maximum, now)
            members = state["members"]
            for member, info in list(members.items()):
                if member != self.me and not _alive(member, now, info["seen"], self.stale_s):
                    del members[member]
            members[self.me] = {"demand": demand, "in_flight": in_flight, "seen": now, "max": self.maximum}
            state["max"] = max(m["max"] for m in members.values())
            if report["latencies"] or report["refusals"] or report["retry_after"]:
                others = sum(m["in_flight"] for k, m in members.items() if k != self.me)
                report["refusals"] = [r + others for r in report["refusals"]]
                fold(state, report, now, self.tolerance)
            return state

        def update_and_commit(state):
            state = update(state)
            # What this process may send before its next sync counts as in flight already, so a process syncing
            # in between never hands out the same places twice.
            share = shares(state, self.me)
            state["members"][self.me]["in_flight"] = max(in_flight, min(share, demand))
            return state

        try:
            state = self.store.transact(update_and_commit)
        except OSError:  # an unwritable state folder must not stop answering: fall back to this process alone
            self.store, self.sync_s = _MemoryStore(), 0.0
            state = self.store.transact(update_and_commit)
        self.share = shares(state, self.me)
        self.limit = state["limit"]
        self.pause_until = max(self.pause_until, state["pause_until"])
        self._synced = time.monotonic()

    def close(self) -> None:
        with self.cond:
            if not self._closed:
                self._closed = True
                self.store.drop(self.me)


_WINDOWS: dict[tuple, ServerWindow] = {}
_WINDOWS_LOCK = threading.Lock()


def window_for(
    key: str,
    maximum: int = DEFAULT_MAX_CONCURRENCY,
    start: int = DEFAULT_START_CONCURRENCY,
    tolerance: float = DEFAULT_LATENCY_TOLERANCE,
) -> ServerWindow:
    """The process's window for one server (key: its address without credentials), created on first use; every
    client of this process that talks to the server shares it. Its bound is the largest max_concurrency asked."""
    state_dir = os.environ.get(STATE_ENV) or None
    with _WINDOWS_LOCK:
        window = _WINDOWS.get((key, state_dir))
        if window is None or window._closed:
            window = _WINDOWS[(key, state_dir)] = ServerWindow(key, state_dir, maximum, start, tolerance)
        window.maximum = max(window.maximum, maximum)
        return window


def _forget_after_fork() -> None:
    """A forked child starts with no window: the parent's locks may be held by threads the child does not have."""
    global _WINDOWS_LOCK
    _WINDOWS_LOCK = threading.Lock()
    _WINDOWS.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def close_all() -> None:
    """Leave every shared window (at exit): the other processes take over this one's share at their next sync."""
    with _WINDOWS_LOCK:
        windows = list(_WINDOWS.values())
        _WINDOWS.clear()
    for window in windows:
        window.close()
