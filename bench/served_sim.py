"""A simulated continuous-batching server (vLLM / SGLang / TGI-like) or rate-limited hosted API speaking OpenAI chat
completions over real HTTP.

Three kinds of server, per request:
- plain (the default): `slots` sequences decode at once (vLLM's `max_num_seqs`); a request beyond them waits FIFO
  for a free slot, so past capacity latency grows with the queue while throughput stays at capacity = slots /
  latency_s requests/s. Each request holds its slot for `latency_s` (times a seeded uniform jitter of ±`jitter`,
  mean unchanged);
- flood penalty (`slowdown`, any kind): service time grows when more requests are present than slots (prefill of
  arrivals, KV-cache preemption and recompute slow the running batch): x (1 + slowdown * (present - slots) /
  slots), so a client that floods the server gets LESS than capacity;
- batch-dependent latency (`step_s` a and `step_per_seq_s` b set): an engine loop decodes one token for every
  running sequence per step, and a step of a batch of B takes a + b*B seconds (x ±jitter; x the flood penalty), so
  latency grows with the batch while throughput still rises up to the slots. Each request generates a number of
  tokens drawn from the token-length mix `tokens` ("4:50,16:30,48:15,160:5": tokens:weight), picked by a hash of
  its question (the same question always gets the same length, whoever asks). Capacity = slots / ((a + b*slots)
  x the mean tokens of the requests answered);
- hosted API (`rpm` and/or `tpm` set): no slots to speak of (latency_s + tokens x `token_s` per request, whatever
  the load), but requests-per-minute and tokens-per-minute limits as token buckets refilled continuously and
  holding `burst_s` (1) seconds' worth (OpenAI enforces per-minute limits over shorter periods); a request that
  finds a bucket short is answered 429 at once with `Retry-After` (whole seconds, RFC 9110) and `retry-after-ms`
  (as OpenAI sends it). A request costs 1 request and its prompt tokens (characters / 4) + its generated tokens.
  Capacity = min(rpm, tpm / mean tokens per request) / 60.
- `reject_above`: a request arriving when that many are already present (running + queued) is answered 429 at
  once (with `Retry-After: <retry_after>` when given), as a gateway or a server with a bounded queue does.

GET /v1/models lists `model`; GET /stats returns what the server saw (answered, rejected, the first arrival and last
reply on its monotonic clock, peak present/running, its capacity for the requests it answered) so a benchmark can
clock the server's busy window; POST /stats/reset clears it. asyncio on one thread, keep-alive HTTP/1.1, so the
server itself costs little CPU.

    python bench/served_sim.py --slots 64 --latency 0.5 [--slowdown 1] [--reject-above 64] [--port 0]
    python bench/served_sim.py --slots 64 --step 0.02 --step-per-seq 0.0003 --tokens 4:50,16:30,48:15,160:5
    python bench/served_sim.py --rpm 6000 --tpm 150000 --latency 0.3 --token-s 0.01      # each prints "PORT <n>"
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import json
import math
import random
import sys
import threading
import time

MODEL = "sim"
TOKEN_MIX = "4:50,16:30,48:15,160:5"  # short yes/no answers mostly, some descriptions


def parse_mix(mix: str | dict) -> dict[int, float]:
    """ "4:50,16:30" -> {4: 50.0, 16: 30.0} (tokens: weight)."""
    if isinstance(mix, dict):
        return {int(k): float(v) for k, v in mix.items()}
    out = {}
    for part in mix.split(","):
        n, _, weight = part.partition(":")
        out[int(n)] = float(weight or 1)
    if not out or min(out) < 1 or min(out.values()) <= 0:
        raise ValueError(f"token mix {mix!r}: tokens >= 1 and weights > 0")
    return out


def mix_mean(mix: dict[int, float]) -> float:
    return sum(n * w for n, w in mix.items()) / sum(mix.values())


class ServedSim:
    """The server's state and its request handling; `serve()` runs it on an asyncio loop."""

    def __init__(
        self,
        slots: int = 64,
        latency_s: float = 0.5,
        jitter: float = 0.1,
        slowdown: float = 0.0,
        reject_above: int | None = None,
        retry_after: str | None = None,
        seed: int = 0,
        model: str = MODEL,
        step_s: float | None = None,
        step_per_seq_s: float = 0.0,
        tokens: str | dict | None = None,
        rpm: float | None = None,
        tpm: float | None = None,
        token_s: float = 0.0,
        burst_s: float = 1.0,
    ):
        self.slots, self.latency_s, self.jitter, self.slowdown = slots, latency_s, jitter, slowdown
        self.reject_above, self.retry_after, self.model = reject_above, retry_after, model
        self.step_s, self.step_per_seq_s, self.token_s, self.burst_s = step_s, step_per_seq_s, token_s, burst_s
        self.rpm, self.tpm = rpm, tpm
        self.mix = parse_mix(tokens) if tokens is not None else {1: 1.0}
        self.rng = random.Random(seed)
        self.reset()

    @property
    def kind(self) -> str:
        if self.rpm or self.tpm:
            return "api"
        return "engine" if self.step_s is not None else "plain"

    def tokens_for(self, question: str) -> int:
        """The tokens this question's answer takes: the mix's inverse CDF at a hash of the question."""
        u = int.from_bytes(hashlib.sha256(question.encode()).digest()[:8], "big") / 2**64
        total = sum(self.mix.values())
        acc = 0.0
        for n, weight in sorted(self.mix.items()):
            acc += weight / total
            if u < acc:
                return n
        return max(self.mix)

    @property
    def capacity(self) -> float:
        """Requests per second the server sustains at best (every slot busy, no slowdown; the API at its limits),
        for the mix of requests it answered (the mix's mean before any)."""
        mean_tokens = self.tokens_total / self.answered if self.answered else mix_mean(self.mix)
        if self.kind == "api":
            mean_cost = self.cost_total / self.answered if self.answered else mean_tokens
            limits = [r / 60 for r in (self.rpm, self.tpm and self.tpm / mean_cost) if r]
            return min(limits)
        if self.kind == "engine":
            return self.slots / ((self.step_s + self.step_per_seq_s * self.slots) * mean_tokens)
        return self.slots / self.latency_s

    @property
    def unqueued_latency_s(self) -> float:
        """A request's latency with the server at capacity and no queue (the in-flight count capacity needs, by
        Little's law, is capacity x this)."""
        mean_tokens = self.tokens_total / self.answered if self.answered else mix_mean(self.mix)
        if self.kind == "api":
            return self.latency_s + self.token_s * mean_tokens
        if self.kind == "engine":
            return (self.step_s + self.step_per_seq_s * self.slots) * mean_tokens
        return self.latency_s

    def reset(self) -> None:
        if getattr(self, "_engine_task", None) is not None:
            self._engine_task.cancel()  # one engine per state
        self.answered = self.rejected = 0
        self.present = self.running = self.peak_present = self.peak_running = 0
        self.first_s: float | None = None
        self.last_s: float | None = None
        self.questions: dict[str, int] = {}  # question -> 200 replies (a test checks none is lost or doubled)
        self.tokens_total = self.cost_total = 0
        self._slots: asyncio.Semaphore | None = None
        self._queue: collections.deque = collections.deque()
        self._running: list = []
        self._wake: asyncio.Event | None = None
        self._engine_task = None
        rate_r = (self.rpm or 0) / 60
        rate_t = (self.tpm or 0) / 60
        self._buckets = {"requests": [rate_r, rate_r * self.burst_s], "tokens": [rate_t, rate_t * self.burst_s]}
        self._bucket_at = None

    def stats(self) -> dict:
        busy = (self.last_s - self.first_s) if self.first_s is not None and self.last_s is not None else 0.0
        return {
            "answered": self.answered,
            "rejected": self.rejected,
            "busy_s": busy,
            "capacity_rps": self.capacity,
            "kind": self.kind,
            "unqueued_latency_s": self.unqueued_latency_s,
            "mean_tokens": self.tokens_total / self.answered if self.answered else None,
            "peak_present": self.peak_present,
            "peak_running": self.peak_running,
            "distinct_questions": len(self.questions),
            "repeated_questions": sum(1 for n in self.questions.values() if n > 1),
        }

    def _question(self, body: dict) -> str:
        messages = body.get("messages") or [{}]
        question = messages[-1].get("content")
        return question if isinstance(question, str) else json.dumps(question, sort_keys=True)

    def _take(self, now: float, cost: int) -> float:
        """The hosted API's buckets: 0 when the request may pass (and is charged), else seconds until it could."""
        if self._bucket_at is not None:
            for name, (rate, cap) in self._buckets.items():
                level = getattr(self, f"_level_{name}", cap)
                setattr(self, f"_level_{name}", min(cap, level + rate * (now - self._bucket_at)))
        self._bucket_at = now
        need = {"requests": 1, "tokens": cost}
        wait = 0.0
        for name, (rate, cap) in self._buckets.items():
            if rate <= 0:
                continue
            level = getattr(self, f"_level_{name}", cap)
            if level < need[name]:
                wait = max(wait, (need[name] - level) / rate)
        if wait > 0:
            return wait
        for name, (rate, cap) in self._buckets.items():
            if rate > 0:
                setattr(self, f"_level_{name}", getattr(self, f"_level_{name}", cap) - need[name])
        return 0.0

    def _over(self) -> float:
        return 1 + self.slowdown * max(0, self.present - self.slots) / self.slots

    async def _engine(self) -> None:
        """Continuous batching: one token for every running sequence per step of a + b*B seconds."""
        due = None
        while True:
            while len(self._running) < self.slots and self._queue:
                self._running.append(self._queue.popleft())
            if not self._running:
                self._wake.clear()
                await self._wake.wait()
                due = None
                continue
            batch = len(self._running)
            self.running = batch
            self.peak_running = max(self.peak_running, batch)
            step = (self.step_s + self.step_per_seq_s * batch) * self._over()
            step *= self.rng.uniform(1 - self.jitter, 1 + self.jitter)
            now = time.monotonic()
            due = (now if due is None or due < now - step else due) + step  # no drift while busy
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            still = []
            for seq in self._running:
                seq[0] -= 1
                if seq[0] <= 0:
                    if not seq[1].done():
                        seq[1].set_result(None)
                else:
                    still.append(seq)
            self._running = still
            self.running = len(still)

    async def chat(self, body: dict) -> tuple[int, dict, dict]:
        now = time.monotonic()
        if self.first_s is None:
            self.first_s = now
        question = self._question(body)
        tokens = self.tokens_for(question)
        if self.reject_above is not None and self.present >= self.reject_above:
            self.rejected += 1
            headers = {"Retry-After": self.retry_after} if self.retry_after is not None else {}
            return 429, {"error": {"message": "server busy", "type": "rate_limit"}}, headers
        cost = len(question) // 4 + tokens
        if self.kind == "api":
            wait = self._take(now, cost)
            if wait > 0:
                self.rejected += 1
                headers = {"Retry-After": str(max(1, math.ceil(wait))), "retry-after-ms": str(math.ceil(wait * 1000))}
                return 429, {"error": {"message": "rate limit reached", "type": "rate_limit"}}, headers
        self.present += 1
        self.peak_present = max(self.peak_present, self.present)
        try:
            if self.kind == "engine":
                if self._engine_task is None:
                    self._wake = asyncio.Event()
                    self._engine_task = asyncio.get_running_loop().create_task(self._engine())
                done = asyncio.get_running_loop().create_future()
                self._queue.append([tokens, done])
                self._wake.set()
                await done
            elif self.kind == "api":
                self.running += 1
                self.peak_running = max(self.peak_running, self.running)
                try:
                    service = (self.latency_s + self.token_s * tokens) * self._over()
                    await asyncio.sleep(service * self.rng.uniform(1 - self.jitter, 1 + self.jitter))
                finally:
                    self.running -= 1
            else:
                service = self.latency_s * self.rng.uniform(1 - self.jitter, 1 + self.jitter) * self._over()
                if self._slots is None:
                    self._slots = asyncio.Semaphore(self.slots)
                async with self._slots:
                    self.running += 1
                    self.peak_running = max(self.peak_running, self.running)
                    try:
                        await asyncio.sleep(service)
                    finally:
                        self.running -= 1
        finally:
            self.present -= 1
        self.questions[question] = self.questions.get(question, 0) + 1
        self.answered += 1
        self.tokens_total += tokens
        self.cost_total += cost
        self.last_s = time.monotonic()
        reply = {
            "id": f"sim-{self.answered}",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Yes"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": cost - tokens, "completion_tokens": tokens, "total_tokens": cost},
        }
        return 200, reply, {}

    async def route(self, method: str, path: str, data: bytes) -> tuple[int, dict, dict]:
        path = path.split("?", 1)[0].rstrip("/")
        if method == "POST" and path.endswith("/chat/completions"):
            try:
                body = json.loads(data)
            except ValueError:
                return 400, {"error": {"message": "body is not JSON"}}, {}
            if body.get("model") != self.model:
                return 404, {"error": {"message": f"model {body.get('model')!r} is not served"}}, {}
            return await self.chat(body)
        if method == "GET" and path.endswith("/models"):
            return 200, {"object": "list", "data": [{"id": self.model, "object": "model"}]}, {}
        if method == "GET" and path == "/stats":
            return 200, self.stats(), {}
        if method == "POST" and path == "/stats/reset":
            self.reset()
            return 200, {"ok": True}, {}
        return 404, {"error": {"message": "not found"}}, {}

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                data = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                status, payload, extra = await self.route(method, path, data)
                out = json.dumps(payload).encode()
                reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests"}[status]
                fields = "".join(f"{k}: {v}\r\n" for k, v in extra.items())
                writer.write(
                    f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(out)}\r\n"
                    f"{fields}\r\n".encode()
                    + out
                )
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def serve(self, port: int = 0, ready=None) -> None:
        server = await asyncio.start_server(self.connection, "127.0.0.1", port, backlog=1024)
        if ready is not None:
            ready(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()


class SimThread:
    """The simulator on its own thread in this process (tests; small loads): `with SimThread(...) as sim:`
    gives `sim.base_url` and the live `sim.server` (a ServedSim)."""

    def __init__(self, **kwargs):
        self.server = ServedSim(**kwargs)
        self.loop = asyncio.new_event_loop()
        self.port: int | None = None
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        task = self.loop.create_task(self.server.serve(0, self._set_port))
        try:
            self.loop.run_until_complete(task)
        except asyncio.CancelledError:
            pass

    def _set_port(self, port: int) -> None:
        self.port = port
        self._ready.set()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> SimThread:
        self.thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("simulated server did not start")
        return self

    def __exit__(self, *exc) -> None:
        def stop():
            self.loop.set_exception_handler(lambda loop, context: None)  # connections cut by the shutdown
            for task in asyncio.all_tasks(self.loop):
                task.cancel()

        self.loop.call_soon_threadsafe(stop)
        self.thread.join(10)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.5, help="seconds a request holds its slot (mean)")
    ap.add_argument("--jitter", type=float, default=0.1)
    ap.add_argument("--slowdown", type=float, default=0.0, help="service-time growth per slots' worth of excess")
    ap.add_argument("--reject-above", type=int, default=None, help="429 when this many requests are present")
    ap.add_argument("--retry-after", default=None, help="Retry-After value sent with each 429")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--step", type=float, default=None, help="engine: seconds per decode step of an empty batch (a)")
    ap.add_argument("--step-per-seq", type=float, default=0.0, help="engine: seconds a step grows per sequence (b)")
    ap.add_argument("--tokens", default=None, help=f"token-length mix tokens:weight,... (e.g. {TOKEN_MIX})")
    ap.add_argument("--rpm", type=float, default=None, help="hosted API: requests per minute")
    ap.add_argument("--tpm", type=float, default=None, help="hosted API: tokens per minute")
    ap.add_argument("--token-s", type=float, default=0.0, help="hosted API: seconds per generated token")
    ap.add_argument("--burst-s", type=float, default=1.0, help="hosted API: seconds' worth a bucket holds")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args(argv)
    sim = ServedSim(
        args.slots,
        args.latency,
        args.jitter,
        args.slowdown,
        args.reject_above,
        args.retry_after,
        args.seed,
        args.model,
        step_s=args.step,
        step_per_seq_s=args.step_per_seq,
        tokens=args.tokens,
        rpm=args.rpm,
        tpm=args.tpm,
        token_s=args.token_s,
        burst_s=args.burst_s,
    )

    def ready(port: int) -> None:
        print(f"PORT {port}", flush=True)

    try:
        asyncio.run(sim.serve(args.port, ready))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
