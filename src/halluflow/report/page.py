"""The page shell every halluflow HTML report shares (the summary and the paper pages): style, escaping, the page
object that collects sections and places images (inline or in an assets folder), and the header / stand-in banner /
navigation / footer around them."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from .. import __version__
from ..io import write_bytes
from . import figures

CSS = """
:root { --ink:#1f2933; --muted:#616e7c; --line:#e4e7eb; --accent:#0072B2; --bg:#f5f7fa; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif; color:var(--ink); background:var(--bg); }
header { background:#102a43; color:#fff; padding:18px 32px 14px; }
header h1 { margin:0 0 4px; font-size:22px; font-weight:600; }
header p { margin:0; color:#bcccdc; }
nav { position:sticky; top:0; z-index:2; background:#fff; border-bottom:1px solid var(--line); padding:8px 32px; display:flex; flex-wrap:wrap; gap:6px 16px; }
nav a { color:var(--accent); text-decoration:none; font-size:13px; }
nav a.not-run { color:var(--muted); }
.banner { background:#c62828; color:#fff; padding:10px 32px; font-weight:600; }
main { max-width:1200px; margin:0 auto; padding:16px 32px 48px; }
section { background:#fff; border:1px solid var(--line); border-radius:8px; padding:14px 20px 18px; margin:16px 0; }
section h2 { margin:0 0 10px; font-size:17px; }
section h3 { font-size:14px; margin:14px 0 6px; }
section.not-run h2::after { content:"not run"; margin-left:10px; font-size:11px; font-weight:600; color:#fff; background:#9aa5b1; border-radius:10px; padding:2px 8px; vertical-align:middle; }
p.note { color:var(--muted); margin:4px 0; }
p.warn { background:#fff3e0; border-left:4px solid #ef6c00; padding:6px 10px; margin:6px 0; }
table { border-collapse:collapse; font-size:13px; margin:6px 0 10px; }
th, td { border-bottom:1px solid var(--line); padding:4px 10px; text-align:right; white-space:nowrap; }
th { background:#f0f4f8; font-weight:600; }
td:first-child, th:first-child { text-align:left; }
td.text { text-align:left; }
tr:nth-child(even) td { background:#fafbfc; }
.scroll { overflow-x:auto; }
figure { margin:8px 0; }
figure img { max-width:100%; height:auto; border:1px solid var(--line); border-radius:4px; }
figcaption { color:var(--muted); font-size:12px; }
.kpis { display:flex; flex-wrap:wrap; gap:12px; }
.kpi { border:1px solid var(--line); border-radius:6px; padding:8px 14px; min-width:120px; }
.kpi b { display:block; font-size:20px; }
.kpi span { color:var(--muted); font-size:12px; }
details summary { cursor:pointer; color:var(--accent); }
footer { text-align:center; color:var(--muted); font-size:12px; padding:12px; }
"""


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


class _Page:
    """Collects sections; images go inline (data URL) or into an assets folder beside the page."""

    def __init__(self, out: Path, embed: bool, dpi: int):
        self.out, self.embed, self.dpi = out, embed, dpi
        self.assets = out.with_name(out.stem + "_files")
        self.sections: list[tuple[str, str, str, bool]] = []

    def image(self, name: str, png: bytes, alt: str, caption: str = "") -> str:
        if self.embed:
            src = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
        else:
            write_bytes(self.assets / f"{name}.png", png)
            src = f"{self.assets.name}/{name}.png"
        cap = f"<figcaption>{_esc(caption)}</figcaption>" if caption else ""
        return f'<figure><img src="{src}" alt="{_esc(alt)}" loading="lazy">{cap}</figure>'

    def add(self, sid: str, title: str, body: str, ran: bool = True) -> None:
        self.sections.append((sid, title, body, ran))


def render_shell(
    title: str,
    intro: str,
    sections: list[tuple[str, str, str, bool]],
    stand_in: list[str],
    footer_html: str,
    extra_css: str = "",
) -> str:
    """The page every halluflow HTML report shares (summary and paper pages): header, stand-in banner, section
    navigation, sections (id, title, body HTML, ran) and footer."""
    nav = "".join(
        f'<a href="#{sid}" class="{"ran" if ran else "not-run"}">{_esc(title)}</a>' for sid, title, _, ran in sections
    )
    banner = (
        (
            f'<div class="banner" id="stand-in-banner">{_esc(figures.STAND_IN_NOTE)} — used in: '
            f"{_esc(', '.join(stand_in))}</div>"
        )
        if stand_in
        else ""
    )
    body = "".join(
        f'<section id="{sid}" class="{"ran" if ran else "not-run"}"><h2>{_esc(title)}</h2>{content}</section>'
        for sid, title, content, ran in sections
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{CSS}{extra_css}</style></head><body>"
        f"<header><h1>{_esc(title)}</h1><p>{_esc(intro)}</p></header>{banner}<nav>{nav}</nav><main>{body}</main>"
        f"<footer>halluflow {_esc(__version__)} · {footer_html}</footer></body></html>\n"
    )
