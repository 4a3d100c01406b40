"""Adaptive concurrency for OpenAI-compatible servers: how many requests one client keeps in flight to one server.

A continuous-batching server (vLLM, SGLang, TGI) decodes up to its batch limit at once, so its throughput grows
with the requests in flight up to that limit (each step of a bigger batch takes a little longer, so latency grows
too) and then stays flat while latency grows (its queue), or falls (waiting requests are prefilled, preempted and
recomputed, slowing the running batch), or the server answers 429/503; a hosted API refuses past its requests- or
tokens-per-minute limit. `ServerWindow` finds the window that maximises throughput per server (base_url) and
shares it between every client and every process that talks to the server.

The control law works on rounds (a round ends once it has lasted 1.5 x the last mean latency, one in slow
start, and has at least 16 answers). Each round gives a point (w, x): w = the requests in flight on average while
its answers were (each answer's own average over its life: the load it met, whatever the window said), x = tokens
per second by Little's law, w x the answers' tokens (usage.completion_tokens when the server reports it, else one
per answer) / their latencies: a ratio estimator, so a mix of answer lengths, whose latency moves with their
tokens, adds little noise. The settled points of the last 48 rounds (not the two rounds after the control law
moved the window: their answers met a mix of two loads, which reads as throughput that is not there), grouped
by w in 8 % steps and pooled, are the server's throughput curve as this client saw it. The KNEE is the smallest
w whose throughput is within 3 % of the best group seen in two rounds or more after slow start (slow start's
rounds, where the window moves every round, can read high; they count as the curve's lower half): the
concurrency that maximised throughput, on a flat top its low end.
- slow start: the window starts at `start_concurrency` (16) and grows by one per answer whose latency per token
  is within (1 + tol/2) x the baseline (the lowest round median of it: unqueued), i.e. doubles per round trip, never past
  1.5 x the best throughput x the baseline latency (Little's law: half again what the server has shown it can
  hold). It ends at the first round whose median latency per token is above (1 + latency_tolerance) x the
  baseline while its throughput did not rise (by 10 % over the best before: latency that grows WITH throughput,
  a batch whose steps slow as it fills, is no queue), or at a refusal;
- then the window is set to the knee + 1, in one step however far slow start went; a window never goes past
  1.5 x the knee;
- climbing: while throughput still rises with concurrency at the top of the curve (the knee is the highest group:
  every lower one is more than 3 % below it; a server whose batches slow as they fill, where latency grows WITH
  throughput and is no congestion), the window steps up by 20 % every fourth round. A flat or falling top (a
  queue, a flood penalty) stops it, and the knee then lies below;
- probing: every 24 rounds at the knee the window goes 10 % down, the next time 10 % up, for four rounds, so a
  server that got faster, a knee read too low or one read too high (a flood penalty whose optimum lies below
  every window tried) shows in the curve; old points age out after 48 rounds (a server that got slower);
- refusal: a 429 or 503 cuts the window to 0.9 x the requests that were in flight when it came (the server's own
  admission limit, known at once), at most one cut per round trip (one burst of refusals is one episode), and for
  the next 64 rounds the window stays below that limit (probes go up to it). `Retry-After` (or
  `retry-after-ms`, as OpenAI sends it) pauses every new request to that server until then (capped by
  backoff_max_s), in every process sharing it; the refused request itself is retried as any retryable failure is
  and counts as failed only when its retries run out.
Requests that failed otherwise (5xx, timeouts, connection errors) neither grow nor cut the window, and the window
grows only while it is used (80 % of it in flight once in a round: RFC 7661's idea), up to `max_concurrency` (256:
vLLM's default max_num_seqs).

What we took and why we differ. lmms-eval 0.6 (`adaptive_concurrency`) decides every max(4, window) answers from
the failure rate, the rate of rate-limit errors and the p95 latency against an ABSOLUTE target (15 s), +10 % or
x0.7: the target must be known in advance (a 64-slot server at 0.5 s never reaches 15 s of latency, so it grows
blindly into its queue), growth from a small start is slow, and each process decides alone. inspect_ai's adaptive
connections (start 20, slow start doubling, +5 % steady growth, x0.8 per rate-limit episode with a cooldown,
Retry-After extends the cooldown, transient 5xx/timeouts neither grow nor cut) react to rate limits only: against a
server that queues instead of refusing (vLLM does), they grow to their maximum and the queue grows with them.
Netflix's concurrency-limits (Vegas, Gradient2) and TCP Vegas/BBR read the latency against a minimum: latency that
grows with the batch (step time a + b x batch) reads as a queue there, and the limit stops short of the batch
limit. We keep inspect's slow start, episode debounce, neutral transient errors and Retry-After (which we also
apply to every process), BBR's bandwidth-delay product (Little's law) as the slow-start bound, and we steer by the
measured throughput curve instead of a latency target: the knee is where throughput stops rising, found by the
throughput gradient, so a queue, a flood penalty and a batch-size-dependent step time all end at the same place.

Shared across processes: with HALLUFLOW_SERVER_STATE set to a folder (the workflow sets it to the run's
results/<release>/.servers), the window of each server lives in a small JSON file there (named by a hash of the
server address, never its credentials), read and written under an exclusive fcntl lock at most every 50 ms per
process. Each process reports its demand (requests in flight + waiting) and in-flight count; the window is split
max-min fairly by demand, and a newcomer's share is first what the others leave free, so several answer jobs
against one server neither flood it (the sum stays at the window) nor starve (each keeps at least one request and
its fair share within a round trip). Members that died (same host: their pid is gone; another host: silent for
stale_s) are dropped. The file outlives the processes, so the next shard of the run starts at the learned window
and curve instead of slow start. Without the variable the window is this process's own. A fixed `concurrency`
bypasses all of this: exactly that many requests in flight, as before.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
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
REFUSAL_MEMORY = 64  # rounds the window stays below the last refusal's in-flight count
SLOW_START_GAIN = 1  # window added per answer within the latency target: x2 per round trip
SLOW_START_BOUND = 1.5  # x best throughput x baseline latency
KNEE_SHARE = 0.97  # a group within 3 % of the best throughput is at the top
HEADROOM = 1.0  # the window over the knee (+1): the curve itself says where throughput stops rising
CAP = 1.5  # never more than this x the knee
CLIMB_STEP = 1.2
PROBE_EVERY, PROBE_STEP, PROBE_ROUNDS = 24, 1.1, 4
GROUP_STEP = 1.08  # width of a group of rounds on the w axis
HISTORY_ROUNDS = 48
MIN_ROUND_S = 0.05
MIN_ROUND_ANSWERS = 16
ROUND_LATENCIES = 1.5  # a round lasts this many of the last median latency (one in slow start)
ROUND_SAMPLES = 512  # latencies kept per round (its median)
FILE_SYNC_S = 0.05
CONGESTION_STATUS = {429, 503}
LAW = 2  # the state's layout; a file written by another layout starts afresh


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def fresh_state(start: float, maximum: int, now: float) -> dict:
    return {
        "law": LAW,
        "limit": float(min(start, maximum)),
        "max": maximum,
        "slow_start": True,
        # [w, x, median latency, answers, their latencies' sum, their tokens, settled, in slow start] of the last rounds
        "history": [],
        "base": None,  # the lowest round median latency seen: the latency of an unqueued request
        "w_max": None,  # requests in flight at the last refusal
        "refused_rounds_ago": 0,
        "since_probe": 0,
        "probe_left": 0,
        "climb_wait": 0,
        "cut_at": 0.0,
        "cooldown_s": 0.0,
        "pause_until": 0.0,
        "round": _round(now),
        "members": {},
    }


def _round(now: float) -> dict:
    return {
        "start": now,
        "latencies": [],
        "n": 0,
        "w_sum": 0.0,
        "lat_sum": 0.0,
        "tok_sum": 0,
        "refused": 0,
        "peak_used": 0,
    }


def baseline(state: dict) -> float | None:
    """The lowest round median latency seen: the latency of an unqueued request (the slow-start bound and exit)."""
    return state.get("base")


def curve(state: dict, slow_start: bool = True) -> list[tuple[float, float, int]]:
    """The throughput curve: the history's rounds grouped by w (GROUP_STEP wide), as (w, x, rounds) by w, each
    group's x by Little's law over all its answers (in flight x their tokens / their latencies: pooled, not a mean
    of the rounds' x, which a noisy latency would bias upward)."""
    groups: dict[int, list] = {}
    history = [h for h in state["history"] if h[6] and (slow_start or not h[7])]  # settled rounds only
    for w, _, _, n, lat_sum, tok_sum, *_ in history:
        if w <= 0 or lat_sum <= 0:
            continue
        key = math.floor(math.log(w) / math.log(GROUP_STEP))
        groups.setdefault(key, []).append((w, n, lat_sum, tok_sum))
    points = []
    for g in groups.values():
        w = sum(w * n for w, n, _, _ in g) / sum(n for _, n, _, _ in g)
        points.append((w, w * sum(t for *_, t in g) / sum(lat for _, _, lat, _ in g), len(g)))
    return sorted(points)


def knee_window(state: dict) -> float | None:
    """The concurrency that maximised throughput: the smallest group on the curve within 3 % of the best one."""
    points = curve(state)
    if not points:
        return None
    # The best throughput of a group seen in two rounds or more after slow start (one round while the window
    # moves, and slow start's, where it moves every round, can read high), of any group before there is one.
    steady = [x for _, x, k in curve(state, slow_start=False) if k >= 2]
    best = max(steady) if steady else max(x for _, x, _ in points)
    return min(w for w, x, _ in points if x >= KNEE_SHARE * best)


def rising(state: dict) -> bool:
    """Does throughput still grow with concurrency at the top of the curve? Yes when the knee is the highest group:
    every lower one is more than 3 % below it (with CLIMB_STEP 1.2, x still grows at least ~0.17 x as fast as w,
    in log terms). One group only counts as rising."""
    points = curve(state)
    return not points or knee_window(state) == points[-1][0]


def _bound(state: dict, window: float) -> float:
    """The window within its bounds: max_concurrency, 1.5 x the knee, below the last refusal's limit."""
    knee = state.get("knee")  # as of the last round's end (curve() per answer would cost ~1 ms of CPU each)
    if knee is not None and not state["slow_start"]:
        window = min(window, CAP * knee)
    if state.get("w_max") is not None:
        window = min(window, state["w_max"] - (0 if state.get("probe_left") else 1))
    return float(min(max(1.0, window), state["max"]))


def fold(state: dict, report: dict, now: float, tolerance: float) -> None:
    """Apply one process's report (answers' latencies, refusals, its counts) to the shared state: the control law."""
    latencies, refusals = report["latencies"], report["refusals"]
    if report.get("retry_after"):
        state["pause_until"] = max(state["pause_until"], now + report["retry_after"])
    rnd = state["round"]
    used = sum(m["in_flight"] for m in state["members"].values())
    rnd["peak_used"] = max(rnd["peak_used"], used)
    # A round trip: the last round's mean latency (its answers' own, not per token).
    last = state["history"][-1][4] / max(1, state["history"][-1][3]) if state["history"] else MIN_ROUND_S
    if refusals and now - state["cut_at"] >= state["cooldown_s"]:
        held = max(1.0, min(state["limit"], min(refusals)))  # requests in flight when the first refusal came
        state["w_max"], state["refused_rounds_ago"], state["probe_left"] = held, 0, 0
        state["limit"] = max(1.0, held * REFUSAL_CUT)
        state["slow_start"] = False
        _cut(state, now, max(MIN_ROUND_S, last))
        rnd = state["round"]
    tokens = (report.get("tokens") or [])[: len(latencies)]
    tokens = tokens + [1] * (len(latencies) - len(tokens))
    # Latency per generated token: what slow start compares with the baseline, so a mix of short and long answers
    # (whose median hops between their lengths) does not read as queueing.
    per_token = [lat / max(1, tok) for lat, tok in zip(latencies, tokens)]
    rnd["n"] += len(latencies)
    sent_with = report.get("sent_with") or [used] * len(latencies)  # requests in flight while each was
    rnd["w_sum"] += sum(sent_with[: len(latencies)]) + used * max(0, len(latencies) - len(sent_with))
    rnd["refused"] += len(refusals)
    room = ROUND_SAMPLES - len(rnd["latencies"])
    rnd["latencies"].extend(per_token[: max(0, room)])
    rnd["lat_sum"] += sum(latencies)
    rnd["tok_sum"] += sum(tokens)
    base = baseline(state)
    if state["slow_start"] and not refusals and used >= 0.5 * state["limit"]:
        target = None if base is None else (1 + tolerance / 2) * base
        grown = state["limit"] + SLOW_START_GAIN * sum(1 for lat in per_token if target is None or lat <= target)
        if state["history"] and base is not None:
            best = state.get("x_best") or max(h[1] for h in state["history"])
            grown = min(grown, max(state["limit"], SLOW_START_BOUND * best * base))
        state["limit"] = grown
    length = 1.0 if state["slow_start"] else ROUND_LATENCIES  # slow start: a round per round trip
    if rnd["n"] >= MIN_ROUND_ANSWERS and now - rnd["start"] >= max(MIN_ROUND_S, length * last):
        _end_round(state, now, tolerance)
    state["limit"] = _bound(state, state["limit"])


def _cut(state: dict, now: float, cooldown: float) -> None:
    state["cut_at"], state["cooldown_s"] = now, cooldown
    state["round"] = _round(now)


def _end_round(state: dict, now: float, tolerance: float) -> None:
    rnd = state["round"]
    if not rnd["latencies"]:
        return
    m = median(rnd["latencies"])
    # w: the requests in flight on average while each of this round's answers was (so each answer is paired with
    # the load it met, however the window moved since); x: tokens per second by Little's law, w x their tokens / their
    # latencies (a ratio estimator: with a mix of answer lengths, latency and tokens move together and the noise
    # of the mix cancels; counting answers per second instead mixes two windows whenever the window moves).
    w = rnd["w_sum"] / max(1, rnd["n"])
    x = w * rnd["tok_sum"] / max(rnd["lat_sum"], 1e-9)
    # A round is settled unless the control law moved the window (by more than 5 %) at its start or at the start of
    # the round before: the answers of the rounds right after a move met a mix of the old and the new load (a
    # request already running when the window grows is not slowed by the requests queued behind it), which reads
    # as throughput it is not. Slow start moves it every round and keeps its rounds: the curve's lower half.
    limit = state["limit"]
    if abs(limit - rnd.get("limit_at_start", limit)) > 0.05 * limit:
        state["unsettled"] = 2
    settled = state["slow_start"] or not state.get("unsettled")
    state["unsettled"] = max(0, state.get("unsettled", 0) - 1)
    entry = [w, x, m, rnd["n"], rnd["lat_sum"], rnd["tok_sum"], settled, state["slow_start"]]
    best_before = state.get("x_best") or 0.0
    state["history"] = (state["history"] + [entry])[-HISTORY_ROUNDS:]
    state["x_best"] = max(h[1] for h in state["history"])
    state["knee"] = knee_window(state)
    state["round"] = _round(now)
    state["round"]["limit_at_start"] = limit
    state["base"] = m if state.get("base") is None else min(state["base"], m)
    if state.get("w_max") is not None:
        state["refused_rounds_ago"] = state.get("refused_rounds_ago", 0) + 1
        if state["refused_rounds_ago"] > REFUSAL_MEMORY:
            state["w_max"] = None
    if rnd["refused"]:
        return  # the refusal already cut the window; no growth in a round that saw one
    knee = state["knee"]
    at_knee = max(1.0, HEADROOM * knee + 1)
    if state["slow_start"]:
        if m > (1 + tolerance) * state["base"] and x <= 1.1 * best_before:
            # Latency grew past the tolerance: the server queues, or its batches slow. The knee of what was seen,
            # in one step; climbing (below) goes on if throughput was still rising.
            state["slow_start"] = False
            state["limit"], state["climb_wait"], state["since_probe"] = at_knee, 3, 0  # measure it before climbing
            _cut(state, now, rnd["lat_sum"] / max(1, rnd["n"]))  # the requests sent before it come back by then
        return
    used = rnd["peak_used"] >= 0.8 * state["limit"]
    if state.get("probe_left"):
        state["probe_left"] -= 1
        if not state["probe_left"]:
            state["limit"] = at_knee
        return
    if state.get("climb_wait"):
        state["climb_wait"] -= 1
        return
    if used and rising(state) and state["limit"] < state["max"]:
        top = max(h[0] for h in state["history"])
        state["limit"] = max(state["limit"], CLIMB_STEP * top)
        state["climb_wait"] = 3  # two rounds to fill the new window, two to measure it
        return
    state["limit"] = at_knee
    state["since_probe"] = state.get("since_probe", 0) + 1
    if used and state["since_probe"] >= PROBE_EVERY:
        # Alternately up and down: a knee read too low shows above it, one read too high (a flood penalty whose
        # optimum lies below every window tried) below it.
        state["since_probe"], state["probe_left"] = 0, PROBE_ROUNDS
        state["probe_down"] = not state.get("probe_down", False)  # down first: slow start's knee reads high
        if state["probe_down"]:
            state["limit"] = max(1.0, at_knee / PROBE_STEP)
            return
        state["limit"] = (
            PROBE_STEP * at_knee if state.get("w_max") is None else min(PROBE_STEP * at_knee, state["w_max"])
        )


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
        self._sent_with: list[int] = []
        self._tokens: list[int] = []
        self._others = 0  # the other processes' requests in flight, as last read
        self._local = threading.local()
        self._area, self._area_t = 0.0, time.monotonic()  # the integral of requests in flight over time
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
            self._advance()
            self.in_flight += 1
            self._local.sent = (self._area, self._area_t)
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            if self.in_flight < self.share and self.waiting:
                self.cond.notify()  # more room (a pause ended, the share grew): wake the next waiter too

    def release(
        self,
        latency_s: float | None,
        status: int | None = None,
        retry_after: float | None = None,
        tokens: int | None = None,
    ) -> None:
        """latency_s: an answered request's latency (None: it failed); status: the HTTP status of a failure; tokens:
        the answer's generated tokens when the server said (usage.completion_tokens), else it counts as one."""
        with self.cond:
            self._advance()
            area, since = getattr(self._local, "sent", (self._area, self._area_t))
            self.in_flight -= 1
            if latency_s is not None:
                self._latencies.append(latency_s)
                self._tokens.append(max(1, tokens or 1))
                # The requests in flight on average while this one was: what it met (the integral over its life).
                life = self._area_t - since
                self._sent_with.append((self._area - area) / life if life > 0 else self.in_flight + 1 + self._others)
            elif status in CONGESTION_STATUS:
                self._refusals.append(self.in_flight + 1)
                if retry_after:
                    self._retry_after = max(self._retry_after, retry_after)
                    self.pause_until = max(self.pause_until, time.time() + retry_after)
            if self._refusals or time.monotonic() - self._synced >= self.sync_s:
                self._sync()
            self.cond.notify(max(1, self.share - self.in_flight))

    def _advance(self) -> None:
        now = time.monotonic()
        self._area += (self.in_flight + self._others) * (now - self._area_t)
        self._area_t = now

    # ---- the shared state ----------------------------------------------------------------------------------
    def _sync(self) -> None:
        report = {
            "latencies": self._latencies,
            "sent_with": self._sent_with,
            "tokens": self._tokens,
            "refusals": self._refusals,
            "retry_after": self._retry_after,
        }
        self._latencies, self._sent_with, self._tokens, self._refusals, self._retry_after = [], [], [], [], 0.0
        demand, in_flight = self.in_flight + self.waiting, self.in_flight

        def update(state):
            now = time.time()
            if state is None or state.get("law") != LAW:
                state = fresh_state(self.start, self.maximum, now)
            members = state["members"]
            for member, info in list(members.items()):
                if member != self.me and not _alive(member, now, info["seen"], self.stale_s):
                    del members[member]
            if self.me not in members and not members:
                # The first process after an idle spell (the next shard): the learned window and curve stay, the
                # round that was open when the last one left does not (its clock ran while nobody asked).
                state["round"] = _round(now)
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
        self._others = sum(m["in_flight"] for key, m in state["members"].items() if key != self.me)
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
