"""transformers VLM backend on tiny random stand-ins of five families (real processor + generate path)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import polars as pl
import pytest
from PIL import Image

from halluflow.answer import answer_shard
from halluflow.backends.base import VLM, BackendInfo, Result, VLMRequest
from halluflow.backends.transformers_vlm import build_tiny_smolvlm, conversation
from halluflow.errors import InputError, MissingExtraError
from halluflow.models import registry
from halluflow.models.model import GenerateConfig, Model, ModelUnderTest
from halluflow.models.standins import MARKER, build_standin, register_builder

# stand-in kind -> the transformers class its folder must reload as
FAMILIES = {
    "llava": "LlavaForConditionalGeneration",
    "llava_next": "LlavaNextForConditionalGeneration",
    "qwen2_vl": "Qwen2VLForConditionalGeneration",
    "gemma3": "Gemma3ForConditionalGeneration",
    "smolvlm": "Idefics3ForConditionalGeneration",
}
# Different sizes and aspect ratios: LLaVA-NeXT picks a different crop grid and Qwen2-VL a different patch grid for
# each, so a batch mixes image-token counts and pixel_values layouts.
SIZES = [(80, 60), (64, 64), (50, 190), (200, 120), (33, 47)]


def ask(request: VLMRequest, max_new_tokens: int) -> VLMRequest:
    return dataclasses.replace(request, max_new_tokens=max_new_tokens)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny_vlm_dir(tmp_path_factory):
    register_builder("smolvlm", build_tiny_smolvlm)
    return build_standin("smolvlm", tmp_path_factory.mktemp("models") / "tiny-smolvlm", seed=0)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    folder = tmp_path_factory.mktemp("img")
    paths = []
    for i, (size, colour) in enumerate(
        zip(SIZES, [(200, 10, 10), (10, 10, 200), (0, 150, 0), (90, 90, 20), (5, 5, 5)])
    ):
        p = folder / f"{i}.png"
        Image.new("RGB", size, colour).save(p)
        paths.append(str(p))
    return paths


def test_standin_is_saved_and_reloaded(tiny_vlm_dir):
    assert (tiny_vlm_dir / "config.json").exists() and (tiny_vlm_dir / MARKER).exists()
    vlm = registry.create("vlm", {"backend": "transformers", "model": str(tiny_vlm_dir)})
    info = vlm.describe()
    assert (
        info.stand_in is True
    )  # from the marker: no explicit stand_in argument given and info.backend == "transformers"
    assert type(vlm.model).__name__ == "Idefics3ForConditionalGeneration"


def test_batched_answers_equal_single_answers(tiny_vlm_dir, images):
    vlm = registry.create("vlm", {"backend": "transformers", "model": str(tiny_vlm_dir), "batch_size": 3})
    reqs = [
        VLMRequest(str(i), q, p, max_new_tokens=5)
        for i, (q, p) in enumerate(
            zip(["Is there a dog?", "Describe this picture in detail.", "Is the cat black?"], images)
        )
    ]
    batched = vlm.answer(reqs)
    single = [vlm.answer([r])[0] for r in reqs]
    assert batched == single  # left padding keeps each row's greedy continuation
    assert all(isinstance(a, str) for a in batched)
    assert vlm.answer(reqs) == batched  # deterministic


def test_mixed_text_and_image_requests_and_history(tiny_vlm_dir, images):
    vlm = registry.create("vlm", {"backend": "transformers", "model": str(tiny_vlm_dir)})
    reqs = [
        VLMRequest("a", "Is there a dog?", images[0]),
        VLMRequest("b", "What is the capital of France?", None),
        VLMRequest("c", "And a cat?", images[1], history=(("Is there a dog?", "Yes."),)),
    ]
    out = vlm.answer([ask(r, 3) for r in reqs])
    assert len(out) == 3
    msgs = conversation(reqs[2])
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[0]["content"][0] == {"type": "image"} and all(c["type"] == "text" for c in msgs[2]["content"])


def test_missing_image_names_the_file(tiny_vlm_dir, tmp_path):
    vlm = registry.create("vlm", {"backend": "transformers", "model": str(tiny_vlm_dir)})
    with pytest.raises(InputError, match="missing.png"):
        vlm.answer([VLMRequest("a", "Is there a dog?", str(tmp_path / "missing.png"))])


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {kind: build_standin(kind, root / kind, seed=0) for kind in FAMILIES}


@pytest.fixture(scope="module")
def release(images):
    """Queries over images of five sizes, yes/no and generative mixed (generative prompts are longer)."""
    folder = Path(images[0]).parent
    questions = [
        ("Is there a dog in the picture?", "discriminative"),
        ("Describe this picture.", "generative"),
        ("Is there a red cat on a chair in the picture?", "discriminative"),
        ("Is the sky blue?", "discriminative"),
        ("What do you see? Describe every object and its colour.", "generative"),
        ("Is there a car?", "discriminative"),
        ("Is there a tree?", "discriminative"),
    ]
    rows = [
        {"query_id": f"q{i}", "image": Path(images[i % len(images)]).name, "question": q, "task": task}
        for i, (q, task) in enumerate(questions)
    ]
    return pl.DataFrame(rows), folder


@pytest.mark.parametrize("kind", list(FAMILIES))
def test_family_answers_batches_of_mixed_image_sizes_through_the_answer_stage(kind, family_dirs, release, tmp_path):
    queries, root = release
    spec = {"name": kind, "backend": "transformers", "args": {"model": str(family_dirs[kind]), "batch_size": 4}}
    model = ModelUnderTest(spec)
    out = tmp_path / "answers.parquet"
    stats = answer_shard(queries, root, model, tmp_path / "cache", out, settings={"batch_size": 7})
    assert stats["new"] == 7 and stats["failed"] == 0
    backend = model.backend
    assert type(backend.model).__name__ == FAMILIES[kind]  # reloaded from the saved folder by from_pretrained
    table = pl.read_parquet(out).sort("query_id")
    assert set(table["status"]) == {"ok"} and table["stand_in"].all()  # labelled from the folder's marker
    generation = {r["query_id"]: json.loads(r["generation"]) for r in table.iter_rows(named=True)}
    assert generation["q1"]["max_new_tokens"] == 24 and generation["q0"]["max_new_tokens"] == 6
    # Each batch mixed image sizes (and for LLaVA-NeXT / Qwen2-VL image-token counts); answering every request
    # alone must give the same text, so padding and the image layout kept the rows apart.
    alone = {}
    for r in queries.iter_rows(named=True):
        task_len = 24 if r["task"] == "generative" else 6
        suffix = " Answer yes or no." if r["task"] == "discriminative" else ""
        request = VLMRequest(r["query_id"], r["question"] + suffix, str(root / r["image"]), max_new_tokens=task_len)
        alone[r["query_id"]] = backend.respond([request])[0].text
    assert dict(zip(table["query_id"], table["answer"])) == alone
    assert all(a == a.strip() for a in table["answer"])
    assert len(set(table["answer"])) > 1  # different images and questions: not one constant reply


def test_two_images_in_one_prompt_reach_the_model(family_dirs, images):
    vlm = registry.create("vlm", {"backend": "transformers", "model": str(family_dirs["qwen2_vl"]), "max_images": 2})
    two = VLMRequest("a", "Which picture is brighter?", images=(images[0], images[2]), max_new_tokens=4)
    enc_texts = vlm.batches([two])[0][2]
    assert enc_texts[0].count("<|vision_start|>") == 2  # both images in the prompt, not tiled
    assert vlm.respond([two])[0].note is None
    one = registry.create("vlm", {"backend": "transformers", "model": str(family_dirs["qwen2_vl"]), "max_images": 1})
    result = one.respond([two])[0]
    assert result.ok and "2 images tiled into one" in result.note


def test_request_settings_override_backend_defaults(family_dirs, images):
    vlm = registry.create("vlm", {"backend": "transformers", "model": str(family_dirs["llava"]), "max_new_tokens": 2})
    short = VLMRequest("a", "Describe the picture.", images[0])
    long = dataclasses.replace(short, request_id="b", max_new_tokens=12)
    # One call, two settings: grouped into two generate calls, each request answered with its own length.
    both = vlm.answer([short, long])
    n_short = len(vlm.tokenizer(both[0], add_special_tokens=False)["input_ids"])
    n_long = len(vlm.tokenizer(both[1], add_special_tokens=False)["input_ids"])
    assert n_short <= 2 < n_long <= 12
    assert (
        vlm.generation_settings(long)["max_new_tokens"] == 12 and vlm.generation_settings(short)["max_new_tokens"] == 2
    )


def test_builder_is_deterministic(tmp_path):
    build_tiny_smolvlm(tmp_path / "a", seed=3)
    build_tiny_smolvlm(tmp_path / "b", seed=3)
    a, b = tmp_path / "a", tmp_path / "b"
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()


def test_vllm_backend_names_its_extra_when_missing():
    pytest.importorskip("torch")
    try:
        import vllm  # noqa: F401
    except ModuleNotFoundError:
        with pytest.raises(MissingExtraError, match=r"halluflow\[vllm\]"):
            registry.create("vlm", {"backend": "vllm", "model": "any/model"})
    else:
        pytest.skip("vllm is installed: the engine itself needs a GPU")


# ---- the one call path every VLM backend shares (base.VLM.respond) and the one evaluatee ----------------------------


class EchoVLM(VLM):
    """Answers with padding whitespace and what it received; fails requests whose prompt says so."""

    max_images = 1

    def __init__(self, calls: list | None = None):
        self.calls = [] if calls is None else calls

    def describe(self) -> BackendInfo:
        return BackendInfo("vlm", "echo", "echo", None, False)

    def answer_results(self, requests):
        self.calls.append(list(requests))
        return [
            Result(None, "boom")
            if "fail" in r.prompt
            else Result(f"  {len(r.images)} {self.settings_for(r)['max_new_tokens']}\n")
            for r in requests
        ]

    def answer(self, requests):
        return [r.text for r in self.answer_results(requests)]


def test_request_keeps_image_path_and_lists_images():
    assert VLMRequest("a", "q", "x.png").images == ("x.png",)
    assert VLMRequest("a", "q", images=("x.png", "y.png")).image_path == "x.png"
    assert VLMRequest("a", "q").images == () and VLMRequest("a", "q").image_path is None
    with pytest.raises(ValueError, match="is not images"):
        VLMRequest("a", "q", "z.png", images=("x.png",))


def test_respond_strips_answers_and_tiles_extra_images(images):
    vlm = EchoVLM()
    two = VLMRequest("a", "q", images=(images[0], images[2]), max_new_tokens=3)
    results = vlm.respond([two, VLMRequest("b", "q", images[1])])
    assert [r.text for r in results] == ["1 3", f"1 {vlm.max_new_tokens}"]  # stripped; request setting or default
    assert "2 images tiled into one" in results[0].note and results[1].note is None
    tiled = Image.open(vlm.calls[0][0].image_path)
    # same height, widths scaled to it: 80x60 → 253x190 beside 50x190
    assert tiled.size == (round(80 * 190 / 60) + 50, 190)


def test_model_under_test_stamps_answer_length_and_counts_failures(monkeypatch):
    monkeypatch.setitem(registry.VLMS._targets, "echo", "test_backends_vlm:EchoVLM")
    ev = Model.under_test(
        {"name": "e", "backend": "echo", "stand_in": True}, config=GenerateConfig(max_new_tokens=9), method="test"
    )
    out = ev.answer([VLMRequest("a", "q"), VLMRequest("b", "please fail"), VLMRequest("c", "q", max_new_tokens=2)])
    assert out == ["0 9", "", "0 2"] and ev.failed == 1
    assert ev.describe().stand_in is True  # the spec's label, though the backend does not know it


def test_served_and_vllm_requests_carry_every_image(images):
    from halluflow.backends.openai_http import request_messages

    request = VLMRequest("a", "Which is brighter?", images=(images[0], images[1]), history=(("Hi", "Hello"),))
    first = request_messages(request, "Be brief.")[1]["content"]
    assert [part["type"] for part in first] == ["image_url", "image_url", "text"]
    assert first[0]["image_url"]["url"].startswith("data:image/png;base64,") and first[0] != first[1]
