"""One small abstract base class per backend role, each with ONE batch method.

Backends differ only in that method; stand-ins (tiny random models) are registered exactly like real ones, so
tests run the real code path. `describe()` feeds manifests and reports (model id, revision, stand-in or not).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from ..io import scrub_surrogates
from ..metrics.parsers import is_failed

EMPTY_ANSWER = "empty answer (the model returned no text or only whitespace)"


@dataclass(frozen=True)
class ImagePrompt:
    """One image to synthesise."""

    image_id: str
    prompt: str
    negative_prompt: str
    seed: int


# Generation settings a request may carry; None means the backend's own default (its constructor arguments).
GENERATION_FIELDS = ("max_new_tokens", "temperature", "top_p", "seed")


@dataclass(frozen=True)
class VLMRequest:
    """One question to a model under test, carrying its own generation settings.

    `images` lists the request's image paths in prompt order (empty for text-only, blind requests); `image_path`
    is the first of them and may be given instead, so VLMRequest(id, prompt, path) keeps working. `image_sha256`
    identifies the image content (all of it, for several images) in request-cache keys. `task` (discriminative,
    generative, ...) is recorded with the answer. A generation setting left None takes the backend's default.
    """

    request_id: str
    prompt: str
    image_path: str | None = None
    image_sha256: str | None = None
    history: tuple[tuple[str, str], ...] = ()  # previous (user, assistant) turns for multi-turn examiners
    images: tuple[str, ...] = ()
    task: str | None = None
    max_new_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None

    def __post_init__(self):
        images = tuple(str(p) for p in self.images)
        if self.image_path is not None and not images:
            images = (str(self.image_path),)
        elif images and self.image_path is not None and str(self.image_path) != images[0]:
            raise ValueError(
                f"request {self.request_id}: image_path {self.image_path!r} is not images[0] {images[0]!r}"
            )
        object.__setattr__(self, "images", images)
        object.__setattr__(self, "image_path", images[0] if images else None)
        object.__setattr__(self, "history", tuple(tuple(t) for t in self.history))


@dataclass
class Result:
    """Outcome of one request: text on success, else error (a short reason without secrets); `note` records a
    fallback the backend took (e.g. images tiled into one), so answers made that way can be told apart."""

    text: str | None
    error: str | None = None
    attempts: int = 1
    note: str | None = None
    latency_s: float | None = None  # send to reply of this request, where the backend measures it (HTTP)

    @property
    def ok(self) -> bool:
        return self.error is None


def finish_result(result: Result, note: str | None = None) -> Result:
    """The one last step every answer of every backend takes: text stripped of the whitespace models and servers
    add (" Yes" -> "Yes"), lone surrogates replaced, a fallback noted; an empty or whitespace-only text is a failed
    answer (never cached, retried by a rerun), not an answer "" that scorers would have to guess about."""
    if result.text is not None:
        result.text = scrub_surrogates(result.text).strip()
    if result.error is None and is_failed(result.text):  # the shared rule: blank = whitespace/control/format only
        result.text, result.error = None, EMPTY_ANSWER
    if note:
        result.note = note if result.note is None else f"{result.note}; {note}"
    return result


@dataclass
class Detection:
    label: str
    score: float
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels


@dataclass
class BackendInfo:
    role: str
    backend: str
    model: str
    revision: str | None = None
    stand_in: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        # A stand-in is built locally from a seed: a hub revision (the config's, of the model it stands in for) would
        # name weights that were never loaded.
        if self.stand_in:
            self.revision = None

    def as_dict(self) -> dict[str, Any]:
        """The record every output keeps of a model; with a models lock in use (HALLUFLOW_MODELS_LOCK) also the
        commit the lock staged it at, so a summary names the exact weights even when it asked for `main`."""
        from ..models.fetch import locked_commit

        # a served model's weights are the server's, whatever repo id it answers to
        commit = locked_commit(self.model, self.revision) if self.backend != "openai" else None
        return {
            "role": self.role,
            "backend": self.backend,
            "model": self.model,
            "revision": self.revision,
            **({"commit": commit} if commit else {}),
            "stand_in": self.stand_in,
            **({"extra": self.extra} if self.extra else {}),
        }


class SamplingSettings:
    """Generation defaults of text-generating backends; a request's own settings override them per request.

    The resolved settings are recorded with every answer (and their semantic parts key the request cache)."""

    max_new_tokens: int = 16
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    system_prompt: str | None = None

    def set_sampling(
        self, max_new_tokens: int, temperature: float, top_p: float, seed: int, system_prompt: str | None
    ) -> None:
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.seed = None if seed is None else int(seed)  # None: a server that takes no seed
        self.system_prompt = system_prompt

    def settings_for(self, request: VLMRequest | None = None) -> dict:
        settings = {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "system_prompt": self.system_prompt,
        }
        if request is not None:
            settings.update({f: getattr(request, f) for f in GENERATION_FIELDS if getattr(request, f) is not None})
        return settings


def group_by_settings(requests: Sequence[VLMRequest], key) -> list[tuple[Any, list[int]]]:
    """Request indices grouped by `key(request)` (hashable), groups in first-seen order: one generate call per group."""
    groups: dict[Any, list[int]] = {}
    for i, r in enumerate(requests):
        groups.setdefault(key(r), []).append(i)
    return list(groups.items())


def tile_images(paths: Sequence[str], out_dir: str | None = None) -> str:
    """Several images side by side in one PNG (same height, aspect kept), for backends taking fewer images.

    Written once per distinct input (named by a hash of the paths, sizes and modification times) under out_dir,
    default <tmp>/halluflow-tiles; the write is atomic, so concurrent jobs share the file safely."""
    import os
    import tempfile
    from pathlib import Path

    from PIL import Image

    from ..io import atomic_path, open_rgb, stable_hash

    folder = Path(out_dir or Path(tempfile.gettempdir()) / "halluflow-tiles")
    stats = [
        (str(p), *((os.stat(p).st_size, os.stat(p).st_mtime_ns) if os.path.exists(p) else (-1, -1))) for p in paths
    ]
    out = folder / f"{stable_hash(stats)[:24]}.png"
    if out.exists():
        return str(out)
    images = [open_rgb(p) for p in paths]
    height = max(im.height for im in images)
    scaled = [im.resize((max(1, round(im.width * height / im.height)), height)) for im in images]
    canvas = Image.new("RGB", (sum(im.width for im in scaled), height))
    x = 0
    for im in scaled:
        canvas.paste(im, (x, 0))
        x += im.width
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        canvas.save(tmp, format="PNG")
    return str(out)


class Backend(ABC):
    role: str = ""

    @abstractmethod
    def describe(self) -> BackendInfo:
        """Model id, revision and whether this is a stand-in: recorded in manifests and reports."""

    def fit_batch_size(self, configured: int) -> int:
        """Items per call of an image stage (synthesis, detection): the configured batch size, which a GPU backend
        cuts to what fits its memory budget (halluflow.devices.probe_batch_size)."""
        return configured


class Synthesizer(Backend):
    role = "synthesizer"

    @abstractmethod
    def generate(self, prompts: Sequence[ImagePrompt]):
        """Return one PIL image per prompt, deterministic given each prompt's seed."""

    def settings(self) -> dict[str, Any]:
        """Everything besides the model that shapes an image (steps, size, guidance ...): keys resumed images."""
        return {}


class Detector(Backend):
    role = "detector"

    @abstractmethod
    def detect(self, images: Sequence, labels: Sequence[Sequence[str]]) -> list[list[Detection]]:
        """Open-vocabulary detection: for each image, boxes for the given text labels."""


class VLM(SamplingSettings, Backend):
    """A model under test. Subclasses implement `answer(requests)`, reading each request's generation settings
    (`settings_for(request)`); callers go through `respond`, the one path every backend's answers take.

    `max_images`: images one prompt may carry (0 = the backend ignores images on purpose, e.g. the blind baseline).
    A request with more images than that is answered on one tiled image instead, recorded in its Result.note.
    """

    role = "vlm"
    max_images: int = 1

    @abstractmethod
    def answer(self, requests: Sequence[VLMRequest]) -> list[str]:
        """One answer text per request (empty string when the model returned nothing); raises on failure."""

    def answer_results(self, requests: Sequence[VLMRequest]) -> list[Result]:
        """Per-request outcomes; backends that can fail per request (HTTP) override this to report failures."""
        return [Result(text) for text in self.answer(requests)]

    def generation_settings(self, request: VLMRequest) -> dict:
        """The settings this request is answered with: recorded beside the answer."""
        return self.settings_for(request)

    def bind_queries(self, table) -> None:
        """Receive the query table (scene context); only context-using baselines (the prior) keep it."""

    def fit_images(self, request: VLMRequest) -> tuple[VLMRequest, str | None]:
        if self.max_images <= 0 or len(request.images) <= self.max_images:
            return request, None
        tiled = tile_images(request.images)
        note = f"{len(request.images)} images tiled into one (backend takes at most {self.max_images})"
        return replace(request, image_path=None, images=(tiled,)), note

    def respond(self, requests: Sequence[VLMRequest]) -> list[Result]:
        """Answer through the one call path all backends share: images fitted to `max_images`, one Result per
        request, each finished by `finish_result` (stripped; empty = failed)."""
        from ..errors import BackendError

        fitted = [self.fit_images(r) for r in requests]
        results = self.answer_results([r for r, _ in fitted])
        if len(results) != len(requests):
            name = self.describe().model
            raise BackendError(f"model {name!r}: backend returned {len(results)} answers for {len(requests)} requests")
        return [finish_result(result, note) for result, (_, note) in zip(results, fitted)]


class LLM(Backend):
    role = "llm"

    @abstractmethod
    def chat(self, messages: Sequence[dict]) -> str:
        """One assistant reply to an OpenAI-style message list [{"role", "content"}]."""

    def chat_batch(self, batch: Sequence[Sequence[dict]]) -> list[str]:
        return [self.chat(m) for m in batch]


class Embedder(Backend):
    role = "embedder"

    @abstractmethod
    def embed(self, texts: Sequence[str]):
        """Return an (n, d) float numpy array, one row per text (multi-word phrases handled by the backend)."""
