"""Blind baseline: a text-only LLM answers the question without seeing the image (the standard "blind" control).

A model that scores well blind exposes question-template leakage or language priors in a benchmark; the offline
default uses the REAL SmolLM2-135M-Instruct (see backends/llm.py), so its answers are genuine, just image-free.
"""

from __future__ import annotations

from typing import Sequence

from .base import VLM, BackendInfo, VLMRequest
from .llm import DEFAULT_LLM_DIR, TransformersLLM


class BlindVLM(VLM):
    """Args are TransformersLLM's (model, revision, device, dtype, max_new_tokens, temperature, top_p, seed,
    batch_size, system_prompt, stand_in); the image of each request is ignored on purpose."""

    def __init__(self, model: str = DEFAULT_LLM_DIR, **llm_args):
        self.llm = TransformersLLM(model=model, **llm_args)

    def describe(self) -> BackendInfo:
        info = self.llm.describe()
        return BackendInfo("vlm", "blind", info.model, info.revision, info.stand_in, {"image_input": False})

    def generation_settings(self, max_new_tokens: int | None = None) -> dict:
        return self.llm.generation_settings(max_new_tokens)

    @staticmethod
    def messages(request: VLMRequest) -> list[dict]:
        messages: list[dict] = []
        for user, assistant in request.history:
            messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        messages.append({"role": "user", "content": request.prompt})
        return messages

    def answer(self, requests: Sequence[VLMRequest], max_new_tokens: int | None = None) -> list[str]:
        prompts = [self.llm.template(self.messages(r)) for r in requests]
        return self.llm.generate_texts(prompts, max_new_tokens=max_new_tokens)
