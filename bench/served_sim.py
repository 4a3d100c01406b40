"""A simulated continuous-batching server (vLLM / SGLang / TGI-like) speaking OpenAI chat completions over real HTTP.

The model of the server, per request:
- `slots` sequences decode at once (vLLM's `max_num_seqs`); a request beyond them waits FIFO for a free slot, so
  past capacity latency grows with the queue while throughput stays at capacity = slots / latency_s requests/s;
- each request holds its slot for `latency_s` (times a seeded uniform jitter of ±`jitter`, mean unchanged), and
  `slowdown` makes that time grow when more requests are present than slots (prefill of arrivals, preemption and
  swapping slow the running batch): service = latency_s * (1 + slowdown * (present - slots) / slots), so a client
  that floods the server gets LESS than capacity;
- `reject_above`: a request arriving when that many are already present (running + queued) is answered 429 at
  once (with `Retry-After: <retry_after>` when given), as a gateway or a server with a bounded queue does.

GET /v1/models lists `model`; GET /stats returns what the server saw (answered, rejected, the first arrival and last
reply on its monotonic clock, peak present/running) so a benchmark can clock the server's busy window; POST
/stats/reset clears it. asyncio on one thread, keep-alive HTTP/1.1, so the server itself costs little CPU.

    python bench/served_sim.py --slots 64 --latency 0.5 [--reject-above 64] [--port 0]   # prints "PORT <n>"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import threading
import time

MODEL = "sim"


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
    ):
        self.slots, self.latency_s, self.jitter, self.slowdown = slots, latency_s, jitter, slowdown
        self.reject_above, self.retry_after, self.model = reject_above, retry_after, model
        self.rng = random.Random(seed)
        self.reset()

    @property
    def capacity(self) -> float:
        """Requests per second the server sustains at best (every slot busy, no slowdown)."""
        return self.slots / self.latency_s

    def reset(self) -> None:
        self.answered = self.rejected = 0
        self.present = self.running = self.peak_present = self.peak_running = 0
        self.first_s: float | None = None
        self.last_s: float | None = None
        self.questions: dict[str, int] = {}  # question -> 200 replies (a test checks none is lost or doubled)
        self._slots: asyncio.Semaphore | None = None

    def stats(self) -> dict:
        busy = (self.last_s - self.first_s) if self.first_s is not None and self.last_s is not None else 0.0
        return {
            "answered": self.answered,
            "rejected": self.rejected,
            "busy_s": busy,
            "capacity_rps": self.capacity,
            "peak_present": self.peak_present,
            "peak_running": self.peak_running,
            "distinct_questions": len(self.questions),
            "repeated_questions": sum(1 for n in self.questions.values() if n > 1),
        }

    async def chat(self, body: dict) -> tuple[int, dict, dict]:
        now = time.monotonic()
        if self.first_s is None:
            self.first_s = now
        if self.reject_above is not None and self.present >= self.reject_above:
            self.rejected += 1
            headers = {"Retry-After": self.retry_after} if self.retry_after is not None else {}
            return 429, {"error": {"message": "server busy", "type": "rate_limit"}}, headers
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.slots)
        self.present += 1
        self.peak_present = max(self.peak_present, self.present)
        over = max(0, self.present - self.slots) / self.slots
        service = self.latency_s * self.rng.uniform(1 - self.jitter, 1 + self.jitter) * (1 + self.slowdown * over)
        try:
            async with self._slots:
                self.running += 1
                self.peak_running = max(self.peak_running, self.running)
                try:
                    await asyncio.sleep(service)
                finally:
                    self.running -= 1
        finally:
            self.present -= 1
        messages = body.get("messages") or [{}]
        question = messages[-1].get("content")
        question = question if isinstance(question, str) else json.dumps(question, sort_keys=True)
        self.questions[question] = self.questions.get(question, 0) + 1
        self.answered += 1
        self.last_s = time.monotonic()
        reply = {
            "id": f"sim-{self.answered}",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Yes"}, "finish_reason": "stop"}],
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
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args(argv)
    sim = ServedSim(
        args.slots, args.latency, args.jitter, args.slowdown, args.reject_above, args.retry_after, args.seed, args.model
    )

    def ready(port: int) -> None:
        print(f"PORT {port}", flush=True)

    try:
        asyncio.run(sim.serve(args.port, ready))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
