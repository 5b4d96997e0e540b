"""HTML building blocks shared by the sites: a page layout, links, forms and pagination.

Every value is escaped here (`esc`), so site code passes raw strings. Inputs get a
`<label for=...>` (not a wrapping label, whose accessible name would include the typed value),
so each control's accessible name is its label text.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from urllib.parse import urlencode

PER_PAGE = 20

_CSS = (
    "body{font-family:sans-serif;margin:0 1em;max-width:60em}nav a{margin-right:.8em}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}"
    ".flash{background:#efe;padding:.4em}.error{background:#fee;padding:.4em}label{margin-right:.4em}"
)


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def money(cents: int) -> str:
    return f"${cents / 100:,.2f}"


def link(href: str, text: str, label: str | None = None) -> str:
    aria = f' aria-label="{esc(label)}"' if label else ""
    return f'<a href="{esc(href)}"{aria}>{esc(text)}</a>'


def url(path: str, **params: object) -> str:
    """`path` with the non-empty `params` as a query string."""
    kept = {k: v for k, v in params.items() if v not in (None, "")}
    return f"{path}?{urlencode(kept)}" if kept else path


def page(site: str, title: str, body: str, nav: Sequence[tuple[str, str]], flash: str = "") -> str:
    """A whole HTML document: the site's nav links, an `h1` with `title`, then `body`."""
    links = "".join(link(href, text) for href, text in nav)
    note = f'<p class="flash" role="status">{esc(flash)}</p>' if flash else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)} | {esc(site)}</title><style>{_CSS}</style></head><body>"
        f'<header><p><strong>{esc(site)}</strong></p><nav aria-label="Main">{links}</nav></header>'
        f"<main><h1>{esc(title)}</h1>{note}{body}</main></body></html>"
    )


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], caption: str = "") -> str:
    """A table; cells are HTML already (escape with `esc` or build with `link`)."""
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def textbox(name: str, label: str, value: object = "", kind: str = "text", required: bool = False) -> str:
    """A labelled input (`kind` "number" gives a spinbutton) or, with kind "textarea", a text area."""
    ident = f"f-{name}"
    req = " required" if required else ""
    if kind == "textarea":
        control = f'<textarea id="{ident}" name="{esc(name)}" rows="4" cols="50"{req}>{esc(value)}</textarea>'
    else:
        control = f'<input id="{ident}" name="{esc(name)}" type="{kind}" value="{esc(value)}"{req}>'
    return f'<p><label for="{ident}">{esc(label)}</label> {control}</p>'


def radios(name: str, legend: str, options: Sequence[tuple[str, str]], checked: str | None = None) -> str:
    """A fieldset of radio buttons, one per `(value, label)`; each radio's name is its label."""
    items = []
    for i, (value, label) in enumerate(options):
        ident = f"r-{name}-{i}"
        mark = " checked" if value == checked else ""
        items.append(
            f'<input type="radio" id="{ident}" name="{esc(name)}" value="{esc(value)}"{mark}>'
            f'<label for="{ident}">{esc(label)}</label>'
        )
    return f"<fieldset><legend>{esc(legend)}</legend>{''.join(items)}</fieldset>"


def form(action: str, inner: str, button: str, method: str = "post", label: str | None = None) -> str:
    """A form ending in one submit button whose accessible name is `label` (default: its text)."""
    aria = f' aria-label="{esc(label)}"' if label else ""
    return (
        f'<form method="{method}" action="{esc(action)}">{inner}'
        f'<button type="submit"{aria}>{esc(button)}</button></form>'
    )


def hidden(name: str, value: object) -> str:
    return f'<input type="hidden" name="{esc(name)}" value="{esc(value)}">'


def search_form(action: str, value: str = "", label: str = "Search", extra: str = "") -> str:
    """A GET form with one textbox named `label` and a "Search" button (named `label` + " button"
    is avoided: the textbox and the button have different roles, so both may say "Search")."""
    return form(action, textbox("q", label, value) + extra, "Search", method="get")


def pager(path: str, page_no: int, total: int, **params: object) -> str:
    """'Page i of n' with "Previous page" / "Next page" links that keep `params`."""
    pages = max(1, math.ceil(total / PER_PAGE))
    parts = [f"<p>Page {page_no} of {pages} ({total} items)</p>"]
    if page_no > 1:
        parts.append(link(url(path, **params, page=page_no - 1 if page_no > 2 else None), "Previous page"))
    if page_no < pages:
        parts.append(link(url(path, **params, page=page_no + 1), "Next page"))
    return f'<nav aria-label="Pagination">{" ".join(parts)}</nav>'


def searched_table(
    path: str,
    q: str,
    label: str,
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    page_no: int,
    total: int,
) -> str:
    """A search form (textbox `label`) over one page of results as a table, and the pager that keeps `q`."""
    return search_form(path, q, label=label) + table(headers, rows) + pager(path, page_no, total, q=q)


def page_number(raw: str | None) -> int:
    try:
        return max(1, int(raw or 1))
    except ValueError:
        return 1
