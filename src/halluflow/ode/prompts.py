"""Text-to-image prompts of ODE (ODE, Tu et al. CVPR 2025, §3.3 "image generation"; original: the ODE repository's prompt composer).

"{a} and {b}" (entity+entity) or "{a} in {env}" (entity+environment), each part "a {state} {action} {object}"
with the article the noun lexicon gives the object (halluflow.ode.nouns: "a urinal", "an old dog", "green grass"),
plus positive style tags and a negative prompt. Each image gets its own seed derived from the master seed and
its image id. Unlike the anchor, style tags never accumulate across the images of a scene.
"""

from __future__ import annotations

import re

import polars as pl

from ..errors import ConfigError
from ..io import stable_hash
from .nouns import indefinite_article, noun

DEFAULT_TEMPLATES = {
    "entity_entity": "{a} and {b}",
    "entity_environment": "{a} in {b}",
    "part": "a {state} {action} {object}",
}
DEFAULT_STYLE_TAGS = ["(clear and obvious entity)", "(entity A and entity B is equally important)", "(Photography)"]
DEFAULT_NEGATIVE = "(missing entity)(bad anatomy)(deformed)"

PROMPT_SCHEMA = {
    "image_id": pl.String,
    "scene_id": pl.String,
    "shard": pl.String,
    "prompt": pl.String,
    "negative_prompt": pl.String,
    "seed": pl.Int64,
    "detect_labels": pl.List(pl.String),
}


def image_seed(master_seed: int, image_id: str) -> int:
    """A 31-bit seed per image: stable under reordering, resharding and resizing of the prompt table."""
    return int(stable_hash([master_seed, "image", image_id])[:8], 16) & 0x7FFFFFFF


def _fill(template: str, key: str, **values) -> str:
    try:
        text = template.format(**values)
    except (KeyError, IndexError) as exc:
        raise ConfigError(f"config key 'ode.prompts.templates.{key}': unknown placeholder {exc}") from None
    # Empty attribute slots leave double spaces ("a  dog"): collapse them.
    return re.sub(r"\s+", " ", text).strip()


_ARTICLE = re.compile(r"\b([Aa])n? (?=(\S+))")


def describe(obj: str, attribute: str | None, kind: str | None, part_template: str) -> str:
    """One part of a prompt: "a swimming dog", "an old umbrella", "a urinal", "green grass", "black sunglasses"."""
    text = _fill(
        part_template,
        "part",
        object=obj,
        state=attribute if kind == "state" else "",
        action=attribute if kind == "action" else "",
    )
    if not noun(obj).countable:
        # a mass noun or a plural takes no article: the template's last one before the object goes
        at = text.rfind(obj)
        before = [m for m in _ARTICLE.finditer(text) if m.end() <= at] if at >= 0 else []
        if before:
            text = text[: before[-1].start()] + text[before[-1].end() :]
    # every article agrees with the sound of the word right after it ("an egg", "an old dog", "a unicorn", "an hour")
    return _ARTICLE.sub(lambda m: _cased(indefinite_article(m.group(2)), m.group(1)) + " ", text)


def _cased(article: str, original: str) -> str:
    return article.capitalize() if original.isupper() else article


def make_prompts(
    scenes: pl.DataFrame,
    *,
    seed: int,
    images_per_scene: int = 1,
    shards: int = 1,
    templates: dict | None = None,
    style_tags: list[str] | None = None,
    negative_prompt: str | None = None,
    extra_labels: dict[str, list[str]] | None = None,
) -> pl.DataFrame:
    """Prompt table (docs/data-contracts.md). Shards are assigned round-robin in prompt order.

    `extra_labels` maps scene_id → objects the detector should also look for (the "no" candidates), so that
    filter_images can exclude candidates the detector sees; the scene's own objects always come first.
    """
    if images_per_scene < 1:
        raise ConfigError("config key 'ode.prompts.images_per_scene': must be at least 1")
    templates = {**DEFAULT_TEMPLATES, **(templates or {})}
    tags = "".join(DEFAULT_STYLE_TAGS if style_tags is None else style_tags)
    negative = DEFAULT_NEGATIVE if negative_prompt is None else negative_prompt
    extra_labels = extra_labels or {}
    rows = []
    for scene in scenes.iter_rows(named=True):
        part_a = describe(scene["object_a"], scene["attribute_a"], scene["attribute_a_kind"], templates["part"])
        part_b = describe(scene["object_b"], scene["attribute_b"], scene["attribute_b_kind"], templates["part"])
        kind = scene["pair_kind"]
        body = _fill(templates[kind], kind, a=part_a, b=part_b)
        labels = list(dict.fromkeys([scene["object_a"], scene["object_b"], *extra_labels.get(scene["scene_id"], [])]))
        for k in range(images_per_scene):
            image_id = f"{scene['scene_id']}-i{k:02d}"
            # The tags are rebuilt from config for every image (anchor bug: its list grew image after image).
            prompt = f"{body}, {tags}" if tags else body
            rows.append(
                {
                    "image_id": image_id,
                    "scene_id": scene["scene_id"],
                    "shard": f"{len(rows) % shards:03d}",
                    "prompt": prompt,
                    "negative_prompt": negative,
                    "seed": image_seed(seed, image_id),
                    "detect_labels": labels,
                }
            )
    return pl.DataFrame(rows, schema=PROMPT_SCHEMA) if rows else pl.DataFrame(schema=PROMPT_SCHEMA)
