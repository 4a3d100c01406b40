"""Rule answer (rules/answer.smk): one model under test answers one shard of the configured source's queries. The
job reads the model's `models:` entry, the `answer:` section and its inputs (the source, and the concept graph for
a model that reads it); the request cache, batching and failure records are halluflow.answer.answer_shard's."""

from __future__ import annotations

from pathlib import Path

from ..config_types import Answer
from . import release_dir


def answer(
    source: list[str],
    answers: str,
    shard: str,
    spec: dict,
    answer: Answer,
    shards: int,
    cache: str,
    graph: list[str] = (),
    threads: int = 1,
) -> dict:
    """Rule answer: shard `shard` of `shards` of the source's queries (`answer` = the config's answer section),
    asked of the model `spec` names, cached under `cache`; an ODE source is read from its release's manifest input.
    Returns the counts the log ends with."""
    from ..answer import answer_shard
    from ..benchmarks import get
    from ..devices import set_threads
    from ..models.model import ModelUnderTest
    from ..ode.task import release_task
    from ..sources import source_queries

    set_threads(threads)
    src = answer.source
    folder = release_dir(source[0]) if get(src.kind).release else None
    queries, image_root = source_queries(src.to_dict(), folder)
    # a model that reads the concept graph (its inputs list the graph's files) is given the graph's folder
    model = ModelUnderTest(spec, graph_dir=str(Path(graph[0]).parent) if graph else None)
    return answer_shard(
        queries,
        image_root,
        model,
        cache,
        answers,
        shard=int(shard),
        n_shards=int(shards),
        settings=answer,
        declared_task=release_task(folder) if folder is not None else None,
    )
