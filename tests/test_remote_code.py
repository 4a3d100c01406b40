"""Remote code (`trust_remote_code`) as an explicit, pinned opt-in, on tiny models whose code lives in their folder.

Each tiny model folder carries its own `configuration_tiny.py` / `modeling_tiny.py` (an existing architecture's
classes under a new model_type) and a config.json whose `auto_map` points at them, the layout InternVL, MiniCPM-V
and Phi-3.5-vision use on the Hub. Without the opt-in loading is refused in one line; with it and the local folder
the code in the folder really runs (the loaded class comes from transformers' dynamic-module cache) and answers; a
Hub id with a moving revision is refused at planning time, before any download or job.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import OBJECTS, write_pope_set

from halluflow.backends.base import VLMRequest
from halluflow.backends.tiny_vlms import _text_config
from halluflow.cli import main
from halluflow.errors import ConfigError
from halluflow.models import check_config_models, registry, resolve, resolve_llm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

HUB_ID = "OpenGVLab/InternVL2-1B"  # never downloaded: every Hub case here is refused before loading
COMMIT = "0123456789abcdef0123456789abcdef01234567"
WORDS = ["<unk>", "<pad>", "<eos>", "user", "assistant", "yes", "no", "is", "there", "a", "cat", "?", ":"]
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}assistant : {% endif %}"
)


def write_own_code(folder: Path, base: str, model_type: str, model_class: str) -> None:
    """Turn a saved `base` model folder into one with its own code: config + modeling modules and auto_map."""
    (folder / "configuration_tiny.py").write_text(
        f"from transformers import {base}Config\n\n\n"
        f"class TinyRemoteConfig({base}Config):\n    model_type = {model_type!r}\n"
    )
    (folder / "modeling_tiny.py").write_text(
        f"from transformers import {model_class.replace('TinyRemote', base)}\n\n"
        "from .configuration_tiny import TinyRemoteConfig\n\n\n"
        f"class {model_class}({model_class.replace('TinyRemote', base)}):\n"
        "    config_class = TinyRemoteConfig\n"
        "    RAN_FROM_THE_FOLDER = True\n"
    )
    config = json.loads((folder / "config.json").read_text())
    auto = "AutoModelForCausalLM" if model_class.endswith("CausalLM") else "AutoModelForImageTextToText"
    config.update(
        model_type=model_type,
        architectures=[model_class],
        auto_map={"AutoConfig": "configuration_tiny.TinyRemoteConfig", auto: f"modeling_tiny.{model_class}"},
    )
    (folder / "config.json").write_text(json.dumps(config, indent=2))


@pytest.fixture(scope="module")
def llm_dir(tmp_path_factory) -> Path:
    """A 2-layer Llama (word-level tokenizer, 13 words) under model_type tiny_remote_llm, its code in the folder."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("models") / "tiny-remote-llm"
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>", chat_template=CHAT_TEMPLATE
    )
    # The stand-ins' own tiny Llama text config (2 layers, hidden 16), sized to this 13-word vocabulary.
    config = LlamaConfig(**_text_config(tokenizer, 16, max_position_embeddings=64))
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    write_own_code(folder, "Llama", "tiny_remote_llm", "TinyRemoteForCausalLM")
    return folder


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory) -> Path:
    """The tiny SmolVLM stand-in (Idefics3) under model_type tiny_remote_vlm, its code in the folder."""
    from halluflow.backends.transformers_vlm import build_tiny_smolvlm

    folder = tmp_path_factory.mktemp("models") / "tiny-remote-vlm"
    build_tiny_smolvlm(folder, seed=0)
    write_own_code(folder, "Idefics3", "tiny_remote_vlm", "TinyRemoteForConditionalGeneration")
    return folder


def assert_one_line(message: str, *parts: str) -> None:
    assert "\n" not in message.strip() and "Traceback" not in message, message
    for part in parts:
        assert part in message, (part, message)


def test_llm_folder_with_its_own_code_is_refused_in_one_line_without_the_opt_in(llm_dir):
    with pytest.raises(ConfigError) as exc:
        registry.create("llm", {"backend": "transformers", "model": str(llm_dir)})
    assert_one_line(str(exc.value), str(llm_dir), "ships its own Python code", "trust_remote_code: true")


def test_llm_with_the_opt_in_runs_the_code_in_its_folder_and_generates(llm_dir):
    block = {"backend": "transformers", "model": str(llm_dir), "trust_remote_code": True, "max_new_tokens": 3}
    resolve_llm(block)  # the plan-time check accepts a local folder: its code is the user's own
    llm = registry.create("llm", block)
    cls = type(llm.model)
    # The class defined in the folder's modeling_tiny.py, imported from transformers' dynamic-module cache.
    assert cls.__name__ == "TinyRemoteForCausalLM" and cls.RAN_FROM_THE_FOLDER
    assert cls.__module__.startswith("transformers_modules")
    assert llm.model.config.model_type == "tiny_remote_llm"
    replies = llm.chat_batch([[{"role": "user", "content": "is there a cat ?"}]] * 2)
    assert len(replies) == 2 and replies[0] == replies[1]  # greedy: the same prompt, the same reply
    info = llm.describe().as_dict()
    assert info["extra"] == {
        "trust_remote_code": True,
        "device": "cpu",
        "dtype": "float32",
        "attn_implementation": "sdpa",
    } and info["model"] == str(llm_dir)


def test_blind_baseline_forwards_the_opt_in_to_its_language_model(llm_dir):
    spec = {"name": "blind-remote", "backend": "blind", "args": {"model": str(llm_dir), "trust_remote_code": True}}
    vlm = registry.create("vlm", {"backend": "blind", **resolve(spec).args})
    assert type(vlm.llm.model).__name__ == "TinyRemoteForCausalLM"
    assert vlm.describe().as_dict()["extra"] == {
        "image_input": False,
        "trust_remote_code": True,
        "device": "cpu",
        "dtype": "float32",
        "attn_implementation": "sdpa",
    }
    assert vlm.respond([VLMRequest("q0", "is there a cat ?", max_new_tokens=2)])[0].ok
    with pytest.raises(ConfigError) as exc:  # the same pin rule through the forwarded signature
        resolve({**spec, "args": {"model": HUB_ID, "trust_remote_code": True, "revision": "main"}})
    assert_one_line(str(exc.value), "blind", "pin it with revision")


def test_vlm_with_the_opt_in_runs_the_code_in_its_folder_and_answers(vlm_dir, tmp_path):
    from PIL import Image

    image = tmp_path / "a.png"
    Image.new("RGB", (64, 64), (200, 30, 30)).save(image)
    spec = {"name": "tiny-remote", "backend": "transformers", "args": {"model": str(vlm_dir)}}
    with pytest.raises(ConfigError) as exc:
        registry.create("vlm", {"backend": "transformers", **spec["args"]})
    assert_one_line(str(exc.value), "ships its own Python code")

    spec["args"].update(trust_remote_code=True, max_new_tokens=4)
    resolved = resolve(spec)  # accepted at planning time
    vlm = registry.create("vlm", {"backend": "transformers", **resolved.args})
    assert type(vlm.model).__name__ == "TinyRemoteForConditionalGeneration" and type(vlm.model).RAN_FROM_THE_FOLDER
    results = vlm.respond([VLMRequest("q0", "Is there a cat in the image?", str(image), max_new_tokens=4)])
    assert len(results) == 1 and results[0].ok and results[0].text  # random weights: some text, generated
    extra = vlm.describe().as_dict()["extra"]
    assert extra == {
        "architecture": "TinyRemoteForConditionalGeneration",
        "trust_remote_code": True,
        "device": "cpu",
        "dtype": "float32",
        "attn_implementation": "sdpa",
    }


@pytest.mark.parametrize("role", ["vlm", "llm"])
@pytest.mark.parametrize("revision", [None, "main", "v1.0", COMMIT[:12], COMMIT.upper()])
def test_hub_id_without_a_pinned_commit_is_refused_at_planning_time(role, revision):
    args = {"model": HUB_ID, "trust_remote_code": True, **({"revision": revision} if revision else {})}
    config = {"models": [{"name": "internvl", "backend": "transformers", "args": args}]}
    key = "models.0.args"
    if role == "llm":
        config, key = {"cedi": {"llm": {"backend": "transformers", **args}}}, "cedi.llm"
    with pytest.raises(ConfigError) as exc:
        check_config_models(config)
    said = f"revision is {revision!r}" if revision else "no revision is given"
    assert_one_line(str(exc.value), f"config key {key!r}", "pin it with revision: <40-hex commit>", said)


@pytest.mark.parametrize("role", ["vlm", "llm"])
def test_hub_id_pinned_to_a_commit_passes_planning_and_off_needs_no_pin(role):
    pinned = {"model": HUB_ID, "trust_remote_code": True, "revision": COMMIT}
    for args in (pinned, {"model": HUB_ID, "trust_remote_code": False, "revision": "main"}):
        if role == "vlm":
            resolve({"name": "internvl", "backend": "transformers", "args": args})
        else:
            resolve_llm({"backend": "transformers", **args})
    with pytest.raises(ConfigError) as exc:  # a type the backend cannot take, named like every argument
        resolve({"name": "internvl", "backend": "transformers", "args": {**pinned, "trust_remote_code": "yes"}})
    assert_one_line(str(exc.value), "'trust_remote_code'", "true/false")


@pytest.mark.parametrize("role", ["vlm", "llm"])
def test_library_callers_get_the_same_refusal_before_any_download(role, monkeypatch):
    # Offline: a refusal that came after a Hub lookup would fail differently (or hang), not with the pin line.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError) as exc:
        registry.create(role, {"backend": "transformers", "model": HUB_ID, "trust_remote_code": True})
    assert_one_line(str(exc.value), f"model {HUB_ID!r}", "no revision is given", "pin it with revision")


def answer_run(tmp_path: Path, *args: str) -> tuple[list[str], Path]:
    pope = write_pope_set(tmp_path / "pope")
    out = tmp_path / "answers.jsonl"
    argv = ["answer", "run", "--source", "pope", "--questions", str(pope / "pope.jsonl"), "--images"]
    argv += [str(pope / "images"), "--backend", "transformers", "--name", "internvl", "--out", str(out)]
    return [*argv, *args], out


def test_cli_answer_run_refuses_remote_code_on_a_moving_revision_in_one_line(tmp_path, capsys):
    argv, out = answer_run(tmp_path, "--arg", f"model={HUB_ID}", "--arg", "trust_remote_code=true")
    code = main(argv)
    err = capsys.readouterr().err
    assert code != 0 and not out.exists()
    assert_one_line(err, "'internvl'", "trust_remote_code", "pin it with revision: <40-hex commit>")
    assert not (tmp_path / "answers.jsonl.cache").exists()  # refused before the model was built or anything cached


def test_cli_answer_run_on_a_folder_with_its_own_code_needs_the_opt_in_then_answers(vlm_dir, tmp_path, capsys):
    argv, out = answer_run(tmp_path, "--arg", f"model={vlm_dir}")
    code = main(argv)
    err = capsys.readouterr().err
    assert code != 0
    assert_one_line(err, "ships its own Python code", "trust_remote_code: true")

    code = main([*argv, "--arg", "trust_remote_code=true"])
    capsys.readouterr()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert code == 0 and len(rows) == len(OBJECTS) and {r["status"] for r in rows} == {"ok"}


def test_workflow_dry_run_refuses_a_moving_revision_before_any_job(tmp_path):
    """`snakemake -n` with a remote-code model on `revision: main`: stopped while planning, one line, no results."""
    import yaml
    from workflow_utils import copy_workflow, run_snakemake

    work = copy_workflow(tmp_path / "wf")
    config = yaml.safe_load((work / "config.yaml").read_text())
    remote = {"model": HUB_ID, "revision": "main", "trust_remote_code": True, "device": "cuda"}
    config["models"].append({"name": "internvl", "backend": "transformers", "args": remote})
    (work / "override.yaml").write_text(yaml.safe_dump(config))
    proc = run_snakemake(work, "-n", "--configfile", "config.yaml", "override.yaml", check=False, timeout=300)
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in said, said[-2000:]
    index = len(config["models"]) - 1
    assert f"config key 'models.{index}.args': model 'internvl'" in said and "pin it with revision" in said
    assert not (work / "results").exists()


def test_vllm_backend_takes_remote_code_under_the_same_pin_rule(monkeypatch):
    """The vLLM engine backend: refused at planning time on a moving revision (also through engine_args), and with a
    pin the flag reaches vllm.LLM and the manifest record. vLLM needs a GPU, so its LLM class is replaced by one
    that records its arguments (the backend's own code runs unchanged)."""
    import sys
    import types

    moving = {"model": HUB_ID, "revision": "main", "trust_remote_code": True}
    for args, key, said in (
        (moving, "models.0.args", "pin it with revision: <40-hex commit>"),
        (
            {"model": HUB_ID, "revision": COMMIT, "engine_args": {"trust_remote_code": True}},
            "models.0.args",
            "engine_args.trust_remote_code is not taken",
        ),
    ):
        with pytest.raises(ConfigError) as exc:
            check_config_models({"models": [{"name": "internvl", "backend": "vllm", "args": args}]})
        assert_one_line(str(exc.value), f"config key {key!r}", "'internvl'", said)
    check_config_models({"models": [{"name": "internvl", "backend": "vllm", "args": {**moving, "revision": COMMIT}}]})

    engines: list[dict] = []
    fake = types.ModuleType("vllm")
    fake.LLM = lambda **kwargs: engines.append(kwargs)
    monkeypatch.setitem(sys.modules, "vllm", fake)
    with pytest.raises(ConfigError) as exc:  # library callers: refused before the engine is built
        registry.create("vlm", {"backend": "vllm", **moving})
    assert_one_line(str(exc.value), f"model {HUB_ID!r}", "revision is 'main'") and not engines
    vlm = registry.create("vlm", {"backend": "vllm", **moving, "revision": COMMIT})
    assert engines[-1]["trust_remote_code"] is True and engines[-1]["revision"] == COMMIT
    assert vlm.describe().as_dict()["extra"] == {"trust_remote_code": True}
    registry.create("vlm", {"backend": "vllm", "model": HUB_ID})
    assert engines[-1]["trust_remote_code"] is False  # off by default, whatever vLLM's own default
