"""Rules of the model folders (rules/standins.smk, rules/models.smk): tiny random stand-ins built offline, the
packaged SmolLM2 converted once, and the real weights staged for offline compute nodes with their lock. The logic is
in halluflow.models.{standins,packaged,fetch}."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("halluflow.workflow.models")


def build_standin(stand_in: dict, model: str) -> None:
    """Rules build_standin_synthesizer / build_standin_detector: a tiny random stand-in model folder."""
    from ..models.standins import build_standin as build

    path = build(stand_in["builder"], model, seed=stand_in["seed"], **stand_in["args"])
    log.info("built stand-in %r (%s) into %s", stand_in["name"], stand_in["builder"], path)


def build_standin_vlm(build: dict, model: str, vlm: str) -> None:
    """Rule build_standin_vlm: a tiny random VLM (the `build:` block of models: entry `vlm`) with the shared
    stand-in machinery."""
    from ..backends.transformers_vlm import build_tiny_smolvlm
    from ..models.standins import build_standin, builder_kinds, register_builder

    if "smolvlm" not in builder_kinds():
        register_builder("smolvlm", build_tiny_smolvlm)
    path = build_standin(build["builder"], model, seed=build["seed"], **build["args"])
    log.info("built stand-in VLM %r (%s) into %s", vlm, build["builder"], path)


def build_local_llm(model: str) -> None:
    """Rule build_local_llm: the packaged SmolLM2-135M-Instruct GGUF as a Hugging Face folder (once, ~25 s)."""
    from ..models.packaged import convert_packaged_llm

    log.info("converted the packaged SmolLM2 GGUF into %s", convert_packaged_llm(model))


def models_fetch(config: dict, lock: str) -> None:
    """Rule models_fetch: every Hub model and ultralytics file the merged config names -> the cache (the lock's
    folder, $HALLUFLOW_MODELS_CACHE) + its lock file."""
    from ..models.fetch import fetch

    fetch(config, str(Path(lock).parent), lock, log=log.info)
