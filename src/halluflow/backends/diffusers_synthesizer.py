"""The diffusers synthesizer backend (registry role `synthesizer`): any diffusers text-to-image pipeline, FLUX.1-dev
by default (ODE, Tu, Hu, Sang, CVPR 2025, §3.2 generates with FLUX.1-dev), loaded lazily, one generator per image.

On CUDA a batch never exceeds a memory budget (backend argument `memory_budget_mb`, default 90% of the GPU memory
free at the first batch): one 1-step probe each of 1 and 2 images measures the pipeline's fixed and per-image peak,
and `synthesis.batch_size` is cut to what fits (halluflow.devices.probe_batch_size). On the CPU the configured
batch size stands, so CPU runs keep their bytes.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Sequence

from ..errors import BackendError, ConfigError
from ..models.standins import standin_info
from ..progress import get_logger
from .base import BackendInfo, ImagePrompt, Synthesizer

log = get_logger(__name__)


class DiffusersSynthesizer(Synthesizer):
    """Any diffusers text-to-image pipeline, loaded once; one torch generator per image so each image depends
    only on its own seed (and on the batch it was generated in: batched kernels round differently)."""

    def __init__(
        self,
        model: str,
        revision: str | None = None,
        dtype: str = "auto",
        device: str = "auto",
        steps: int = 4,
        guidance: float = 3.5,
        height: int = 128,
        width: int = 128,
        call_args: dict | None = None,
        true_cfg_scale: float | None = None,
        memory_budget_mb: float | None = None,
        attn_implementation: str = "auto",
    ):
        from ..devices import ATTN_IMPLEMENTATIONS, resolve_device, resolve_dtype

        try:
            import torch  # noqa: F401
            from diffusers import DiffusionPipeline
        except ModuleNotFoundError as exc:
            from ..errors import MissingExtraError

            raise MissingExtraError(
                f"synthesizer 'diffusers' needs the package {exc.name!r}: pip install 'halluflow[models]'"
            ) from exc
        self.model = str(model)
        self.revision = revision
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        self.steps, self.guidance, self.height, self.width = int(steps), float(guidance), int(height), int(width)
        self.call_args = dict(call_args or {})
        self.true_cfg_scale = None if true_cfg_scale is None else float(true_cfg_scale)
        self.standin = standin_info(self.model)
        if memory_budget_mb is not None and float(memory_budget_mb) < 0:
            raise ConfigError(
                f"synthesis.memory_budget_mb must be >= 0 (0 = the configured batch size), got {memory_budget_mb}"
            )
        self.memory_budget_mb = None if memory_budget_mb is None else float(memory_budget_mb)
        if attn_implementation not in ATTN_IMPLEMENTATIONS:
            raise ConfigError(
                f"synthesis.attn_implementation {attn_implementation!r} is not one of {', '.join(ATTN_IMPLEMENTATIONS)}"
            )
        self.requested_attention = attn_implementation
        self.attn_implementation: str | None = None  # known once the pipeline is loaded
        self.batching: dict[str, Any] = {}
        self._batch_sizes: dict[tuple[str, int], int] = {}
        self._warned: set[str] = set()
        self._pipe = None
        self._pipeline_class = DiffusionPipeline
        local = Path(self.model)
        if local.is_dir() and not (local / "model_index.json").is_file():
            raise BackendError(
                f"synthesis.model {self.model!r}: folder has no model_index.json (not a diffusers pipeline)"
            )

    @property
    def pipe(self):
        """The pipeline, loaded on first use: a restarted shard whose images all exist never pays for loading
        FLUX.1-dev (tens of GB)."""
        if self._pipe is None:
            try:
                pipe = self._pipeline_class.from_pretrained(self.model, revision=self.revision, dtype=self.dtype)
            except (OSError, ValueError) as exc:
                raise BackendError(
                    f"synthesis.model {self.model!r} (revision {self.revision!r}) could not be loaded: "
                    f"{str(exc).splitlines()[0]}"
                ) from exc
            accepted = set(inspect.signature(pipe.__call__).parameters)
            unknown = sorted(set(self.call_args) - accepted)
            if unknown:
                raise ConfigError(f"synthesis.call_args: {', '.join(unknown)} not accepted by {type(pipe).__name__}")
            self._accepted = accepted
            pipe.to(self.device)
            pipe.set_progress_bar_config(disable=True)
            self.attn_implementation = _set_attention(pipe, self.requested_attention, self.device)
            self._pipe = pipe
        return self._pipe

    def settings(self) -> dict[str, Any]:
        """Everything besides the prompt and seed that shapes an image (part of the resume key)."""
        out = {
            "steps": self.steps,
            "guidance": self.guidance,
            "height": self.height,
            "width": self.width,
            "call_args": self.call_args,
            "dtype": str(self.dtype),
            "weights": _weights_fingerprint(self.model),
        }
        if self.true_cfg_scale is not None:
            out["true_cfg_scale"] = self.true_cfg_scale  # absent when unset: earlier images keep their resume key
        return out

    def _warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            log.warning(message)

    def negative_args(self, negatives: list[str]) -> dict[str, Any]:
        """Arguments that make the negative prompts reach the model, warning where the pipeline would drop them.

        FLUX.1-dev is guidance-distilled: FluxPipeline accepts `negative_prompt` but runs the second (negative)
        pass only when `true_cfg_scale` > 1 (diffusers >= 0.32); pipelines without `negative_prompt` ignore it."""
        name = type(self.pipe).__name__
        if "true_cfg_scale" in self._accepted and self.true_cfg_scale is not None:
            args: dict[str, Any] = {"true_cfg_scale": self.true_cfg_scale}
        else:
            args = {}
            if self.true_cfg_scale is not None:
                self._warn_once(f"synthesis.true_cfg_scale: {name} has no true_cfg_scale argument: ignored")
        if not any(negatives):
            return args
        if "negative_prompt" not in self._accepted:
            self._warn_once(f"{name} takes no negative_prompt: the negative prompts are dropped")
            return args
        scale = args.get("true_cfg_scale", self.call_args.get("true_cfg_scale"))
        if "true_cfg_scale" in self._accepted and (scale is None or float(scale) <= 1):
            self._warn_once(
                f"{name} ignores the negative prompt unless true_cfg_scale > 1 (now {scale or 1.0}): "
                "set synthesis.true_cfg_scale (e.g. 1.5; each image then costs two passes)"
            )
        args["negative_prompt"] = negatives
        return args

    def describe(self) -> BackendInfo:
        return BackendInfo(
            role="synthesizer",
            backend="diffusers",
            model=self.model,
            revision=self.revision,
            stand_in=self.standin is not None,
            extra={
                **{k: v for k, v in self.settings().items() if k != "weights"},
                "device": self.device,
                **({"attn_implementation": self.attn_implementation} if self.attn_implementation else {}),
                **self.batching,
            },
        )

    def fit_batch_size(self, configured: int) -> int:
        """The configured batch size; on CUDA cut to the largest that fits the memory budget (measured once)."""
        from ..devices import probe_batch_size

        key = (self.device, configured)
        if key not in self._batch_sizes:

            def probe(n: int):  # one denoising step: its peak is every step's, and the VAE decode runs too
                self._run([ImagePrompt(f"probe{i}", "a photo", "", i) for i in range(n)], steps=1)

            size, self.batching = probe_batch_size(probe, self.device, configured, self.memory_budget_mb)
            if size != configured:
                log.info("synthesis: batches of %d images fit the memory budget (%s)", size, self.batching)
            self._batch_sizes[key] = size
        return self._batch_sizes[key]

    def generate(self, prompts: Sequence[ImagePrompt]):
        if not prompts:
            return []
        return self._run(prompts, self.steps)

    def _run(self, prompts: Sequence[ImagePrompt], steps: int):
        import torch

        # CPU generators: the same seed gives the same starting noise on any device.
        pipe = self.pipe
        generators = [torch.Generator("cpu").manual_seed(int(p.seed)) for p in prompts]
        kwargs = dict(
            prompt=[p.prompt for p in prompts],
            generator=generators,
            num_inference_steps=steps,
            guidance_scale=self.guidance,
            height=self.height,
            width=self.width,
            output_type="pil",
            **self.call_args,
        )
        kwargs.update(self.negative_args([p.negative_prompt or "" for p in prompts]))
        with torch.inference_mode():
            return list(pipe(**kwargs).images)


def _set_attention(pipe, requested: str, device: str) -> str:
    """Put the denoiser on the attention kernel devices.choose_attn_implementation picks (diffusers' "flash"
    backend for flash_attention_2; its default is torch's sdpa) and return the one it runs with."""
    from ..devices import choose_attn_implementation, flash_attn_installed

    denoiser = getattr(pipe, "transformer", None) or getattr(pipe, "unet", None)
    can_switch = hasattr(denoiser, "set_attention_backend")
    import torch

    half = getattr(pipe, "dtype", None) in (torch.float16, torch.bfloat16)  # flash kernels run in half precision only
    want = choose_attn_implementation(
        requested,
        device,
        flash_installed=flash_attn_installed(),
        supports_flash=can_switch and half,
        supports_sdpa=True,
    )
    backend = {"flash_attention_2": "flash", "flash_attention_3": "_flash_3", "flex_attention": "flex"}.get(want)
    if want == "eager":
        backend = "_native_math"
    if backend is None or not can_switch:
        return "sdpa"
    try:
        denoiser.set_attention_backend(backend)
    except (ValueError, ImportError, RuntimeError) as exc:
        if requested != "auto":
            raise ConfigError(f"synthesis.attn_implementation {requested!r}: {str(exc).splitlines()[0]}") from None
        return "sdpa"
    return want


def _weights_fingerprint(model: str) -> Any:
    """Identifies the weights behind a model path, so a rebuilt stand-in or replaced local folder is never mistaken
    for the one that made existing images: the stand-in marker (kind, seed, settings), else file sizes and mtimes
    of a local folder (cheap for tens of GB; a copy only costs a regeneration). Hub ids rely on `revision`."""
    marker = standin_info(model)
    if marker is not None:
        return marker
    path = Path(model)
    if not path.is_dir():
        return None
    return sorted(
        (str(f.relative_to(path)), f.stat().st_size, f.stat().st_mtime_ns) for f in path.rglob("*") if f.is_file()
    )
