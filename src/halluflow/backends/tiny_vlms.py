"""Tiny RANDOM vision-language models of the families people evaluate, built offline from config.

As transformers tests itself: a tiny text + vision config, `save_pretrained`, and the backend reloads the folder
with `AutoProcessor` + `AutoModelForImageTextToText.from_pretrained`, so the real processor (chat template, image
token expansion, image tiling / grids, pixel_values layout) and `generate` paths run. Answers are noise; the
stand-in marker written by halluflow.models.standins labels every output.

Every family shares the real SmolLM2 BPE tokenizer (read from the packaged GGUF, no download) plus the special
tokens its processor expects, and a ChatML-style chat template whose image placeholder is the family's own.
Builders for `halluflow.models.standins.build_standin`: kinds smolvlm, llava, llava_next, qwen2_vl, gemma3.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..errors import ConfigError
from ..models.packaged import load_packaged_tokenizer


def chat_template(image_placeholder: str) -> str:
    """ChatML turns; each {"type": "image"} part becomes the family's placeholder, which its processor expands."""
    return (
        "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
        "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
        "{% for part in message['content'] %}{% if part['type'] == 'image' %}"
        + image_placeholder
        + "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
        "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )


# Idefics3's own template, minus the system-prompt handling SmolVLM adds; images become one <image> placeholder
# that the processor expands to image_seq_len tokens.
_IDEFICS3_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)


def _tokenizer(specials: list[str], named: dict[str, str] | None = None):
    """SmolLM2's tokenizer plus `specials`; `named` special tokens also become attributes (tokenizer.boi_token ...)
    that some processors read, which only a save → from_pretrained round trip with extra_special_tokens sets."""
    tokenizer = load_packaged_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": specials})
    if not named:
        return tokenizer
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory(prefix="halluflow-tok-") as tmp:
        tokenizer.save_pretrained(tmp)
        return AutoTokenizer.from_pretrained(tmp, extra_special_tokens=named)


def _text_config(tokenizer, hidden_size: int, config_class=None, **extra) -> dict:
    from transformers import LlamaConfig

    config_class = config_class or LlamaConfig
    settings = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
    )
    return config_class(**{**settings, **extra}).to_dict()


def _vision(hidden_size: int, image_size: int, patch_size: int = 16) -> dict:
    if image_size % patch_size:
        raise ConfigError(f"stand-in VLM: image_size {image_size} must be a multiple of the patch size {patch_size}")
    return dict(
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=4,
        image_size=image_size,
        patch_size=patch_size,
    )


def _save(
    model, processor, out_dir: str | os.PathLike, tokenizer_note: str = "SmolLM2 (packaged GGUF)", **facts
) -> dict:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.eval().save_pretrained(out)
    processor.save_pretrained(out)
    return {"architecture": type(model).__name__, "tokenizer": tokenizer_note, **facts}


def build_tiny_smolvlm(out_dir: str | os.PathLike, seed: int = 0, hidden_size: int = 32, image_size: int = 64) -> dict:
    """Idefics3 (SmolVLM architecture): 64 px images, 16 px patches → 4 image tokens after pixel shuffle ×2."""
    import torch
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3ImageProcessor, Idefics3Processor

    tokenizer = _tokenizer(["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>"])
    config = Idefics3Config(
        vision_config=_vision(hidden_size, image_size),
        text_config=_text_config(tokenizer, hidden_size, max_position_embeddings=2048),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        scale_factor=2,
    )
    torch.manual_seed(seed)
    model = Idefics3ForConditionalGeneration(config)
    image_processor = Idefics3ImageProcessor(
        size={"longest_edge": image_size}, max_image_size={"longest_edge": image_size}, do_image_splitting=False
    )
    processor = Idefics3Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        image_seq_len=(image_size // 16) ** 2 // 4,
        chat_template=_IDEFICS3_TEMPLATE,
    )
    return _save(model, processor, out_dir, image_size=image_size, hidden_size=hidden_size)


def build_tiny_llava(out_dir: str | os.PathLike, seed: int = 0, hidden_size: int = 32, image_size: int = 64) -> dict:
    """LLaVA-1.5 (LlavaForConditionalGeneration): CLIP vision tower, every image resized + centre-cropped to one
    square, (image_size / 16)² patch tokens + CLS (dropped by the "default" feature strategy)."""
    import torch
    from transformers import CLIPImageProcessor, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    tokenizer = _tokenizer(["<image>"])
    config = LlavaConfig(
        vision_config={
            "model_type": "clip_vision_model",
            **_vision(hidden_size, image_size),
            "projection_dim": hidden_size,
        },
        text_config={"model_type": "llama", **_text_config(tokenizer, hidden_size)},
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config)
    image_processor = CLIPImageProcessor(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
    )
    processor = _llava_processor(LlavaProcessor, image_processor, tokenizer)
    return _save(model, processor, out_dir, image_size=image_size, hidden_size=hidden_size)


def _llava_processor(processor_class, image_processor, tokenizer):
    """LLaVA-1.5 and LLaVA-NeXT processors share their settings: CLIP's 16 px patches, the CLS token dropped."""
    return processor_class(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=16,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=chat_template("<image>\n"),
    )


def build_tiny_llava_next(
    out_dir: str | os.PathLike, seed: int = 0, hidden_size: int = 32, image_size: int = 64
) -> dict:
    """LLaVA-NeXT (LlavaNextForConditionalGeneration): "any resolution" — each image is tiled on the best-fitting
    grid of image_size crops (1×1 … 2×2) plus a base view, so the image-token count depends on the image's shape."""
    import torch
    from transformers import (
        LlavaNextConfig,
        LlavaNextForConditionalGeneration,
        LlavaNextImageProcessor,
        LlavaNextProcessor,
    )

    tokenizer = _tokenizer(["<image>"])
    grid = [
        [image_size, image_size],
        [image_size, 2 * image_size],
        [2 * image_size, image_size],
        [2 * image_size, 2 * image_size],
    ]
    config = LlavaNextConfig(
        vision_config={
            "model_type": "clip_vision_model",
            **_vision(hidden_size, image_size),
            "projection_dim": hidden_size,
        },
        text_config={"model_type": "llama", **_text_config(tokenizer, hidden_size)},
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
        image_grid_pinpoints=grid,
    )
    torch.manual_seed(seed)
    model = LlavaNextForConditionalGeneration(config)
    image_processor = LlavaNextImageProcessor(
        size={"shortest_edge": image_size},
        crop_size={"height": image_size, "width": image_size},
        image_grid_pinpoints=grid,
    )
    processor = _llava_processor(LlavaNextProcessor, image_processor, tokenizer)
    return _save(model, processor, out_dir, image_size=image_size, hidden_size=hidden_size)


def build_tiny_qwen2_vl(
    out_dir: str | os.PathLike, seed: int = 0, hidden_size: int = 32, max_pixels: int = 12544
) -> dict:
    """Qwen2-VL (Qwen2VLForConditionalGeneration): native resolution — images keep their aspect ratio, become a
    (t, h, w) grid of 14 px patches (pixel_values flattened across the batch, image_grid_thw per image) with
    multimodal rotary positions; max_pixels (default 16 merged 28 px cells) bounds the grid."""
    import torch
    from transformers import (
        Qwen2Config,
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    tokenizer = _tokenizer(["<|vision_start|>", "<|image_pad|>", "<|vision_end|>", "<|video_pad|>"])
    head_dim = hidden_size // 4
    # mrope_section splits the rotary half-dimension (head_dim / 2) over time, height and width.
    half = head_dim // 2
    text = _text_config(tokenizer, hidden_size, Qwen2Config)
    text["rope_parameters"] = {
        "rope_type": "default",
        "rope_theta": 10000.0,
        "mrope_section": [half - 2 * (half // 4), half // 4, half // 4],
    }
    config = Qwen2VLConfig(
        vision_config=dict(
            depth=2,
            embed_dim=hidden_size,
            hidden_size=hidden_size,
            num_heads=4,
            mlp_ratio=2,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
            in_chans=3,
        ),
        text_config=text,
        image_token_id=tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tokenizer.convert_tokens_to_ids("<|vision_start|>"),
    )
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(config)
    processor = Qwen2VLProcessor(
        image_processor=Qwen2VLImageProcessor(min_pixels=4 * 28 * 28, max_pixels=int(max_pixels)),
        video_processor=Qwen2VLVideoProcessor(),
        tokenizer=tokenizer,
        chat_template=chat_template("<|vision_start|><|image_pad|><|vision_end|>"),
    )
    return _save(model, processor, out_dir, max_pixels=int(max_pixels), hidden_size=hidden_size)


def build_tiny_gemma3(out_dir: str | os.PathLike, seed: int = 0, hidden_size: int = 32, image_size: int = 64) -> dict:
    """Gemma 3 (Gemma3ForConditionalGeneration): SigLIP tower, image tokens pooled to a fixed 4 per image between
    <start_of_image> / <end_of_image>, bidirectional attention over the image span (token_type_ids)."""
    import torch
    from transformers import (
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3ImageProcessor,
        Gemma3Processor,
        Gemma3TextConfig,
    )

    named = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}
    tokenizer = _tokenizer(list(named.values()), named)
    text = _text_config(tokenizer, hidden_size, Gemma3TextConfig, head_dim=hidden_size // 4, sliding_window=64)
    config = Gemma3Config(
        text_config=text,
        vision_config={"model_type": "siglip_vision_model", **_vision(hidden_size, image_size)},
        mm_tokens_per_image=4,
        boi_token_index=tokenizer.convert_tokens_to_ids(named["boi_token"]),
        eoi_token_index=tokenizer.convert_tokens_to_ids(named["eoi_token"]),
        image_token_index=tokenizer.convert_tokens_to_ids(named["image_token"]),
    )
    torch.manual_seed(seed)
    model = Gemma3ForConditionalGeneration(config)
    processor = Gemma3Processor(
        image_processor=Gemma3ImageProcessor(size={"height": image_size, "width": image_size}),
        tokenizer=tokenizer,
        image_seq_length=4,
        chat_template=chat_template(named["boi_token"]),
    )
    return _save(model, processor, out_dir, image_size=image_size, hidden_size=hidden_size)
