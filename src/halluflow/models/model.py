"""The one call path of every text-generating model: a `Model` wraps a `vlm` or `llm` backend, and its single call,
`generate(requests, config)`, returns one `Result` per request, through the request-hash cache (halluflow.cache).

CAOS's oracle members, CEDI's evaluatee and examiner/parser LLM, SAMF's evaluatee and judges, the label audit and
the answer stage all reach a backend through here, so each gets the same things from one place (as
lm-evaluation-harness's `CachingLM` wraps any model):
- the request cache: with a cache folder, a request answered before is read back, never sent again (failures are
  never stored, so a rerun retries them); keys are the answer stage's (halluflow.cache.request_key of the model's
  key fields and the request), so a `models:` entry asked the same question by two methods shares one entry;
- failure records: a failed request is logged once, counted and listed (`failures`), answered "" by `answer()`
  (unjudged, never a hallucination) and raised by `chat()` as the backend raises it;
- retries: `retries` more attempts for the requests that failed (0 by default: the HTTP backend retries itself);
- counts of cache hits and backend calls (`hits`, `sent`), which tests and logs read.

`ModelUnderTest` is a config `models:` entry with its backend built lazily: a fully cached shard or judge never loads
the model. It is resolved by halluflow.models.resolve, so it loads the folder the workflow planned.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..backends.base import EMPTY_ANSWER, LLM, VLM, Backend, Result, VLMRequest
from ..cache import RequestCache, request_key
from ..errors import BackendError, ConfigError
from ..io import sha256_file, stable_hash
from ..progress import get_logger
from . import MODELS_CACHE, ModelSpec, registry, resolve

log = get_logger(__name__)

# Backend arguments that cannot change an answer: left out of the cache key so e.g. a bigger batch or another
# server address still hits the cache.
NON_SEMANTIC_ARGS = frozenset(
    {
        "batch_size",
        "device",
        "concurrency",
        "max_concurrency",
        "start_concurrency",
        "latency_tolerance",
        "timeout_s",
        "max_retries",
        "max_reply_bytes",
        "backoff_s",
        "backoff_max_s",
        "api_key_env",
        "base_url",
        "stand_in",
        "tensor_parallel_size",
        "gpu_memory_utilization",
        "queries",
    }
)

BASE_CLASS = {"vlm": VLM, "llm": LLM}

# This process's request counts per caller ("<method> <role>"): a workflow job logs them when its rule is done
# (cache_report), so a rerun's log shows its requests were read back from the cache instead of sent again.
TALLY: dict[str, dict[str, int]] = {}


def cache_report() -> list[str]:
    """One line per caller of this process: "cache (<method> <role>): N hits, M sent"."""
    return [f"cache ({who}): {t['hits']} hits, {t['sent']} sent" for who, t in sorted(TALLY.items())]


def cache_folder(root: str | os.PathLike | None, spec: Mapping[str, Any], role: str = "vlm") -> Path | None:
    """A model's request cache folder under a run's cache root (None: no cache). A `models:` entry's is the answer
    stage's, root/<name>, so a request the answer stage and a method (or two methods) ask is one entry; an `llm:`
    block's is root/llm-<its model's name>. Keys name the model's backend, weights and arguments, so two models
    sharing a folder never share an answer."""
    if root is None:
        return None
    if role == "vlm":
        return Path(root) / str(spec["name"])
    llm = ModelSpec.of("llm", spec, default_backend="transformers")
    model = llm.args.get("model")
    return Path(root) / f"llm-{Path(str(model)).name if model else llm.name}"


def semantic_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """A backend's arguments that can change an answer, sorted by name: what a cache key holds of them."""
    return {k: v for k, v in sorted(args.items()) if k not in NON_SEMANTIC_ARGS}


@dataclasses.dataclass(frozen=True)
class GenerateConfig:
    """Generation settings for one call; a field left None takes the request's own setting, else the backend's
    default (its constructor argument), so an empty config changes nothing."""

    max_new_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None

    def apply(self, request: VLMRequest) -> VLMRequest:
        """The request with its unset generation fields filled from this config (a request's own setting wins)."""
        fill = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is not None and getattr(request, f.name) is None
        }
        return dataclasses.replace(request, **fill) if fill else request

    def is_empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in dataclasses.fields(self))


def vlm_request(request_id: str, prompt: str, image_path: str | os.PathLike | None = None, **fields: Any) -> VLMRequest:
    """The one place a caller's question becomes a VLMRequest (ids and paths as strings; every other field, e.g.
    image_sha256, history, task, max_new_tokens, as VLMRequest takes it)."""
    return VLMRequest(
        request_id=str(request_id), prompt=prompt, image_path=None if image_path is None else str(image_path), **fields
    )


_DIGESTS: dict[str, str] = {}


def image_sha256(path: str | os.PathLike) -> str:
    """sha256 of an image file, read once per path and process (judges and oracles ask about one image often)."""
    path = str(path)
    return _DIGESTS.get(path) or _DIGESTS.setdefault(path, sha256_file(path))


def _image_digest(request: VLMRequest) -> str | None:
    """The request's image content for its cache key: its own image_sha256, else the sha256 of its image (several
    images: the hash of their digests in prompt order)."""
    if request.image_sha256 is not None or not request.images:
        return request.image_sha256
    digests = [image_sha256(p) for p in request.images]
    return digests[0] if len(digests) == 1 else stable_hash(digests)


def vlm_request_key(key_fields: Mapping[str, Any], request: VLMRequest) -> str:
    """Cache key of a VLM request: the model's key fields, the prompt, the history, the image content and the
    generation settings the request carries (unset ones are the backend's, already in the key fields)."""
    own = {f: getattr(request, f) for f in ("temperature", "top_p", "seed") if getattr(request, f) is not None}
    return request_key(
        **key_fields,
        prompt=request.prompt,
        history=list(request.history),
        image_sha256=_image_digest(request),
        max_new_tokens=request.max_new_tokens,
        **own,
    )


def llm_request_key(key_fields: Mapping[str, Any], messages: Sequence[Mapping]) -> str:
    return request_key(**key_fields, messages=[dict(m) for m in messages])


def _backend_key_fields(backend: Backend) -> dict:
    """Key fields of a backend built outside a config spec: what it says it is, and its generation defaults."""
    info = backend.describe().as_dict()
    fields = {k: info.get(k) for k in ("role", "backend", "model", "revision")}
    settings = getattr(backend, "settings_for", None)
    if callable(settings):
        fields["settings"] = settings()
    return {**fields, "class": f"{type(backend).__module__}.{type(backend).__qualname__}"}


class ModelUnderTest:
    """A config `models:` entry with its backend built lazily (a fully cached shard never loads the model)."""

    def __init__(
        self,
        spec: dict,
        graph_dir: str | None = None,
        queries=None,
        models_cache: str | os.PathLike = MODELS_CACHE,
    ):
        for key in ("name", "backend"):
            if key not in spec:
                raise ConfigError(f"models entry {spec!r}: missing key {key!r}")
        resolved = resolve(spec, models_cache)  # the workflow's resolver: same folder the DAG built
        self.name = spec["name"]
        self.backend_name = spec["backend"]
        self.args = dict(resolved.args)
        self.spec_stand_in = bool(spec.get("stand_in", False))
        self.build = spec.get("build")
        if resolved.reads_graph and graph_dir is not None:
            self.args["graph"] = str(graph_dir)
        self._queries = queries
        self._backend = None
        self._stopped: str | None = None

    @property
    def backend(self):
        if self._backend is None:
            self._backend = registry.create("vlm", {"backend": self.backend_name, **self.args})
            if self._queries is not None:
                self._backend.bind_queries(self._queries)
        return self._backend

    def describe(self):
        """The backend's description; a spec marked stand_in labels it stand-in whatever the backend knows."""
        info = self.backend.describe()
        info.stand_in = bool(info.stand_in or self.spec_stand_in)
        return info

    def bind(self, queries) -> None:
        """Hand the query table to backends that use scene context (the prior); others ignore it."""
        self._queries = queries
        if self._backend is not None:
            self._backend.bind_queries(queries)

    @property
    def loaded(self) -> bool:
        return self._backend is not None

    def key_fields(self) -> dict:
        from .fetch import HUB_BACKENDS, locked_commit

        semantic = semantic_args(self.args)
        revision = self.args.get("revision")
        # With a models lock the weights are those of the locked commit, not of whatever `main` is now: a
        # re-fetch that moved the commit must miss the cache (without a lock the requested revision keys it).
        if self.backend_name in HUB_BACKENDS:
            revision = locked_commit(self.args.get("model"), revision) or revision
        return {
            "backend": self.backend_name,
            "model": self.args.get("model"),
            "revision": revision,
            "args": semantic,
            "build": self.build,
        }

    def run(self, requests) -> list:
        """One Result per request (text stripped, failures as errors, fallbacks as notes): backend.respond."""
        return self.backend.respond(requests)

    def stop(self, reason: str) -> None:
        """Send no request not yet sent: run_stream answers each of them "not sent: <reason>" (the caller cannot
        keep answers: a full disk); requests in flight finish and are still yielded."""
        if self._stopped is None:
            self._stopped = reason
            stop = getattr(self._backend, "stop", None)
            if callable(stop):
                stop(reason)

    def run_stream(self, batches):
        """Yield (batch index, position in the batch, Result) for every request AS ITS ANSWER ARRIVES, so the caller
        caches each one at once (a job killed after 7 of 8 replies keeps 7). A backend that queues requests
        (respond_futures: the served `openai` one) gets every batch up front, so the server keeps its configured
        number of requests in flight across batch boundaries; others answer batch by batch, each Result carrying
        its share of the batch's time as latency.

        A request that raises (a wrong model id: every request raises the same BackendError) stops the rest from
        being sent, yet every answer already received or in flight is still yielded, so the caller keeps it; the
        FIRST failure is raised once, after them (one error line, not one per request)."""
        from concurrent.futures import CancelledError, as_completed

        if not any(batches):
            return  # a fully cached shard never loads the model
        backend = self.backend
        if not hasattr(backend, "respond_futures"):
            for b, requests in enumerate(batches):
                if self._stopped is not None:
                    for i in range(len(requests)):
                        yield b, i, Result(None, error=f"not sent: {self._stopped}", attempts=0)
                    continue
                start = time.perf_counter()
                results = self.run(requests)
                for i, result in enumerate(results):
                    if result.latency_s is None:
                        result.latency_s = (time.perf_counter() - start) / max(1, len(results))
                    yield b, i, result
            return
        queued = {}
        for b, requests in enumerate(batches):
            for i, future in enumerate(backend.respond_futures(requests)):
                queued[future] = (b, i)
        first: BaseException | None = None
        try:
            for future in as_completed(queued):
                try:
                    result = future.result()
                except CancelledError:
                    continue  # cancelled before it was sent, after a failure: the failure is what is raised
                except Exception as exc:  # noqa: BLE001 - collected: raised once, after the answers in flight
                    if first is None:
                        first = exc
                        for other in queued:  # only those not yet sent are cancelled
                            other.cancel()
                    continue
                yield (*queued[future], result)
        finally:  # a crash or an early stop must not leave queued requests to be sent
            for future in queued:
                future.cancel()
        if first is not None:
            raise first


class Model:
    """A `vlm` or `llm` backend behind the one call path (see the module docstring).

    Args: role ("vlm" or "llm"); backend: a built backend, a ModelUnderTest (built when first asked) or a
    zero-argument factory; name (logs, failure records); key_fields (what identifies the model in cache keys;
    default: from the ModelUnderTest, else from the built backend's description); cache (a folder or a
    RequestCache; None = no cache); config (the GenerateConfig of calls that pass none); retries (more attempts
    for failed requests); method (names the caller in logs: "cedi", "samf", "caos").
    """

    def __init__(
        self,
        role: str,
        backend: Backend | ModelUnderTest | Callable[[], Backend],
        *,
        name: str | None = None,
        key_fields: Mapping[str, Any] | None = None,
        cache: RequestCache | str | os.PathLike | None = None,
        config: GenerateConfig | None = None,
        retries: int = 0,
        method: str = "model",
    ):
        if role not in BASE_CLASS:
            raise ConfigError(f"model role {role!r}: expected one of {', '.join(BASE_CLASS)}")
        self.role = role
        self._source = backend
        self._backend = None
        if isinstance(backend, Backend):
            self._backend = self._checked(backend)
        elif not (isinstance(backend, ModelUnderTest) or callable(backend)):
            raise ConfigError(f"{role} model: {type(backend).__name__} is neither a backend nor a factory of one")
        self.name = name or (backend.name if isinstance(backend, ModelUnderTest) else None) or role
        self._key_fields = dict(key_fields) if key_fields is not None else None
        self.cache = RequestCache(cache) if cache is not None and not isinstance(cache, RequestCache) else cache
        self.config = config or GenerateConfig()
        self.retries = max(0, int(retries))
        self.method = method
        self.hits = 0  # requests answered from the cache
        self.sent = 0  # requests sent to the backend (each attempt counts)
        self.failures: list[dict] = []  # {"request_id", "error"} of every request that failed its last attempt

    @classmethod
    def under_test(
        cls,
        spec: Mapping[str, Any],
        *,
        graph_dir: str | os.PathLike | None = None,
        queries=None,
        models_cache: str | os.PathLike = MODELS_CACHE,
        **kwargs: Any,
    ) -> Model:
        """A `models:` entry (model under test, oracle member, visual judge) as a lazily built vlm Model."""
        mut = ModelUnderTest(
            dict(spec), graph_dir=str(graph_dir) if graph_dir else None, queries=queries, models_cache=models_cache
        )
        return cls("vlm", mut, **kwargs)

    @classmethod
    def llm(
        cls, spec: ModelSpec | Mapping[str, Any], models_cache: str | os.PathLike = MODELS_CACHE, **kwargs: Any
    ) -> Model:
        """An `llm:` block (flat {backend, **arguments} or {backend, args}; backend transformers by default) as a
        lazily built llm Model: resolved by the planning resolver (the same arguments, checked the same way), keyed
        by its semantic arguments."""
        spec = ModelSpec.of("llm", spec, default_backend="transformers")
        args = resolve(spec, models_cache, role="llm").args
        semantic = semantic_args(args)
        kwargs.setdefault("key_fields", {"role": "llm", "backend": spec.backend, "args": semantic})
        kwargs.setdefault("name", str(args.get("model") or spec.name))
        return cls("llm", lambda: registry.create("llm", {"backend": spec.backend, **args}), **kwargs)

    # ---- the backend -------------------------------------------------------------------------------------------
    def _checked(self, backend) -> Backend:
        base = BASE_CLASS[self.role]
        if not isinstance(backend, base):
            raise ConfigError(
                f"{self.role} model {getattr(self, 'name', '')!r}: {type(backend).__name__} does not subclass "
                f"{base.__module__}.{base.__name__}"
            )
        return backend

    @property
    def backend(self) -> Backend:
        """The built backend (built on first use)."""
        if self._backend is None:
            source = self._source
            self._backend = self._checked(source.backend if isinstance(source, ModelUnderTest) else source())
        return self._backend

    @property
    def loaded(self) -> bool:
        return self._backend is not None

    @property
    def under(self) -> ModelUnderTest | None:
        return self._source if isinstance(self._source, ModelUnderTest) else None

    def describe(self):
        return self.under.describe() if self.under is not None else self.backend.describe()

    @property
    def max_images(self) -> int:
        """Images one request may carry: the backend's (loads it)."""
        return self.backend.max_images

    @property
    def failed(self) -> int:
        return len(self.failures)

    def key_fields(self) -> dict:
        if self._key_fields is None:
            self._key_fields = self.under.key_fields() if self.under is not None else _backend_key_fields(self.backend)
        return self._key_fields

    def key(self, request) -> str:
        if self.role == "vlm":
            return vlm_request_key(self.key_fields(), request)
        return llm_request_key(self.key_fields(), request)

    # ---- the one call --------------------------------------------------------------------------------------------
    def generate(self, requests: Sequence, config: GenerateConfig | None = None) -> list[Result]:
        """One Result per request: VLMRequests for a vlm, message lists [{"role", "content"}] for an llm (whose
        settings are its spec's: a non-empty config is refused). Cached answers are read back; the rest go to the
        backend, failed ones again up to `retries` times; every success is cached the moment it returns."""
        config = config or self.config
        if self.role == "vlm":
            requests = [config.apply(r) for r in requests]
        elif not config.is_empty():
            raise ConfigError(f"llm model {self.name!r}: generation settings come from its llm spec, not per call")
        out: list[Result | None] = [None] * len(requests)
        keys = [self.key(r) for r in requests] if self.cache is not None else [None] * len(requests)
        if self.cache is not None:
            for i, key in enumerate(keys):
                entry = self.cache.get(key)
                if entry is not None:
                    out[i] = Result(entry["answer"], attempts=0, note=entry.get("note"))
                    self.hits += 1
                    self._tally("hits", 1)
        todo = [i for i, r in enumerate(out) if r is None]
        if todo and self.cache is not None:
            self.cache.check_writable()
        for _attempt in range(1 + self.retries):
            if not todo:
                break
            results = self._send([requests[i] for i in todo])
            again = []
            for i, result in zip(todo, results):
                out[i] = result
                if result.error is None:
                    if self.cache is not None:
                        record = {"answer": result.text, "request_id": self._request_id(requests[i], i)}
                        if result.note:
                            record["note"] = result.note
                        self.cache.put(keys[i], record)
                else:
                    again.append(i)
            todo = again
        for i in todo:
            error = out[i].error
            self.failures.append({"request_id": self._request_id(requests[i], i), "error": error})
            log.warning(
                "%s: request %s to %s failed: %s", self.method, self._request_id(requests[i], i), self.name, error
            )
        return out  # type: ignore[return-value]

    def _tally(self, what: str, n: int) -> None:
        counts = TALLY.setdefault(f"{self.method} {self.role}", {"hits": 0, "sent": 0})
        counts[what] += n

    @staticmethod
    def _request_id(request, index: int) -> str:
        return str(getattr(request, "request_id", f"message-{index}"))

    def _send(self, requests: Sequence) -> list[Result]:
        self.sent += len(requests)
        self._tally("sent", len(requests))
        if self.role == "vlm":
            return list(self.backend.respond(requests))
        try:
            replies = list(self.backend.chat_batch(requests))
        except BackendError as exc:
            return [Result(None, error=str(exc)) for _ in requests]
        if len(replies) != len(requests):
            raise BackendError(f"llm {self.name!r}: backend returned {len(replies)} replies for {len(requests)} chats")
        # A blank reply is returned as the backend gave it (callers parse it as no answer) but never cached.
        return [Result(r) if isinstance(r, str) and r.strip() else Result(r, error=EMPTY_ANSWER) for r in replies]

    # ---- the faces callers already use -------------------------------------------------------------------------
    def answer(self, requests: Sequence[VLMRequest]) -> list[str]:
        """VLM face: one text per request, "" for a failed one (logged and counted, never a hallucination)."""
        return [r.text or "" if r.error is None else "" for r in self.generate(requests)]

    def respond(self, requests: Sequence[VLMRequest]) -> list[Result]:
        return self.generate(requests)

    def chat_batch(self, batch: Sequence[Sequence[Mapping]]) -> list[str]:
        """LLM face: one reply per message list, as the backend's chat_batch returns them; a request that failed
        raises BackendError (as the backend does), after every other reply of the batch was cached."""
        results = self.generate(batch)
        for r in results:
            if r.error is not None and r.error != EMPTY_ANSWER:
                raise BackendError(r.error)
        return [r.text if r.text is not None else "" for r in results]

    def chat(self, messages: Sequence[Mapping]) -> str:
        return self.chat_batch([messages])[0]

    def stats(self) -> dict:
        return {"cache_hits": self.hits, "sent": self.sent, "failed": self.failed}
