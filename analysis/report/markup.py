"""HTML by hand, escaped, and the page around it: its CSS and script inline (page.css, page.js),
nothing fetched from anywhere."""
from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Iterable, Optional, Sequence, Union

HERE = Path(__file__).resolve().parent
Child = Union[str, "Raw", None]


class Raw(str):
    """Markup already escaped (an element built here): not escaped again."""


def esc(text: object) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def el(tag: str, *children: Child, **attrs: object) -> Raw:
    """``<tag attrs>children</tag>``; text children are escaped, Raw ones are not. Attribute
    names: a trailing underscore is dropped (``class_``), other underscores become dashes
    (``data_v``); None or False leaves an attribute out, True writes it bare."""
    parts = [tag]
    for name, value in attrs.items():
        if value is None or value is False:
            continue
        name = name.rstrip("_").replace("_", "-")
        parts.append(name if value is True else f'{name}="{esc(value)}"')
    inner = "".join(c if isinstance(c, Raw) else esc(c) for c in children if c is not None)
    return Raw(f"<{' '.join(parts)}>{inner}</{tag}>")


def join(children: Iterable[Child], sep: str = "") -> Raw:
    return Raw(sep.join(c if isinstance(c, Raw) else esc(c) for c in children if c is not None))


def png_img(png: bytes, alt: str, **attrs: object) -> Raw:
    """An <img> holding ``png`` as a data: URL (the page stands alone)."""
    src = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return Raw(f'<img src="{src}" alt="{esc(alt)}"'
               + "".join(f' {k.rstrip("_").replace("_", "-")}="{esc(v)}"' for k, v in attrs.items()) + ">")


def table(columns: Sequence[tuple], rows: Sequence[Sequence[tuple]], id_: str, caption: Optional[str] = None) -> Raw:
    """A sortable table (page.js): ``columns`` are (header, kind, title) with kind "num" or
    "text"; each row is a sequence of (text, sort value, class), sort value None for a missing
    number (sorted last either way)."""
    head = el("tr", *[Raw(el("th", h, data_type=kind, title=title or None, scope="col",
                                  aria_sort="none", tabindex="0")) for h, kind, title in columns])
    body = []
    for cells in rows:
        tds = []
        for (text, value, cls), (_h, kind, _t) in zip(cells, columns):
            v = None if kind != "num" else ("" if value is None else repr(float(value)))
            tds.append(el("td", text, class_=cls or None, data_v=v))
        body.append(el("tr", *tds))
    return el("table", el("caption", caption) if caption else None, el("thead", head), el("tbody", *body),
              class_="sortable", id=id_)


# Nothing from the network, or anywhere else: images are data: URLs, style and script inline.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


def page(title: str, body: Raw) -> str:
    css = (HERE / "page.css").read_text()
    js = (HERE / "page.js").read_text()
    return ("<!DOCTYPE html>\n"
            + el("html",
                 el("head", Raw('<meta charset="utf-8">'),
                    Raw(f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'),
                    Raw('<meta name="viewport" content="width=device-width, initial-scale=1">'),
                    el("title", title), el("style", Raw(css))),
                 el("body", body, el("script", Raw(js))), lang="en")
            + "\n")
