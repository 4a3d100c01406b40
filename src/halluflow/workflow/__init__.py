"""The workflow's jobs: one function per Snakemake rule, called through one entry.

Every rule's `script:` is scripts/rule.py, which calls `run(snakemake)`. `run` looks the rule up in `RULES`
("module:function", imported only when that rule runs, so a light job never imports torch), sets up the job's log
and threads (halluflow.snakemake_glue) and calls the function with keyword arguments named as in the rule: each
named input, output and param, each wildcard, `threads` and `log` (when the function asks for them). A name used
twice in one rule (an input and an output both called `model`) is refused in one line, so a function's signature is
the rule's interface. A param whose annotation is a typed config section (halluflow.config_types) is built from the
plain config dict the rule passes (rules keep passing plain, serialisable config sections: Snakemake compares them
to decide reruns), so a job reads `section.key`, never `section.get("key", default)`.

The functions live beside each other by stage (halluflow.workflow.<stage>); the domain modules they call (ode, caos,
cedi, samf, metrics, benchmarks) know nothing of Snakemake.
"""

from __future__ import annotations

import importlib
import inspect
import os
import typing
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError

# rule name -> "halluflow.workflow.<stage>:<function>"
RULES: dict[str, str] = {
    # ODE graph, scenes, images, release, answer, score, report, models and stand-ins
    "build_graph": "halluflow.workflow.ode:build_graph",
    "sample_scenes": "halluflow.workflow.ode:sample_scenes",
    "make_prompts": "halluflow.workflow.ode:make_prompts",
    "synthesize": "halluflow.workflow.images:synthesize",
    "synthesize_retry": "halluflow.workflow.images:synthesize",
    "detect": "halluflow.workflow.images:detect",
    "detect_retry": "halluflow.workflow.images:detect",
    "retry_prompts": "halluflow.workflow.images:retry_prompts",
    "filter_images": "halluflow.workflow.release:filter_images",
    "make_queries": "halluflow.workflow.release:make_queries",
    "package_release": "halluflow.workflow.release:package_release",
    "release_audit": "halluflow.workflow.release:release_audit",
    "answer": "halluflow.workflow.answer:answer",
    "score": "halluflow.workflow.score:score",
    "score_compare": "halluflow.workflow.score:score_compare",
    "release_validity": "halluflow.workflow.score:release_validity",
    "report_release_audit": "halluflow.workflow.report:report_release_audit",
    "report_models": "halluflow.workflow.report:report_models",
    "report_summary": "halluflow.workflow.report:report_summary",
    "build_standin_synthesizer": "halluflow.workflow.models:build_standin",
    "build_standin_detector": "halluflow.workflow.models:build_standin",
    "build_standin_vlm": "halluflow.workflow.models:build_standin_vlm",
    "build_local_llm": "halluflow.workflow.models:build_local_llm",
    "models_fetch": "halluflow.workflow.models:models_fetch",
    # CAOS, CEDI, SAMF, fine-tuning and paper pages
    "caos_score": "halluflow.workflow.caos:caos_score",
    "ode_diagnosis": "halluflow.workflow.caos:caos_diagnosis",
    "cedi_examine": "halluflow.workflow.cedi:examine",
    "cedi_grade": "halluflow.workflow.cedi:grade",
    "cedi_comparison": "halluflow.workflow.cedi:comparison",
    "samf_instances": "halluflow.workflow.samf:instances",
    "samf_standard_eval": "halluflow.workflow.samf:standard_eval",
    "samf_train": "halluflow.workflow.samf:train",
    "samf_fuzzed_eval": "halluflow.workflow.samf:fuzzed_eval",
    "samf_dynamic_eval": "halluflow.workflow.samf:dynamic_eval",
    "samf_compare": "halluflow.workflow.samf:compare",
    "paper_ode": "halluflow.workflow.paper:paper",
    "paper_caos": "halluflow.workflow.paper:paper",
    "paper_samf": "halluflow.workflow.paper:paper",
    "paper_cedi": "halluflow.workflow.paper:paper",
    "ode_finetune_train": "halluflow.workflow.finetune:train",
    "ode_finetune_eval": "halluflow.workflow.finetune:evaluate",
    "ode_finetune": "halluflow.workflow.finetune:paper_section",
}


def release_dir(manifest: str | os.PathLike) -> Path:
    """The folder of a release, from its manifest.json (the input rules name: package_release writes it last, so the
    release's queries and images are complete when it exists)."""
    return Path(manifest).parent


KINDS = {
    "input": "an input",
    "output": "an output",
    "params": "a param",
    "wildcards": "a wildcard",
    "framework": "a job setting (threads, log)",
}


def function(rule: str) -> Callable[..., Any]:
    """The function of a rule (imported now)."""
    try:
        target = RULES[rule]
    except KeyError:
        raise ConfigError(f"rule {rule!r} has no function in halluflow.workflow.RULES") from None
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _named(items) -> dict[str, Any]:
    """The named entries of a Snakemake io/params/wildcards object, as plain values (a named list stays a list)."""
    return {key: items[key] for key in items.keys()}


def arguments(rule: str, fn: Callable[..., Any], smk) -> dict[str, Any]:
    """The keyword arguments `fn` takes, from the job's named inputs, outputs, params and wildcards."""
    pools = {
        "input": _named(smk.input),
        "output": _named(smk.output),
        "params": _named(smk.params),
        "wildcards": _named(smk.wildcards),
        "framework": {"threads": int(getattr(smk, "threads", 1) or 1), "log": list(smk.log)},
    }
    seen: dict[str, str] = {}
    values: dict[str, Any] = {}
    for pool, items in pools.items():
        for key, value in items.items():
            if key in seen:
                raise ConfigError(f"rule {rule!r}: {key!r} is both {KINDS[seen[key]]} and {KINDS[pool]}")
            seen[key], values[key] = pool, value
    hints = typing.get_type_hints(fn)
    kwargs = {}
    for name, param in inspect.signature(fn).parameters.items():
        if name not in values:
            if param.default is inspect.Parameter.empty:
                raise ConfigError(f"rule {rule!r} passes no {name!r}, which {fn.__module__}.{fn.__name__} needs")
            continue
        kwargs[name] = _typed(values[name], hints.get(name))
    return kwargs


def _typed(value: Any, hint: Any) -> Any:
    """A plain config section as the typed section its annotation names; anything else unchanged."""
    from_dict = getattr(hint, "from_dict", None)
    if callable(from_dict) and isinstance(value, dict):
        return from_dict(value)
    return value


def run(smk) -> Any:
    """Entry of every rule's script: log and threads as the rule declares, then the rule's function."""
    from ..snakemake_glue import setup

    log = setup(smk)
    fn = function(smk.rule)
    result = fn(**arguments(smk.rule, fn, smk))
    if result is not None:
        log.info("done: %s", result)
    for line in _cache_report():  # the job's model requests: read back from the request cache, or sent
        log.info("%s", line)
    return result


def _cache_report() -> list[str]:
    # Only when the job used the model layer: a light job never imports it.
    import sys

    model = sys.modules.get("halluflow.models.model")
    return model.cache_report() if model is not None else []
