"""Text-to-image prompts of ODE (ODE, Tu et al. CVPR 2025, §3.3 "image generation"; original: the ODE repository's prompt composer).

"{a} and {b}" (entity+entity) or "{a} in {env}" (entity+environment), each part "a {state} {action} {object}"
with the article the noun lexicon gives the object (halluflow.ode.nouns: "a urinal", "an old dog", "green grass"),
plus the positive style tags and the negative prompt of its pair kind, as ODE's image generator has them (an
entity-entity scene asks for both entities equally, an entity-environment one for the subject and only this
environment). Each image gets its own seed derived from the master seed and its image id. Unlike the anchor, style
tags never accumulate across the images of a scene. As the anchor does, a variant whose prompt repeats an earlier
variant of the same pair is skipped (no image is made of it).
"""

from __future__ import annotations

import re

import polars as pl

from ..errors import ConfigError, InputError
from ..io import stable_hash
from ..progress import get_logger
from .nouns import indefinite_article, noun

log = get_logger(__name__)

PAIR_KINDS = ("entity_entity", "entity_environment")
DEFAULT_TEMPLATES = {
    "entity_entity": "{a} and {b}",
    "entity_environment": "{a} in {b}",
    "part": "a {state} {action} {object}",
}
# ODE's image generator (its Photography set; the code alternates it with an ANIME set image by image, which a
# photographic benchmark does not copy): tags and negative prompt per pair kind.
DEFAULT_STYLE_TAGS = {
    "entity_entity": [
        "(clear and obvious entity)",
        "(entity A and entity B is equally important)",
        "(Photography)",
        "(best quality)",
        "(masterpiece)",
        "(concise)",
        "(complete body)",
    ],
    "entity_environment": [
        "(highlight the subject and only this environment)",
        "(Entity as the main body and clear and obvious)",
        "(Photography)",
        "(best quality)",
        "(masterpiece)",
    ],
}
DEFAULT_NEGATIVE = {
    "entity_entity": "(missing entity)(bad anatomy)(deformed)(disconnected limbs)(missing limb)(out of focus)"
    "(mutated)(incomplete body)(poorly face)",
    "entity_environment": "(extra environmental elements)(extra entity)(bad anatomy)(deformed)(disconnected limbs)"
    "(missing limb)(out of focus)(mutated)",
}

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


def per_kind(value, default: dict, key: str) -> dict:
    """A per-pair-kind setting: a mapping {entity_entity, entity_environment} (a kind left out takes its default),
    or one value for both kinds (a list of tags, a negative prompt string); None = the defaults."""
    if value is None:
        return dict(default)
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(PAIR_KINDS))
        if unknown:
            raise ConfigError(
                f"config key 'ode.prompts.{key}.{unknown[0]}': unknown pair kind; known: {', '.join(PAIR_KINDS)}"
            )
        return {kind: default[kind] if value.get(kind) is None else value[kind] for kind in PAIR_KINDS}
    return {kind: value for kind in PAIR_KINDS}


def repeated_variants(scenes: pl.DataFrame, bodies: list[str]) -> set[str]:
    """scene_ids whose prompt body repeats another variant of the same pair (same distribution and pair kind, as
    ODE's generator keeps one set of prompts per list): the lowest variant (then scene_id) of each prompt stays, so
    the choice does not depend on the table's order."""
    keep: dict[tuple, tuple] = {}
    for scene, body in zip(scenes.iter_rows(named=True), bodies):
        key = (scene["distribution"], scene["pair_kind"], scene["object_a"], scene["object_b"], body)
        rank = (scene["variant"] if scene.get("variant") is not None else 0, scene["scene_id"])
        if key not in keep or rank < keep[key]:
            keep[key] = rank
    winners = {rank[1] for rank in keep.values()}
    return {sid for sid in scenes["scene_id"].to_list() if sid not in winners}


def make_prompts(
    scenes: pl.DataFrame,
    *,
    seed: int,
    images_per_scene: int = 1,
    shards: int = 1,
    templates: dict | None = None,
    style_tags: dict | list[str] | None = None,
    negative_prompt: dict | str | None = None,
    extra_labels: dict[str, list[str]] | None = None,
) -> pl.DataFrame:
    """Prompt table (docs/data-contracts.md). Shards are assigned round-robin in prompt order.

    `style_tags` / `negative_prompt`: per pair kind (see per_kind). A scene whose prompt repeats another variant of
    its pair gets no row (repeated_variants). `extra_labels` maps scene_id → objects the detector should also look
    for (the "no" candidates), so that filter_images can exclude candidates the detector sees; the scene's own
    objects always come first.
    """
    if images_per_scene < 1:
        raise ConfigError("config key 'ode.prompts.images_per_scene': must be at least 1")
    templates = {**DEFAULT_TEMPLATES, **(templates or {})}
    tags = {kind: "".join(t) for kind, t in per_kind(style_tags, DEFAULT_STYLE_TAGS, "style_tags").items()}
    negative = per_kind(negative_prompt, DEFAULT_NEGATIVE, "negative_prompt")
    extra_labels = extra_labels or {}
    bodies = []
    for scene in scenes.iter_rows(named=True):
        part_a = describe(scene["object_a"], scene["attribute_a"], scene["attribute_a_kind"], templates["part"])
        part_b = describe(scene["object_b"], scene["attribute_b"], scene["attribute_b_kind"], templates["part"])
        kind = scene["pair_kind"]
        if kind not in PAIR_KINDS:
            raise InputError(
                f"scenes table: scene {scene['scene_id']}: unknown pair kind {kind!r}; known: {', '.join(PAIR_KINDS)}"
            )
        bodies.append(_fill(templates[kind], kind, a=part_a, b=part_b))
    repeated = repeated_variants(scenes, bodies) if scenes.height else set()
    if repeated:
        log.info(
            "%d scene variant(s) repeat an earlier variant's prompt: skipped, as ODE's generator does", len(repeated)
        )
    rows = []
    for scene, body in zip(scenes.iter_rows(named=True), bodies):
        if scene["scene_id"] in repeated:
            continue
        kind = scene["pair_kind"]
        labels = list(dict.fromkeys([scene["object_a"], scene["object_b"], *extra_labels.get(scene["scene_id"], [])]))
        # The tags are rebuilt from config for every image (anchor bug: its list grew image after image).
        prompt = f"{body}, {tags[kind]}" if tags[kind] else body
        for k in range(images_per_scene):
            image_id = f"{scene['scene_id']}-i{k:02d}"
            rows.append(
                {
                    "image_id": image_id,
                    "scene_id": scene["scene_id"],
                    "shard": f"{len(rows) % shards:03d}",
                    "prompt": prompt,
                    "negative_prompt": negative[kind],
                    "seed": image_seed(seed, image_id),
                    "detect_labels": labels,
                }
            )
    return pl.DataFrame(rows, schema=PROMPT_SCHEMA) if rows else pl.DataFrame(schema=PROMPT_SCHEMA)
