"""The paper-page renderer (halluflow.report.papers.render_paper): section shape, catalogue keys, figure files,
stand-in banner, one-line refusals."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zlib

import pytest

from halluflow.errors import InputError
from halluflow.report.papers import render_paper


def _png(path, rgb=(200, 30, 30)) -> None:
    # a real 2x2 PNG written by hand (the renderer must not care who drew it)
    raw = b"".join(b"\x00" + bytes(rgb) * 2 for _ in range(2))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    )


def _section(folder, **changes):
    folder.mkdir(parents=True, exist_ok=True)
    _png(folder / "fig.png")
    doc = {
        "paper": "caos",
        "section": "fig3",
        "title": "Per-model object metrics (CAOS Fig. 3 layout)",
        "caption": "Models: tiny-a, tiny-b; oracle: none; 4 images.",
        "stand_ins": [],
        "tables": [
            {
                "id": "objects",
                "title": "Objects",
                "columns": ["model", "precision", "recall"],
                "rows": [["tiny-a", 0.5, 0.25], ["tiny-b", None, 1.0]],
                "metrics": ["caos.objects.precision", "caos.objects.recall"],
                "note": "n/a: no object named",
            },
            {
                "id": "long",
                "title": "Long form",
                "columns": ["model", "metric", "value"],
                "rows": [["tiny-a", "pope.f1", 0.75]],
                "metrics": ["pope.f1"],
            },
        ],
        "figures": [
            {"id": "bars", "title": "Bars", "file": "fig.png", "caption": "the bars", "metrics": ["pope.f1"]},
        ],
    }
    doc.update(changes)
    path = folder / "section.json"
    path.write_text(json.dumps(doc))
    return path


def test_page_has_figures_tables_and_definitions(tmp_path):
    path = _section(tmp_path / "caos")
    out = tmp_path / "report" / "paper_caos.html"
    render_paper("caos", [path], out)
    page = out.read_text()
    assert page.count("data:image/png;base64,") == 1
    assert "CAOS Fig. 3 layout" in page and "Models: tiny-a, tiny-b" in page
    assert 'id="stand-in-banner"' not in page
    # each number traced: the column header's tooltip and the footnote carry the catalogue's definition
    from halluflow.metrics.catalogue import CATALOGUE

    for key in ("caos.objects.precision", "caos.objects.recall", "pope.f1"):
        assert f"<code>{key}</code>" in page
        assert CATALOGUE[key].label in page
    assert 'title="caos.objects.precision:' in page
    assert "<td>0.5</td>" in page and '<td class="na">n/a</td>' in page


def test_stand_in_banner(tmp_path):
    a = _section(tmp_path / "a", stand_ins=["tiny-smolvlm"])
    b = _section(tmp_path / "b", section="fig4", stand_ins=["rule fallback extraction"])
    out = tmp_path / "p.html"
    render_paper("caos", [a, b], out)
    page = out.read_text()
    assert 'id="stand-in-banner"' in page
    assert "tiny-smolvlm, rule fallback extraction" in page
    assert "Stand-ins in this section: tiny-smolvlm." in page


@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"tables": [{"id": "t", "title": "T", "columns": ["a", "b"], "rows": [[1]], "metrics": []}]}, "rows[0]"),
        ({"tables": [{"id": "t", "title": "T", "columns": ["a"], "rows": [], "metrics": ["pope.nope"]}]}, "pope.nope"),
        ({"figures": [{"id": "f", "title": "F", "file": "gone.png", "caption": "", "metrics": []}]}, "gone.png"),
        ({"figures": [{"id": "f", "title": "F", "file": "section.json", "caption": "", "metrics": []}]}, "not a PNG"),
        ({"figures": [{"id": "f", "title": "F", "file": "../x.png", "caption": "", "metrics": []}]}, "inside"),
        ({"stand_ins": "tiny"}, "stand_ins"),
        ({"caption": None}, "caption"),
        ({"paper": "ode"}, "paper"),
        (
            {
                "tables": [
                    {
                        "id": "t",
                        "title": "T",
                        "columns": ["precision"],
                        "rows": [[1.5]],
                        "metrics": ["caos.objects.precision"],
                    }
                ]
            },
            "outside the range",
        ),
        (
            {"tables": [{"id": "t", "title": "T", "columns": ["metric"], "rows": [["pope.f1"]], "metrics": []}]},
            "pope.f1",
        ),
    ],
)
def test_bad_section_refused_naming_file_and_key(tmp_path, changes, needle):
    path = _section(tmp_path / "s", **changes)
    out = tmp_path / "p.html"
    with pytest.raises(InputError) as err:
        render_paper("caos", [path], out)
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg and needle in msg
    assert not out.exists()


def test_missing_key_and_duplicate_section(tmp_path):
    path = _section(tmp_path / "s")
    doc = json.loads(path.read_text())
    del doc["tables"][0]["rows"]
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"tables\[0\]\.rows: missing"):
        render_paper("caos", [path], tmp_path / "p.html")
    a, b = _section(tmp_path / "a"), _section(tmp_path / "b")
    with pytest.raises(InputError, match="fig3"):
        render_paper("caos", [a, b], tmp_path / "p.html")
    with pytest.raises(InputError, match="unknown paper"):
        render_paper("pope", [a], tmp_path / "p.html")


def test_bad_section_is_one_line_in_a_script(tmp_path):
    # what a paper rule's log shows: one line naming the file, no traceback
    path = _section(tmp_path / "s", tables=[{"id": "t", "title": "T", "columns": [], "rows": [], "metrics": ["x.y"]}])
    code = (
        "import sys\nfrom halluflow.cli import main\n"
        f"sys.exit(main(['report', 'paper', 'caos', {str(path)!r}, '--out', {str(tmp_path / 'p.html')!r}]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "x.y" in lines[0] and str(path) in lines[0], proc.stderr


def test_summary_links_the_paper_pages_that_exist(tmp_path):
    from halluflow.report.summary import build_summary

    root = tmp_path / "results" / "rel"
    report = root / "report"
    report.mkdir(parents=True)
    build_summary(root, report / "summary.html")
    assert 'href="paper_' not in (report / "summary.html").read_text()
    render_paper("caos", [_section(tmp_path / "s")], report / "paper_caos.html")
    build_summary(root, report / "summary.html")
    page = (report / "summary.html").read_text()
    assert '<a href="paper_caos.html">CAOS paper layout</a>' in page and 'href="paper_ode.html"' not in page


def _validity_row(model, ode, real, stand_in=False):
    def side(v):
        return {"value": v, "ci_low": v - 0.05, "ci_high": v + 0.05, "n": 40, "n_failed": 0, "parser": "first_word"}

    diff = {"value": ode - real, "ci_low": ode - real - 0.1, "ci_high": ode - real + 0.1}
    return {"model": model, "ode": side(ode), "real": side(real), "difference": diff, "stand_in": stand_in}


def test_ode_validity_sections_from_the_validity_view(tmp_path):
    # ODE Fig. 1/4 (both datasets per model) and Fig. 7 (their difference) from validity/validity.json
    from halluflow.report.paper_sections import ode_sections

    root = tmp_path / "results" / "rel"
    (root / "metrics").mkdir(parents=True)
    (root / "validity").mkdir()
    for m in ("a", "b"):
        (root / "metrics" / f"{m}.json").write_text(json.dumps({"model": m, "stand_in": m == "b"}))
    doc = {
        "metric": "pope.accuracy",
        "real": {"source": "pope", "results": "results/coco", "labels": "x.json", "n_concepts": 80},
        "shared_concepts": ["dog", "cat", "car"],
        "n_questions": {"ode": 60, "real": 90},
        "n_resamples": 200,
        "seed": 0,
        "models": [_validity_row("a", 0.8, 0.9), _validity_row("b", 0.7, 0.6, stand_in=True)],
        "correlation": {"spearman": {"value": None, "undefined": "2 model(s) with both scores"}},
    }
    (root / "validity" / "validity.json").write_text(json.dumps(doc))
    paths = ode_sections(root, tmp_path / "sections", models=["a", "b"])
    by_id = {json.loads(p.read_text())["section"]: json.loads(p.read_text()) for p in paths}
    fig7 = by_id["fig7"]["tables"][0]
    assert fig7["rows"] == [
        ["a", pytest.approx(-0.1), pytest.approx(-0.2), pytest.approx(0.0, abs=1e-9)],
        fig7["rows"][1],
    ]
    assert by_id["fig1_4"]["tables"][0]["rows"][1] == ["b", 0.6, 0.7]
    assert "model b (stand-in)" in by_id["fig7"]["stand_ins"] and "3 concepts" in by_id["fig7"]["caption"]
    out = tmp_path / "paper_ode.html"
    render_paper("ode", paths, out)
    page = out.read_text()
    assert page.count("data:image/png;base64,") == 2 and "spearman undefined" in page
    # the run's other sections say what to run
    assert 'class="not-run"><h2>Results per distribution' in page


def test_ode_domain_release_section(tmp_path):
    # ODE Fig. 9: a release cut from a domain of the graph (ode.domain), per model and distribution
    from halluflow.report.paper_sections import ode_sections

    root = tmp_path / "results" / "kitchen"
    (root / "metrics").mkdir(parents=True)
    (root / "release").mkdir()
    by = {"standard": {"hallucination_rate": 0.25, "pope": {"f1": 0.5}}, "fictional": {"hallucination_rate": 0.75}}
    (root / "metrics" / "m.json").write_text(json.dumps({"model": "m", "by_distribution": by, "parser": "pope"}))
    domain = {"concepts": ["cup", "sink"], "hops": 1}
    (root / "release" / "manifest.json").write_text(json.dumps({"config": {"ode": {"domain": domain}}, "files": []}))
    paths = ode_sections(root, tmp_path / "sections", models=["m"])
    fig9 = json.loads(next(p for p in paths if p.stem == "fig9").read_text())
    assert fig9["tables"][0]["rows"] == [["m", "standard", 0.25, 0.5], ["m", "fictional", 0.75, None]]
    assert "concepts cup, sink" in fig9["caption"] and "pope parser" in fig9["caption"]
    render_paper("ode", paths, tmp_path / "p.html")  # the page takes it (keys and ranges checked)
    (root / "metrics" / "m.json").write_text(
        json.dumps({"model": "m", "by_distribution": {"standard": {"hallucination_rate": 2}}})
    )
    with pytest.raises(InputError, match=r"metrics/m.json: by_distribution.standard.hallucination_rate: 2 is outside"):
        ode_sections(root, tmp_path / "sections2", models=["m"])
