"""Device, dtype, attention and batch-size choice shared by the torch backends (synthesis, detection, VLMs, LLMs).

`device: auto` means CUDA when a GPU is visible (Slurm GPU jobs), else the CPU (laptops, CI); `dtype: auto`
means bfloat16 on CUDA and float32 on the CPU, where half precision is slow or unsupported. `attn_implementation:
auto` means flash_attention_2 on CUDA when flash-attn is installed and the model supports it, else sdpa where the
model supports it, else eager. On CUDA, image batches (FLUX, the detector) never exceed a memory budget measured
on the GPU itself (`batch_for_budget`, `probe_batch_size`): the configured batch size is the most a batch holds, cut
to what fits; on the CPU the configured batch size stands.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Callable

from .errors import ConfigError

DTYPES = ("auto", "float32", "float16", "bfloat16")
ATTN_IMPLEMENTATIONS = ("auto", "eager", "sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")
# Share of the GPU memory that is free when a stage starts that its batches may use (the rest absorbs the
# allocator's fragmentation and other processes on the GPU).
FREE_MEMORY_SHARE = 0.9


def resolve_device(device: str = "auto") -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} requested but no CUDA GPU is visible (use device: auto or cpu)")
    return device


def resolve_dtype(dtype: str = "auto", device: str = "cpu"):
    import torch

    if dtype not in DTYPES:
        raise ConfigError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    if dtype == "auto":
        dtype = "bfloat16" if device.startswith("cuda") else "float32"
    return getattr(torch, dtype)


def flash_attn_installed() -> bool:
    return importlib.util.find_spec("flash_attn") is not None


def choose_attn_implementation(
    requested: str, device: str, *, flash_installed: bool, supports_flash: bool, supports_sdpa: bool
) -> str:
    """The attention kernel a model runs with: `requested` unless it is auto, then the fastest the installed
    packages and the model class support on this device (flash-attn runs on CUDA only)."""
    if requested not in ATTN_IMPLEMENTATIONS:
        raise ConfigError(f"attn_implementation {requested!r} is not one of {', '.join(ATTN_IMPLEMENTATIONS)}")
    if requested != "auto":
        return requested
    if device.startswith("cuda") and flash_installed and supports_flash:
        return "flash_attention_2"
    return "sdpa" if supports_sdpa else "eager"


def batch_for_budget(budget_bytes: float, fixed_bytes: float, per_item_bytes: float, cap: int) -> int:
    """The largest batch whose predicted peak (fixed + n x per item) fits the budget, at least 1, at most `cap`."""
    if per_item_bytes <= 0:
        return max(1, int(cap))
    n = int((budget_bytes - fixed_bytes) // per_item_bytes)
    return max(1, min(int(cap), n))


def probe_batch_size(
    run: Callable[[int], object], device: str, configured: int, memory_budget_mb: float | None = None
) -> tuple[int, dict]:
    """Batch size for an image stage: on the CPU (or with memory_budget_mb 0) the configured one; on CUDA the
    configured one cut to the largest batch that fits the budget (memory_budget_mb, default FREE_MEMORY_SHARE of
    the memory free now). A cap, never a growth: where the configured batch fits, batches and so images stay the
    same on every GPU and across restarts (the resume key holds each batch); where it does not, the job runs
    smaller batches instead of failing out of memory. To fill a large GPU, raise batch_size.

    The cost of one item is measured, not guessed: `run(n)` runs one small pass of n items (one denoising step, one
    detector forward) and the peaks of n = 1 and n = 2 (torch.cuda.max_memory_allocated) give fixed and per-item
    bytes. Returns (batch size, what was measured), the second recorded by the backend's describe()."""
    configured = max(1, int(configured))
    if not device.startswith("cuda") or memory_budget_mb == 0 or configured == 1:
        return configured, {"batch_size": configured, "batch_source": "configured"}
    import torch

    torch.cuda.synchronize(device)
    peaks = []
    for n in (1, 2):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        run(n)
        torch.cuda.synchronize(device)
        peaks.append(torch.cuda.max_memory_allocated(device))
    per_item = max(0, peaks[1] - peaks[0])
    fixed = peaks[0] - per_item
    if memory_budget_mb is None:
        free, _ = torch.cuda.mem_get_info(device)
        budget = FREE_MEMORY_SHARE * free + torch.cuda.memory_allocated(device)
    else:
        budget = float(memory_budget_mb) * 2**20
    size = batch_for_budget(budget, fixed, per_item, cap=configured)
    return size, {
        "batch_size": size,
        "batch_source": "configured" if size == configured else "memory budget",
        "memory_budget_mb": round(budget / 2**20),
        "per_item_mb": round(per_item / 2**20, 1),
        "fixed_mb": round(fixed / 2**20),
    }


# The job's torch thread count (set_threads), applied when torch is imported: a job that runs no model never pays
# for importing torch (2-3 s and ~500 MB) just to set it.
_THREADS: int | None = None
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def set_threads(n: int) -> None:
    """Give torch the job's CPU threads (Snakemake `threads:`), not every core: parallel jobs must not oversubscribe.

    On a shared, busy CPU torch's default pool spin-waits against other jobs: measured under load 12 on 2 cores,
    one SmolLM2 batch took 158 s with the default pool and 5.6 s with one thread. A fixed count also keeps float
    reductions (and so images and answers) reproducible across machines with different core counts.

    Imports nothing: the count goes to the BLAS/OpenMP variables now (read when torch is imported) and to torch
    itself now if it is imported already, else by `apply_threads` once a backend is built (halluflow.models.registry
    .create), so a job whose every request is cached never imports torch.
    """
    global _THREADS
    _THREADS = max(1, int(n))
    for var in THREAD_VARS:
        os.environ[var] = str(_THREADS)
    apply_threads()


def apply_threads() -> None:
    """Hand torch the count set_threads recorded, if torch is imported (never imports it)."""
    torch = sys.modules.get("torch")
    if _THREADS is not None and torch is not None and hasattr(torch, "set_num_threads"):
        torch.set_num_threads(_THREADS)
