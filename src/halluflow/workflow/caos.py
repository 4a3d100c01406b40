"""Rules of rules/caos.smk: CAOS (context-aware object similarities of hallucinated objects) on one model's
generative answers, and ODE's clustered concept x hallucination diagnosis (Tu et al., ODE, Fig. 8). The scoring is
halluflow.caos.scores and halluflow.ode.diagnosis; each function reads its rule's inputs, builds the extractor,
oracle and embedders from the `caos:` section and writes the rule's outputs."""

from __future__ import annotations

from pathlib import Path

from ..config_types import Caos, Diagnosis
from ..errors import ConfigError, InputError
from ..io import read_json, read_parquet, write_json, write_parquet
from ..progress import get_logger
from . import release_dir

log = get_logger("halluflow.workflow.caos")


def read_answers(answers: list[str], model: str):
    """One model's answer shards as one table (shards may differ in optional columns)."""
    import polars as pl

    if not answers:
        raise InputError(f"model {model!r}: no answer shards")
    return pl.concat([read_parquet(p) for p in answers], how="diagonal_relaxed")


def _backend_spec(spec: dict) -> dict:
    """{backend, args} (the `models:` shape) or {backend, **kwargs} → the registry's {backend, **kwargs}."""
    spec = dict(spec)
    args = spec.pop("args", None) or {}
    for meta in ("name", "stand_in"):
        spec.pop(meta, None)
    return {**spec, **args}


def caos_score(
    *,
    answers: list[str],
    metrics: list[str],
    summary: str,
    objects: str,
    captions: str,
    caos: Caos,
    model: str,
    oracle_members: list[dict] = (),
    llm: dict | None = None,
    cache: str | None = None,
    source: dict | None = None,
    release: str | None = None,
    nodes: str | None = None,
) -> dict:
    """Rule caos_score -> caos/<model>.{json,objects.parquet,captions.parquet}.

    An ODE release (its manifest `release`) brings the queries (truth = each scene's objects) and the graph `nodes`
    (the vocabulary); a coco `source` (answer.source) brings one caption query per image, truth = its instances, and
    the vocabulary is built like `halluflow score caos` builds it (truth + frequent objects + COCO/CHAIR synonyms), so
    both agree. `llm`: the top-level `llm:` block when the extractor uses it. The oracle members and the extractor's
    LLM ask through the request cache under `cache` (a `models:` entry's folder is the answer stage's)."""
    from ..caos.extract import ObjectExtractor, build_vocabulary
    from ..caos.scores import Oracle, metrics_side_by_side, resolve_frequent, score_release_answers
    from ..models import registry
    from ..models.model import Model, cache_folder

    caos = Caos.from_dict(caos)  # a partial mapping (a library call) gets the schema's defaults
    answers_df = read_answers(answers, model)
    if source is not None and source.get("kind") == "coco":
        from ..sources import source_queries

        queries, image_root = source_queries(dict(source))
        nodes_df = None
        frequent = resolve_frequent(caos.frequent)
        truth_terms = {o for objs in queries["objects"].to_list() for o in objs or []}
        vocab = build_vocabulary(
            extra_terms=sorted(truth_terms | set(frequent)),
            synonyms=caos.synonyms,
            open_vocabulary=caos.open_vocabulary,
        )
    else:
        folder = release_dir(release)
        queries_path = folder / "queries.parquet"
        if not queries_path.exists():
            raise InputError(f"{queries_path}: release queries not found")
        queries, image_root = read_parquet(queries_path), folder
        nodes_df = read_parquet(nodes)
        vocab = build_vocabulary(
            graph_terms=sorted(nodes_df["node"].to_list()),
            synonyms=caos.synonyms,
            open_vocabulary=caos.open_vocabulary,
        )
        frequent = resolve_frequent(caos.frequent, nodes_df)
    extractor_llm = None
    if caos.extractor == "llm":
        spec = caos.to_dict()["llm"] or llm
        if not spec:
            raise ConfigError(
                "config key 'caos.llm': extractor 'llm' needs an llm spec (or a top-level `llm:` section)"
            )
        extractor_llm = Model.llm(
            _backend_spec(spec), method="caos extractor", cache=cache_folder(cache, spec, role="llm")
        )
    oracle, oracle_models = None, []
    if oracle_members:
        # Built like the answer stage builds a model under test (stand-in folders, the prior's graph, its request
        # cache folder), so a `models:` entry means the same backend, and the same cached answers, in both roles.
        for i, m in enumerate(oracle_members):
            spec = {"name": f"oracle-{i}", **m}
            oracle_models.append(
                Model.under_test(
                    spec,
                    graph_dir=str(Path(nodes).parent) if nodes else None,
                    method="caos oracle",
                    cache=cache_folder(cache, spec),
                )
            )
        o = caos.oracle
        oracle = Oracle([(m.name, m) for m in oracle_models], rule=o.vote, tie=o.tie, question=o.question)
    embedders = {name: registry.create("embedder", {"backend": name}) for name in caos.embedders}
    result, object_rows, caption_rows = score_release_answers(
        answers_df,
        queries,
        nodes_df,
        release_dir=image_root,
        extractor=ObjectExtractor(vocab, extractor_llm, negation=caos.negation, meta_words=caos.meta_words),
        embedders=embedders,
        oracle=oracle,
        k=caos.k,
        ks=sorted(set(caos.k_sweep)),
        frequent=frequent,
        ood_without_oracle=caos.ood_without_oracle,
    )
    metrics_json = read_json(metrics[0]) if metrics else None
    result.update(
        model=model,
        metrics=metrics_side_by_side(metrics_json, str(metrics[0]) if metrics else None),
        embedder_info={n: e.describe().as_dict() for n, e in embedders.items()},
        extractor=caos.extractor,
        llm=extractor_llm.describe().as_dict() if extractor_llm is not None else None,
        # Each member's backend, model id, revision and stand_in (the spec's flag included): who judged what.
        oracle={
            "members": [{"name": m.name, **m.describe().as_dict()} for m in oracle_models],
            "vote": oracle.rule,
            "tie": oracle.tie,
        }
        if oracle
        else None,
        vocabulary_size=len(vocab),
        frequent_source=str(caos.frequent),
    )
    result["settings"].update(extractor=caos.extractor, frequent=str(caos.frequent), k=caos.k)
    write_parquet(objects, object_rows)
    write_parquet(captions, caption_rows)
    write_json(summary, result)
    for name, s in result["embedders"].items():
        log.info(
            "%s: CAOS_T %s CAOS_X %s CAOS_K %s over %d hallucinated objects",
            name,
            s["caos_t"],
            s["caos_x"],
            s["caos_k"],
            s["n_hallucinated"],
        )
    return result


def caos_diagnosis(
    *,
    answers: list[str],
    release: str,
    captions: str,
    scores: list[str],
    matrix: str,
    heatmap: str,
    distributions: str,
    diagnosis: Diagnosis,
    model: str,
) -> dict:
    """Rule ode_diagnosis: scored answers + CAOS captions -> diagnosis/<model>.{parquet,png,distributions.parquet},
    with the `diagnosis:` section's clustering."""
    from ..ode.diagnosis import run_diagnosis

    diagnosis = Diagnosis.from_dict(diagnosis)
    answers_df = read_answers(answers, model)
    queries_path = release_dir(release) / "queries.parquet"
    if not queries_path.exists():
        raise InputError(f"{queries_path}: release queries not found")
    stand_in = bool(answers_df["stand_in"].any()) if "stand_in" in answers_df.columns and answers_df.height else False
    return run_diagnosis(
        read_parquet(queries_path),
        answers_df,
        read_parquet(captions),
        scores=read_parquet(scores[0]) if scores else None,
        model=model,
        stand_in=stand_in,
        out_parquet=matrix,
        out_png=heatmap,
        out_distributions=distributions,
        linkage=diagnosis.linkage,
        metric=diagnosis.metric,
        n_clusters=int(diagnosis.clusters),
        min_events=int(diagnosis.min_events),
        max_rows=int(diagnosis.max_rows),
    )
