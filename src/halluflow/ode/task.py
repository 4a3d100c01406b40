"""The task a release declares: how each query kind is asked and read, written once into its manifest (`task`).

A release is a task. Its definition holds, per query kind (the queries' `task` column: `discriminative` for the
yes/no questions, `generative` for descriptions), the exact prompt template (`{question}` followed by the kind's
suffix), the system prompt (none: halluflow's answer stage sends none), the generation limit (max new tokens) and
the answer reader (a parser name of halluflow.metrics.parsers; descriptions are not read as yes/no: null).

halluflow's answer stage, the lmms-eval and VLMEvalKit exports and `halluflow score release` all take the prompt,
the limits and the reader from this one definition. A run that asks or reads otherwise (another suffix, another
limit, another reader) is an *override*: its metrics list the differences (`task.overrides`) and carry the hash of
the definition actually used (`task.hash`); `score compare` refuses to pair answers scored under different hashes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..io import stable_hash

TASK_FORMAT = "halluflow-task/1"
KINDS = ("discriminative", "generative")
# The release's own reader: the yes/no parser every tool reads a release's answers with unless a run overrides it
# (halluflow.metrics.parsers.release_yes_no: case- and whitespace-robust, unknown for what it cannot read).
RELEASE_READER = "release"
DEFAULT_SUFFIX = " Answer yes or no."
DEFAULT_MAX_NEW_TOKENS = {"discriminative": 6, "generative": 24}


def task_definition(answer: Any = None, reader: str = RELEASE_READER) -> dict:
    """The task definition from an answer section (typed `Answer`, a mapping with `yes_no_suffix` and
    `max_new_tokens`, or None for the defaults) and the yes/no reader."""
    if answer is None:
        answer = {}
    if not isinstance(answer, Mapping):
        answer = answer.to_dict()
    suffix = answer.get("yes_no_suffix")
    suffix = DEFAULT_SUFFIX if suffix is None else str(suffix)  # null: halluflow's default
    limits = {**DEFAULT_MAX_NEW_TOKENS, **dict(answer.get("max_new_tokens") or {})}
    return {
        "format": TASK_FORMAT,
        "system_prompt": None,
        "kinds": {
            "discriminative": {
                "template": "{question}" + suffix,
                "suffix": suffix,
                "max_new_tokens": int(limits["discriminative"]),
                "reader": reader,
            },
            "generative": {
                "template": "{question}",
                "suffix": "",
                "max_new_tokens": int(limits["generative"]),
                "reader": None,
            },
        },
    }


def task_hash(task: Mapping) -> str:
    """A short stable hash of a task definition (canonical JSON)."""
    return stable_hash(json.dumps(task, sort_keys=True, ensure_ascii=True, separators=(",", ":")))[:16]


def check_task(task: Any, where: str) -> dict:
    """A task definition read from a file, checked (one clear line when it is not one)."""
    kinds = task.get("kinds") if isinstance(task, dict) else None
    if not isinstance(kinds, dict) or any(not isinstance(kinds.get(k), dict) for k in KINDS):
        raise InputError(f"{where}: 'task' is not a task definition (needs kinds {', '.join(KINDS)})")
    for kind in KINDS:
        spec = kinds[kind]
        if not isinstance(spec.get("suffix"), str) or not isinstance(spec.get("max_new_tokens"), int):
            raise InputError(f"{where}: task kind {kind!r} lacks a suffix or max_new_tokens")
    return task


def release_task(release_dir: str | Path | None, manifest: Mapping | None = None) -> dict | None:
    """The task a release declares (its manifest's `task`); None for a release made before releases declared it."""
    if manifest is None:
        from ..io import read_json

        path = Path(release_dir) / "manifest.json" if release_dir is not None else None
        if path is None or not path.is_file():
            return None
        manifest = read_json(path)
    task = manifest.get("task") if isinstance(manifest, Mapping) else None
    return None if task is None else check_task(task, f"{release_dir or 'manifest'}")


def kind_of(task_column: Any) -> str:
    """The task kind of a query row's `task` value (anything but `generative` is asked as a yes/no question)."""
    return "generative" if task_column == "generative" else "discriminative"


def prompt(task: Mapping, question: str, kind: str) -> str:
    """The exact prompt text of one query under a task definition."""
    return str(task["kinds"][kind_of(kind)]["template"]).replace("{question}", str(question))


def with_reader(task: Mapping, reader: str | None) -> dict:
    """The same task read with another yes/no reader (None: as declared)."""
    out = json.loads(json.dumps(task))
    if reader is not None:
        out["kinds"]["discriminative"]["reader"] = reader
    return out


def overrides(declared: Mapping | None, used: Mapping) -> list[str]:
    """What `used` does differently from the release's `declared` task, one line per difference ([] = none)."""
    if declared is None:
        return []
    lines = []
    if declared.get("system_prompt") != used.get("system_prompt"):
        lines.append(f"system_prompt: {declared.get('system_prompt')!r} -> {used.get('system_prompt')!r}")
    for kind in KINDS:
        a, b = declared["kinds"].get(kind, {}), used["kinds"].get(kind, {})
        for key in ("suffix", "max_new_tokens", "reader"):
            if a.get(key) != b.get(key):
                lines.append(f"{kind}.{key}: {a.get(key)!r} -> {b.get(key)!r}")
    return lines


def task_record(declared: Mapping | None, used: Mapping, note: str | None = None) -> dict:
    """The `task` block of a metrics JSON: the definition used, its hash, the release's hash and the overrides."""
    lines = overrides(declared, used)
    out = {
        "hash": task_hash(used),
        "declared_hash": task_hash(declared) if declared is not None else None,
        "overridden": bool(lines),
        "overrides": lines,
        "definition": dict(used),
    }
    if note:
        out["note"] = note
    return out


def answers_task(answers: Any, declared: Mapping | None, reader: str | None, where: str) -> tuple[dict, dict]:
    """The task a table of answers was asked and is read under, and its metrics record.

    The answer stage records the definition it asked with (`task_definition`, JSON); an exported lmms-eval task or
    VLMEvalKit dataset records the hash of the release's task (`task_hash`) in every sample. Without either, the
    answers are taken as asked the way the release declares (said in the record's note). `reader`: the yes/no
    reader of this scoring (None: the one the answers were asked for). Answers asked under two definitions are
    refused."""
    columns = set(getattr(answers, "columns", ()))
    note, asked_hash = None, None
    if "task_definition" in columns and answers["task_definition"].drop_nulls().len():
        found = sorted(set(answers["task_definition"].drop_nulls().to_list()))
        if len(found) > 1:
            raise InputError(f"{where}: answers asked under {len(found)} different task definitions; score them apart")
        try:
            used = check_task(json.loads(found[0]), where)
        except (ValueError, TypeError):
            raise InputError(f"{where}: its task_definition column is not a task definition") from None
    else:
        if "task_hash" in columns and answers["task_hash"].drop_nulls().len():
            found = sorted(set(answers["task_hash"].drop_nulls().to_list()))
            if len(found) > 1:
                raise InputError(f"{where}: answers asked under {len(found)} different tasks (task_hash {found})")
            asked_hash = str(found[0])
        if declared is not None:
            used = json.loads(json.dumps(declared))
            if asked_hash is None:
                note = "the answers record no task: taken as asked the way the release declares"
        else:
            used = task_definition()
            note = "neither the answers nor the release record a task: halluflow's defaults assumed"
    used = with_reader(used, reader)
    record = task_record(declared, used, note)
    if asked_hash is not None and declared is not None and asked_hash != task_hash(declared):
        # asked under another definition than the release's: only its hash is known
        record["overridden"] = True
        record["overrides"].insert(0, f"asked under task {asked_hash}, not the release's {task_hash(declared)}")
        record["hash"] = stable_hash(f"{asked_hash}:{record['hash']}")[:16]
    return used, record
