"""One standalone HTML page per paper (ODE, CAOS, CEDI, UniHall/SAMF) from "paper section" JSON files.

Each method's own code writes its sections (`halluflow.io.write_json`, no import of this module needed):

    {"paper": "caos", "section": "fig3", "title": ..., "caption": "models, judges, sizes ...",
     "stand_ins": ["tiny-smolvlm", ...],            # every stand-in / fallback used; [] = none
     "tables": [{"id", "title", "columns", "rows", "metrics": [catalogue keys], "note"?}],
     "figures": [{"id", "title", "file": "fig.png" (relative to the JSON's folder), "caption", "metrics"}]}

`render_paper` refuses, in one line naming the file and the key, a section whose shape is wrong, whose figure file
is missing or not a PNG, or whose `metrics` name a key the metric catalogue lacks; a table column (or a long table's
`metric` cell) that names one of the table's catalogue keys is checked against that entry's range and carries the
entry's definition as a tooltip and a footnote. The page shows the stand-in banner whenever any section lists a
stand-in. Look and page shell are the report summary's (halluflow.report.summary).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..io import read_json, write_text
from ..metrics.catalogue import CATALOGUE, Metric
from .page import Html, _Page, figure_file, join, render_shell, tag

PAPERS = {
    "ode": 'Tu, Hu, Sang, "ODE: Open-Set Evaluation of Hallucinations in Multimodal Large Language Models" (CVPR 2025)',
    "caos": 'CAOS: "context-aware object similarity" for open-vocabulary object hallucination in captions',
    "cedi": 'Li et al., "Contextualized Evaluation of Vision Language Models through Dynamic, Multi-turn '
    'Interactions" (CEDI)',
    "samf": "UniHall / SAMF (EvalHall): static vs fuzzed hallucination by category, heuristic vs RL controllers",
}
LONG_TABLE = 16  # rows shown open; a longer table is folded under its row count
# on top of the summary's style: the section caption (who produced it) and the metric footnotes
CSS = """
p.caption { margin:0 0 8px; }
ol.notes { font-size:12px; color:var(--ink); padding-left:22px; }
ol.notes li { margin:3px 0; }
a.fn { text-decoration:none; color:var(--accent); font-size:10px; margin-left:2px; }
th[title], td[title], span[title] { cursor:help; }
th.text { text-align:left; }
"""

_SECTION_KEYS = {
    "paper": str,
    "section": str,
    "title": str,
    "caption": str,
    "stand_ins": list,
    "tables": list,
    "figures": list,
}
_TABLE_KEYS = {"id": str, "title": str, "columns": list, "rows": list, "metrics": list}
_FIGURE_KEYS = {"id": str, "title": str, "file": str, "caption": str, "metrics": list}


def _require(obj: Any, keys: dict[str, type], where: str) -> None:
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected an object, got {type(obj).__name__}")
    for key, kind in keys.items():
        if key not in obj:
            raise InputError(f"{where}.{key}: missing")
        if not isinstance(obj[key], kind):
            raise InputError(f"{where}.{key}: expected {kind.__name__}, got {type(obj[key]).__name__}")


def _item(obj: Any, keys: dict[str, type], where: str, seen: set[str]) -> str:
    """A table or figure of a section: its keys, and an id no other table or figure of the section uses."""
    _require(obj, keys, where)
    if obj["id"] in seen:
        raise InputError(f"{where}.id: {obj['id']!r} used twice in this section")
    seen.add(obj["id"])
    return where


def _metrics(keys: list, where: str) -> list[Metric]:
    out = []
    for i, key in enumerate(keys):
        if not isinstance(key, str):
            raise InputError(f"{where}.metrics[{i}]: expected a catalogue key (string), got {key!r}")
        if key not in CATALOGUE:
            raise InputError(
                f"{where}.metrics[{i}]: {key!r} is not in the metric catalogue (halluflow.metrics.catalogue, "
                "docs/metrics.md)"
            )
        out.append(CATALOGUE[key])
    return out


def _column_entry(column: str, entries: list[Metric]) -> Metric | None:
    """The table's catalogue entry a column header names: its key, the key's last part, or its label."""
    for e in entries:
        if column in (e.name, e.label) or e.name.endswith("." + column):
            return e
    return None


def load_section(path: str | Path, paper: str) -> dict:
    """One section file, checked: shape, paper, figure files, catalogue keys and the values of keyed columns."""
    path = Path(path)
    doc = read_json(path)
    where = str(path)
    _require(doc, _SECTION_KEYS, where)
    if doc["paper"] != paper:
        raise InputError(f"{where}.paper: {doc['paper']!r}, but this page is the {paper!r} paper")
    for i, name in enumerate(doc["stand_ins"]):
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"{where}.stand_ins[{i}]: expected a non-empty string, got {name!r}")
    seen: set[str] = set()
    for i, table in enumerate(doc["tables"]):
        tw = _item(table, _TABLE_KEYS, f"{where}: tables[{i}]", seen)
        if "note" in table and not isinstance(table["note"], str):
            raise InputError(f"{tw}.note: expected str, got {type(table['note']).__name__}")
        if not all(isinstance(c, str) for c in table["columns"]):
            raise InputError(f"{tw}.columns: every column name must be a string")
        entries = _metrics(table["metrics"], tw)
        keyed = [_column_entry(c, entries) for c in table["columns"]]
        metric_col = table["columns"].index("metric") if "metric" in table["columns"] else None
        for r, row in enumerate(table["rows"]):
            if not isinstance(row, list) or len(row) != len(table["columns"]):
                size = len(row) if isinstance(row, list) else type(row).__name__
                raise InputError(f"{tw}.rows[{r}]: expected {len(table['columns'])} cells (the columns), got {size}")
            for c, cell in enumerate(row):
                cw = f"{tw}.rows[{r}][{c}]"
                if cell is not None and not isinstance(cell, (str, int, float)):
                    raise InputError(f"{cw}: a cell is a string, a number or null, got {type(cell).__name__}")
                if keyed[c] is not None and isinstance(cell, bool):
                    raise InputError(
                        f"{cw} ({table['columns'][c]}): expected a number or null for {keyed[c].name}, got "
                        f"{str(cell).lower()}"
                    )
                if keyed[c] is not None and isinstance(cell, (int, float)):
                    CATALOGUE.check(keyed[c].name, cell, f"{cw} ({table['columns'][c]})")
            if metric_col is not None and row[metric_col] is not None:
                key = row[metric_col]
                if key not in table["metrics"]:
                    raise InputError(
                        f"{tw}.rows[{r}]: metric {key!r} is not one of the table's metrics (its catalogue keys)"
                    )
    for i, fig in enumerate(doc["figures"]):
        fw = _item(fig, _FIGURE_KEYS, f"{where}: figures[{i}]", seen)
        _metrics(fig["metrics"], fw)
        if Path(fig["file"]).is_absolute() or ".." in Path(fig["file"]).parts:
            raise InputError(f"{fw}.file: {fig['file']!r} must be a path inside the section's folder")
        # checked here (a PNG, a regular file), read when the page is written: inline up to the page's size limit
        fig["_path"], _ = figure_file(path.parent / fig["file"], f"{fw}.file")
    return doc


def _cell(value: Any) -> Html:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return tag("td", "n/a", class_="na")
    if isinstance(value, bool):
        return tag("td", "yes" if value else "no", class_="text")
    if isinstance(value, int):
        return tag("td", value)
    if isinstance(value, float):
        return tag("td", f"{value:.4g}")
    return tag("td", value, class_="text")


class _Notes:
    """The page's footnotes: one per catalogue entry, numbered in order of first use."""

    def __init__(self) -> None:
        self.order: list[Metric] = []

    def ref(self, entry: Metric) -> Html:
        if entry not in self.order:
            self.order.append(entry)
        n = self.order.index(entry) + 1
        return tag("sup", tag("a", n, href=f"#metric-{n}", class_="fn"))

    @staticmethod
    def tooltip(entry: Metric) -> str:
        better = f", {entry.better} is better" if entry.better else ""
        return f"{entry.name}: {entry.label}. {entry.definition} Range {entry.range_text}{better}."

    def labelled(self, entry: Metric) -> Html:
        return tag("span", entry.label, self.ref(entry), title=self.tooltip(entry))

    def html(self) -> Html:
        items = join(
            tag(
                "li",
                tag("code", e.name),
                " — ",
                tag("b", e.label),
                f": {e.definition} Range {e.range_text}{', ' + e.better + ' is better' if e.better else ''}; unit "
                f"{e.unit}. Failed answers: {e.failed} ",
                tag("i", e.reference),
                id=f"metric-{i}",
            )
            for i, e in enumerate(self.order, 1)
        )
        return tag("ol", items, class_="notes")


def _table_html(table: dict, notes: _Notes, section: str) -> Html:
    entries = [CATALOGUE[k] for k in table["metrics"]]
    head = []
    for c, column in enumerate(table["columns"]):
        entry = _column_entry(column, entries)
        # a text column's header sits left, over its cells (numbers stay right-aligned)
        text = "text" if any(isinstance(row[c], str) for row in table["rows"]) else None
        if entry is None:
            head.append(tag("th", column, class_=text))
        else:
            head.append(tag("th", column, notes.ref(entry), class_=text, title=notes.tooltip(entry)))
    metric_col = table["columns"].index("metric") if "metric" in table["columns"] else None
    body = []
    for row in table["rows"]:
        cells = []
        for c, value in enumerate(row):
            if c == metric_col and value is not None:
                entry = CATALOGUE[value]
                cells.append(tag("td", entry.label, notes.ref(entry), class_="text", title=notes.tooltip(entry)))
            else:
                cells.append(_cell(value))
        body.append(tag("tr", join(cells)))
    # keys no column or row names still get their footnote: every number in the table is one of them
    loose = [e for e in entries if not any(_column_entry(c, [e]) for c in table["columns"])]
    if metric_col is not None:
        loose = [e for e in loose if not any(row[metric_col] == e.name for row in table["rows"])]
    keys = (
        tag("p", "Numbers from the metric catalogue: ", join((notes.labelled(e) for e in loose), ", "), class_="note")
        if loose
        else None
    )
    note = tag("p", table["note"], class_="note") if table.get("note") else None
    grid = tag("div", tag("table", tag("thead", tag("tr", join(head))), tag("tbody", join(body))), class_="scroll")
    if len(body) > LONG_TABLE:  # the figure above carries a long table's numbers; the rows stay one click away
        grid = tag("details", tag("summary", f"{len(body)} rows"), grid)
    # the anchor is the section's and the table's id: two sections may each have a table "objects"
    return join([tag("h3", table["title"], id=f"{section}-{table['id']}"), grid, keys, note])


def _figure_html(fig: dict, page: _Page, notes: _Notes, section: str) -> Html:
    refs = join((notes.labelled(CATALOGUE[k]) for k in fig["metrics"]), ", ")
    img = page.image_file(f"{section}_{fig['id']}", fig["_path"], fig["title"], fig["caption"])
    drawn = tag("p", "Metrics drawn: ", refs, class_="note") if fig["metrics"] else None
    return join([tag("h3", fig["title"], id=f"{section}-{fig['id']}"), img, drawn])


def render_paper(paper: str, sections: list[str | Path], out: str | Path) -> None:
    """Write the standalone page of `paper` (ode, caos, cedi, samf) from its section files to `out`."""
    if paper not in PAPERS:
        raise InputError(f"unknown paper {paper!r}: one of {', '.join(sorted(PAPERS))}")
    if not sections:
        raise InputError(f"paper {paper!r}: no section files given")
    docs = [load_section(p, paper) for p in sections]
    ids = [d["section"] for d in docs]
    for i, sid in enumerate(ids):
        if sid in ids[:i]:
            raise InputError(f"{sections[i]}.section: {sid!r} is also the id of {sections[ids.index(sid)]}")
    out = Path(out)
    page = _Page(out, embed=True, dpi=110)
    notes = _Notes()
    stand_in: list[str] = []
    for doc in docs:
        for name in doc["stand_ins"]:
            if name not in stand_in:
                stand_in.append(name)
        body = [tag("p", doc["caption"], class_="caption")]
        if doc["stand_ins"]:
            body.append(tag("p", f"Stand-ins in this section: {', '.join(doc['stand_ins'])}.", class_="warn"))
        body += [_figure_html(f, page, notes, doc["section"]) for f in doc["figures"]]
        body += [_table_html(t, notes, doc["section"]) for t in doc["tables"]]
        # a section without figures or tables is a part whose stage did not run: its caption says what to run
        ran = bool(doc["figures"] or doc["tables"])
        page.add(f"sec-{doc['section']}", doc["title"], join(body), ran=ran)
    page.add("metric-notes", "Metric definitions", notes.html() if notes.order else tag("p", "No catalogue numbers."))
    html = render_shell(
        f"halluflow — {paper.upper()} paper layout",
        f"{PAPERS[paper]}: the paper's tables and figures, computed by halluflow.",
        page.sections,
        stand_in,
        footer=join([f"{len(docs)} section file(s) · ", tag("a", "report summary", href="summary.html")]),
        extra_css=CSS,
    )
    write_text(out, html)
