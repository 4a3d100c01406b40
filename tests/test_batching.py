"""Local VLM batching: requests sorted by image size and prompt length, answers in request order, identical to
answering one request at a time (greedy decoding), on tiny random stand-ins of the five families."""

from __future__ import annotations

import random

import pytest
from helpers import VLM_FAMILIES
from PIL import Image

from halluflow.backends.base import VLMRequest
from halluflow.backends.transformers_vlm import batch_order, image_size
from halluflow.models import registry

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# Aspect ratios and sizes that give LLaVA-NeXT different crop grids, Qwen2-VL different patch grids and Idefics3
# (SmolVLM) different tile counts, so one padded batch mixes image-token counts and pixel_values layouts.
SIZES = [(80, 60), (64, 64), (50, 190), (200, 120), (33, 47), (128, 32)]
PROMPTS = [
    "Is there a dog?",
    "Describe this picture in detail, naming every object, its colour and where it is.",
    "Is the cat black? Answer yes or no.",
    "What is in the picture?",
    "Is there a red car parked beside a tall green tree in this picture? Answer yes or no.",
    "Colour?",
    "How many birds are there on the wire above the street?",
    "Is it day or night in this picture?",
    "Name the largest object.",
]


@pytest.fixture(scope="module")
def requests_mixed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("batching-img")
    rng = random.Random(0)
    paths = []
    for i, size in enumerate(SIZES):
        p = folder / f"{i}.png"
        # Noise, not a flat colour: images of one size must still differ, so a row mixed up with its neighbour shows.
        im = Image.new("RGB", size)
        im.putdata([tuple(rng.randrange(256) for _ in range(3)) for _ in range(size[0] * size[1])])
        im.save(p)
        paths.append(str(p))
    return [
        VLMRequest(f"r{i}", prompt, paths[(3 * i) % len(paths)], max_new_tokens=8) for i, prompt in enumerate(PROMPTS)
    ]


def test_batch_order_sorts_by_image_size_then_prompt_length_stably():
    texts = ["long prompt", "x", "mid one", "x", "long prompt"]
    sizes = [((64, 64),), ((32, 32),), ((64, 64),), ((64, 64),), ((32, 32),)]
    assert batch_order([0, 1, 2, 3, 4], texts, sizes) == [1, 4, 3, 2, 0]
    assert batch_order([4, 0], texts, sizes) == [4, 0]  # only the given indices, sorted


def test_image_size_reads_the_header_and_tolerates_a_missing_file(tmp_path):
    p = tmp_path / "a.png"
    Image.new("RGB", (17, 9)).save(p)
    assert image_size(str(p)) == (17, 9)
    assert image_size(str(tmp_path / "missing.png")) == (0, 0)  # the load itself names the file later


@pytest.mark.parametrize("kind", VLM_FAMILIES)
def test_batched_answers_equal_unbatched_in_request_order(kind, vlm_family_dirs, requests_mixed):
    vlm = registry.create("vlm", {"backend": "transformers", "model": str(vlm_family_dirs[kind]), "batch_size": 4})
    batches = vlm.batches(requests_mixed)
    # The test means something only if batches really mix image sizes and prompt lengths (padding on both).
    assert max(len(idx) for _, idx, _ in batches) == 4
    assert any(len({image_size(requests_mixed[i].image_path) for i in idx}) > 1 for _, idx, _ in batches)
    assert any(len({len(t) for t in texts}) > 1 for _, _, texts in batches)
    assert sorted(i for _, idx, _ in batches for i in idx) == list(range(len(requests_mixed)))

    batched = vlm.answer(requests_mixed)
    vlm.batch_size = 1
    unbatched = vlm.answer(requests_mixed)
    assert batched == unbatched, kind
    assert len(set(batched)) > 1  # different images and prompts: not one constant reply
    # Results come back in the caller's order whatever order the batches ran in.
    vlm.batch_size = 4
    shuffled = list(range(len(requests_mixed)))
    random.Random(1).shuffle(shuffled)
    again = vlm.answer([requests_mixed[i] for i in shuffled])
    assert again == [batched[i] for i in shuffled]
