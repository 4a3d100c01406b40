"""Device choices of the local backends without a GPU: dtype auto, the attention kernel, memory-budget batches
(halluflow.devices), with CUDA simulated where the choice depends on it."""

from __future__ import annotations

import types

import pytest
import torch

from halluflow import devices
from halluflow.backends import llm as llm_module
from halluflow.backends import transformers_vlm as vlm_module
from halluflow.devices import batch_for_budget, choose_attn_implementation, probe_batch_size, resolve_dtype
from halluflow.errors import ConfigError

MB = 2**20


@pytest.mark.parametrize(
    ("device", "flash", "supports_flash", "supports_sdpa", "expected"),
    [
        ("cpu", False, True, True, "sdpa"),
        ("cpu", True, True, True, "sdpa"),  # flash-attn runs on CUDA only
        ("cpu", False, False, False, "eager"),
        ("cuda", True, True, True, "flash_attention_2"),
        ("cuda:1", True, True, True, "flash_attention_2"),
        ("cuda", False, True, True, "sdpa"),  # not installed
        ("cuda", True, False, True, "sdpa"),  # the model has no flash kernel
        ("cuda", True, False, False, "eager"),
    ],
)
def test_auto_attention_picks_the_fastest_supported_kernel(device, flash, supports_flash, supports_sdpa, expected):
    got = choose_attn_implementation(
        "auto", device, flash_installed=flash, supports_flash=supports_flash, supports_sdpa=supports_sdpa
    )
    assert got == expected


def test_an_explicit_attention_choice_is_kept_and_an_unknown_one_refused():
    kw = dict(flash_installed=False, supports_flash=False, supports_sdpa=True)
    assert choose_attn_implementation("eager", "cuda", **kw) == "eager"
    with pytest.raises(ConfigError, match="attn_implementation 'fast'"):
        choose_attn_implementation("fast", "cpu", **kw)


def test_dtype_auto_is_bfloat16_on_cuda_and_float32_on_the_cpu(monkeypatch):
    assert resolve_dtype("auto", "cpu") is torch.float32
    assert resolve_dtype("auto", "cuda:0") is torch.bfloat16
    assert resolve_dtype("float16", "cpu") is torch.float16
    # The VLM / LLM backends go through the same rule (auto no longer means "the checkpoint's dtype").
    assert llm_module.resolve_dtype is resolve_dtype and vlm_module.resolve_dtype is resolve_dtype
    assert (
        llm_module.resolve_dtype("auto", "cuda") is torch.bfloat16
        and llm_module.resolve_dtype("auto", "cpu") is torch.float32
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a simulated GPU machine
    device = devices.resolve_device("auto")
    assert device == "cuda" and resolve_dtype("auto", device) is torch.bfloat16
    with pytest.raises(ConfigError, match="dtype 'half'"):
        resolve_dtype("half", "cpu")


class FakeModel:
    """What apply_attention reads and calls on a transformers model."""

    _supports_sdpa = True
    _supports_flash_attn = True

    def __init__(self, fail: bool = False, dtype=torch.bfloat16):
        self.config = types.SimpleNamespace(_attn_implementation="sdpa")
        self.fail, self.dtype = fail, dtype

    def set_attn_implementation(self, name):
        if self.fail:
            raise ImportError("flash_attn is not installed\nmore detail")
        self.config._attn_implementation = name


def test_apply_attention_switches_to_flash_only_on_cuda_with_flash_attn(monkeypatch):
    monkeypatch.setattr(llm_module, "flash_attn_installed", lambda: True)
    assert llm_module.apply_attention(FakeModel(), "auto", "cpu") == "sdpa"
    assert llm_module.apply_attention(FakeModel(), "auto", "cuda") == "flash_attention_2"
    assert llm_module.apply_attention(FakeModel(dtype=torch.float32), "auto", "cuda") == "sdpa"  # flash is half-only
    # auto keeps what transformers chose when the switch fails; an explicit request that fails is one line
    assert llm_module.apply_attention(FakeModel(fail=True), "auto", "cuda") == "sdpa"
    with pytest.raises(ConfigError, match="attn_implementation 'flash_attention_2': flash_attn is not installed$"):
        llm_module.apply_attention(FakeModel(fail=True), "flash_attention_2", "cuda")
    monkeypatch.setattr(llm_module, "flash_attn_installed", lambda: False)
    assert llm_module.apply_attention(FakeModel(), "auto", "cuda") == "sdpa"
    assert llm_module.apply_attention(FakeModel(), "eager", "cpu") == "eager"


def test_batch_for_budget():
    assert batch_for_budget(10_000, 2_000, 1_000, cap=64) == 8
    assert batch_for_budget(10_000, 2_000, 1_000, cap=5) == 5  # the configured size is a cap, never grown
    assert batch_for_budget(1_000, 2_000, 1_000, cap=8) == 1  # never below one item: the stage then fails loudly
    assert batch_for_budget(10_000, 2_000, 0, cap=8) == 8


def test_the_cpu_keeps_the_configured_batch_size_without_probing():
    def never(n):
        raise AssertionError("a CPU run must not probe")

    assert probe_batch_size(never, "cpu", 4) == (4, {"batch_size": 4, "batch_source": "configured"})
    assert probe_batch_size(never, "cuda", 4, memory_budget_mb=0)[0] == 4  # 0 = the configured size on CUDA too
    assert probe_batch_size(never, "cuda", 1)[0] == 1  # nothing to cut


class FakeCuda:
    """torch.cuda's memory counters for a stage whose peak is `fixed` + n x `per_item` bytes (weights resident)."""

    def __init__(self, fixed_mb: int, per_item_mb: int, free_mb: int, resident_mb: int):
        self.fixed, self.per_item = fixed_mb * MB, per_item_mb * MB
        self.free, self.resident = free_mb * MB, resident_mb * MB
        self.peak = self.resident
        self.calls: list[int] = []

    def run(self, n: int):
        self.calls.append(n)
        self.peak = max(self.peak, self.fixed + n * self.per_item)

    def install(self, monkeypatch):
        cuda = torch.cuda
        monkeypatch.setattr(cuda, "synchronize", lambda device=None: None)
        monkeypatch.setattr(cuda, "empty_cache", lambda: None)
        monkeypatch.setattr(cuda, "reset_peak_memory_stats", lambda device=None: setattr(self, "peak", self.resident))
        monkeypatch.setattr(cuda, "max_memory_allocated", lambda device=None: self.peak)
        monkeypatch.setattr(cuda, "memory_allocated", lambda device=None: self.resident)
        monkeypatch.setattr(cuda, "mem_get_info", lambda device=None: (self.free, 80_000 * MB))


def test_a_simulated_gpu_batches_to_its_measured_memory_budget(monkeypatch):
    gpu = FakeCuda(fixed_mb=24_000, per_item_mb=3_000, free_mb=50_000, resident_mb=23_000)
    gpu.install(monkeypatch)
    size, info = probe_batch_size(gpu.run, "cuda", 32)
    # budget = 0.9 x 50,000 free + 23,000 resident = 68,000 MB; (68,000 - 24,000) / 3,000 = 14.67 -> 14
    assert gpu.calls == [1, 2] and size == 14
    assert info == {
        "batch_size": 14,
        "batch_source": "memory budget",
        "memory_budget_mb": 68_000,
        "per_item_mb": 3_000.0,
        "fixed_mb": 24_000,
    }
    # where the configured batch fits, it stands (images stay the same on every GPU and across restarts)
    assert probe_batch_size(gpu.run, "cuda", 8) == (8, {**info, "batch_size": 8, "batch_source": "configured"})
    assert probe_batch_size(gpu.run, "cuda", 32, memory_budget_mb=36_000)[0] == 4  # (36,000 - 24,000) / 3,000
    assert probe_batch_size(gpu.run, "cuda", 32, memory_budget_mb=1_000)[0] == 1


def test_flux_and_the_detector_batch_to_the_budget_on_a_simulated_gpu(tmp_path, monkeypatch):
    from halluflow.models.registry import create
    from halluflow.models.standins import build_standin

    flux = build_standin("flux", tmp_path / "tiny-flux", seed=0)
    synth = create(
        "synthesizer", {"backend": "diffusers", "model": str(flux), "device": "cpu", "height": 32, "width": 32}
    )
    assert synth.fit_batch_size(4) == 4 and synth._pipe is None  # the CPU neither probes nor loads the pipeline
    owl = build_standin("owlv2", tmp_path / "tiny-owlv2", seed=0)
    detector = create("detector", {"backend": "transformers", "model": str(owl), "device": "cpu"})
    assert detector.fit_batch_size(8) == 8
    info = detector.describe().extra
    assert info["dtype"] == "float32" and info["device"] == "cpu" and info["attn_implementation"] in ("sdpa", "eager")

    gpu = FakeCuda(fixed_mb=30_000, per_item_mb=5_000, free_mb=40_000, resident_mb=30_000)
    gpu.install(monkeypatch)
    runs = []
    synth.device = "cuda"  # simulated: the probe's passes are counted, not run

    def fake_run(prompts, steps):
        runs.append((len(prompts), steps))
        gpu.run(len(prompts))

    monkeypatch.setattr(synth, "_run", fake_run)
    # budget 0.9 x 40,000 + 30,000 = 66,000 MB: (66,000 - 30,000) / 5,000 = 7 images per batch
    assert synth.fit_batch_size(16) == 7 and runs == [(1, 1), (2, 1)]  # one denoising step per probe
    assert synth.fit_batch_size(16) == 7 and len(runs) == 2  # measured once
    assert synth.describe().extra["batch_source"] == "memory budget"
    detector.device = "cuda"
    seen = []
    monkeypatch.setattr(detector, "detect", lambda images, labels: (seen.append(len(images)), gpu.run(len(images))))
    assert detector.fit_batch_size(16) == 7 and seen == [1, 2]
