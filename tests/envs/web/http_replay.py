"""Replay a task's solution over plain HTTP (no browser), for the tasks' tests.

`HttpPlayer` parses each page's links, buttons, labelled inputs and radios, names them the way
the accessibility tree does for these simple pages (aria-label, else the text; inputs by their
`<label for>`), and performs `click` / `type` / `goto` / `go_back` / `stop` steps: links are
followed, radios checked, buttons and Enter submit their form (GET or POST, as a browser would).
A step whose role and name match no element, or several without `nth`, fails loudly: that is
what the real expert (Chromium) would trip on too. `HttpContext` scores the end state with the
real evaluators: the answer, the final URL, page text over HTTP and queries on the tenant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlencode, urljoin

import httpx

from horizonrl.envs.web.sites import TENANT_HEADER, RunningSites

_ROLE = {"text": "textbox", "number": "spinbutton", "search": "searchbox", "radio": "radio"}


@dataclass
class Element:
    role: str
    name: str = ""
    href: str = ""
    form: int | None = None
    field: str = ""
    value: str = ""
    checked: bool = False
    ident: str = ""


@dataclass
class Form:
    action: str
    method: str
    elements: list[Element] = field(default_factory=list)


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.forms: list[Form] = []
        self.labels: dict[str, str] = {}
        self._open: list[tuple[str, Element | None, list[str]]] = []  # (tag, element, text parts)
        self._form: int | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append(Form(a.get("action", ""), a.get("method", "get").lower()))
            self._form = len(self.forms) - 1
        elif tag == "a":
            self._open.append(("a", Element("link", a.get("aria-label", ""), href=a.get("href", "")), []))
        elif tag == "button":
            self._open.append(("button", Element("button", a.get("aria-label", ""), form=self._form), []))
        elif tag == "label":
            self._open.append(("label", Element("label", ident=a.get("for", "")), []))
        elif tag == "textarea":
            el = Element("textbox", form=self._form, field=a.get("name", ""), ident=a.get("id", ""))
            self._open.append(("textarea", el, []))
        elif tag == "input":
            kind = a.get("type", "text")
            el = Element(_ROLE.get(kind, "hidden"), form=self._form, field=a.get("name", ""),
                         value=a.get("value", ""), checked="checked" in a, ident=a.get("id", ""))  # fmt: skip
            self._add(el)

    def _add(self, el: Element) -> None:
        self.elements.append(el)
        if el.form is not None:
            self.forms[el.form].elements.append(el)

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        for _, _, parts in self._open:
            parts.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None
        if not self._open or self._open[-1][0] != tag:
            return
        _, el, parts = self._open.pop()
        assert el is not None
        text = " ".join("".join(parts).split())
        if tag == "label":
            self.labels[el.ident] = text
        elif tag == "textarea":
            el.value = "".join(parts)
            self._add(el)
        else:
            el.name = el.name or text
            self._add(el)


class HttpPlayer:
    """A minimal form-and-link browser for one tenant of the sites."""

    def __init__(self, sites: RunningSites, tenant: str) -> None:
        self.client = httpx.Client(headers={TENANT_HEADER: tenant}, follow_redirects=True, timeout=30)
        self.history: list[str] = []
        self.url = ""
        self.answer: str | None = None
        self._page: _Parser | None = None

    def close(self) -> None:
        self.client.close()

    def _load(self, response: httpx.Response) -> None:
        assert response.status_code == 200, (
            f"{response.request.method} {response.url}: {response.status_code}"
        )
        if self.url:
            self.history.append(self.url)
        self.url = str(response.url)
        self._page = _Parser()
        self._page.feed(response.text)
        for el in self._page.elements:
            if el.role in ("textbox", "spinbutton", "searchbox", "radio") and el.ident in self._page.labels:
                el.name = self._page.labels[el.ident]

    def goto(self, url: str) -> None:
        self._load(self.client.get(url))

    def find(self, role: str, name: str, nth: int | None = None) -> Element:
        assert self._page is not None
        found = [e for e in self._page.elements if e.role == role and e.name == name]
        if not found or (nth is None and len(found) > 1):
            names = sorted({e.name for e in self._page.elements if e.role == role})
            raise AssertionError(f"{len(found)} {role}s named {name!r} on {self.url}; {role}s there: {names}")
        return found[nth or 0]

    def submit(self, form_index: int) -> None:
        assert self._page is not None
        form = self._page.forms[form_index]
        data = [(e.field, e.value) for e in form.elements if e.field and (e.role != "radio" or e.checked)]
        action = urljoin(self.url, form.action)
        if form.method == "get":
            self._load(self.client.get(f"{action}?{urlencode(data)}"))
        else:
            self._load(self.client.post(action, data=dict(data)))

    def step(self, step: dict[str, Any]) -> None:
        op = step["op"]
        if op == "goto":
            self.goto(step["url"])
        elif op == "go_back":
            self.goto(self.history.pop())
            self.history.pop()
        elif op == "stop":
            self.answer = step["answer"]
        elif op == "click":
            el = self.find(step["role"], step["name"], step.get("nth"))
            if el.role == "link":
                self.goto(urljoin(self.url, el.href))
            elif el.role == "radio":
                assert el.form is not None and self._page is not None
                for other in self._page.forms[el.form].elements:
                    if other.role == "radio" and other.field == el.field:
                        other.checked = other is el
            elif el.role == "button":
                assert el.form is not None
                self.submit(el.form)
            else:
                raise AssertionError(f"cannot click a {el.role}")
        elif op == "type":
            el = self.find(step["role"], step["name"], step.get("nth"))
            el.value = step["text"]  # the action replaces the field's value
            if step.get("enter"):
                assert el.form is not None
                self.submit(el.form)
        else:
            raise AssertionError(f"unknown op {op!r}")

    def play(self, start_url: str, solution: list[dict[str, Any]]) -> None:
        self.goto(start_url)
        for step in solution:
            self.step(step)


class HttpContext:
    """`EvalContext` over HTTP: page text without JavaScript, queries through the admin route."""

    def __init__(self, sites: RunningSites, tenant: str, answer: str | None, url: str) -> None:
        self.sites, self.tenant, self.answer, self.url = sites, tenant, answer, url

    def page_text(self, url: str, locator: str) -> str:
        if locator:
            raise AssertionError(f"HttpContext cannot run the JavaScript locator {locator!r}")
        response = httpx.get(url, headers={TENANT_HEADER: self.tenant}, follow_redirects=True)
        parser = _Parser()
        parser.feed(response.text)
        return re.sub(r"\s+", " ", " ".join(parser.text))

    def db_query(self, sql: str) -> list[list]:
        return self.sites.query(self.tenant, sql)
