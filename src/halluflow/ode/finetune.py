"""ODE's fine-tuning loop: train a model under test on one release's data, evaluate it on a disjoint child release.

Tu, Hu and Sang ("ODE: Open-Set Evaluation of Hallucinations in Multimodal Large Language Models", CVPR 2025) show
that fine-tuning on ODE-generated samples lowers hallucination on generative (Fig. 10) and discriminative (Fig. 11)
tasks. Here the training data are the release's own exports (`halluflow release export`): SFT on the llava export
(each image's questions with their verified answers and a description naming exactly the scene's objects), DPO on
the dpo export (the verified answer chosen, the base model's hallucinated answer on the training release rejected).
Training runs with TRL (SFTTrainer / DPOTrainer on the model's own processor and chat template), with LoRA as a
config switch (merged into the weights before saving), and the tuned model is saved as a plain transformers folder
that the answer stage loads like any other; a stand-in base leaves its stand-in marker in the tuned folder.

The evaluation release must share no concept pair with the training release (a child release cut with
`ode.lineage.parent` = the training release excludes every ancestor pair); `check_disjoint` refuses otherwise. The
base model's answers are the workflow's own (rules answer + score); the tuned model answers the same release through
the same answer stage and is scored by the same ODE scorer, and halluflow.report.finetune_section writes the before/after table
(per distribution and overall, metric catalogue keys), a figure in the paper's two-panel layout and the hash of the
weights before and after as a paper section (halluflow.report.papers).
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
from pathlib import Path

from ..config_types import Answer, Ode
from ..errors import ConfigError, InputError, MissingExtraError
from ..io import building_folder, write_json

log = logging.getLogger("halluflow.finetune")

METHODS = ("sft", "dpo")
KEY = "finetune"
# Written into every tuned model folder: what it was trained from, on what, how, and the weights' hashes.
RECORD = "halluflow_finetune.json"


# ---------------------------------------------------------------------------------------------- config
def finetune_model(config: dict) -> dict:
    """The `models:` entry fine-tuned: `finetune.model`, else the first transformers model."""
    section = config.get(KEY) or {}
    models = {m["name"]: m for m in config.get("models") or []}
    name = section.get("model")
    if name is None:
        name = next((n for n, m in models.items() if m.get("backend") == "transformers"), None)
        if name is None:
            raise ConfigError(f"config key '{KEY}.model': no transformers model in models: to fine-tune")
    if name not in models:
        raise ConfigError(f"config key '{KEY}.model': no model named {name!r} in models ({', '.join(models)})")
    if models[name].get("backend") != "transformers":
        raise ConfigError(
            f"config key '{KEY}.model': {name!r} has backend {models[name].get('backend')!r}; only a transformers "
            "model has weights to fine-tune here"
        )
    return models[name]


def train_release_dir(config: dict) -> str:
    """The release trained on: `finetune.train_release`, else the lineage parent (this run's release is its child)."""
    section = config.get(KEY) or {}
    path = section.get("train_release") or Ode.from_dict(config.get("ode") or {}).lineage.parent
    if not path:
        raise ConfigError(
            f"config key '{KEY}.train_release': none given and ode.lineage.parent is null; name the release to train "
            "on (this run's release, the evaluation one, must share no concept pair with it)"
        )
    return str(path)


def check_config(config: dict) -> None:
    """Cross-key checks of an enabled `finetune:` section, one ConfigError naming the key."""
    if Answer.from_dict(config.get("answer") or {}).source.kind != "ode":
        raise ConfigError(f"config key '{KEY}.enabled': fine-tuning evaluates on an ODE release (answer.source.kind)")
    finetune_model(config)
    train_release_dir(config)
    methods = (config.get(KEY) or {}).get("methods") or []
    if not methods:
        raise ConfigError(f"config key '{KEY}.methods': empty; give sft, dpo or both")


# ---------------------------------------------------------------------------------------------- data
def check_disjoint(train_dir: str | Path, eval_dir: str | Path) -> int:
    """Refuse (one line) an evaluation release sharing a concept pair with the training release; else the number
    of pairs the training release has."""
    from .lineage import release_pairs  # polars: not at import time (rules/common.smk imports this module)

    train, held_out = release_pairs(train_dir), release_pairs(eval_dir)
    shared = sorted(train & held_out)
    if shared:
        raise InputError(
            f"{KEY}: the evaluation release {eval_dir} shares {len(shared)} concept pair(s) with the training release "
            f"{train_dir} (e.g. {shared[0]}); cut it as a child (ode.lineage.parent: {train_dir}, "
            "exclude_ancestor_pairs: true)"
        )
    return len(train)


def _strip_image_tag(text: str) -> str:
    return text.replace("<image>\n", "", 1).replace("<image>", "", 1).strip()


def sft_rows(records: list[dict], root: str | Path) -> list[dict]:
    """llava export records → TRL's conversational vision rows: {"messages": [...], "images": [path]}; the image
    goes with the first user turn (TRL inserts it there, as the answer stage's conversation does)."""
    rows = []
    for r in records:
        messages = [
            {"role": "user" if t["from"] == "human" else "assistant", "content": _strip_image_tag(t["value"])}
            for t in r["conversations"]
        ]
        rows.append({"messages": messages, "images": [str(Path(root) / r["image"])]})
    return rows


def dpo_rows(records: list[dict], root: str | Path) -> list[dict]:
    """dpo export records → TRL's conversational preference rows (prompt, chosen, rejected, images)."""
    return [
        {
            "prompt": [{"role": "user", "content": _strip_image_tag(r["prompt"])}],
            "chosen": [{"role": "assistant", "content": r["chosen"]}],
            "rejected": [{"role": "assistant", "content": r["rejected"]}],
            "images": [str(Path(root) / p) for p in r["images"]],
        }
        for r in records
    ]


def _dataset(rows: list[dict]):
    from datasets import Dataset, Image, List

    # images stay paths until a batch is collated (the Image feature decodes them lazily)
    return Dataset.from_list(rows).cast_column("images", List(Image()))


# ---------------------------------------------------------------------------------------------- weights
def weights_hash(model) -> str:
    """sha256 over every parameter and buffer (name, dtype, shape, bytes) in name order: equal weights, equal hash,
    whatever file layout or metadata a save writes."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def _load(model_path: str, revision: str | None, dtype: str):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from ..devices import resolve_dtype
    from ..models import resolve_model_path

    path = resolve_model_path(model_path)
    processor = AutoProcessor.from_pretrained(path, revision=revision)
    model = AutoModelForImageTextToText.from_pretrained(path, revision=revision, dtype=resolve_dtype(dtype))
    return model, processor


def _trainer(method: str, model, processor, dataset, settings: dict, work: str, device: str, dtype: str):
    try:
        from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer
    except ModuleNotFoundError as exc:
        raise MissingExtraError(f"fine-tuning needs {exc.name!r}: pip install 'halluflow[finetune]'") from exc

    common = {
        "output_dir": work,
        "max_steps": int(settings["max_steps"]),
        "per_device_train_batch_size": int(settings["batch_size"]),
        "gradient_accumulation_steps": int(settings["gradient_accumulation_steps"]),
        "learning_rate": float(settings["learning_rate"]),
        "seed": int(settings["seed"]),
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "use_cpu": device == "cpu",
        "bf16": dtype == "bfloat16",
        "dataloader_num_workers": 0,
    }
    peft_config = None
    lora = settings.get("lora") or {}
    if lora.get("enabled"):
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=int(lora["r"]),
            lora_alpha=int(lora["alpha"]),
            lora_dropout=float(lora["dropout"]),
            target_modules=lora["target_modules"],
            task_type="CAUSAL_LM",
        )
    if method == "sft":
        args = SFTConfig(**common)
        return SFTTrainer(
            model=model, args=args, train_dataset=dataset, processing_class=processor, peft_config=peft_config
        )
    args = DPOConfig(**common, beta=float(settings["beta"]))
    return DPOTrainer(
        model=model, args=args, train_dataset=dataset, processing_class=processor, peft_config=peft_config
    )


def train_model(
    method: str,
    rows: list[dict],
    base: dict,
    out_dir: str | Path,
    settings: dict,
    facts: dict | None = None,
) -> dict:
    """Fine-tune `base` ({name, model, revision, device, dtype, stand_in}) with `method` on `rows`; save the tuned
    model (LoRA merged) with its processor into `out_dir`; return the training record (`facts` added; also written
    to out_dir/RECORD)."""
    import torch

    from ..devices import resolve_device
    from ..models.standins import MARKER, standin_info

    if method not in METHODS:
        raise ConfigError(f"config key '{KEY}.methods': unknown method {method!r}; known: {', '.join(METHODS)}")
    if not rows:
        raise InputError(f"{KEY} {method}: no training examples (the release's {method} export is empty)")
    device = resolve_device(base.get("device") or "auto")
    dtype = base.get("dtype") or "float32"
    if dtype == "auto":
        dtype = "bfloat16" if device.startswith("cuda") else "float32"
    torch.manual_seed(int(settings["seed"]))
    model, processor = _load(base["model"], base.get("revision"), dtype)
    before = weights_hash(model)
    with tempfile.TemporaryDirectory(prefix="halluflow-finetune-") as work:
        trainer = _trainer(method, model, processor, _dataset(rows), settings, work, device, dtype)
        result = trainer.train()
        tuned = trainer.model
    if hasattr(tuned, "merge_and_unload"):  # LoRA: the adapters go into the weights, so the folder loads plainly
        tuned = tuned.merge_and_unload()
    tuned = tuned.to("cpu")
    after = weights_hash(tuned)
    marker = standin_info(base["model"])
    stand_in = bool(base.get("stand_in")) or marker is not None
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    record = {
        "method": method,
        "base": {k: base.get(k) for k in ("name", "model", "revision")},
        "stand_in": stand_in,
        "examples": len(rows),
        "steps": int(trainer.state.global_step),
        "max_steps": int(settings["max_steps"]),
        "batch_size": int(settings["batch_size"]),
        "gradient_accumulation_steps": int(settings["gradient_accumulation_steps"]),
        "learning_rate": float(settings["learning_rate"]),
        "beta": float(settings["beta"]) if method == "dpo" else None,
        "lora": dict(settings.get("lora") or {}) if (settings.get("lora") or {}).get("enabled") else None,
        "seed": int(settings["seed"]),
        "device": device,
        "dtype": dtype,
        "losses": [float(x) for x in losses],
        "train_loss": float(result.training_loss),
        "weights_sha256_before": before,
        "weights_sha256_after": after,
        "weights_changed": before != after,
        **(facts or {}),
    }
    with building_folder(out_dir) as tmp:
        tuned.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        if stand_in:  # a tuned stand-in is still noise: every output made with it says so
            write_json(tmp / MARKER, {**(marker or {"stand_in": True}), "fine_tuned": {"method": method}})
        write_json(tmp / RECORD, record)
    log.info(
        "%s on %d examples, %d steps: loss %s, weights %s → %s",
        method,
        len(rows),
        record["steps"],
        ", ".join(f"{x:.4f}" for x in record["losses"]),
        before[:12],
        after[:12],
    )
    return record


def tuned_spec(spec: dict, method: str, model_dir: str) -> dict:
    """The base model's `models:` entry pointing at the tuned folder (same backend and generation arguments)."""
    args = {**(spec.get("args") or {}), "model": str(model_dir), "revision": None}
    return {
        "name": f"{spec['name']}-{method}",
        "backend": spec["backend"],
        "stand_in": bool(spec.get("stand_in")),
        "args": args,
    }


# ---------------------------------------------------------------------------------------------- section
