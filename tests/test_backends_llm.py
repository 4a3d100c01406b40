"""The `llm` role on the REAL SmolLM2-135M-Instruct (packaged GGUF → HF folder) and the blind baseline."""

from __future__ import annotations

import pytest
from helpers import REPO

from halluflow.backends.base import VLMRequest
from halluflow.errors import ConfigError, InputError
from halluflow.models import LOCAL_LLM, registry

LLM_DIR = str(REPO / LOCAL_LLM)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def llm():
    # Shared cache under resources/models (git-ignored): converted once (~25 s), then loads in < 1 s.
    return registry.create("llm", {"backend": "transformers", "model": LLM_DIR, "max_new_tokens": 8})


def test_llm_chat_is_deterministic_and_batched(llm):
    messages = [{"role": "user", "content": "Is the sky blue? Answer yes or no."}]
    first = llm.chat(messages)
    assert first and isinstance(first, str)
    # Batching with left padding must not change a greedy answer.
    batch = llm.chat_batch([[{"role": "user", "content": "Name one fruit that is yellow."}], messages])
    assert batch[1] == first
    assert llm.chat(messages) == first


def test_llm_describe_and_system_prompt(llm):
    info = llm.describe()
    assert info.role == "llm" and info.backend == "transformers" and info.stand_in is False
    assert "smollm2-135m-instruct" in info.model
    text = llm.template([{"role": "system", "content": "Only say OK."}, {"role": "user", "content": "hi"}])
    assert "Only say OK." in text and text.count("<|im_start|>system") == 1


def test_llm_bad_message_names_the_item(llm):
    with pytest.raises(InputError, match="chat message 0"):
        llm.chat([{"content": "no role"}])


def test_llm_missing_local_folder_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        registry.create("llm", {"backend": "transformers", "model": str(tmp_path / "nope")})


def test_blind_vlm_ignores_the_image_and_supports_history(llm):
    blind = registry.create("vlm", {"backend": "blind", "model": LLM_DIR, "max_new_tokens": 8})
    q = "Is there a dog in the picture? Answer yes or no."
    with_image = blind.answer([VLMRequest("a", q, "/nonexistent/image.png")])
    without = blind.answer([VLMRequest("b", q, None)])
    assert with_image == without  # the image is never opened: a missing file is fine
    assert with_image[0] == llm.chat([{"role": "user", "content": q}])
    history = blind.answer([VLMRequest("c", "And a cat?", None, history=(("Is there a dog?", "Yes."),))])
    assert isinstance(history[0], str)
    # How the language model runs is recorded with it (dtype auto = float32 on the CPU; sdpa chosen by auto).
    assert blind.describe().extra == {
        "image_input": False,
        "device": "cpu",
        "dtype": "float32",
        "attn_implementation": "sdpa",
    }
    assert len(blind.answer([VLMRequest("d", q, None, max_new_tokens=1)])[0].split()) <= 2  # the request's own length
