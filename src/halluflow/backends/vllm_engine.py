"""Models under test on the vLLM offline engine (one engine per answer shard; GPU clusters).

Same request format as the OpenAI-compatible backend (chat messages with base64 image URLs) through
`vllm.LLM.chat`, so a model answers identically whether served or run offline. vLLM is imported lazily; a machine
without it gets a MissingExtraError naming the extra `vllm`. `trust_remote_code` follows the transformers backends'
rule (halluflow.models.remote_code_refusal): an explicit opt-in, allowed only for a local folder or a 40-hex commit.
"""

from __future__ import annotations

from typing import Sequence

from ..errors import ConfigError, MissingExtraError
from .base import VLM, BackendInfo, VLMRequest
from .openai_http import request_messages


class VLLMVLM(VLM):
    """Args: model (folder or hub id), revision, dtype ("auto"), max_new_tokens (16), temperature (0), top_p (1),
    seed (0), tensor_parallel_size (1), gpu_memory_utilization (0.9), max_model_len (null = model default),
    max_images_per_prompt (1), system_prompt, stand_in, trust_remote_code (false; only with a local folder or a
    40-hex revision), engine_args (dict passed to vllm.LLM as is, except trust_remote_code: give it as its own
    argument so the pin rule sees it)."""

    # Values no run can use, refused at planning time (halluflow.models.check_backend_args).
    ARG_BOUNDS = {"max_new_tokens": (">=", 1), "temperature": (">=", 0), "tensor_parallel_size": (">=", 1)}

    def __init__(
        self,
        model: str,
        revision: str | None = None,
        dtype: str = "auto",
        max_new_tokens: int = 16,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        max_images_per_prompt: int = 1,
        system_prompt: str | None = None,
        stand_in: bool = False,
        trust_remote_code: bool = False,
        engine_args: dict | None = None,
    ):
        from ..models import remote_code_refusal

        if "trust_remote_code" in (engine_args or {}):
            # engine_args go to vllm.LLM unchecked: remote code through them would skip the pin rule.
            raise ConfigError(
                f"model {model!r}: engine_args.trust_remote_code is not taken; set trust_remote_code: true "
                "(with revision: <40-hex commit>) as its own argument"
            )
        if trust_remote_code:
            problem = remote_code_refusal(model, revision)
            if problem:  # before vLLM is imported or any weight downloaded (planning refuses it the same way)
                raise ConfigError(f"model {model!r}: {problem}")
        try:
            import vllm
        except ModuleNotFoundError as exc:
            raise MissingExtraError(
                "vlm backend 'vllm' needs the package 'vllm': pip install 'halluflow[vllm]' (GPU machines)"
            ) from exc
        self._vllm = vllm
        self.model_name = model
        self.revision = revision
        self.set_sampling(max_new_tokens, temperature, top_p, seed, system_prompt)
        self.stand_in = stand_in
        self.trust_remote_code = bool(trust_remote_code)
        self.max_images = max(1, int(max_images_per_prompt))
        kwargs = dict(
            model=model,
            revision=revision,
            dtype=dtype,
            seed=seed,
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            limit_mm_per_prompt={"image": max_images_per_prompt},
            trust_remote_code=self.trust_remote_code,
        )
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        kwargs.update(engine_args or {})
        self.engine = vllm.LLM(**kwargs)

    def describe(self) -> BackendInfo:
        extra = {"trust_remote_code": True} if self.trust_remote_code else {}
        return BackendInfo("vlm", "vllm", self.model_name, self.revision, self.stand_in, extra)

    def answer(self, requests: Sequence[VLMRequest]) -> list[str]:
        settings = [self.settings_for(r) for r in requests]
        # vLLM takes one SamplingParams per prompt, so requests with different settings share one engine call.
        params = [
            self._vllm.SamplingParams(
                max_tokens=s["max_new_tokens"], temperature=s["temperature"], top_p=s["top_p"], seed=s["seed"]
            )
            for s in settings
        ]
        conversations = [request_messages(r, s["system_prompt"]) for r, s in zip(requests, settings)]
        outputs = self.engine.chat(conversations, params, use_tqdm=False)
        return [o.outputs[0].text if o.outputs else "" for o in outputs]
