"""`halluflow import vlmevalkit`: VLMEvalKit's prediction file (xlsx, tsv, csv or json) -> halluflow answers JSONL.

VLMEvalKit writes `<work_dir>/<model>/.../<model>_<dataset>.xlsx` (or .tsv / .json with PRED_FORMAT=tsv / json;
a .csv reads as well): the dataset's columns without the image, plus `prediction`. A dataset written by `halluflow
release export --format vlmevalkit` has a `query_id` and a `task_hash` column (the release task it was asked
under); any other Y/N dataset (VLMEvalKit's POPE) is keyed by its `index`. xlsx needs openpyxl (the `imports`
extra; read only when installed); tsv, csv and json are read with the standard library.
"""

from __future__ import annotations

import csv
import io
import re
import sys
import zipfile
from pathlib import Path

from ..errors import InputError
from ..io import decode_utf8, read_bytes


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # a spreadsheet's 7.0 is the index 7
    return str(value)


_ID_LIKE = re.compile(r"[\w.:-]{1,128}\Z")


def _text_table(path: str, delimiter: str) -> list[tuple[int, list[str]]]:
    """(line, fields) of each row of a TSV/CSV, read by the csv module: a quoted value may hold tabs, commas and
    line breaks; a byte-order mark is dropped; a quote never closed is refused (strict), not read to the end."""
    csv.field_size_limit(sys.maxsize)  # a dataset TSV holds base64 images
    text = decode_utf8(read_bytes(path), path)
    if text.startswith("\ufeff"):  # Excel's and pandas' utf-8-sig: the first column is `index`, not `\ufeffindex`
        text = text[1:]
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    table = []
    line = 1
    try:
        for row in reader:
            table.append((line, row))
            line = reader.line_num + 1
    except csv.Error as exc:
        reason = str(exc)
        if "unexpected end of data" in reason or "EOF" in reason:
            reason = "a quoted value is never closed (an unterminated quote)"
        raise InputError(
            f"{path}: line {line}: not a readable {'TSV' if delimiter == chr(9) else 'CSV'} ({reason})"
        ) from None
    return table


def read_table(path: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The prediction table: its header and (line, fields) of each data row, every row as wide as the header;
    InputError in one line for a row of another width (an unquoted tab inside a value, a cut row)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".xlsx":
        try:
            import openpyxl
        except ImportError:
            raise InputError(
                f"{path}: reading .xlsx needs openpyxl (pip install openpyxl), or run VLMEvalKit with PRED_FORMAT=tsv"
            ) from None
        try:
            sheet = openpyxl.load_workbook(read_bytes_io(path), read_only=True, data_only=True).worksheets[0]
            table = [(i, [_cell(v) for v in row]) for i, row in enumerate(sheet.iter_rows(values_only=True), 1)]
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:  # not a workbook, or a damaged one
            raise InputError(f"{path}: not a readable xlsx workbook ({str(exc)[:160]})") from None
        # a sheet's row is as wide as its widest row: empty cells at the end of the header or a row are padding
        while table and table[0][1] and table[0][1][-1] == "":
            table[0][1].pop()
        width = len(table[0][1]) if table else 0
        table = [(i, row[:width] + [""] * (width - len(row)) if not any(row[width:]) else row) for i, row in table]
    elif suffix in (".tsv", ".csv"):
        table = _text_table(path, "\t" if suffix == ".tsv" else ",")
    elif suffix == ".json":
        table = _json_table(path)
    else:
        raise InputError(f"{path}: expected VLMEvalKit's .xlsx, .tsv, .csv or .json prediction file")
    if not table:
        raise InputError(f"{path}: empty")
    header = table[0][1]
    rows = [(line, row) for line, row in table[1:] if any(cell.strip() for cell in row)]
    for line, row in rows:
        if len(row) != len(header):
            raise InputError(
                f"{path}: line {line}: {len(row)} fields where the header has {len(header)} (an unquoted "
                f"{'tab' if suffix == '.tsv' else 'separator'} inside a value, or a cut row)"
            )
    return header, rows


def _json_table(path: str) -> list[tuple[int, list[str]]]:
    """VLMEvalKit's PRED_FORMAT=json file (its dump of the predictions DataFrame: a JSON array of one object per
    row, `to_dict('records')`) as the (record, fields) table the other formats give; a pandas NaN is an empty
    cell."""
    import math

    from ..io import read_json

    records = read_json(path)
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise InputError(f"{path}: expected a JSON array of prediction records (VLMEvalKit's PRED_FORMAT=json)")
    header: dict[str, None] = {}
    for record in records:
        header.update(dict.fromkeys(map(str, record)))
    columns = list(header)

    def cell(value) -> str:
        if isinstance(value, float) and math.isnan(value):
            return ""
        if isinstance(value, (dict, list)):
            raise InputError(f"{path}: a prediction record holds a nested {type(value).__name__}, not a table cell")
        return _cell(value)

    rows = [(i, [cell(record.get(c)) for c in columns]) for i, record in enumerate(records, 1)]
    return [(0, columns), *rows] if records else []


def read_bytes_io(path: str):
    return io.BytesIO(read_bytes(path))


def _column(path: str, header: list[str], name: str) -> int | None:
    where = [i for i, h in enumerate(header) if h.strip() == name]
    if len(where) > 1:
        raise InputError(
            f"{path}: column {name!r} appears {len(where)} times (columns {', '.join(str(i + 1) for i in where)}); "
            "which one holds the answers is unclear"
        )
    return where[0] if where else None


def _merged_rows(text: str, width: int, key: int, delimiter: str) -> bool:
    """Whether a value holding line breaks holds lines that read as rows of the file themselves (as wide as the
    header, an id-like key): a quote opened in one row and closed rows later, which merged them."""
    for line in text.split("\n")[1:]:
        parts = line.rstrip("\r").split(delimiter)
        if len(parts) == width and _ID_LIKE.match(parts[key].strip()):
            return True
    return False


def read_predictions(path: str) -> list[tuple[str, str, str, str, str | None]]:
    header, rows = read_table(path)
    prediction = _column(path, header, "prediction")
    if prediction is None:
        raise InputError(f"{path}: no 'prediction' column (not a VLMEvalKit prediction file?)")
    query_id, index = _column(path, header, "query_id"), _column(path, header, "index")
    digest = _column(path, header, "task_hash")
    name, key = ("query_id", query_id) if query_id is not None else ("index", index)
    if key is None:
        raise InputError(f"{path}: neither a 'query_id' nor an 'index' column")
    delimiter = "\t" if Path(path).suffix.lower() == ".tsv" else ","
    dataset = Path(path).stem
    records = []
    for line, row in rows:
        if not row[key].strip():
            raise InputError(f"{path}: line {line} has no {name}")
        for cell in row:
            if (
                "\n" in cell
                and Path(path).suffix.lower() not in (".xlsx", ".json")
                and _merged_rows(cell, len(header), key, delimiter)
            ):
                raise InputError(
                    f"{path}: line {line}: a quoted value runs over lines that read as rows of their own (a quote "
                    "opened and closed rows later?); refusing rather than merging rows"
                )
        task_hash = row[digest].strip() or None if digest is not None else None  # an exported dataset's task
        records.append((row[key], row[prediction], dataset, f"{path}: line {line}", task_hash))
    return records
