"""Models under test on transformers: any AutoModelForImageTextToText with a processor chat template.

Batched greedy generation with left padding; multi-turn history (CEDI examiner conversations) is replayed with the
image attached to the first user turn. Also builds the offline stand-in: a tiny RANDOM SmolVLM/Idefics3 whose
answers are noise (every output is labelled stand_in) but which runs the real processor/generate code path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from ..errors import MissingExtraError
from .base import VLM, BackendInfo, SamplingSettings, VLMRequest
from .llm import generation_kwargs, load_packaged_tokenizer, resolve_device, resolve_model_path, torch_dtype

STANDIN_VLM_NAME = "tiny-smolvlm"

# Idefics3's own template, minus the system-prompt handling SmolVLM adds; images become one <image> placeholder
# that the processor expands to image_seq_len tokens.
_IDEFICS3_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)


def build_tiny_smolvlm(out_dir: str | os.PathLike, seed: int = 0, hidden_size: int = 32, image_size: int = 64) -> dict:
    """Save a tiny random Idefics3 (SmolVLM architecture) + processor into `out_dir`; reload with from_pretrained.

    Vision: hidden 32, 64 px images, 16 px patches (16 patches → 4 image tokens after pixel shuffle ×2);
    text: a 2-layer Llama of width 32 over the real SmolLM2 tokenizer (so prompts tokenize like SmolVLM's).
    A builder for `halluflow.standins.build_standin` (kind "smolvlm"), which adds atomicity and the stand-in marker.
    """
    import torch
    from transformers import (
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3ImageProcessor,
        Idefics3Processor,
        LlamaConfig,
    )

    out = Path(out_dir)
    tokenizer = load_packaged_tokenizer()
    tokenizer.add_special_tokens(
        {"additional_special_tokens": ["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>"]}
    )
    text = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
    )
    config = Idefics3Config(
        vision_config=dict(
            hidden_size=hidden_size,
            intermediate_size=2 * hidden_size,
            num_hidden_layers=2,
            num_attention_heads=4,
            image_size=image_size,
            patch_size=16,
        ),
        text_config=text.to_dict(),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        scale_factor=2,
    )
    torch.manual_seed(seed)
    model = Idefics3ForConditionalGeneration(config).eval()
    image_processor = Idefics3ImageProcessor(
        size={"longest_edge": image_size}, max_image_size={"longest_edge": image_size}, do_image_splitting=False
    )
    image_seq_len = (image_size // 16) ** 2 // 4
    processor = Idefics3Processor(
        image_processor=image_processor, tokenizer=tokenizer, image_seq_len=image_seq_len, chat_template=_IDEFICS3_TEMPLATE
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return {"architecture": "Idefics3ForConditionalGeneration", "image_size": image_size, "hidden_size": hidden_size,
            "tokenizer": "SmolLM2 (packaged GGUF)"}


def is_standin_folder(model: str) -> bool:
    """True when the folder carries the stand-in marker written by halluflow.standins.build_standin."""
    try:
        from ..standins import standin_info
    except ImportError:  # stand-in support absent: only the explicit `stand_in` argument labels outputs
        return False
    return standin_info(model) is not None


def load_image(path: str):
    from ..io import open_rgb

    return open_rgb(path)


def conversation(request: VLMRequest, system_prompt: str | None = None) -> list[dict]:
    """Chat messages in the processor format; the image goes with the first user turn."""
    messages: list[dict] = []
    if system_prompt:
        messages.append({"role": "system", "content": [{"type": "text", "text": system_prompt}]})
    turns = [*request.history, (request.prompt, None)]
    for i, (user, assistant) in enumerate(turns):
        content = [{"type": "text", "text": user}]
        if i == 0 and request.image_path is not None:
            content.insert(0, {"type": "image"})
        messages.append({"role": "user", "content": content})
        if assistant is not None:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": assistant}]})
    return messages


class TransformersVLM(SamplingSettings, VLM):
    """A VLM under test loaded with AutoProcessor + AutoModelForImageTextToText.

    Args: model (folder or hub id), revision, device (cpu|cuda|auto), dtype, max_new_tokens (16; the answer stage
    overrides it per task), temperature (0 = greedy), top_p, seed, batch_size (8), system_prompt, stand_in.
    """

    def __init__(
        self,
        model: str,
        revision: str | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        max_new_tokens: int = 16,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
        batch_size: int = 8,
        system_prompt: str | None = None,
        stand_in: bool = False,
    ):
        try:
            import torch
            from transformers import AutoModelForImageTextToText, AutoProcessor
        except ModuleNotFoundError as exc:
            raise MissingExtraError(f"vlm backend 'transformers' needs {exc.name!r}: pip install 'halluflow[models]'") from exc
        self.model_name = model
        self.revision = revision
        self.set_sampling(max_new_tokens, temperature, top_p, seed, system_prompt)
        self.batch_size = max(1, int(batch_size))
        self.stand_in = bool(stand_in) or is_standin_folder(model)
        self.device = resolve_device(device)
        path = resolve_model_path(model)
        self.processor = AutoProcessor.from_pretrained(path, revision=revision)
        self.processor.tokenizer.padding_side = "left"
        if self.processor.tokenizer.pad_token is None:
            self.processor.tokenizer.pad_token = self.processor.tokenizer.eos_token
        self.model = AutoModelForImageTextToText.from_pretrained(path, revision=revision, dtype=torch_dtype(dtype))
        self.model.to(self.device).eval()
        self._torch = torch

    def describe(self) -> BackendInfo:
        return BackendInfo("vlm", "transformers", self.model_name, self.revision, self.stand_in)

    def answer(self, requests: Sequence[VLMRequest], max_new_tokens: int | None = None) -> list[str]:
        answers: dict[int, str] = {}
        # A batch must be all-image or all-text: the processor takes one images list aligned with the texts.
        with_image = [i for i, r in enumerate(requests) if r.image_path is not None]
        text_only = [i for i, r in enumerate(requests) if r.image_path is None]
        for group in (with_image, text_only):
            for start in range(0, len(group), self.batch_size):
                idx = group[start : start + self.batch_size]
                for i, text in zip(idx, self._generate([requests[i] for i in idx], max_new_tokens)):
                    answers[i] = text
        return [answers[i] for i in range(len(requests))]

    def _generate(self, batch: list[VLMRequest], max_new_tokens: int | None) -> list[str]:
        texts = [
            self.processor.apply_chat_template(conversation(r, self.system_prompt), add_generation_prompt=True)
            for r in batch
        ]
        kwargs = {"text": texts, "return_tensors": "pt", "padding": True}
        if batch[0].image_path is not None:
            kwargs["images"] = [[load_image(r.image_path)] for r in batch]
        enc = self.processor(**kwargs).to(self.device)
        limit = self.max_new_tokens if max_new_tokens is None else max_new_tokens
        gen = generation_kwargs(limit, self.temperature, self.top_p, self.processor.tokenizer.pad_token_id)
        self._torch.manual_seed(self.seed)
        with self._torch.inference_mode():
            out = self.model.generate(**enc, **gen)
        new = out[:, enc["input_ids"].shape[1] :]
        return [t.strip() for t in self.processor.batch_decode(new, skip_special_tokens=True)]
