"""transformers VLM backend on the tiny random SmolVLM/Idefics3 stand-in (real processor + generate path)."""

from __future__ import annotations

import pytest
from PIL import Image

from halluflow import registry
from halluflow.backends.base import VLMRequest
from halluflow.backends.transformers_vlm import build_tiny_smolvlm, conversation
from halluflow.errors import InputError, MissingExtraError
from halluflow.standins import MARKER, build_standin, register_builder


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny_vlm_dir(tmp_path_factory):
    register_builder("smolvlm", build_tiny_smolvlm)
    return build_standin("smolvlm", tmp_path_factory.mktemp("models") / "tiny-smolvlm", seed=0)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    folder = tmp_path_factory.mktemp("img")
    paths = []
    for i, (size, colour) in enumerate([((80, 60), (200, 10, 10)), ((64, 64), (10, 10, 200)), ((50, 90), (0, 150, 0))]):
        p = folder / f"{i}.png"
        Image.new("RGB", size, colour).save(p)
        paths.append(str(p))
    return paths


def test_standin_is_saved_and_reloaded(tiny_vlm_dir):
    assert (tiny_vlm_dir / "config.json").exists() and (tiny_vlm_dir / MARKER).exists()
    vlm = registry.create("vlm", {"backend": "transformers", "model": str(tiny_vlm_dir)})
    info = vlm.describe()
    assert info.stand_in is True  # from the marker: no explicit stand_in argument given and info.backend == "transformers"
    assert type(vlm.model).__name__ == "Idefics3ForConditionalGeneration"


def test_batched_answers_equal_single_answers(tiny_vlm_dir, images):
    vlm = registry.create("vlm", {"backend": "transformers", "model": str(tiny_vlm_dir), "batch_size": 3})
    reqs = [VLMRequest(str(i), q, p) for i, (q, p) in enumerate(zip(["Is there a dog?", "Describe this picture in detail.", "Is the cat black?"], images))]
    batched = vlm.answer(reqs, max_new_tokens=5)
    single = [vlm.answer([r], max_new_tokens=5)[0] for r in reqs]
    assert batched == single  # left padding keeps each row's greedy continuation
    assert all(isinstance(a, str) for a in batched)
    assert vlm.answer(reqs, max_new_tokens=5) == batched  # deterministic


def test_mixed_text_and_image_requests_and_history(tiny_vlm_dir, images):
    vlm = registry.create("vlm", {"backend": "transformers", "model": str(tiny_vlm_dir)})
    reqs = [
        VLMRequest("a", "Is there a dog?", images[0]),
        VLMRequest("b", "What is the capital of France?", None),
        VLMRequest("c", "And a cat?", images[1], history=(("Is there a dog?", "Yes."),)),
    ]
    out = vlm.answer(reqs, max_new_tokens=3)
    assert len(out) == 3
    msgs = conversation(reqs[2])
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[0]["content"][0] == {"type": "image"} and all(c["type"] == "text" for c in msgs[2]["content"])


def test_missing_image_names_the_file(tiny_vlm_dir, tmp_path):
    vlm = registry.create("vlm", {"backend": "transformers", "model": str(tiny_vlm_dir)})
    with pytest.raises(InputError, match="missing.png"):
        vlm.answer([VLMRequest("a", "Is there a dog?", str(tmp_path / "missing.png"))])


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
