"""`halluflow import vlmevalkit`: VLMEvalKit's prediction file (xlsx or tsv) -> halluflow answers JSONL.

VLMEvalKit writes `<work_dir>/<model>/.../<model>_<dataset>.xlsx` (or .tsv with PRED_FORMAT=tsv): the dataset's
columns without the image, plus `prediction`. A dataset written by `halluflow release export --format vlmevalkit`
has a `query_id` column; any other Y/N dataset (VLMEvalKit's POPE) is keyed by its `index`. xlsx needs openpyxl
(read only when installed); tsv is read with the standard library.
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

from ..errors import InputError
from ..io import decode_utf8, read_bytes


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # a spreadsheet's 7.0 is the index 7
    return str(value)


def read_table(path: str) -> list[dict[str, str]]:
    """The prediction table as rows of strings (header from the first row)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".xlsx":
        try:
            import openpyxl
        except ImportError:
            raise InputError(
                f"{path}: reading .xlsx needs openpyxl (pip install openpyxl), or run VLMEvalKit with PRED_FORMAT=tsv"
            ) from None
        try:
            sheet = openpyxl.load_workbook(path, read_only=True, data_only=True).worksheets[0]
            table = [[_cell(v) for v in row] for row in sheet.iter_rows(values_only=True)]
        except (OSError, ValueError, KeyError) as exc:  # not a workbook, or a damaged one
            raise InputError(f"{path}: not a readable xlsx workbook ({exc})") from None
    elif suffix in (".tsv", ".csv"):
        csv.field_size_limit(sys.maxsize)  # a dataset TSV holds base64 images
        text = decode_utf8(read_bytes(path), path)
        # a quoted prediction may hold newlines: the csv reader, not splitlines, decides where a row ends
        table = list(csv.reader(io.StringIO(text, newline=""), delimiter="\t" if suffix == ".tsv" else ","))
    else:
        raise InputError(f"{path}: expected VLMEvalKit's .xlsx or .tsv prediction file")
    if not table:
        raise InputError(f"{path}: empty")
    header = table[0]
    return [dict(zip(header, row)) for row in table[1:] if any(row)]


def read_predictions(path: str) -> list[tuple[str, str, str, str]]:
    rows = read_table(path)
    columns = set(rows[0]) if rows else set()
    if "prediction" not in columns:
        raise InputError(f"{path}: no 'prediction' column (not a VLMEvalKit prediction file?)")
    key = "query_id" if "query_id" in columns else "index"
    if key not in columns:
        raise InputError(f"{path}: neither a 'query_id' nor an 'index' column")
    dataset = Path(path).stem
    records = []
    for i, row in enumerate(rows, 2):
        if not row.get(key):
            raise InputError(f"{path}: row {i} has no {key}")
        records.append((row[key], row.get("prediction") or "", dataset, f"{path}: row {i}"))
    return records
