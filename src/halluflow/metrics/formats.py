"""One reader per external file format: POPE label and answer files (RUCAIBox/POPE), AMBER annotations, queries and
responses (junyangwang0410/AMBER). Every scorer, source and converter reads these formats through here, so a
malformed file gets the same one-line error (naming the file and the record) wherever it is read.

JSON Lines files go through polars' NDJSON reader with an explicit schema: no Python object per line. A value of
the wrong type (an answer `1`, `true` or `["yes"]`) is refused instead of stringified: the reader fails on it, and
the slow path re-reads the file line by line and names the offending record.
"""

from __future__ import annotations

import json
from io import BytesIO
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError
from ..io import decode_utf8, is_stream, read_bytes, read_json, read_jsonl

if TYPE_CHECKING:
    import polars as pl

YES, NO = "yes", "no"


def _is_json_array(path: Path, data: bytes | None) -> bool:
    if data is not None:
        return data[:256].lstrip()[:1] == b"["
    try:
        with open(path, "rb") as fh:
            return fh.read(256).lstrip()[:1] == b"["
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, expected a file") from None
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror})") from None


def read_records(
    path: str | Path, string_fields: tuple[str, ...], id_field: str, what: str, categorical: bool = False
) -> "pl.DataFrame":
    """`id_field` (any JSON scalar, as a string) and `string_fields` (JSON strings or null) of every record of a JSON
    Lines file or a JSON array. A record whose field holds a number, boolean, list or object is refused.
    `categorical` keeps the string fields as pl.Categorical (for columns of few distinct values: answers, labels)."""
    import polars as pl

    path = Path(path)
    # A pipe, FIFO or /dev/stdin can be read once: it is read whole here, and the sniff and both readers use the bytes.
    data = read_bytes(path) if is_stream(path) else None
    if not _is_json_array(path, data):
        fast = _fast_ids_and_fields(path, string_fields, id_field, data)
        if fast is not None:
            return fast if categorical else fast.with_columns(pl.col(string_fields).cast(pl.String))
    rows = read_jsonl(path, None if data is None else decode_utf8(data, path))
    if not rows:
        raise InputError(f"{path}: no records")
    cols: dict[str, list] = {id_field: []}
    cols.update({f: [] for f in string_fields})
    for i, r in enumerate(rows, 1):
        v = r.get(id_field)
        if isinstance(v, (dict, list)):
            raise InputError(f"{path}: {what} #{i} has {id_field} {json.dumps(v)}, expected a number or string")
        cols[id_field].append(None if v is None else str(v))
        for f in string_fields:
            v = r.get(f)
            if v is not None and not isinstance(v, str):
                raise InputError(
                    f"{path}: {what} #{i} ({id_field} {r.get(id_field)!r}): {f} is {json.dumps(v)[:60]}, "
                    "expected a string"
                )
            cols[f].append(v)
    kind = pl.Categorical if categorical else pl.String
    return pl.DataFrame(cols, schema={id_field: pl.String, **{f: kind for f in string_fields}})


def _first_record(path: Path, data: bytes | None) -> dict | None:
    with open(path, "rb") if data is None else BytesIO(data) as fh:
        for line in fh:
            if line.strip():
                try:
                    row = json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    return None
                return row if isinstance(row, dict) else None
    return None


def _fast_ids_and_fields(
    path: Path, string_fields: tuple[str, ...], id_field: str, data: bytes | None = None
) -> "pl.DataFrame | None":
    """polars' NDJSON reader with an explicit schema (other fields skipped); None sends the file to the slow path,
    which names the offending line. Text fields are read as categoricals: that reader refuses a number, boolean,
    list or object where a string belongs (read as pl.String it would stringify them), and model answers repeat a
    lot, so each distinct string is stored once."""
    import polars as pl

    first = _first_record(path, data)
    if first is None:
        return None
    # The id is a number in some files and a string in others: the first record decides, and a record that
    # disagrees makes the reader fail, so the slow path reports it.
    first_id = first.get(id_field)
    if isinstance(first_id, bool) or not isinstance(first_id, (int, str)):
        return None
    schema = {id_field: pl.String if isinstance(first_id, str) else pl.Int64}
    # A field the first record lacks (an answer file's "text" and "status", usually) is read as pl.Null: 15 % less
    # parsing per million records, and as strict (a later string there fails the read, which is then redone with
    # every field categorical).
    absent = [f for f in string_fields if first.get(f) is None]
    for guess in ({f: pl.Null for f in absent}, {}) if absent else ({},):
        try:
            df = pl.read_ndjson(
                path if data is None else BytesIO(data),
                schema=schema | {f: guess.get(f, pl.Categorical) for f in string_fields},
            )
        except (pl.exceptions.PolarsError, OSError, ValueError):
            continue
        if not df.height:
            return None
        return df.with_columns(pl.col(list(guess)).cast(pl.Categorical)) if guess else df
    return None


def check_ids(ids: "pl.Series", path: Path, id_field: str = "question_id", native: bool = False) -> "pl.Series":
    """The ids as strings (ids are strings everywhere in halluflow; `native` keeps them as read, integers or
    strings, for a caller that only aligns two files: `pope.align` compares them natively and casts only when the
    two files disagree); a missing or repeated id is refused."""
    import polars as pl

    if ids.is_null().all():
        raise InputError(f"{path}: records lack '{id_field}'")
    if ids.is_null().any():
        raise InputError(f"{path}: record #{int(ids.is_null().arg_max()) + 1} has no {id_field}")
    if ids.n_unique() < len(ids):  # cheap test first (on integer ids when they are); locate the duplicate only then
        dup = ids.is_duplicated()
        raise InputError(f"{path}: {id_field} {str(ids.filter(dup)[0])!r} appears more than once")
    return ids if native else ids.cast(pl.String)


# ---------------------------------------------------------------- POPE
def read_pope_labels(
    path: str | Path, require_label: bool = True, questions: bool = True, scoring: bool = False
) -> "pl.DataFrame":
    """POPE label/question file (COCO: JSONL; A-OKVQA/GQA: JSON array of {question_id, image, text, label}) →
    DataFrame[question_id, image, text, truth] with truth "yes"/"no" (null only when require_label is False).
    `questions=False` reads only the ids and labels (what scoring needs) → DataFrame[question_id, truth].
    `scoring`: ids as read (see check_ids) and truth categorical, for `score pope`, which only aligns and counts."""
    import polars as pl

    path = Path(path)
    df = read_records(path, ("image", "text", "label") if questions else ("label",), "question_id", "record", True)
    ids = check_ids(df["question_id"], path, native=scoring)
    label = df["label"]
    exact = ((label == YES) | (label == NO)).fill_null(False).all()
    if not (exact and scoring):
        label = label.cast(pl.String)
    truth = label if exact else label.str.strip_chars().str.to_lowercase()
    if not exact:  # some label is not exactly "yes"/"no": find any that is not one after normalising
        bad = ~truth.is_in([YES, NO]).fill_null(False)
        if not require_label:
            bad = bad & truth.is_not_null()
        if bad.any():
            i = int(bad.arg_max())
            raise InputError(f"{path}: question_id {str(ids[i])!r} has label {label[i]!r} (expected yes/no)")
    if not questions:
        return pl.DataFrame({"question_id": ids, "truth": truth})
    return pl.DataFrame(
        {"question_id": ids, "image": df["image"].cast(pl.String), "text": df["text"].cast(pl.String), "truth": truth}
    )


def pope_native_ids(path: str | Path) -> dict[str, int | str]:
    """{question_id as halluflow keeps it (a string): the id exactly as the file gives it}: answers written for a
    POPE file carry its own ids back, so "000" stays the string "000" and 7 the integer 7 (a scorer that compares
    natively, POPE's own included, then finds every answer)."""
    return {str(r.get("question_id")): r.get("question_id") for r in read_jsonl(path)}


def read_pope_answers(path: str | Path, scoring: bool = False) -> "pl.DataFrame":
    """POPE answer file → DataFrame[question_id, answer, status]: JSONL {question_id, answer} or LLaVA's
    {question_id, text}; `status` ("ok"/"failed", as `halluflow answer run` writes it) defaults to ok. One file uses
    one of answer/text: a file mixing them is refused (which one would be the model's answer is a guess). `answer`
    and `status` are categorical: a million answers hold a few hundred distinct strings, each stored once.
    `scoring`: ids as read (see check_ids)."""
    import polars as pl

    path = Path(path)
    df = read_records(path, ("answer", "text", "status"), "question_id", "answer", categorical=True)
    ids = check_ids(df["question_id"], path, native=scoring)
    has_answer, has_text = df["answer"].is_not_null(), df["text"].is_not_null()
    both = has_answer & has_text
    if both.any() or (has_answer.any() and has_text.any()):
        i = int(both.arg_max()) if both.any() else int((has_text if has_answer[0] else has_answer).arg_max())
        raise InputError(f"{path}: records mix 'answer' and 'text' (question_id {str(ids[i])!r}); use one key per file")
    if not has_answer.any() and not has_text.any() and df["status"].is_null().all():
        raise InputError(f"{path}: records have no 'answer' or 'text' (expected {{question_id, answer}})")
    answer = df["text"] if has_text.any() else df["answer"]
    status = df["status"]
    bad = ~((status == "ok") | (status == "failed")).fill_null(True)
    if bad.any():
        i = int(bad.arg_max())
        raise InputError(f"{path}: question_id {str(ids[i])!r} has status {status[i]!r} (expected ok or failed)")
    return pl.DataFrame({"question_id": ids, "answer": answer.rename("answer"), "status": status.fill_null("ok")})


# ---------------------------------------------------------------- AMBER
def _json_array(path: str | Path, what: str) -> list:
    data = read_json(path)
    if not isinstance(data, list):
        kind = {
            "dict": "object",
            "str": "string",
            "int": "number",
            "float": "number",
            "bool": "boolean",
            "NoneType": "null",
        }.get(type(data).__name__, type(data).__name__)
        raise InputError(f"{path}: expected AMBER's JSON array of {what}, got a JSON {kind}")
    return data


def read_amber_annotations(path: str | Path, indexed: bool = True) -> list[dict]:
    """AMBER annotations.json: [{id, type, truth, hallu?}]; generative truth = list of object names, the others
    "yes"/"no". `indexed`: ids must be 1..N in order (AMBER's scorer indexes annotations by id - 1); otherwise
    any distinct integers (a subset of the file)."""
    path = Path(path)
    data = _json_array(path, "{id, type, truth} records")
    seen: set[int] = set()  # only for indexed=False: 1..N in order are distinct
    for n, a in enumerate(data, 1):
        if type(a) is not dict:
            raise InputError(f"{path}: record {n} is not an object")
        i = a.get("id")
        if type(i) is not int or (i != n if indexed else i in seen):  # type(True) is bool: refused
            raise InputError(
                f"{path}: record {n} has id {i!r}; "
                + ("AMBER indexes by id-1" if indexed else "expected a distinct integer")
            )
        if not indexed:
            seen.add(i)
        kind = a.get("type")
        if type(kind) is not str:
            raise InputError(f"{path}: record id {i} has no string 'type'")
        if "truth" not in a:
            raise InputError(f"{path}: record id {i} has no 'truth'")
        truth = a["truth"]
        if kind == "generative":
            for key in ("truth", "hallu"):
                value = a.get(key, [])
                if type(value) is not list or not all(type(w) is str for w in value):
                    raise InputError(f"{path}: generative record id {i} needs '{key}' as a list of object names")
        elif truth != YES and truth != NO and (type(truth) is not str or truth.strip().lower() not in (YES, NO)):
            raise InputError(f"{path}: record id {i} ({kind}) has truth {json.dumps(truth)[:40]}, expected yes/no")
    return data


def read_amber_queries(path: str | Path) -> list[dict]:
    """AMBER query_*.json: [{id, image, query}]."""
    path = Path(path)
    data = _json_array(path, "{id, image, query} records")
    for i, q in enumerate(data):
        if not isinstance(q, dict):
            raise InputError(f"{path}: item {i} is not an object")
        missing = [k for k in ("id", "image", "query") if k not in q]
        if missing:
            raise InputError(f"{path}: item {i}: missing key(s) {', '.join(missing)}")
        if not isinstance(q["id"], int) or isinstance(q["id"], bool):
            raise InputError(f"{path}: item {i} has id {q['id']!r}, expected an integer")
        if not isinstance(q["query"], str) or not isinstance(q["image"], str):
            raise InputError(f"{path}: item {i} (id {q['id']}) needs string 'image' and 'query'")
    return data


def read_amber_responses(path: str | Path, n_annotations: int | None) -> "pl.DataFrame":
    """AMBER responses [{id, response}] → DataFrame[id, response, status]; an empty response is kept (a failed
    answer, excluded and counted by the scorer), a non-string one refused. An optional "status" (ok / failed, as
    halluflow's answer stage writes it; default ok) marks a request that failed. Ids must lie in 1..n_annotations
    (from 1 up when n_annotations is None: the caller checks the upper end)."""
    import polars as pl

    path = Path(path)
    data = _json_array(path, '{"id", "response"} records')
    if not data:
        raise InputError(f"{path}: no responses (an empty array)")
    if not set(map(type, data)) - {dict}:  # the loop's checks column by column: 0.03 s less per 100k responses
        ids, texts = [r.get("id") for r in data], [r.get("response") for r in data]
        statuses = [r.get("status", "ok") for r in data]
        # type(True) is bool: refused
        typed = not set(map(type, ids)) - {int} and not set(map(type, texts)) - {str, type(None)}
        if typed and not set(statuses) - {"ok", "failed"}:
            try:
                df = pl.DataFrame(
                    {"id": ids, "response": texts, "status": statuses},
                    schema={"id": pl.Int64, "response": pl.String, "status": pl.String},
                )
            except TypeError:  # an id beyond Int64: the loop names it
                df = None
            if df is not None and 1 <= df["id"].min() and (n_annotations is None or df["id"].max() <= n_annotations):
                if df["id"].n_unique() == df.height:
                    return df
    ids, texts, statuses, seen = [], [], [], set()  # something is wrong: the loop names the first bad record
    for i, r in enumerate(data):
        rid = r.get("id") if isinstance(r, dict) else None
        if not isinstance(rid, int) or isinstance(rid, bool) or not isinstance(r.get("response"), (str, type(None))):
            raise InputError(f"{path}: item {i} needs an integer 'id' and a string 'response'")
        if rid < 1 or (n_annotations is not None and rid > n_annotations):
            raise InputError(
                f"{path}: item {i} has id {rid}, outside AMBER's 1..{'N' if n_annotations is None else n_annotations}"
            )
        if rid in seen:
            raise InputError(f"{path}: id {rid} appears more than once (item {i})")
        status = r.get("status", "ok")
        if status not in ("ok", "failed"):
            raise InputError(
                f"{path}: item {i} (id {rid}) has status {json.dumps(status)[:40]} (expected ok or failed)"
            )
        seen.add(rid)
        ids.append(rid)
        texts.append(r.get("response"))
        statuses.append(status)
    return pl.DataFrame(
        {"id": ids, "response": texts, "status": statuses},
        schema={"id": pl.Int64, "response": pl.String, "status": pl.String},
    )
