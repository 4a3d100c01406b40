"""Offline stand-in models: tiny, randomly initialised models built from a config in code.

No model hub is reachable in CI, so — as diffusers and transformers test themselves — the workflow builds tiny
random models with the real classes, saves them with `save_pretrained`, and the real backends load them with
`from_pretrained`. Their outputs are noise; every model folder carries a marker file so every output says so.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError, InputError, MissingExtraError
from ..io import read_json, replace_folder, write_json

# Written last into every stand-in folder: backends read it to label their outputs `stand_in: true`.
MARKER = "halluflow_standin.json"

# kind -> "package.module:function" (imported lazily, so building a detector never imports diffusers) or a callable.
_BUILDERS: dict[str, str | Callable] = {}


def register_builder(kind: str, target: str | Callable) -> None:
    """Register a builder `fn(out_dir: Path, seed: int, **cfg) -> dict | None` (the dict is added to the marker).

    A builder writes a folder its backend loads with `from_pretrained` (or a weights file) and raises ConfigError
    for settings it does not know. Example: register_builder("smolvlm", "halluflow.backends.tiny_vlms:build_tiny_smolvlm")."""
    _BUILDERS[kind] = target


def _missing_extra(exc: ModuleNotFoundError, what: str) -> MissingExtraError | None:
    from .registry import EXTRA_FOR_MODULE

    missing = (exc.name or "").split(".")[0]
    if missing not in EXTRA_FOR_MODULE:
        return None
    return MissingExtraError(
        f"{what} needs the package {missing!r}: pip install 'halluflow[{EXTRA_FOR_MODULE[missing]}]'"
    )


def builder_kinds() -> list[str]:
    return sorted(_BUILDERS)


def _resolve(kind: str) -> Callable:
    if kind not in _BUILDERS:
        raise ConfigError(f"unknown stand-in kind {kind!r}; known: {', '.join(builder_kinds())}")
    target = _BUILDERS[kind]
    if callable(target):
        return target
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Same actionable message as the backend registry: name the extra to install.
        error = _missing_extra(exc, f"stand-in {kind!r}")
        if error is None:
            raise
        raise error from exc
    return getattr(module, attr)


def build_standin(kind: str, out_dir: str | os.PathLike, seed: int = 0, **cfg: Any) -> Path:
    """Build the stand-in `kind` into `out_dir` (replaced atomically: the folder is complete or absent)."""
    builder = _resolve(kind)
    out_dir = Path(out_dir)
    _check_replaceable(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".part", dir=out_dir.parent))
    try:
        try:
            import torch

            # Seeding the global generator is how the tiny models get reproducible random weights.
            torch.manual_seed(seed)
            facts = builder(tmp, seed=seed, **cfg) or {}
        except ModuleNotFoundError as exc:
            error = _missing_extra(exc, f"stand-in {kind!r}")
            if error is None:
                raise
            raise error from exc
        write_json(tmp / MARKER, {"kind": kind, "seed": seed, "config": cfg, "stand_in": True, **facts})
        replace_folder(tmp, out_dir)  # the old stand-in stays whole until the new one is complete
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(tmp)
        raise
    return out_dir


def _check_replaceable(out_dir: Path) -> None:
    """Only a stand-in folder (it carries MARKER) or an empty one is replaced: `out` may be a typo for a real folder."""
    if not out_dir.exists() and not out_dir.is_symlink():
        return
    if not out_dir.is_dir() or out_dir.is_symlink():
        raise InputError(f"{out_dir}: exists and is not a folder; give a new or stand-in folder to build into")
    if not (out_dir / MARKER).is_file() and any(out_dir.iterdir()):
        raise InputError(
            f"{out_dir}: exists and is not a stand-in folder (no {MARKER}); refusing to replace it "
            "(give a new folder, or remove this one yourself)"
        )


def standin_info(model: str | os.PathLike) -> dict | None:
    """The marker of a stand-in folder (or of the folder holding a stand-in weights file), else None."""
    path = Path(model)
    for folder in (path, path.parent):
        marker = folder / MARKER
        if marker.is_file():
            return read_json(marker)
    return None


def tiny_clip_tokenizer(max_length: int = 77):
    """A CLIP BPE tokenizer over single bytes (no merges): built in code, no download, real CLIPTokenizer class."""
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import CLIPTokenizer

    alphabet = sorted(ByteLevel.alphabet())
    vocab: dict[str, int] = {}
    # CLIP marks the last symbol of a word with "</w>", so both forms of every byte are needed.
    for symbol in alphabet + [c + "</w>" for c in alphabet] + ["<|startoftext|>", "<|endoftext|>"]:
        vocab[symbol] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=max_length)


def tiny_t5_tokenizer(max_length: int = 128):
    """A T5 unigram tokenizer over ASCII characters: built in code, no download, real T5Tokenizer class."""
    import string

    from transformers import T5Tokenizer

    # T5's special ids are fixed: pad 0, eos 1, unk 2. Word-initial letters get "▁" pieces like SentencePiece's.
    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -2.0)]
    pieces += [("\u2581" + c, -2.5) for c in string.ascii_lowercase + string.digits]
    pieces += [(c, -3.0) for c in string.ascii_letters + string.digits + string.punctuation]
    return T5Tokenizer(vocab=pieces, extra_ids=0, model_max_length=max_length)


for _kind, _target in [
    ("flux", "halluflow.ode.synthesis:build_tiny_flux"),
    ("owlv2", "halluflow.ode.detection:build_tiny_owlv2"),
    ("grounding_dino", "halluflow.ode.detection:build_tiny_grounding_dino"),
    ("yolo", "halluflow.ode.detection:build_tiny_yolo"),
    ("yolo_world", "halluflow.ode.detection:build_tiny_yolo_world"),
    ("dinov2", "halluflow.backends.image_embedders:build_tiny_dinov2"),
]:
    register_builder(_kind, _target)
# Models under test of the families people evaluate (tiny random, built from config).
for _kind, _fn in [
    ("smolvlm", "build_tiny_smolvlm"),
    ("llava", "build_tiny_llava"),
    ("llava_next", "build_tiny_llava_next"),
    ("qwen2_vl", "build_tiny_qwen2_vl"),
    ("gemma3", "build_tiny_gemma3"),
]:
    register_builder(_kind, f"halluflow.backends.tiny_vlms:{_fn}")
