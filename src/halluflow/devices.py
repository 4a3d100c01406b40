"""Device and dtype choice shared by the torch backends (synthesis, detection, local VLMs).

`device: auto` means CUDA when a GPU is visible (Slurm GPU jobs), else the CPU (laptops, CI); `dtype: auto`
means bfloat16 on CUDA and float32 on the CPU, where half precision is slow or unsupported.
"""

from __future__ import annotations

from .errors import ConfigError

DTYPES = ("auto", "float32", "float16", "bfloat16")


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


def set_threads(n: int) -> None:
    """Give torch the job's CPU threads (Snakemake `threads:`), not every core: parallel jobs must not oversubscribe.

    On a shared, busy CPU torch's default pool spin-waits against other jobs: measured under load 12 on 2 cores,
    one SmolLM2 batch took 158 s with the default pool and 5.6 s with one thread. A fixed count also keeps float
    reductions (and so images and answers) reproducible across machines with different core counts.
    """
    try:
        import torch
    except ModuleNotFoundError:
        return
    torch.set_num_threads(max(1, int(n)))
