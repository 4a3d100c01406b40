"""The answer stage: ask one model under test every query of one shard (design "answers/{model}/{shard}").

Queries are assigned to shards by a hash of the query id; the model loads once per shard and only when some request
is not cached; requests run in batches; each answer goes to the request-hash cache the moment it arrives (a killed
job repeats nothing it received); failures (an empty answer among them) are recorded (status failed + error), never
cached, and retried by a rerun. When the cache cannot take an answer (a disk that fills), no further request is sent,
the answers already received or in flight are still kept (cached when the disk takes them, and in the answer table
either way), the table is written, and then the cache's one-line error is raised (`CacheFull`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from .backends.base import EMPTY_ANSWER
from .cache import RequestCache
from .config_types import Answer
from .errors import BackendError, InputError
from .io import scrub_surrogates, sha256_file, stable_hash, write_parquet
from .metrics.parsers import is_failed
from .models.model import ModelUnderTest, vlm_request, vlm_request_key
from .progress import progress
from .sources import resolve_images

log = logging.getLogger("halluflow.answer")

# Test hook: stop (as if killed) after this many NEW answers were cached, to prove a rerun repeats none of them.
STOP_AFTER_ENV = "HALLUFLOW_ANSWER_STOP_AFTER"

DEFAULT_SETTINGS: dict[str, Any] = {
    "yes_no_suffix": None,  # the source's declared task (halluflow.ode.task: " Answer yes or no." by default)
    "max_new_tokens": {"discriminative": 6, "generative": 24},
    "batch_size": 8,
    "max_answer_chars": 10000,
    "max_failed_fraction": 0.0,
    "record_latency": False,
}

ANSWER_SCHEMA = {
    "query_id": "String",
    "model": "String",
    "answer": "String",
    "status": "String",
    "error": "String",
    "request_hash": "String",
    "image_sha256": "String",  # the file the model was shown (null: no image): score compare pairs on it
    "stand_in": "Boolean",
    "latency_s": "Float64",
    "truncated": "Boolean",
    "original_chars": "Int64",
    "generation": "String",
    "task_definition": "String",  # the task the query was asked under (halluflow.ode.task, JSON)
}


class SimulatedCrash(RuntimeError):
    """Raised by the STOP_AFTER_ENV hook."""


class CacheFull(InputError):
    """The request cache stopped taking answers mid-shard; raised once the shard's answers are in: `table` holds
    them (written to the answer table too when that disk took it), so the caller can still write its own output."""

    def __init__(self, message: str, table):
        super().__init__(message)
        self.table = table


def shard_of(query_id: str, n_shards: int) -> int:
    """Stable across runs, machines and Python versions (unlike hash()): sha256 of the id, mod n."""
    return int(stable_hash(str(query_id))[:12], 16) % n_shards


def prompt_for(row: dict, settings: Answer | Mapping | dict) -> str:
    """The prompt of one query: its question in the template of its kind (halluflow.ode.task). `settings`: the
    answer section (its yes_no_suffix) or a task definition."""
    from .ode.task import prompt, task_definition

    task = settings if isinstance(settings, Mapping) and "kinds" in settings else task_definition(settings)
    # only a yes/no question (task discriminative) takes the suffix; every source sets the column
    kind = "discriminative" if row.get("task") == "discriminative" else "generative"
    return prompt(task, str(row["question"]), kind)


def clean_answer(text: Any, max_chars: int) -> tuple[str, bool, int]:
    """None → "", over-long answers truncated (a runaway 10 MB reply must not bloat every table downstream)."""
    text = "" if text is None else scrub_surrogates(str(text))  # a lone surrogate cannot be written as UTF-8
    if len(text) > max_chars:
        return text[:max_chars], True, len(text)
    return text, False, len(text)


def answer_shard(
    queries,
    image_root: str | os.PathLike,
    model: ModelUnderTest,
    cache_dir: str | os.PathLike,
    out_path: str | os.PathLike,
    shard: int = 0,
    n_shards: int = 1,
    settings: Answer | Mapping | None = None,
    declared_task: Mapping | None = None,
) -> dict:
    """Answer the shard's queries, write answers/<model>/<shard>.parquet, return counts for the log. `settings`: the
    config's answer section (typed, or a mapping completed with the schema's defaults; its source is not read).
    `declared_task`: the task the release declares (halluflow.ode.task): its reader is kept, the prompts and limits
    are the settings'; when they differ from the declaration the log says so, and every row records the task used."""
    import polars as pl

    from .ode.task import RELEASE_READER, overrides, task_definition

    settings = Answer.from_dict(settings or {})
    declared_disc = (declared_task or {}).get("kinds", {}).get("discriminative", {})
    reader = declared_disc.get("reader") or RELEASE_READER
    asked = settings.to_dict()
    if asked.get("yes_no_suffix") is None and declared_disc:  # null: the suffix the release declares
        asked["yes_no_suffix"] = declared_disc["suffix"]
    task_def = task_definition(asked, reader)
    task_json = json.dumps(task_def, sort_keys=True)
    override_lines = list(overrides(declared_task, task_def))  # said right after the job's first line
    limits = settings.max_new_tokens.to_dict()  # per task; another task gets the yes/no length
    model.bind(queries)
    stop_after = int(os.environ.get(STOP_AFTER_ENV, "0") or 0)
    rows = [r for r in queries.iter_rows(named=True) if shard_of(r["query_id"], n_shards) == shard]
    rows.sort(key=lambda r: str(r["query_id"]))
    image_rows = [r for r in rows if r.get("image")]
    paths = dict(zip((r["image"] for r in image_rows), resolve_images([r["image"] for r in image_rows], image_root)))
    digests = {rel: sha256_file(p) for rel, p in paths.items()}
    # A release states each image's sha256 (queries' image_sha256): an image swapped since packaging would be
    # answered as if it were the one the truths were checked on, so the shard stops before any request is paid.
    for r in image_rows:
        stated = r.get("image_sha256")
        if stated and stated != digests[r["image"]]:
            raise InputError(
                f"{paths[r['image']]}: not the image the release was packaged with (sha256 {digests[r['image']][:12]}…,"
                f" the release states {stated[:12]}…); run `halluflow release verify` on the release"
            )
    cache = RequestCache(cache_dir)
    key_fields = model.key_fields()

    planned = []  # (row, request, key, max_new_tokens)
    for r in rows:
        task = r.get("task") or "discriminative"
        limit = int(limits.get(task, limits["discriminative"]))
        image = r.get("image")
        request = vlm_request(
            r["query_id"],
            prompt_for(r, task_def),
            paths[image] if image else None,
            image_sha256=digests[image] if image else None,
            task=task,
            max_new_tokens=limit,
        )
        key = vlm_request_key(key_fields, request)
        planned.append((r, request, key, limit))

    results: dict[str, dict] = {}
    hits = 0
    for _, _, key, _ in planned:
        entry = cache.get(key)
        if entry is not None:
            results[key] = entry
            hits += 1
    misses = [p for p in planned if p[2] not in results]
    if misses:
        cache.check_writable()
    # The job's first line: what it will do (the model loads only after it, and only for misses).
    log.info(
        "model %s (backend %s%s) shard %d/%d: %d queries, %d cache hits, %d to request",
        model.name,
        model.backend_name,
        f", {model.args['model']}" if model.args.get("model") else "",
        shard,
        n_shards,
        len(planned),
        hits,
        len(misses),
    )
    for line in override_lines:
        log.warning("asked otherwise than the release declares (an override, recorded in every answer): %s", line)

    new = failed = 0
    batch_size = max(1, int(settings.batch_size))
    # Group by generation length so each backend call has one max_new_tokens, and sort each group by prompt length
    # so a batch pads its prompts to a near neighbour (ties by query id: the order stays deterministic).
    by_limit: dict[int, list] = {}
    for item in sorted(misses, key=lambda m: (len(m[1].prompt), m[1].request_id)):
        by_limit.setdefault(item[3], []).append(item)
    batches = [
        items[i : i + batch_size] for _, items in sorted(by_limit.items()) for i in range(0, len(items), batch_size)
    ]
    stream = model.run_stream([[b[1] for b in batch] for batch in batches])
    stand_in = None
    cache_error: str | None = None  # the first answer the cache could not take: nothing more is sent after it
    uncached = 0
    for b, i, outcome in progress(stream, desc=f"answer {model.name} {shard:03d}", total=len(misses)):
        _, request, key, _ = batches[b][i]
        if stand_in is None:
            stand_in = bool(model.describe().stand_in)
        text, error = outcome.text, outcome.error
        used = model.backend.generation_settings(request)
        generation = json.dumps(
            {**used, **({"note": outcome.note} if outcome.note else {})}, sort_keys=True, default=str
        )
        answer, truncated, original = clean_answer(text, int(settings.max_answer_chars))
        if error is None and is_failed(answer):  # whatever the backend: a blank answer is a failed one
            error = EMPTY_ANSWER
        record = {
            "answer": answer,
            "truncated": truncated,
            "original_chars": original,
            "latency_s": outcome.latency_s,
            "generation": generation,
            "stand_in": stand_in,
            "query_id": request.request_id,
        }
        if error is None:
            try:
                cache.put(key, record)  # at once: a kill after this line repeats nothing that arrived
            except InputError as exc:  # a full or failing disk: keep this answer and those in flight, send no more
                uncached += 1
                if cache_error is None:
                    cache_error = str(exc)
                    log.warning("the request cache takes no more answers: sending no further request")
                    model.stop(f"the request cache cannot take answers ({exc})")
            new += 1
            results[key] = record
            if stop_after and new >= stop_after:
                stream.close()
                raise SimulatedCrash(f"{STOP_AFTER_ENV}={stop_after}: stopped after {new} new answers")
        else:
            failed += 1
            error = scrub_surrogates(error)
            results[key] = {**record, "answer": "", "error": error, "failed": True}
            log.warning("model %s query %s failed: %s", model.name, request.request_id, error)

    table_rows = []
    for _, request, key, _ in planned:
        res = results[key]
        ok = not res.get("failed")
        table_rows.append(
            {
                "query_id": request.request_id,
                "model": model.name,
                "answer": res["answer"],
                "status": "ok" if ok else "failed",
                "error": None if ok else res["error"],
                "request_hash": key,
                "image_sha256": request.image_sha256,
                "stand_in": bool(res.get("stand_in", model.spec_stand_in)),
                # Wall-clock latency differs run to run; off by default so answer files are byte-reproducible.
                "latency_s": float(res.get("latency_s") or 0.0) if settings.record_latency else None,
                "truncated": bool(res.get("truncated", False)),
                "original_chars": int(res.get("original_chars", len(res["answer"]))),
                "generation": res.get("generation"),
                "task_definition": task_json,
            }
        )
    schema = {k: getattr(pl, v) for k, v in ANSWER_SCHEMA.items()}
    table = pl.DataFrame(table_rows, schema=schema, orient="row")
    try:
        write_parquet(out_path, table)
    except OSError as exc:
        if cache_error is None:
            raise
        cache_error += f"; the answer table {out_path} could not be written either ({exc.strerror or exc})"
    stats = {
        "queries": len(planned),
        "cache_hits": hits,
        "new": new,
        "failed": failed,
        "truncated": sum(r["truncated"] for r in table_rows),
        "empty": sum(r["answer"] == "" for r in table_rows),
    }
    log.info("model %s shard %d: %s", model.name, shard, json.dumps(stats, sort_keys=True))
    if cache_error is not None:
        raise CacheFull(
            f"{cache_error}; {new - uncached} answers received are cached, {uncached} more are not (a rerun asks "
            f"them again), {failed} requests failed or were not sent",
            table,
        )
    if planned and failed / len(planned) > float(settings.max_failed_fraction):
        first = next(r for r in table_rows if r["status"] == "failed")
        raise BackendError(
            f"model {model.name!r} shard {shard:03d}: {failed} of {len(planned)} requests failed "
            f"(first: query {first['query_id']}: {first['error']}); finished answers are cached, so a rerun retries "
            "only the failures; raise answer.max_failed_fraction to accept them"
        )
    return stats


def answer_file(
    source: str,
    questions: str,
    out: str | os.PathLike,
    spec: dict,
    *,
    images: str | None,
    annotations: str | None,
    cache: str | os.PathLike | None,
    settings: dict,
) -> tuple[dict, str]:
    """Ask the model of `spec` every question of one POPE / AMBER / ODE source (`halluflow answer run`) and write the
    answers to `out` in the format its scorer reads (.parquet: the answer table itself). The request cache is
    `cache` (default <out>.cache/). Returns the shard's stats and the first failure ("" when none failed): failures
    are written as status failed, never raised here, so the caller decides what a failed share means."""
    from pathlib import Path

    import polars as pl

    from .io import write_json, write_jsonl
    from .metrics.formats import pope_native_ids
    from .sources import load_source, original_id

    declared = None
    if source == "ode":
        from .ode.release import verify_release
        from .ode.task import release_task

        problems = verify_release(questions)
        if problems:
            raise InputError(
                f"release {questions} fails verification ({len(problems)} problem(s), first: "
                f"{problems[0]}); run `halluflow release verify {questions}`"
            )
        declared = release_task(questions)
        if declared is not None:  # what the caller left unset is asked as the release declares
            kinds = declared["kinds"]
            if settings.get("yes_no_suffix") is None:
                settings = {**settings, "yes_no_suffix": kinds["discriminative"]["suffix"]}
            lengths = {k: kinds[k]["max_new_tokens"] for k in kinds}
            settings = {**settings, "max_new_tokens": {**lengths, **(settings.get("max_new_tokens") or {})}}

    queries, image_root = load_source(source, questions, images, annotations)
    out = Path(out)
    cache = Path(cache) if cache else out.with_name(out.name + ".cache")
    # The shard never raises on failures here: the output is written first (failures recorded as status failed),
    # then the caller's limit decides.
    settings = {**settings, "max_failed_fraction": 1.0}
    table_path = out if out.suffix == ".parquet" else cache / "answers.parquet"
    full = None
    try:
        stats = answer_shard(
            queries,
            image_root,
            ModelUnderTest(spec),
            cache / spec["name"],
            table_path,
            settings=settings,
            declared_task=declared,
        )
    except CacheFull as exc:  # the answers received are in its table: written out below, then the one line
        stats, full = {}, exc
    table = pl.read_parquet(table_path) if full is None else full.table
    if out.suffix != ".parquet":
        if source == "amber":
            write_json(
                out, [{"id": original_id(r["query_id"]), "response": r["answer"]} for r in table.iter_rows(named=True)]
            )
        else:
            id_key = "question_id" if source == "pope" else "query_id"
            native = pope_native_ids(questions) if source == "pope" else {}
            write_jsonl(
                out,
                (
                    {
                        id_key: native.get(r["query_id"], r["query_id"]),
                        "answer": r["answer"],
                        "status": r["status"],
                        **({"error": r["error"]} if r["error"] else {}),
                    }
                    for r in table.iter_rows(named=True)
                ),
            )
    if full is not None:
        raise full
    failures = table.filter(pl.col("status") == "failed")
    first = f"first: query {original_id(failures['query_id'][0])}: {failures['error'][0]}; " if failures.height else ""
    return stats, first
