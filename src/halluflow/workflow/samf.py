"""Rules of rules/samf.smk: UniHall instances and SAMF's fuzzing ("Unified Hallucination Fuzzing for Multimodal
Large Language Models"): standard evaluation, one controller-training job per (model, controller, group), fuzzed
evaluation with each controller's CentralFuzzController, the random-policy dynamic setting, and the comparison. The
file-level steps are halluflow.samf.workflow; these functions hand them the rule's files and the `samf:` section.

Every evaluation rule reads the same things: the `samf:` section, the model's `models:` entry (`spec`), the judge
specs (halluflow.samf.workflow.judge_specs), the seed and the run's request cache root (`cache`); the release
(its manifest, for an ODE source: the instances' images) and the concept graph's nodes (when the evaluatee or the
visual judge reads the graph) are inputs."""

from __future__ import annotations

from pathlib import Path

from ..config_types import Samf
from ..models import MODELS_CACHE
from . import release_dir


def _plain(samf: Samf) -> dict:
    # halluflow.samf.workflow reads the section as the validated mapping (a library call may pass a partial one)
    return Samf.from_dict(samf).to_dict()


def _release(release: str | None) -> Path | None:
    return release_dir(release) if release else None


def _job(samf, spec, judges, cache, instances, split, release, nodes) -> dict:
    """The arguments every run_* step of halluflow.samf.workflow takes, from an evaluation rule's keywords."""
    return {
        "samf": _plain(samf),
        "instances_path": instances,
        "split_path": split,
        "spec": spec,
        "release_dir": _release(release),
        "models_cache": MODELS_CACHE,
        "graph_dir": str(Path(nodes).parent) if nodes else None,
        "judges": judges,
        "requests_cache": cache,
    }


def instances(
    *,
    samf: Samf,
    seed: int,
    release_name: str,
    instances: str,
    split: str,
    release: str | None = None,
) -> int:
    """Checkpoint samf_instances -> fuzz/{instances.json,split.parquet}: from the ODE release (its manifest) or the
    UniHall file samf.source.path; the pilot/test split."""
    from ..samf.workflow import make_instances

    return make_instances(_plain(samf), _release(release), release_name, seed, instances, split)


def standard_eval(
    *,
    samf: Samf,
    spec: dict,
    judges: dict,
    cache: str,
    instances: str,
    split: str,
    table: str,
    release: str | None = None,
    nodes: str | None = None,
) -> None:
    """Rule samf_standard_eval -> fuzz/<model>/standard.parquet: the model on the unmutated test instances."""
    from ..samf.workflow import run_standard

    run_standard(**_job(samf, spec, judges, cache, instances, split, release, nodes), out=table)


def train(
    *,
    samf: Samf,
    spec: dict,
    judges: dict,
    seed: int,
    cache: str,
    instances: str,
    split: str,
    policy: str,
    group: str,
    controller: str,
    release: str | None = None,
    nodes: str | None = None,
) -> None:
    """Rule samf_train -> fuzz/<model>/<controller>/train/<group>.json: one controller learns the mutation policy of
    one (subtype x question type) group."""
    from ..samf.workflow import run_train

    job = _job(samf, spec, judges, cache, instances, split, release, nodes)
    run_train(**job, group=group, seed=seed, out=policy, controller=controller)


def fuzzed_eval(
    *,
    samf: Samf,
    spec: dict,
    judges: dict,
    seed: int,
    cache: str,
    instances: str,
    split: str,
    trained: list[str],
    policies: str,
    table: str,
    fuzzed_instances: str,
    images: str,
    controller: str,
    release: str | None = None,
    nodes: str | None = None,
) -> None:
    """Rule samf_fuzzed_eval -> fuzz/<model>/<controller>/{policies.json,fuzzed.parquet,fuzzed_instances.json,
    fuzzed/}: one controller's trained policies on the instances."""
    from ..samf.workflow import run_fuzzed

    run_fuzzed(
        **_job(samf, spec, judges, cache, instances, split, release, nodes),
        trained=trained,
        seed=seed,
        out_dir=Path(images).parent,  # the controller's fuzz folder; fuzzed/ is written inside it
        out_policies=policies,
        out_fuzzed=table,
        out_instances=fuzzed_instances,
        controller=controller,
    )


def dynamic_eval(
    *,
    samf: Samf,
    spec: dict,
    judges: dict,
    seed: int,
    cache: str,
    instances: str,
    split: str,
    table: str,
    images: str,
    release: str | None = None,
    nodes: str | None = None,
) -> None:
    """Rule samf_dynamic_eval -> fuzz/<model>/{dynamic.parquet,dynamic/}: Table 11's Dynamic setting (one random
    policy per instance, no controller), once per model."""
    from ..samf.workflow import run_dynamic

    job = _job(samf, spec, judges, cache, instances, split, release, nodes)
    run_dynamic(**job, seed=seed, out_dir=images, out=table)  # the random policies' images go under out_dir


def compare(
    *,
    standard: str,
    fuzzed: list[str],
    dynamic: str,
    labels: list[str],
    table: str,
    summary: str,
    controllers: str,
    controller_names: list[str],
    agreement: dict,
    model: str,
) -> None:
    """Rule samf_compare -> fuzz/<model>/{comparison.parquet,comparison.json,controllers.parquet}: standard /
    dynamic / fuzzed (first controller), the controller x category x static/fuzzed table of every controller, and
    Table 4's metric-human agreement when samf.agreement.labels is set (`labels` is that file, an input)."""
    from ..samf.workflow import run_compare

    run_compare(
        standard_path=standard,
        fuzzed=dict(zip(controller_names, fuzzed)),
        model=model,
        out_parquet=table,
        out_json=summary,
        dynamic_path=dynamic,
        out_categories=controllers,
        agreement={**agreement, "labels": labels[0] if labels else None},
    )
