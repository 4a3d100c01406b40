"""Blind baseline: a text-only LLM answers the question without seeing the image (the standard "blind" control).

A model that scores well blind exposes question-template leakage or language priors in a benchmark; the offline
default uses the REAL SmolLM2-135M-Instruct (see halluflow.models.packaged), so its answers are genuine, just image-free.
"""

from __future__ import annotations

from typing import Sequence

from ..models import LOCAL_LLM
from .base import VLM, BackendInfo, VLMRequest, group_by_settings
from .llm import TransformersLLM


class BlindVLM(VLM):
    """Args are TransformersLLM's (model, revision, device, dtype, max_new_tokens, temperature, top_p, seed,
    batch_size, system_prompt, stand_in, trust_remote_code); the image of each request is ignored on purpose."""

    max_images = 0

    FORWARDS_ARGS_TO = TransformersLLM  # the declared signature the config's arguments are checked against

    def __init__(self, model: str = LOCAL_LLM, **llm_args):
        self.llm = TransformersLLM(model=model, **llm_args)

    def describe(self) -> BackendInfo:
        info = self.llm.describe()
        # The language model's own extras (trust_remote_code when on) travel with it into manifests.
        return BackendInfo(
            "vlm", "blind", info.model, info.revision, info.stand_in, {"image_input": False, **info.extra}
        )

    def settings_for(self, request: VLMRequest | None = None) -> dict:
        return self.llm.settings_for(request)

    @staticmethod
    def messages(request: VLMRequest) -> list[dict]:
        messages: list[dict] = []
        for user, assistant in request.history:
            messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        messages.append({"role": "user", "content": request.prompt})
        return messages

    def answer(self, requests: Sequence[VLMRequest]) -> list[str]:
        answers = [""] * len(requests)
        for _, idx in group_by_settings(requests, lambda r: tuple(sorted(self.settings_for(r).items()))):
            settings = self.settings_for(requests[idx[0]])
            prompts = [self.llm.template(self.messages(requests[i]), settings["system_prompt"]) for i in idx]
            for i, text in zip(idx, self.llm.generate_texts(prompts, settings)):
                answers[i] = text
        return answers
