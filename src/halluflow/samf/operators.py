"""SAMF mutation operators (UniHall/SAMF paper, Sec. 3.2 and Appendix C.1; chaining and the 80,000-char cap of C.6).

Five text and five image operators, each with an intensity level 1-5 and a difficulty tag. Every operator is
seeded and semantic-preserving: the original question stays verbatim in the prompt and the image the answer
must be grounded on keeps its content (untouched pixels, or a mild degradation for multi_image_copy_v2).
"""

from __future__ import annotations

import copy
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageFilter, ImageFont, ImageOps

from ..errors import InputError
from ..io import open_rgb, safe_join, sha256_file, stable_hash, write_bytes
from .schema import negative_answers, truth_answers

MAX_PROMPT_CHARS = 80_000  # C.6: stop applying text operators once the prompt reaches this length
LEVELS = (1, 2, 3, 4, 5)


@dataclass
class MutationState:
    """A prompt as context blocks around a core that always contains the original question verbatim."""

    question: str
    qtype: str
    core: str
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    image_instruction: str = ""
    images: list[Image.Image] = field(default_factory=list)
    reference: int = 0
    records: list[dict] = field(default_factory=list)
    truncated: bool = False

    def text(self) -> str:
        parts = [*self.before, self.core, *self.after]
        if self.image_instruction:
            parts.append(self.image_instruction)
        return "\n\n".join(parts)


@dataclass(frozen=True)
class Operator:
    name: str
    modality: str  # "text" | "image"
    difficulty: str  # the operator's tag in C.1 (Easy .. Extreme)
    description: str
    fn: Callable


@dataclass
class MutationContext:
    """What an operator may read besides the state: the instance (for N and G) and distractor images."""

    instance: dict
    distractors: list[Image.Image] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- text banks
# Neutral sentences about nothing visual in the image: they add load without changing what is asked.
IRRELEVANT_SENTENCES = (
    "The municipal library extended its opening hours during the exam period last spring.",
    "Many recipes for bread call for a long, slow fermentation to develop flavour.",
    "Tide tables are published a year in advance for most coastal towns.",
    "The committee postponed its quarterly meeting because of a scheduling conflict.",
    "Some programming languages use indentation to mark the structure of a block.",
    "A well-tuned piano is usually checked at least once or twice a year.",
    "The train timetable changes twice a year, in spring and in autumn.",
    "Several studies have examined how sleep affects long-term memory.",
    "The annual report was printed on recycled paper for the first time.",
    "Chess openings are often named after the players who popularised them.",
    "Rainfall in the region was slightly above the ten-year average.",
    "The museum's audio guide is available in eleven languages.",
    "Postal codes were introduced to speed up the sorting of letters.",
    "A marathon covers a little more than forty-two kilometres.",
    "The conference dinner will be served after the closing keynote.",
    "Prime numbers have exactly two distinct positive divisors.",
    "The lecture on medieval trade routes drew a larger audience than expected.",
    "Most spreadsheets can sort a column in ascending or descending order.",
    "The festival organisers thanked the volunteers in a short speech.",
    "Historians still debate the exact date of the treaty's signing.",
    "The recipe notes that the sauce can be frozen for up to three months.",
    "A leap year adds one day to the month of February.",
    "The survey asked participants about their commuting habits.",
    "Water boils at a lower temperature at high altitude.",
    "The novel was translated into several languages within a year of release.",
    "An orchestra usually tunes to the note A before a performance.",
    "The software update fixed a number of minor bugs.",
    "Crossword puzzles became popular in newspapers in the early twentieth century.",
    "The garden club meets on the first Tuesday of every month.",
    "Some board games can be completed in under twenty minutes.",
    "The bakery on the corner changed its opening hours in winter.",
    "Interest rates were left unchanged at the last policy meeting.",
)

# Logically equivalent constraints (C.1 "constraint stacking"): none changes what the question asks.
CONSTRAINTS = (
    "Answer only based on the visible content of the image.",
    "Do not speculate beyond what the image shows.",
    "If something is not visible in the image, do not assume it is present.",
    "Answer the question exactly as it is asked.",
    "Consider the entire image before answering.",
    "Keep your answer consistent with the image content.",
    "Do not rely on prior expectations about similar scenes.",
    "Treat the image as the only source of evidence.",
    "Ignore any assumption that is not supported by the image.",
    "Make sure your answer refers to this image and not to a typical one.",
)
YON_CONSTRAINT = "Answer with Yes or No."

# Nested clauses and parentheticals (C.1 "syntactic complication"); {core} keeps the question verbatim.
COMPLICATIONS = (
    "Taking into account, as any careful observer would, the content of the image provided, {core}",
    "If, after looking at the picture (which you should examine as a whole), you were asked the following, "
    'how would you respond: "{core}"',
    "Setting aside, for a moment, any assumption one might make without looking, and given that the question "
    "below is meant literally, consider this: {core}",
    "In a situation where someone who has not seen the image themselves asks you, wanting a faithful answer, "
    "the following question, what would you say? {core}",
    "Bearing in mind that the question, whose wording has been chosen deliberately, refers only to the image "
    "provided (and to nothing else), answer: {core}",
)

# Salient cues for "disturbance exclusion" when no negative answer can serve as the distractor.
DISTRACTORS = (
    "a red umbrella",
    "a crowd of people",
    "a burning building",
    "a flying kite",
    "a parked ambulance",
    "a giant clock",
    "a marching band",
    "a snow-covered mountain",
    "a lighthouse",
    "a hot-air balloon",
)
EXCLUSION_TEMPLATES = (
    "Do not let the idea of {d} guide your answer; it is irrelevant to this question.",
    "A common misinterpretation of images like this one involves {d}. Disregard it: it has nothing to do "
    "with what you are asked.",
    "Someone once misread a similar image and thought of {d}. That reading is explicitly excluded here.",
)

AUTHORITY_SOURCES = (
    "Dr. Helen Marsh, a senior expert in visual forensics",
    "the International Institute for Image Analysis",
    "Professor Alan Reyes, who has reviewed thousands of such images",
    "a panel of certified annotators from a national laboratory",
    "the lead author of the Journal of Visual Cognition's 2021 survey",
)

OVERLAY_WORDS = ("SALE", "EXIT", "OPEN 24H", "No. 42", "LOT B-7", "FRESH", "ZONE 3", "PROMO", "2019", "A/B")


# ---------------------------------------------------------------------------------------------- helpers
def _distractor_cues(ctx: MutationContext) -> list[str]:
    """Negative answers make the strongest misleading cue; yes/no negatives carry no content, so fall back."""
    negs = [n for n in negative_answers(ctx.instance) if n.strip().lower() not in ("yes", "no")]
    if negs:
        return negs
    words = set(ctx.instance["seed_data"]["question"].lower().split())
    for answer in truth_answers(ctx.instance):
        words |= set(answer.lower().split())
    # A cue that shares a word with the question could turn the exclusion into a statement about the answer.
    return [d for d in DISTRACTORS if not (set(d.split()[1:]) & words)]


def _sample(rng: np.random.Generator, bank, n: int) -> list:
    n = min(n, len(bank))
    return [bank[int(i)] for i in rng.choice(len(bank), size=n, replace=False)]


# ---------------------------------------------------------------------------------------------- text ops
def expand_context_irrelevant(state: MutationState, level: int, rng, ctx) -> dict:
    n = 2**level  # 2 .. 32 sentences
    picks = [IRRELEVANT_SENTENCES[int(i)] for i in rng.integers(0, len(IRRELEVANT_SENTENCES), size=n)]
    split = int(rng.integers(0, n + 1)) if level >= 3 else n  # from level 3 on, noise also follows the question
    if picks[:split]:
        state.before.append(" ".join(picks[:split]))
    if picks[split:]:
        state.after.append(" ".join(picks[split:]))
    return {"sentences": n}


def constraint_stack(state: MutationState, level: int, rng, ctx) -> dict:
    picks = _sample(rng, CONSTRAINTS, level + 1)
    if state.qtype == "YON" and level >= 2:
        picks.append(YON_CONSTRAINT)
    state.after.append(" ".join(picks))
    return {"constraints": len(picks)}


def syntactic_complication(state: MutationState, level: int, rng, ctx) -> dict:
    order = rng.permutation(len(COMPLICATIONS))[:level]
    for i in order:
        state.core = COMPLICATIONS[int(i)].format(core=state.core)
    return {"nesting": int(level)}


def disturbance_exclusion(state: MutationState, level: int, rng, ctx) -> dict:
    cues = _distractor_cues(ctx)
    picks = [cues[int(i)] for i in rng.integers(0, len(cues), size=level)] if cues else []
    lines = [EXCLUSION_TEMPLATES[int(rng.integers(0, len(EXCLUSION_TEMPLATES)))].format(d=d) for d in picks]
    # C.1: the negated cue comes BEFORE the question, where an early strong cue biases most.
    state.before.append(" ".join(lines))
    return {"distractors": picks}


def authority_bias_context(state: MutationState, level: int, rng, ctx) -> dict:
    negs = negative_answers(ctx.instance)
    neg = negs[int(rng.integers(0, len(negs)))] if negs else None
    sources = _sample(rng, AUTHORITY_SOURCES, len(AUTHORITY_SOURCES))
    lines = [f"According to {sources[0]}, images of this kind are frequently misjudged by casual viewers."]
    if level >= 2:
        lines.append(f"This has been documented by {sources[1]} (see the 2021 technical report, pp. 14-17).")
    if level >= 3 and neg is not None:
        lines.append(f'{sources[2][0].upper() + sources[2][1:]} reportedly believes the answer here is "{neg}".')
    if level >= 4 and neg is not None:
        lines.append(f'This view is shared by {sources[3]} and {sources[4]}, who both concluded "{neg}".')
    block = " ".join(lines)
    if level >= 5:
        # Extreme: a long dossier of authoritative opinion (the 80,000-char cap of C.6 bounds it).
        paragraphs = [
            f"Expert statement {i + 1}: {sources[i % len(sources)]} reviewed the material and "
            + (f'endorsed the answer "{neg}". ' if neg is not None else "stressed the need for caution. ")
            + " ".join(IRRELEVANT_SENTENCES[int(j)] for j in rng.integers(0, len(IRRELEVANT_SENTENCES), size=3))
            for i in range(40)
        ]
        block = block + "\n\n" + "\n\n".join(paragraphs)
    state.before.append(block)
    return {"pushed_answer": neg, "chars": len(block)}


# ---------------------------------------------------------------------------------------------- image ops
def _font(size: int) -> ImageFont.ImageFont:
    return ImageFont.load_default(size=max(8, size))


def _border_box(rng, size: tuple[int, int], inner: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """A random box inside the padded border (never over the original picture)."""
    w, h = size
    x0, y0, x1, y1 = inner
    strips = [
        s for s in ((0, 0, w, y0), (0, y1, w, h), (0, 0, x0, h), (x1, 0, w, h)) if s[2] - s[0] > 2 and s[3] - s[1] > 2
    ]
    sx0, sy0, sx1, sy1 = strips[int(rng.integers(0, len(strips)))]
    bw = int(rng.integers(max(2, (sx1 - sx0) // 4), max(3, sx1 - sx0) + 1))
    bh = int(rng.integers(max(2, (sy1 - sy0) // 4), max(3, sy1 - sy0) + 1))
    bx = int(rng.integers(sx0, max(sx0 + 1, sx1 - bw + 1)))
    by = int(rng.integers(sy0, max(sy0 + 1, sy1 - bh + 1)))
    return bx, by, min(bx + bw, sx1), min(by + bh, sy1)


def _random_colour(rng, alpha: int | None = None) -> tuple[int, ...]:
    rgb = tuple(int(v) for v in rng.integers(0, 256, size=3))
    return rgb if alpha is None else (*rgb, alpha)


def _background_interference(image: Image.Image, level: int, rng) -> tuple[Image.Image, dict]:
    image = image.convert("RGB")
    w, h = image.size
    pad = max(8, int(round(max(w, h) * 0.1 * level)))
    cw, ch = w + 2 * pad, h + 2 * pad
    # Outpainting stand-in: a seeded colour gradient with grain, so the border is not a flat frame.
    c0, c1 = np.array(_random_colour(rng), float), np.array(_random_colour(rng), float)
    t = np.linspace(0.0, 1.0, cw)[None, :, None]
    canvas = (c0 * (1 - t) + c1 * t).repeat(ch, axis=0)
    canvas = np.clip(canvas + rng.normal(0, 6 + 2 * level, size=canvas.shape), 0, 255).astype(np.uint8)
    base = Image.fromarray(canvas, "RGB").convert("RGBA")
    overlay = Image.new("RGBA", base.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    inner = (pad, pad, pad + w, pad + h)
    kinds = []
    for _ in range(2 * level):
        kind = ("sticker", "logo", "text")[int(rng.integers(0, 3))]
        box = _border_box(rng, base.size, inner)
        alpha = int(rng.integers(100, 220))
        if kind == "sticker":
            draw.rounded_rectangle(box, radius=3, fill=_random_colour(rng, alpha))
        elif kind == "logo":
            draw.ellipse(box, outline=_random_colour(rng, alpha), width=2, fill=_random_colour(rng, alpha // 2))
        else:
            word = OVERLAY_WORDS[int(rng.integers(0, len(OVERLAY_WORDS)))]
            draw.text((box[0], box[1]), word, fill=_random_colour(rng, alpha), font=_font(max(8, pad // 2)))
        kinds.append(kind)
    out = Image.alpha_composite(base, overlay).convert("RGB")
    out.paste(image, (pad, pad))  # the original content is kept pixel for pixel
    return out, {"pad": pad, "offset": [pad, pad], "elements": kinds}


def background_interference(state: MutationState, level: int, rng, ctx) -> dict:
    details = []
    for i, img in enumerate(state.images):
        state.images[i], info = _background_interference(img, level, rng)
        details.append(info)
    return {"images": details}


def _simple_transform(img: Image.Image, level: int, rng) -> tuple[Image.Image, str]:
    kind = ("scale", "rotate", "flip", "crop", "noise", "brightness", "contrast", "blur")[int(rng.integers(0, 8))]
    w, h = img.size
    s = level / 5.0
    if kind == "scale":
        f = 1.0 - 0.5 * s * float(rng.uniform(0.5, 1.0))
        img = img.resize((max(8, int(w * f)), max(8, int(h * f))), Image.BILINEAR)
    elif kind == "rotate":
        img = img.rotate(float(rng.uniform(5, 5 + 40 * s)) * (1 if rng.random() < 0.5 else -1), expand=True)
    elif kind == "flip":
        img = ImageOps.mirror(img) if rng.random() < 0.5 else ImageOps.flip(img)
    elif kind == "crop":
        f = 1.0 - 0.3 * s
        cw, ch = min(w, max(8, int(w * f))), min(h, max(8, int(h * f)))
        x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        img = img.crop((x, y, x + cw, y + ch))
    elif kind == "noise":
        img = _add_noise(img, 8 + 10 * level, rng)
    elif kind == "brightness":
        img = ImageEnhance.Brightness(img).enhance(float(1 + (0.6 * s) * (1 if rng.random() < 0.5 else -1)))
    elif kind == "contrast":
        img = ImageEnhance.Contrast(img).enhance(float(1 + (0.6 * s) * (1 if rng.random() < 0.5 else -1)))
    else:
        img = img.filter(ImageFilter.GaussianBlur(radius=0.5 + level))
    return img, kind


def _add_noise(img: Image.Image, sigma: float, rng) -> Image.Image:
    arr = np.asarray(img.convert("RGB"), dtype=np.float64)
    return Image.fromarray(np.clip(arr + rng.normal(0, sigma, arr.shape), 0, 255).astype(np.uint8), "RGB")


def _degrade(img: Image.Image, level: int, rng) -> Image.Image:
    """Quality loss that keeps the content recognisable: down/up-scaling, JPEG artefacts, mild noise."""
    w, h = img.size
    f = 1.0 - 0.1 * level
    img = img.resize((max(8, int(w * f)), max(8, int(h * f))), Image.BILINEAR).resize((w, h), Image.BILINEAR)
    buf = io.BytesIO()
    img.convert("RGB").save(buf, format="JPEG", quality=int(90 - 12 * level))
    img = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    return _add_noise(img, 1.5 * level, rng)


def _style(img: Image.Image, rng) -> tuple[Image.Image, str]:
    kind = ("grayscale", "posterize", "solarize", "contour", "emboss", "sepia", "edge_enhance")[int(rng.integers(0, 7))]
    rgb = img.convert("RGB")
    if kind == "grayscale":
        out = ImageOps.grayscale(rgb).convert("RGB")
    elif kind == "posterize":
        out = ImageOps.posterize(rgb, int(rng.integers(2, 4)))
    elif kind == "solarize":
        out = ImageOps.solarize(rgb, threshold=int(rng.integers(96, 192)))
    elif kind == "contour":
        out = rgb.filter(ImageFilter.CONTOUR)
    elif kind == "emboss":
        out = rgb.filter(ImageFilter.EMBOSS)
    elif kind == "sepia":
        out = ImageOps.colorize(ImageOps.grayscale(rgb), black=(40, 20, 5), white=(255, 240, 200))
    else:
        out = rgb.filter(ImageFilter.EDGE_ENHANCE_MORE)
    return out, kind


def _copies(state: MutationState, level: int, rng, make_copy, reference_image: Image.Image) -> tuple[int, list[str]]:
    """Replace the image input by level+1 versions; the reference sits at a random position."""
    k = level + 1
    ref = int(rng.integers(0, k))
    images, kinds = [], []
    for i in range(k):
        if i == ref:
            images.append(reference_image)
            kinds.append("reference")
        else:
            img, kind = make_copy()
            images.append(img)
            kinds.append(kind)
    state.images, state.reference = images, ref
    return ref, kinds


def multi_image_copy_v1(state: MutationState, level: int, rng, ctx) -> dict:
    original = state.images[state.reference].convert("RGB")

    def make():
        img, kinds = original, []
        for _ in range(1 + (level >= 4)):
            img, kind = _simple_transform(img, level, rng)
            kinds.append(kind)
        return img, "+".join(kinds)

    ref, kinds = _copies(state, level, rng, make, original)
    state.image_instruction = (
        f"The {len(kinds)} images are differently processed versions of the same image, not different scenes: "
        f"do not count anything across images. Base your answer only on Image {ref + 1}."
    )
    return {"copies": kinds, "reference": ref}


def multi_image_copy_v2(state: MutationState, level: int, rng, ctx) -> dict:
    degraded = _degrade(state.images[state.reference], level, rng)

    def make():
        img, kind = _simple_transform(degraded, level, rng)
        return _degrade(img, max(1, level - 1), rng), f"degraded+{kind}"

    ref, kinds = _copies(state, level, rng, make, degraded)
    state.image_instruction = (
        f"The {len(kinds)} images are degraded copies of the same image, not different scenes: do not count "
        f"anything across images. Base your answer only on Image {ref + 1}."
    )
    return {"copies": kinds, "reference": ref}


def multi_image_copy_v3(state: MutationState, level: int, rng, ctx) -> dict:
    original = state.images[state.reference].convert("RGB")
    ref, kinds = _copies(state, level, rng, lambda: _style(original, rng), original)
    # The model has to find the untouched (highest-quality) version itself: that is the "key information" task.
    state.image_instruction = (
        f"All {len(kinds)} images depict the same scene in different styles. "
        "Reason solely based on the highest-quality version."
    )
    return {"copies": kinds, "reference": ref}


def _synthetic_distractor(size: tuple[int, int], rng) -> Image.Image:
    """An abstract seeded image (shapes on a gradient) used when no other instance images are available."""
    w, h = size
    img = Image.new("RGB", size, _random_colour(rng))
    draw = ImageDraw.Draw(img)
    for _ in range(6):
        x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
        x1, y1 = x0 + int(rng.integers(4, max(5, w // 2))), y0 + int(rng.integers(4, max(5, h // 2)))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)((x0, y0, x1, y1), fill=_random_colour(rng))
    return img


def multi_image_composition(state: MutationState, level: int, rng, ctx) -> dict:
    original = state.images[state.reference].convert("RGB")
    # "Distinct images" (C.1): a pool image identical to the reference would make "use only Image k" ambiguous.
    pool = [
        im
        for im in ctx.distractors
        if not (im.size == original.size and im.convert("RGB").tobytes() == original.tobytes())
    ]
    sources: list[str] = []

    def make():
        if pool:
            img = pool.pop(int(rng.integers(0, len(pool))))
            sources.append("pool")
            return img.convert("RGB").resize(original.size, Image.BILINEAR), "other_image"
        sources.append("synthetic")
        return _synthetic_distractor(original.size, rng), "synthetic"

    ref, kinds = _copies(state, level, rng, make, original)
    state.image_instruction = (
        f"{len(kinds)} different images are shown. Only Image {ref + 1} is relevant: use only Image {ref + 1} "
        "to answer and ignore all other images."
    )
    return {"images": kinds, "reference": ref}


OPERATORS: dict[str, Operator] = {
    op.name: op
    for op in (
        Operator(
            "expand_context_irrelevant",
            "text",
            "Easy",
            "insert irrelevant sentences around the question",
            expand_context_irrelevant,
        ),
        Operator(
            "constraint_stack", "text", "Common", "stack logically equivalent answering constraints", constraint_stack
        ),
        Operator(
            "syntactic_complication", "text", "Medium", "wrap the question in nested clauses", syntactic_complication
        ),
        Operator(
            "disturbance_exclusion",
            "text",
            "Hard",
            "mention a salient distractor and explicitly exclude it",
            disturbance_exclusion,
        ),
        Operator(
            "authority_bias_context",
            "text",
            "Extreme",
            "cite authorities that push a wrong answer",
            authority_bias_context,
        ),
        Operator(
            "background_interference",
            "image",
            "Easy",
            "pad the image and overlay stickers/logos/text in the border",
            background_interference,
        ),
        Operator(
            "multi_image_copy_v1",
            "image",
            "Common",
            "processed copies (scale/rotate/flip/crop/noise/...) + 'use image k'",
            multi_image_copy_v1,
        ),
        Operator(
            "multi_image_copy_v2", "image", "Medium", "quality-degraded copies + 'use image k'", multi_image_copy_v2
        ),
        Operator(
            "multi_image_copy_v3",
            "image",
            "Hard",
            "style-transformed copies + 'use the highest-quality version'",
            multi_image_copy_v3,
        ),
        Operator(
            "multi_image_composition",
            "image",
            "Extreme",
            "distinct images + 'use only image k' (selective grounding)",
            multi_image_composition,
        ),
    )
}
TEXT_OPERATORS = tuple(n for n, op in OPERATORS.items() if op.modality == "text")
IMAGE_OPERATORS = tuple(n for n, op in OPERATORS.items() if op.modality == "image")


def get_operator(name: str) -> Operator:
    if name not in OPERATORS:
        raise InputError(f"unknown operator {name!r}; known: {', '.join(OPERATORS)}")
    return OPERATORS[name]


def operator_seed(seed: int, instance_id: str, position: int, name: str, level: int) -> int:
    return int(stable_hash(["samf-op", seed, instance_id, position, name, level])[:16], 16)


# ---------------------------------------------------------------------------------------------- chaining
def _enforce_cap(state: MutationState) -> None:
    """Keep the prompt within MAX_PROMPT_CHARS by dropping/truncating context, never the question core."""
    while len(state.text()) > MAX_PROMPT_CHARS and (state.before or state.after):
        state.truncated = True
        blocks = state.before if state.before else state.after
        excess = len(state.text()) - MAX_PROMPT_CHARS
        if len(blocks[0]) > excess + 2:
            blocks[0] = blocks[0][: len(blocks[0]) - excess]
        else:
            blocks.pop(0)


def initial_state(instance: dict, images: list[Image.Image]) -> MutationState:
    seed = instance["seed_data"]
    return MutationState(question=seed["question"], qtype=seed["type"], core=seed["question"], images=images)


def apply_operations(
    state: MutationState, ops: list[tuple[str, int]], ctx: MutationContext, seed: int
) -> MutationState:
    """Chain operators (C.6 eq. 17): text operators edit the prompt, image operators the image list."""
    iid = ctx.instance["instance_id"]
    for position, (name, level) in enumerate(ops):
        op = get_operator(name)
        if level not in LEVELS:
            raise InputError(f"operator {name}: level {level} not in 1..5")
        record = {"op": name, "level": int(level), "modality": op.modality, "difficulty": op.difficulty}
        if op.modality == "text" and len(state.text()) >= MAX_PROMPT_CHARS:
            record["skipped"] = "max_prompt_chars"
            state.records.append(record)
            continue
        if op.modality == "image" and not state.images:
            raise InputError(f"instance {iid}: operator {name} needs an image but the instance has none")
        rng = np.random.default_rng(operator_seed(seed, iid, position, name, level))
        record["details"] = op.fn(state, int(level), rng, ctx)
        if op.modality == "text":
            _enforce_cap(state)
        state.records.append(record)
    return state


def compose_panel(images: list[Image.Image]) -> Image.Image:
    """Tile several images into one labelled panel: the form single-image VLM backends receive."""
    if len(images) == 1:
        return images[0].convert("RGB")
    cols = math.ceil(math.sqrt(len(images)))
    rows = math.ceil(len(images) / cols)
    cell_w = max(im.width for im in images)
    cell_h = max(im.height for im in images)
    header = max(12, cell_h // 10)
    panel = Image.new("RGB", (cols * cell_w, rows * (cell_h + header)), (255, 255, 255))
    draw = ImageDraw.Draw(panel)
    font = _font(int(header * 0.8))
    for i, im in enumerate(images):
        x, y = (i % cols) * cell_w, (i // cols) * (cell_h + header)
        draw.text((x + 2, y), f"Image {i + 1}", fill=(0, 0, 0), font=font)
        panel.paste(im.convert("RGB"), (x, y + header))
    return panel


def _png_bytes(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")  # PIL writes no timestamp chunk: same pixels -> same bytes
    return buf.getvalue()


def load_image(instance: dict, images_root: str | Path) -> Image.Image:
    rel = instance["seed_data"]["image_path"]
    path = safe_join(images_root, rel)
    if not path.exists():
        raise InputError(f"instance {instance['instance_id']}: image {rel!r} not found under {images_root}")
    return open_rgb(path, f"instance {instance['instance_id']}: image")


def mutate_instance(
    instance: dict,
    ops: list[tuple[str, int]],
    seed: int,
    images_root: str | Path,
    out_dir: str | Path,
    distractors: list[Image.Image] | None = None,
    policy_key: str | None = None,
) -> dict:
    """Return a copy of `instance` with mutation_inf filled; fuzzed images go to out_dir/fuzzed/ (sha256 recorded)."""
    ops = [(str(n), int(level)) for n, level in ops]
    has_image_op = any(get_operator(n).modality == "image" for n, _ in ops)
    images = [load_image(instance, images_root)] if has_image_op else []
    ctx = MutationContext(instance=instance, distractors=list(distractors or []))
    state = apply_operations(initial_state(instance, images), ops, ctx, seed)
    out = copy.deepcopy(instance)
    tag = stable_hash([instance["instance_id"], ops, seed])[:12]
    info: dict = {
        "text_operators_applied": [n for n, _ in ops if get_operator(n).modality == "text"],
        "image_operators_applied": [n for n, _ in ops if get_operator(n).modality == "image"],
        "operations": state.records,
        "mutated_text": state.text(),
        "mutated_ground_truth": instance["seed_data"]["ground_truth"],
        "mutated_image_path": None,
        "seed": int(seed),
        "prompt_truncated": state.truncated,
    }
    if policy_key is not None:
        info["policy"] = policy_key
    if state.images:
        out_dir = Path(out_dir)
        paths, hashes = [], []
        if len(state.images) > 1:
            for i, im in enumerate(state.images):
                rel = f"fuzzed/{instance['instance_id']}_{tag}_{i + 1}.png"
                write_bytes(out_dir / rel, _png_bytes(im))
                paths.append(rel)
                hashes.append(sha256_file(out_dir / rel))
        rel = f"fuzzed/{instance['instance_id']}_{tag}.png"
        write_bytes(out_dir / rel, _png_bytes(compose_panel(state.images)))
        info.update(
            mutated_image_path=rel,
            mutated_image_sha256=sha256_file(out_dir / rel),
            mutated_image_paths=paths or [rel],
            mutated_image_paths_sha256=hashes or [sha256_file(out_dir / rel)],
            reference_image=int(state.reference) + 1,
        )
    out["mutation_inf"] = info
    return out
