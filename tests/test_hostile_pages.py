"""Hostile input to the pages and the terminal, third round, by class:

- script injection: a paper page and the summary built from section and result files whose every string field holds
  a script payload are loaded in headless Chromium and their DOM is checked (no script element, no event-handler
  attribute, the title unchanged, the payload present as text); a control page that does inject proves the check
  can fail; and no report module but the page shell writes markup (a source check, nothing imported);
- terminal lines: a file name with a newline or an ANSI escape prints as one line with the control shown;
- large inputs: a 1.5 GB figure is linked, not read; a 5 MB caption or rejection reason is cut with a marker, fast;
- malformed result files: one line naming the file and the key, or (a mathtext concept name) drawn as text.

Every refusal is checked for exit code 1, exactly one stderr line, no traceback and the inputs left unchanged.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import struct
import subprocess
import sys
import time
import zlib
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest
from browser import chromium, require_chromium

from halluflow.cli import main as cli_main
from halluflow.io import write_json, write_parquet

REPO = Path(__file__).resolve().parents[1]
PWNED = "PWNED"
# in a string field: closes an attribute and a tag, then a script and an image whose error handler sets the title
PAYLOAD = f"\"'><script>document.title='{PWNED}'</script><img src=x onerror=\"document.title='{PWNED}'\">"
# in a file or folder name (no slash): the image alone
NAME_PAYLOAD = f"\"'><img src=x onerror=\"document.title='{PWNED}'\">"


def _png(path: Path, rgb=(200, 30, 30)) -> None:
    raw = b"".join(b"\x00" + bytes(rgb) * 2 for _ in range(2))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    )


def _snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under root (sparse giants by size and head only: they must not be read whole here)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            with open(p, "rb") as fh:
                head = fh.read(1 << 20)
            out[str(p)] = f"{p.stat().st_size}:{hashlib.sha256(head).hexdigest()}"
    return out


def _run(argv: list[str], capsys, inputs: Path) -> tuple[int, list[str], str]:
    """The CLI in-process: exit code, stderr lines, stdout; the inputs must be unchanged."""
    before = _snapshot(inputs)
    code = cli_main(argv)
    captured = capsys.readouterr()
    assert _snapshot(inputs) == before, "inputs changed"
    assert "Traceback" not in captured.err and "Traceback" not in captured.out
    return code, [line for line in captured.err.splitlines() if line.strip()], captured.out


def _refused(argv: list[str], capsys, inputs: Path, *needles: str) -> str:
    code, err, _ = _run(argv, capsys, inputs)
    assert code == 1 and len(err) == 1, err
    for needle in needles:
        assert needle in err[0], (needle, err[0])
    return err[0]


# ---- class 1: script injection (the DOM in headless Chromium) ------------------------------------------------------
class _Dom(HTMLParser):
    """The elements of a DOM Chromium serialised after loading the page (and running whatever it ran)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.title = ""
        self.text: list[str] = []
        self._in_title = False

    def handle_starttag(self, name, attrs):
        self.tags.append((name, dict(attrs)))
        self._in_title = name == "title"

    def handle_endtag(self, name):
        self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        self.text.append(data)


def _dom(page: Path, profile: Path) -> _Dom:
    proc = chromium(page.as_uri(), "--dump-dom", "--virtual-time-budget=2000", profile=profile, timeout=90)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = _Dom()
    dom.feed(proc.stdout)
    return dom


def _injected(dom: _Dom) -> list[str]:
    """What of the payload became page structure or ran: script elements, event handlers, the image, the title."""
    found = [f"<{name}>" for name, _ in dom.tags if name == "script"]
    found += [f"<{name} {a}>" for name, attrs in dom.tags for a in attrs if a.startswith("on")]
    found += [f"<{name} src=x>" for name, attrs in dom.tags if attrs.get("src") == "x"]
    if dom.title == PWNED:  # what the payload's script and error handler set
        found.append(f"title {dom.title!r}")
    return found


def test_the_dom_check_catches_an_injection(tmp_path):
    require_chromium()
    page = tmp_path / "raw.html"
    page.write_text(f"<!DOCTYPE html><html><head><title>raw</title></head><body><p>{PAYLOAD}</p></body></html>")
    dom = _dom(page, tmp_path / "profile")
    found = _injected(dom)
    assert "<script>" in found and f"title '{PWNED}'" in found, found


def _hostile_section(folder: Path, sid: str = PAYLOAD) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    fig = f"fig{NAME_PAYLOAD}.png"
    _png(folder / fig)
    doc = {
        "paper": "caos",
        "section": sid,
        "title": PAYLOAD,
        "caption": PAYLOAD,
        "stand_ins": [PAYLOAD],
        "tables": [
            {
                "id": PAYLOAD + "t",
                "title": PAYLOAD,
                "columns": [PAYLOAD, "precision", "metric"],
                "rows": [[PAYLOAD, 0.5, "pope.f1"], [PAYLOAD, None, None]],
                "metrics": ["caos.objects.precision", "pope.f1"],
                "note": PAYLOAD,
            }
        ],
        "figures": [{"id": PAYLOAD + "f", "title": PAYLOAD, "file": fig, "caption": PAYLOAD, "metrics": ["pope.f1"]}],
    }
    path = folder / "section.json"
    path.write_text(json.dumps(doc))
    return path


def test_paper_page_from_hostile_sections_runs_no_script(tmp_path, capsys):
    require_chromium()
    sections = [_hostile_section(tmp_path / "a"), _hostile_section(tmp_path / "b", sid=PAYLOAD + "2")]
    out = tmp_path / "site" / "paper_caos.html"
    code, err, _ = _run(["report", "paper", "caos", *map(str, sections), "--out", str(out)], capsys, tmp_path / "a")
    assert code == 0 and not err, err
    dom = _dom(out, tmp_path / "profile")
    assert _injected(dom) == []
    assert dom.title == "halluflow — CAOS paper layout"
    # behind the escaping, the page forbids scripts itself (the element check above does not rely on it)
    [csp] = [a["content"] for n, a in dom.tags if n == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp
    # every field reached the page, as text: title x2 sections, caption, table title, note, cells, figure title, ...
    assert sum(t.count(f"document.title='{PWNED}'") for t in dom.text) >= 2 * 10
    ids = [attrs["id"] for _, attrs in dom.tags if "id" in attrs]
    assert len(ids) == len(set(ids)) and all(re.fullmatch(r"[A-Za-z0-9_.-]+", i) for i in ids), ids
    # the navigation still leads to each section
    hrefs = {attrs["href"][1:] for name, attrs in dom.tags if name == "a" and attrs.get("href", "").startswith("#")}
    assert {i for i in ids if i.startswith("sec-")} <= hrefs


def _poison_strings(root: Path) -> None:
    """Every string column of every result table gets the payload appended (consistently, so joins still join);
    the free-text fields of the JSON documents (warnings, an alignment's metric name) hold it too."""
    for path in sorted(root.rglob("*.parquet")):
        df = pl.read_parquet(path)
        strings = [c for c, t in df.schema.items() if t == pl.String and c != "model"]
        write_parquet(path, df.with_columns(pl.col(c) + PAYLOAD for c in strings))
    for path in sorted(root.glob("caos/*.json")):
        doc = json.loads(path.read_text())
        write_json(path, {**doc, "warnings": [PAYLOAD, PAYLOAD]})
    align = json.loads((root / "align/cedi_human.json").read_text())
    write_json(root / f"align/{NAME_PAYLOAD}.json", {"metrics": {PAYLOAD: align["metrics"]["ged_hal"]}})
    scenes = pl.read_parquet(root / "scenes/scenes.parquet")
    audit = [
        {
            "query_type": PAYLOAD,
            "distribution": PAYLOAD,
            **dict.fromkeys(("items", "detector_judged", "detector_disagrees", "oracle_judged"), 1),
            **dict.fromkeys(("oracle_disagrees", "flagged"), 0),
        }
    ]
    write_json(root / "audit/audit.json", {"warning": PAYLOAD, "by_query_type_distribution": audit})
    assert scenes.height


def test_summary_from_hostile_results_runs_no_script(tmp_path, capsys):
    require_chromium()
    from test_report import make_results

    release = f"demo{NAME_PAYLOAD}"
    root = make_results(tmp_path / "results" / release, models=(f"vlm{NAME_PAYLOAD}", "blind"))
    _poison_strings(root)
    out = tmp_path / "site" / "summary.html"
    code, err, _ = _run(
        ["report", "build", str(root), "--out", str(out), "--gallery-size", "2", "--dpi", "30"], capsys, root
    )
    assert code == 0 and not err, err
    dom = _dom(out, tmp_path / "profile")
    assert _injected(dom) == []
    assert dom.title == f"halluflow report — {release}"
    text = "".join(dom.text)
    # the model, the release, scene and reason tables, warnings, the audit and the alignment all carried it
    assert text.count(f"document.title='{PWNED}'") >= 10
    assert text.count(f"vlm{NAME_PAYLOAD}") >= 3


def test_no_report_module_but_the_page_shell_writes_markup():
    """The one escaping rule holds by construction: markup (an HTML tag in a string literal) appears only in
    report/page.py; every other module builds its HTML with page.tag / join / text. Read as source, not imported."""
    tags = "a|b|i|p|div|span|table|thead|tbody|tr|td|th|section|h[1-6]|img|figure|figcaption|sup|ol|ul|li|code"
    tags += "|details|summary|nav|main|header|footer|style|script|html|head|body|title|meta|br|pre"
    markup = re.compile(rf"</?({tags})[\s>/]", re.IGNORECASE)
    found = []
    for path in sorted((REPO / "src/halluflow/report").glob("*.py")):
        if path.name == "page.py":
            continue
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if markup.search(node.value):
                    found.append(f"{path.name}:{node.lineno}: {node.value[:60]!r}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Html":
                found.append(f"{path.name}:{node.lineno}: Html(...) outside the page shell")
    assert found == []


def test_the_shell_escapes_attributes_slugs_ids_and_keeps_links_relative(tmp_path):
    from halluflow.report.page import _Page, anchor, tag

    link = tag("a", PAYLOAD, href="javascript:document.title='PWNED'", id=PAYLOAD, title=PAYLOAD)
    assert link.startswith('<a href="javascript%3Adocument.title%3D%27PWNED%27" id="')
    assert "<script" not in link and "<img" not in link and link.count('"') == 6
    assert re.fullmatch(r"[A-Za-z0-9_.-]+", anchor(PAYLOAD)) and anchor(PAYLOAD) != anchor(PAYLOAD + "2")
    # linked images (report build --link-images): the asset's file name is the slug, inside the assets folder
    page = _Page(tmp_path / "s.html", embed=False, dpi=30)
    _png(tmp_path / "x.png")
    figure = page.image(f"diagnosis_{NAME_PAYLOAD}", (tmp_path / "x.png").read_bytes(), PAYLOAD, PAYLOAD)
    [asset] = list((tmp_path / "s_files").iterdir())
    assert re.fullmatch(r"[A-Za-z0-9_.-]+\.png", asset.name) and f'src="s_files/{asset.name}"' in figure
    assert "<script" not in figure and "onerror=" not in figure.replace("onerror=&quot;", "")


# ---- class 2: names printed to a terminal --------------------------------------------------------------------------
FORGED = "evil\nok: 3 files match manifest.json\x1b[2K\x1b[1A\u202e.txt"


def test_release_verify_prints_a_hostile_file_name_as_one_visible_line(tmp_path, capsys):
    rel = tmp_path / "release"
    rel.mkdir()
    (rel / "a.txt").write_text("x")
    (rel / FORGED).write_text("y")
    write_json(
        rel / "manifest.json", {"release": "r", "files": {"a.txt": {"sha256": hashlib.sha256(b"x").hexdigest()}}}
    )
    code, err, out = _run(["release", "verify", str(rel)], capsys, rel)
    lines = out.splitlines()
    assert code == 1 and not err and len(lines) == 1, lines
    assert "\x1b" not in out and "\u202e" not in out
    assert lines[0] == "evil\\nok: 3 files match manifest.json\\x1b[2K\\x1b[1A\\u202e.txt: not listed in manifest"


def test_an_error_naming_a_hostile_file_is_one_visible_line(tmp_path, capsys):
    folder = tmp_path / "s"
    folder.mkdir()
    missing = folder / "sec\x1b[2J\nhalluflow: ok.json"
    line = _refused(["report", "paper", "caos", str(missing), "--out", str(tmp_path / "p.html")], capsys, folder)
    assert "\x1b" not in line and "sec\\x1b[2J\\nhalluflow: ok.json" in line


def test_release_diff_keeps_a_hostile_distribution_name_on_its_line(tmp_path, capsys):
    from helpers import make_lineage_release

    hostile = "standard\n| forged | 9 | 9 |\x1b[2K"
    a = make_lineage_release(tmp_path / "in", "a", [(hostile, "dog", "cat")])
    b = make_lineage_release(tmp_path / "in", "b", [(hostile, "dog", "cat"), ("standard", "cup", "kite")])
    argv = ["release", "diff", str(a), str(b), "--out", str(tmp_path / "d.json")]
    code, err, out = _run(argv, capsys, tmp_path / "in")
    assert code == 0 and not err, err
    assert "\x1b" not in out and "| forged" not in out.splitlines()[0]
    rows = [line for line in out.splitlines() if line.startswith("| standard")]
    assert any("standard\\n| forged | 9 | 9 |\\x1b[2K |" in line for line in rows), rows


def test_visible_shows_every_control_class():
    from halluflow.errors import visible

    assert visible("plain name é 中 ok") == "plain name é 中 ok"
    shown = visible("a\nb\rc\td\x1b[2Je\x7ff\x9bg\u2028h\u202ei\udc80j\x00k")
    assert shown == "a\\nb\\rc\\td\\x1b[2Je\\x7ff\\x9bg\\u2028h\\u202ei\\udc80j\\x00k"
    assert shown.isprintable()


# ---- class 3: large inputs -----------------------------------------------------------------------------------------
def test_a_huge_figure_is_linked_and_a_huge_caption_cut(tmp_path):
    path = _hostile_section(tmp_path / "s", sid="big")
    doc = json.loads(path.read_text())
    doc["figures"][0]["file"] = "huge.png"
    doc["caption"] = "c" * 5_000_000
    path.write_text(json.dumps(doc))
    with open(tmp_path / "s" / "huge.png", "wb") as fh:  # sparse: 1.5 GB on paper, a few bytes on disk
        fh.write(b"\x89PNG\r\n\x1a\n")
        fh.truncate(1_500_000_000)
    out = tmp_path / "paper.html"
    code = (
        "import re, sys\nfrom halluflow.cli import main\n"
        f"rc = main(['report', 'paper', 'caos', {str(path)!r}, '--out', {str(out)!r}])\n"
        # VmHWM is this process's own peak: ru_maxrss keeps the forking pytest worker's peak across exec on Linux
        "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\nsys.exit(rc)"
    )
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    took = time.monotonic() - start
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
    peak_mb = int(proc.stdout.split()[-1]) / 1024
    page = out.read_text()
    assert peak_mb < 500 and took < 30, (peak_mb, took)
    assert "Figure not placed in the page: 1.5 GB is over the 16.0 MB limit" in page
    assert 'href="s/huge.png"' in page and len(page) < 200_000
    assert "c" * 2000 + "… [cut: 4,998,000 more characters]" in page


def _results(root: Path, scenes=True) -> Path:
    """The smallest result folder the summary reads: one scene, one accepted and one rejected image."""
    row = {"scene_id": "s0", "distribution": "standard", "pair_kind": "entity_entity", "object_a": "dog"}
    row["object_b"] = "cat"
    image = {"scene_id": "s0", "distribution": "standard", "pair_kind": "entity_entity", "path": "images/x.png"}
    if scenes:
        write_parquet(root / "scenes/scenes.parquet", pl.DataFrame([row]))
        write_parquet(root / "filtered/accepted.parquet", pl.DataFrame([{"image_id": "i0", **image}]))
        write_parquet(
            root / "filtered/rejected.parquet", pl.DataFrame([{"image_id": "i1", **image, "reason": "too dark"}])
        )
    root.mkdir(parents=True, exist_ok=True)
    return root


def _build(root: Path, tmp_path: Path) -> list[str]:
    return ["report", "build", str(root), "--out", str(tmp_path / "out" / "s.html"), "--dpi", "30"]


def test_a_5mb_rejection_reason_is_cut_and_fast(tmp_path, capsys):
    root = _results(tmp_path / "r" / "demo")
    df = pl.read_parquet(root / "filtered/rejected.parquet").with_columns(pl.lit("r" * 5_000_000).alias("reason"))
    write_parquet(root / "filtered/rejected.parquet", df)
    start = time.monotonic()
    code, err, _ = _run(_build(root, tmp_path), capsys, root)
    assert code == 0 and not err and time.monotonic() - start < 30, err
    page = (tmp_path / "out" / "s.html").read_text()
    assert "r" * 2000 + "… [cut: 4,998,000 more characters]" in page and len(page) < 500_000


def test_a_huge_diagnosis_figure_is_linked_in_the_summary(tmp_path, capsys):
    root = _results(tmp_path / "r" / "demo", scenes=False)
    (root / "diagnosis").mkdir()
    with open(root / "diagnosis" / "m.png", "wb") as fh:
        fh.write(b"\x89PNG\r\n\x1a\n")
        fh.truncate(1_500_000_000)
    code, err, _ = _run(_build(root, tmp_path), capsys, root)
    assert code == 0 and not err, err
    page = (tmp_path / "out" / "s.html").read_text()
    assert "Figure not placed in the page: 1.5 GB is over the 16.0 MB limit" in page
    assert 'href="../r/demo/diagnosis/m.png"' in page and len(page) < 200_000


def test_a_huge_diagnosis_figure_is_not_copied_into_the_ode_paper_section(tmp_path):
    from halluflow.report.paper_sections import ode_sections

    root = _results(tmp_path / "r" / "demo", scenes=False)
    (root / "diagnosis").mkdir()
    with open(root / "diagnosis" / "m.png", "wb") as fh:
        fh.write(b"\x89PNG\r\n\x1a\n")
        fh.truncate(1_500_000_000)
    matrix = {"cluster": [0], "concept": ["dog"], "n": [4], "n_hallucinated": [1]}
    write_parquet(root / "diagnosis" / "m.parquet", pl.DataFrame(matrix))
    paths = ode_sections(root, tmp_path / "paper")
    fig8 = json.loads(next(p for p in paths if p.name == "fig8.json").read_text())
    png = tmp_path / "paper" / fig8["figures"][0]["file"]
    assert png.stat().st_size < 200_000  # the placeholder saying where the 1.5 GB file is, not a copy


def test_gallery_images_that_cannot_be_drawn_are_named_not_fatal(tmp_path, capsys):
    root = _results(tmp_path / "r" / "demo")
    (root / "images").mkdir()
    (root / "images" / "x.png").write_text("not an image")
    code, err, _ = _run(_build(root, tmp_path), capsys, root)
    assert code == 0 and not err, err
    with open(root / "images" / "x.png", "wb") as fh:  # 1.5 GB: named in the tile, never read
        fh.truncate(1_500_000_000)
    code, err, _ = _run(_build(root, tmp_path), capsys, root)
    assert code == 0 and not err, err


# ---- class 4: malformed result files -------------------------------------------------------------------------------
def _metrics(root: Path, model: str) -> None:
    write_json(root / f"metrics/{model}.json", {"model": model, "n": 4, "n_failed": 0})


CASES = {
    "manifest files is a string": (
        lambda r: write_json(r / "release/manifest.json", {"files": "abcdefghijklmnop"}),
        ("release/manifest.json", "'files'", "got a string"),
    ),
    "metrics file is a list": (
        lambda r: (r / "metrics").mkdir() or (r / "metrics/m.json").write_text("[1, 2]"),
        ("metrics/m.json", "expected a JSON object, got a list"),
    ),
    "compare nested 100k deep": (
        lambda r: (r / "compare").mkdir() or (r / "compare/models.json").write_text("[" * 100_000 + "]" * 100_000),
        ("compare/models.json", "nested deeper than"),
    ),
    "compare names a renamed model": (
        lambda r: _metrics(r, "m") or write_json(r / "compare/models.json", {"models": {"m-renamed": {}}}),
        ("compare/models.json", "'models.m-renamed'", "renamed"),
    ),
    "compare pair without significant": (
        lambda r: (
            _metrics(r, "m")
            or write_json(
                r / "compare/models.json",
                {"models": {"m": {}}, "comparisons": [{"a": "m", "b": "m", "metrics": {"f1": {"n": 3}}}]},
            )
        ),
        ("compare/models.json", "'comparisons.0.metrics.f1.significant': missing"),
    ),
    "audit row missing a key": (
        lambda r: (
            _results(r)
            and write_json(r / "audit/audit.json", {"by_query_type_distribution": [{"query_type": "existence"}]})
        ),
        ("audit/audit.json", "'by_query_type_distribution.0.distribution': missing"),
    ),
    "audit without its table": (
        lambda r: _results(r) and write_json(r / "audit/audit.json", {"warning": "x"}),
        ("audit/audit.json", "'by_query_type_distribution': missing"),
    ),
    "alignment missing a statistic": (
        lambda r: write_json(r / "align/h.json", {"metrics": {"ged_hal": {"overall": {"n": 3}}}}),
        ("align/h.json", "'metrics.ged_hal.overall.accuracy': missing"),
    ),
    "metrics number is text": (
        lambda r: write_json(r / "metrics/m.json", {"model": "m", "pope": {"f1": "high", "accuracy": 0.5}}),
        ("metrics/m.json", "pope.f1", "expected a number", "'high'"),
    ),
    "manifest is a list": (
        lambda r: (r / "release").mkdir() or (r / "release/manifest.json").write_text("[]"),
        ("release/manifest.json", "expected a JSON object, got a list"),
    ),
    "cedi grades is a number": (
        lambda r: (r / "cedi/m").mkdir(parents=True) or (r / "cedi/m/grades.json").write_text("3"),
        ("cedi/m/grades.json", "expected a JSON object, got a number"),
    ),
    "alignment metrics is a list": (
        lambda r: write_json(r / "align/h.json", {"metrics": []}),
        ("align/h.json", "key 'metrics': expected an object, got a list"),
    ),
    "compare models is a list": (
        lambda r: _metrics(r, "m") or write_json(r / "compare/models.json", {"models": ["m"]}),
        ("compare/models.json", "key 'models': expected an object, got a list"),
    ),
    "caos warnings is a number": (
        lambda r: write_json(r / "caos/m.json", {"embedders": {"glove": {"caos_t": 0.5}}, "warnings": 5}),
        ("caos/m.json", "key 'warnings': expected a list, got a number"),
    ),
    "caos file is a list": (
        lambda r: write_json(r / "caos/m.json", [{"warnings": "x"}]),
        ("caos/m.json", "expected a JSON object, got a list"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_results_fail_in_one_line_naming_file_and_key(case, tmp_path, capsys):
    root = _results(tmp_path / "r" / "demo", scenes=False)
    make, needles = CASES[case]
    make(root)
    _refused(_build(root, tmp_path), capsys, root, *needles)
    assert not (tmp_path / "out" / "s.html").exists()


def test_true_in_a_catalogue_column_is_refused(tmp_path, capsys):
    path = _hostile_section(tmp_path / "s", sid="t")
    doc = json.loads(path.read_text())
    doc["tables"][0]["rows"][0][1] = True
    path.write_text(json.dumps(doc))
    _refused(
        ["report", "paper", "caos", str(path), "--out", str(tmp_path / "p.html")],
        capsys,
        tmp_path / "s",
        "rows[0][1] (precision): expected a number or null for caos.objects.precision, got true",
    )


def test_a_mathtext_concept_name_is_drawn_as_text(tmp_path, capsys):
    root = _results(tmp_path / "r" / "demo")
    for rel in ("scenes/scenes.parquet",):
        df = pl.read_parquet(root / rel).with_columns(pl.lit("$\\frac{1}{$").alias("object_a"))
        write_parquet(root / rel, df)
    code, err, _ = _run(_build(root, tmp_path), capsys, root)
    assert code == 0 and not err, err
    page = (tmp_path / "out" / "s.html").read_text()
    assert page.count("data:image/png;base64,") >= 2  # both galleries drawn
