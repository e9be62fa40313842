"""Building blocks of the static pages `view` and `report` write: escaping, images (embedded or linked), tables.

A page is one self-contained HTML file: the style sheet is inlined, images are either embedded as base64 data URIs
or linked by a path relative to the page (so the page keeps working when copied together with what it links).
A small inline script, run on load, counts the images that decoded (`naturalWidth > 0`) and writes the count into
`#load-check`; the page reads fine without it.
"""

from __future__ import annotations

import base64
import html
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from pyrua_dojo.runtime.atomic_files import write_atomic

__all__ = ["ImageRef", "MIME_TYPES", "Page", "esc", "fmt_num", "pretty_json", "table"]

MIME_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".gif": "image/gif",
    ".svg": "image/svg+xml",
}

_LOAD_CHECK = """<div id="load-check">images: not checked (scripts off)</div>
<script>
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; });
  var bad = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); });
  var el = document.getElementById("load-check");
  el.setAttribute("data-images", String(imgs.length));
  el.setAttribute("data-loaded", String(ok.length));
  el.textContent = (bad.length ? "IMAGES-BROKEN " : "IMAGES-OK ") + ok.length + "/" + imgs.length +
    (bad.length ? " broken: " + bad.map(function (i) { return i.getAttribute("data-src") || "?"; }).join(", ") : "");
});
</script>"""


def esc(value: Any) -> str:
    """HTML-escaped text of any value (None shows as an empty string)."""
    return "" if value is None else html.escape(str(value), quote=True)


def fmt_num(value: Any, digits: int = 0, *, unit: str = "") -> str:
    """A number for a table cell with thousands separators; "-" for None or a non-number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    text = f"{value:,.{digits}f}" if digits or isinstance(value, float) else f"{value:,}"
    return text + unit


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, numeric: Sequence[int] = (), cls: str = "") -> str:
    """An HTML table; `rows` hold ready-made HTML cells (escape text with `esc`); `numeric` column indices align
    right. A row whose first cell starts with "<total>" is styled as a total row."""
    num = set(numeric)
    head = "".join(f'<th class="num">{h}</th>' if i in num else f"<th>{h}</th>" for i, h in enumerate(headers))
    body = []
    for row in rows:
        cells = list(row)
        total = bool(cells) and cells[0].startswith("<total>")
        if total:
            cells[0] = cells[0][len("<total>"):]
        tds = "".join(f'<td class="num">{c}</td>' if i in num else f"<td>{c}</td>" for i, c in enumerate(cells))
        body.append(f'<tr class="total">{tds}</tr>' if total else f"<tr>{tds}</tr>")
    klass = f' class="{cls}"' if cls else ""
    return f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


@dataclass(frozen=True)
class ImageRef:
    """An image file to show and the caption under it."""

    path: Path
    caption: str = ""
    alt: str = ""


class Page:
    """Collects one page's body and writes the file.

    out: where the page will be written (links are made relative to its directory).
    embed: embed images as base64 data URIs (a single portable file) instead of linking them.
    """

    def __init__(self, title: str, out: Path, *, embed: bool = True) -> None:
        self.title = title
        self.out = Path(out)
        self.embed = embed
        self.parts: list[str] = []
        self.missing: list[str] = []
        self.images = 0
        self._cache: dict[Path, str] = {}

    def add(self, *fragments: str) -> None:
        self.parts.extend(fragments)

    def image_src(self, path: Path) -> str | None:
        """The `src` for an image file: a data URI when embedding, else a path relative to the page; None (and
        noted in `missing`) when the file cannot be read."""
        path = Path(path)
        if path in self._cache:
            return self._cache[path]
        if not path.is_file():
            self.missing.append(str(path))
            return None
        if self.embed:
            mime = MIME_TYPES.get(path.suffix.lower(), "application/octet-stream")
            try:
                data = path.read_bytes()
            except OSError:
                self.missing.append(str(path))
                return None
            src = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
        else:
            rel = os.path.relpath(path.resolve(), self.out.resolve().parent)
            src = Path(rel).as_posix()
        self._cache[path] = src
        return src

    def figure(self, image: ImageRef, cls: str = "thumb", anchor: str | None = None) -> str:
        """A <figure> for an image (a visible placeholder when the file is missing)."""
        src = self.image_src(image.path)
        cap = f"<figcaption>{esc(image.caption)}</figcaption>" if image.caption else ""
        ident = f' id="{esc(anchor)}"' if anchor else ""
        if src is None:
            missing = f'<div class="missing">missing: {esc(image.path.name)}</div>'
            return f'<figure class="{cls}"{ident}>{missing}{cap}</figure>'
        self.images += 1
        return (
            f'<figure class="{cls}"{ident}><img src="{esc(src)}" alt="{esc(image.alt or image.caption)}" '
            f'data-src="{esc(image.path.name)}" loading="eager">{cap}</figure>'
        )

    def html(self) -> str:
        css = resources.files("pyrua_dojo.evaluate").joinpath("page.css").read_text(encoding="utf-8")
        return (
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(self.title)}</title><style>{css}</style></head>\n<body><main>\n"
            + "\n".join(self.parts)
            + f"\n{_LOAD_CHECK}\n</main></body></html>\n"
        )

    def write(self) -> Path:
        """Write the page atomically (temporary file, then rename); returns its path."""
        self.out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.out, self.html())
        return self.out


def pretty_json(value: Any) -> str:
    """Compact, readable JSON of a record for a <pre> block."""
    try:
        return json.dumps(value, indent=1, ensure_ascii=False, sort_keys=False, default=str)
    except (TypeError, ValueError):
        return repr(value)
