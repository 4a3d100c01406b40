"""The page shell every halluflow HTML report shares (the summary and the paper pages): style, the one escaping rule,
the page object that collects sections and places images (inline, in an assets folder, or linked when too large),
and the header / stand-in banner / navigation / footer around them.

The one escaping rule: markup is made here only. `tag(name, *children, **attrs)` escapes every child that is not
already markup and every attribute value; an `id` is slugged (`anchor`) and an `href="#..."` points at the same slug;
any other `href` / `src` is a relative path (percent-quoted, so `javascript:` is a file name) or an inline PNG.
Every text value is cut at MAX_TEXT characters with a visible marker. The other report modules build their HTML
with `tag`, `join` and `text` and never write markup themselves (tests/test_hostile_pages.py checks their source).
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
import re
from pathlib import Path
from urllib.parse import quote

from .. import __version__
from ..errors import InputError, clip
from ..io import read_bytes, write_bytes
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

# Behind the escaping, the page itself forbids scripts, plugins, frames, forms and any fetch but its own images and
# inline style: a value that ever slipped past `tag` could still not run or load anything.
CSP = "default-src 'none'; img-src data: 'self' file: http: https:; style-src 'unsafe-inline'; base-uri 'none'; "
CSP += "form-action 'none'"
MAX_TEXT = 2_000
"""Characters of one value shown on a page (a cell, a caption, a reason); a longer one is cut with a marker."""
MAX_INLINE_FIGURE = 16_000_000
"""Bytes of a figure file placed in a page; a larger one is linked (never read whole), and the page says so."""
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class Html(str):
    """Markup made by this module (by `tag`, `join`, `text` or the shell's own constants). Any other string that
    reaches a page is text and is escaped."""

    __slots__ = ()


def text(value: object, limit: int = MAX_TEXT) -> Html:
    """A value as page text: cut at `limit` characters with a visible marker, then escaped (markup passes)."""
    if isinstance(value, Html):
        return value
    return Html(html.escape(clip(value, limit), quote=True))


def join(parts, sep: str = "") -> Html:
    """Fragments and values joined (values escaped, `sep` escaped too)."""
    return Html(text(sep).join(text(p) for p in parts if p is not None))


_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


def anchor(value: object) -> str:
    """An id / fragment for `value`: itself when it is a plain name ([A-Za-z0-9_.-], at most 80 characters), else
    a slug of it plus a short hash, so two different values never share an anchor."""
    raw = str(value)
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]{0,79}", raw):
        return raw
    slug = _SLUG.sub("-", raw).strip("-.")[:60] or "x"
    return f"{slug}-{hashlib.sha256(raw.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def _url(value: str) -> str:
    """An `href` / `src` value: `#fragment` (slugged), an inline PNG, or a relative path, percent-quoted (so
    `javascript:` or `//host` can only name a file beside the page)."""
    if value.startswith("#"):
        return "#" + anchor(value[1:])
    if value.startswith("data:image/png;base64,") and re.fullmatch(r"[A-Za-z0-9+/=]*", value[22:]):
        return value
    quoted = quote(value, safe="/._-~#")
    return "./" + quoted if quoted.startswith("/") or ":" in quoted else quoted


_TAG = re.compile(r"[a-z][a-z0-9]*")
_VOID = frozenset({"img", "meta", "br"})


def tag(name: str, *children: object, **attrs: object) -> Html:
    """`<name attrs>children</name>` with every child that is not markup escaped and every attribute value escaped;
    `class_` sets `class`; `id` is slugged (anchor), `href` / `src` go through _url. None and False attributes and
    None children are left out; True attributes are written bare."""
    if not _TAG.fullmatch(name):
        raise ValueError(f"not a tag name: {name!r}")
    out = [f"<{name}"]
    for key, value in attrs.items():
        key = key.rstrip("_").replace("_", "-")
        if not _TAG.fullmatch(key.replace("-", "")):
            raise ValueError(f"not an attribute name: {key!r}")
        if value is None or value is False:
            continue
        if value is True:
            out.append(f" {key}")
            continue
        value = str(value)
        if key == "id":
            value = anchor(value)
        elif key in ("href", "src"):
            value = _url(value)
        else:
            value = clip(value, MAX_TEXT)
        out.append(f' {key}="{html.escape(value, quote=True)}"')
    out.append(">")
    if name in _VOID:
        return Html("".join(out))
    return Html("".join(out) + join(children) + f"</{name}>")


def _size(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n:,} bytes"


def figure_file(path: str | Path, what: str) -> tuple[Path, int]:
    """A figure file beside a result or section: a regular PNG file (its first bytes only are read here); its size.
    InputError naming `what` when it is not."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{what}: {path} is not a regular file" if path.exists() else f"{what}: {path} does not exist")
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(PNG_MAGIC))
        size = path.stat().st_size
    except OSError as exc:
        raise InputError(f"{what}: {path} cannot be read ({exc.strerror or exc})") from None
    if head != PNG_MAGIC:
        raise InputError(f"{what}: {path} is not a PNG image")
    return path, size


class _Page:
    """Collects sections; images go inline (data URL) or into an assets folder beside the page; a figure file over
    MAX_INLINE_FIGURE is linked where it lies."""

    def __init__(self, out: Path, embed: bool, dpi: int):
        self.out, self.embed, self.dpi = out, embed, dpi
        self.assets = out.with_name(out.stem + "_files")
        self.sections: list[tuple[str, str, Html, bool]] = []

    def image(self, name: str, png: bytes, alt: str, caption: str = "") -> Html:
        if self.embed:
            src = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
        else:
            file = f"{anchor(name)}.png"
            write_bytes(self.assets / file, png)
            src = f"{self.assets.name}/{file}"
        cap = tag("figcaption", caption) if caption else None
        return tag("figure", tag("img", src=src, alt=alt, loading="lazy"), cap)

    def image_file(self, name: str, path: str | Path, alt: str, caption: str = "", what: str = "") -> Html:
        """A PNG file placed in the page: inline (or copied) up to MAX_INLINE_FIGURE, else a link to where it lies
        and a note saying why it is not shown (a 1.5 GB figure is never read)."""
        path, size = figure_file(path, what or str(path))
        if size <= MAX_INLINE_FIGURE:
            return self.image(name, read_bytes(path), alt, caption)
        href = os.path.relpath(os.path.abspath(path), os.path.abspath(self.out.parent)).replace(os.sep, "/")
        note = tag(
            "p",
            f"Figure not placed in the page: {_size(size)} is over the {_size(MAX_INLINE_FIGURE)} limit; open it: ",
            tag("a", path.name, href=href),
            class_="warn",
        )
        return tag("figure", note, tag("figcaption", caption) if caption else None)

    def add(self, sid: str, title: str, body: Html, ran: bool = True) -> None:
        self.sections.append((sid, title, text(body), ran))


def render_shell(
    title: str,
    intro: str,
    sections: list[tuple[str, str, Html, bool]],
    stand_in: list[str],
    footer: Html | str,
    extra_css: str = "",
) -> str:
    """The page every halluflow HTML report shares (summary and paper pages): header, stand-in banner, section
    navigation, sections (id, title, body markup, ran) and footer. Ids, titles and every text are escaped here."""
    nav = join(tag("a", title, href=f"#{sid}", class_="ran" if ran else "not-run") for sid, title, _, ran in sections)
    banner = (
        tag(
            "div",
            f"{figures.STAND_IN_NOTE} — used in: {', '.join(stand_in)}",
            class_="banner",
            id="stand-in-banner",
        )
        if stand_in
        else None
    )
    body = join(
        tag("section", tag("h2", title), text(content), id=sid, class_="ran" if ran else "not-run")
        for sid, title, content, ran in sections
    )
    head = join(
        [
            Html('<meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'),
            Html(f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'),
            tag("title", title),
            Html(f"<style>{CSS}{extra_css}</style>"),  # the code's own style sheets, never data
        ]
    )
    page = tag(
        "html",
        tag("head", head),
        tag(
            "body",
            tag("header", tag("h1", title), tag("p", intro)),
            banner,
            tag("nav", nav),
            tag("main", body),
            tag("footer", f"halluflow {__version__} · ", text(footer)),
        ),
        lang="en",
    )
    return "<!DOCTYPE html>\n" + page + "\n"
