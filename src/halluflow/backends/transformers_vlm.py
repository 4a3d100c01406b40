"""Models under test on transformers: any AutoModelForImageTextToText with a processor chat template.

Nothing here depends on the model family (LLaVA, LLaVA-NeXT, Qwen2-VL, Gemma 3, Idefics3/SmolVLM ...): prompts go
through the processor's own chat template (`apply_chat_template`, one {"type": "image"} part per image), and
everything the processor returns (pixel_values of whatever shape, image_sizes, image_grid_thw, token_type_ids ...)
is passed to `generate`. Requests are grouped by generation settings and image count, sorted by image size and
prompt length and batched with left padding, so each batch pads its prompts (and, for families whose image-token
count or tile count follows the image size, its pixel_values) to near neighbours; answers come back in request order
and equal the unbatched ones under greedy decoding (tests/test_batching.py, five families). Multi-turn history (CEDI examiner
conversations) is replayed with the images attached to the first user turn. Offline stand-ins of these families:
halluflow.backends.tiny_vlms.
"""

from __future__ import annotations

from typing import Sequence

from ..devices import resolve_device, resolve_dtype
from ..errors import MissingExtraError
from .base import VLM, BackendInfo, VLMRequest, group_by_settings
from .llm import (
    apply_attention,
    generation_kwargs,
    load_pretrained,
    resolve_model_path,
    runtime_info,
)
from .tiny_vlms import build_tiny_smolvlm  # noqa: F401  (scripts and tests build the default stand-in from here)

STANDIN_VLM_NAME = "tiny-smolvlm"


def is_standin_folder(model: str) -> bool:
    """True when the folder carries the stand-in marker written by halluflow.models.standins.build_standin."""
    try:
        from ..models.standins import standin_info
    except ImportError:  # stand-in support absent: only the explicit `stand_in` argument labels outputs
        return False
    return standin_info(model) is not None


def load_image(path: str):
    from ..io import open_rgb

    return open_rgb(path)


def image_size(path: str) -> tuple[int, int]:
    """(width, height) read from the file's header only; (0, 0) for a missing or unreadable file, which the real
    load later reports with its name."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            return im.size
    except (OSError, ValueError):
        return (0, 0)


def batch_order(indices: list[int], texts: Sequence[str], sizes: Sequence[tuple]) -> list[int]:
    """Indices sorted so neighbours share image sizes, then prompt lengths: a batch then pads its pixel_values
    (tiles, patch grids) and its prompts to near neighbours. Ties keep request order, so the order is stable."""
    return sorted(indices, key=lambda i: (sizes[i], len(texts[i]), i))


def conversation(request: VLMRequest, system_prompt: str | None = None) -> list[dict]:
    """Chat messages in the processor format; the images go with the first user turn, before its text."""
    messages: list[dict] = []
    if system_prompt:
        messages.append({"role": "system", "content": [{"type": "text", "text": system_prompt}]})
    turns = [*request.history, (request.prompt, None)]
    for i, (user, assistant) in enumerate(turns):
        content = [{"type": "text", "text": user}]
        if i == 0:
            content[:0] = [{"type": "image"} for _ in request.images]
        messages.append({"role": "user", "content": content})
        if assistant is not None:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": assistant}]})
    return messages


class TransformersVLM(VLM):
    """A VLM under test loaded with AutoProcessor + AutoModelForImageTextToText.

    Args: model (folder or hub id), revision, device (cpu|cuda|auto), dtype (auto: bfloat16 on CUDA, float32 on the
    CPU), attn_implementation (auto: flash_attention_2 on CUDA with flash-attn installed, else sdpa where the model
    supports it, else eager; the one used is in describe()), max_new_tokens (16; requests carry
    their own, set by the answer stage per task), temperature (0 = greedy), top_p, seed, batch_size (8),
    system_prompt, max_images (images one prompt may carry, default 4; more are tiled into one), stand_in,
    trust_remote_code (false; InternVL, MiniCPM-V, Phi-3.5-vision ship their own code: allowed only with a local
    folder or a revision pinned to a 40-hex commit, refused at planning time otherwise).
    """

    # Values no run can use, refused at planning time (halluflow.models.check_backend_args).
    ARG_BOUNDS = {
        "max_new_tokens": (">=", 1),
        "temperature": (">=", 0),
        "top_p": (">=", 0),
        "batch_size": (">=", 1),
        "max_images": (">=", 1),
    }

    def __init__(
        self,
        model: str,
        revision: str | None = None,
        device: str = "cpu",
        dtype: str = "auto",
        max_new_tokens: int = 16,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
        batch_size: int = 8,
        system_prompt: str | None = None,
        max_images: int = 4,
        stand_in: bool = False,
        trust_remote_code: bool = False,
        attn_implementation: str = "auto",
    ):
        try:
            import torch
            from transformers import AutoModelForImageTextToText, AutoProcessor
        except ModuleNotFoundError as exc:
            raise MissingExtraError(
                f"vlm backend 'transformers' needs {exc.name!r}: pip install 'halluflow[models]'"
            ) from exc
        self.model_name = model
        self.revision = revision
        self.set_sampling(max_new_tokens, temperature, top_p, seed, system_prompt)
        self.batch_size = max(1, int(batch_size))
        self.max_images = max(1, int(max_images))
        self.stand_in = bool(stand_in) or is_standin_folder(model)
        self.device = resolve_device(device)
        path = resolve_model_path(model)
        self.trust_remote_code = bool(trust_remote_code)
        self.processor = load_pretrained(AutoProcessor, path, model, revision, self.trust_remote_code)
        self.tokenizer = self.processor.tokenizer
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.dtype = resolve_dtype(dtype, self.device)
        self.model = load_pretrained(
            AutoModelForImageTextToText, path, model, revision, self.trust_remote_code, dtype=self.dtype
        )
        self.model.to(self.device).eval()
        self.attn_implementation = apply_attention(self.model, attn_implementation, self.device)
        self._torch = torch

    def describe(self) -> BackendInfo:
        return BackendInfo(
            "vlm",
            "transformers",
            self.model_name,
            self.revision,
            self.stand_in,
            # Remote code is recorded only when on, so manifests of ordinary models stay as they were.
            {
                "architecture": type(self.model).__name__,
                **({"trust_remote_code": True} if self.trust_remote_code else {}),
                **runtime_info(self),
            },
        )

    def batches(self, requests: Sequence[VLMRequest]) -> list[tuple[dict, list[int], list[str]]]:
        """(settings, request indices, templated prompts) per generate call.

        A call needs one generation config and, for the processor, one image count per prompt; within a group
        requests are sorted by image size, then prompt length (batch_order), so each batch pads to a near neighbour,
        not to the longest prompt or largest image overall."""
        texts = [
            self.processor.apply_chat_template(
                conversation(r, self.settings_for(r)["system_prompt"]), add_generation_prompt=True
            )
            for r in requests
        ]
        sizes = [tuple(image_size(p) for p in r.images) for r in requests]
        out = []
        for (_, settings), idx in group_by_settings(
            requests, lambda r: (len(r.images), tuple(sorted(self.settings_for(r).items())))
        ):
            idx = batch_order(idx, texts, sizes)
            for start in range(0, len(idx), self.batch_size):
                chunk = idx[start : start + self.batch_size]
                out.append((dict(settings), chunk, [texts[i] for i in chunk]))
        return out

    def encode(self, texts: list[str], images: list[list] | None):
        kwargs = {"text": texts, "return_tensors": "pt", "padding": True}
        if images:
            kwargs["images"] = images  # one list per prompt: the layout every processor accepts
        return self.processor(**kwargs).to(self.device)

    def generate(self, enc, settings: dict) -> list[str]:
        gen = generation_kwargs(
            settings["max_new_tokens"], settings["temperature"], settings["top_p"], self.tokenizer.pad_token_id
        )
        self._torch.manual_seed(settings["seed"])
        with self._torch.inference_mode():
            out = self.model.generate(**enc, **gen)
        return self.processor.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)

    def answer(self, requests: Sequence[VLMRequest]) -> list[str]:
        answers: list[str] = [""] * len(requests)
        for settings, idx, texts in self.batches(requests):
            images = [[load_image(p) for p in requests[i].images] for i in idx] if requests[idx[0]].images else None
            for i, text in zip(idx, self.generate(self.encode(texts, images), settings)):
                answers[i] = text
        return answers
