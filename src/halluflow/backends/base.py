"""One small abstract base class per backend role, each with ONE batch method.

Backends differ only in that method; stand-ins (tiny random models) are registered exactly like real ones, so
tests run the real code path. `describe()` feeds manifests and reports (model id, revision, stand-in or not).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Sequence


@dataclass(frozen=True)
class ImagePrompt:
    """One image to synthesise."""

    image_id: str
    prompt: str
    negative_prompt: str
    seed: int


@dataclass(frozen=True)
class VLMRequest:
    """One question to a model under test. `image_path` is None for text-only (blind) requests."""

    request_id: str
    prompt: str
    image_path: str | None
    image_sha256: str | None = None
    history: tuple[tuple[str, str], ...] = ()  # previous (user, assistant) turns for multi-turn examiners


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

    def as_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "backend": self.backend,
            "model": self.model,
            "revision": self.revision,
            "stand_in": self.stand_in,
            **({"extra": self.extra} if self.extra else {}),
        }


class SamplingSettings:
    """Generation settings shared by text-generating backends; recorded with every answer and in request-cache keys."""

    def set_sampling(self, max_new_tokens: int, temperature: float, top_p: float, seed: int,
                     system_prompt: str | None) -> None:
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed
        self.system_prompt = system_prompt

    def generation_settings(self, max_new_tokens: int | None = None) -> dict:
        return {
            "max_new_tokens": self.max_new_tokens if max_new_tokens is None else max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "system_prompt": self.system_prompt,
        }


class Backend(ABC):
    role: str = ""

    @abstractmethod
    def describe(self) -> BackendInfo:
        """Model id, revision and whether this is a stand-in: recorded in manifests and reports."""


class Synthesizer(Backend):
    role = "synthesizer"

    @abstractmethod
    def generate(self, prompts: Sequence[ImagePrompt]):
        """Return one PIL image per prompt, deterministic given each prompt's seed."""


class Detector(Backend):
    role = "detector"

    @abstractmethod
    def detect(self, images: Sequence, labels: Sequence[Sequence[str]]) -> list[list[Detection]]:
        """Open-vocabulary detection: for each image, boxes for the given text labels."""


class VLM(Backend):
    role = "vlm"

    @abstractmethod
    def answer(self, requests: Sequence[VLMRequest]) -> list[str]:
        """One answer text per request (empty string when the model returned nothing)."""


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
