"""The browser layer in real Chromium, on a tiny local site: tree, ids, actions, host guard, cleanup."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from horizonrl.envs.web.actions import Action, Tabs, key_combination, parse_action
from horizonrl.envs.web.browser import TENANT_HEADER, Browser, BrowserConfig, is_allowed, origin_of
from horizonrl.envs.web.observation import format_observation, parse_tree, render_tree
from tests.ports import free_port


class Site:
    """A Starlette app on a loopback port in a thread; `hits` records every request path."""

    def __init__(self, routes: list[Route]) -> None:
        self.hits: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        app = Starlette(routes=routes)

        async def record(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                self.hits.append(scope["path"])
                self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
            await app(scope, receive, send)

        self.server = uvicorn.Server(
            uvicorn.Config(record, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(5)


async def home(request: Request) -> HTMLResponse:
    return HTMLResponse(
        "<html><head><title>Home</title></head><body><h1>Shop</h1>"
        "<a href='/item?id=7'>Blue Tee</a>"
        "<form action='/search'><label>Search <input name=q></label><button>Go</button></form>"
        f"<a href='{request.query_params.get('out', 'http://example.com/')}'>Outside</a>"
        "<p>Footer text</p></body></html>"
    )


async def item(request: Request) -> HTMLResponse:
    return HTMLResponse(f"<title>Item</title><p>Item {request.query_params['id']}</p>")


async def search(request: Request) -> HTMLResponse:
    return HTMLResponse(f"<title>Results</title><p>Results for {request.query_params.get('q')}</p>")


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    s = Site([Route("/", home), Route("/item", item), Route("/search", search)])
    yield s
    s.stop()


@pytest.fixture(scope="module")
def outside() -> Iterator[Site]:
    """A reachable server the browser is not allowed to reach."""
    s = Site([Route("/", item), Route("/x.png", item)])
    yield s
    s.stop()


@pytest.fixture(scope="module")
def browser(site: Site) -> Iterator[Browser]:
    closed = f"http://127.0.0.1:{free_port()}"  # allowed, but nothing listens there
    b = Browser(BrowserConfig(allowed_origins=tuple(sorted({origin_of(site.url), origin_of(closed)}))))
    b.closed_origin = closed  # type: ignore[attr-defined]
    yield b
    b.close()


def observe(tabs: Tabs, message: str | None = None) -> str:
    tree = render_tree(tabs.cdp().send("Accessibility.getFullAXTree")["nodes"])
    tabs.backend_ids = tree.backend_ids
    titles = [page.title() for page in tabs.pages]
    text = format_observation(tree.text, titles, tabs.current, tabs.page.url, "find it", None)
    return f"{message}\n{text}" if message else text


def id_of(observation: str, role: str, name: str) -> int:
    return next(
        line.id for line in parse_tree(observation) if line.role == role and line.name.strip() == name
    )


def play(browser: Browser, actions: list[str], tenant: str = "t1") -> list[str]:
    """Run actions in a fresh context, returning the observation after each; `{role:name}` in an
    action is replaced by that element's id in the observation before it."""

    def run() -> list[str]:
        tabs = Tabs(browser.new_context(tenant), browser.config)
        out, obs = [], ""
        try:
            for raw in actions:
                while "{" in raw:
                    start, end = raw.index("{"), raw.index("}")
                    role, name = raw[start + 1 : end].split(":", 1)
                    raw = raw[:start] + str(id_of(obs, role, name)) + raw[end + 1 :]
                parsed = parse_action(raw)
                assert isinstance(parsed, Action), parsed
                obs = observe(tabs, tabs.run(parsed))
                out.append(obs)
        finally:
            tabs.context.close()
        return out

    return browser.call(run)


def test_tree_ids_click_type_and_tenant_header(browser: Browser, site: Site) -> None:
    first, clicked, back, typed = play(
        browser,
        [f"goto [{site.url}/]", "click [{link:Blue Tee}]", "go_back", "type [{textbox:Search}] [blue tee]"],
    )
    assert "[1] RootWebArea 'Home' focused: True" in first
    assert "link 'Blue Tee'" in first and "button 'Go'" in first and "StaticText 'Footer text'" in first
    assert "StaticText 'Blue Tee'" not in first  # the link's own text is not printed twice
    assert f"URL: {site.url}/" in first and "OBJECTIVE: find it" in first and "Tab 0 (current): Home" in first
    assert "StaticText 'Item 7'" in clicked and clicked.count("URL: ") == 1 and "/item?id=7" in clicked
    assert back.splitlines()[:8] == first.splitlines()[:8]  # same page, same ids
    assert "Results for blue tee" in typed and "/search?q=blue+tee" in typed
    assert site.headers[-1][TENANT_HEADER.lower()] == "t1"


def test_outside_hosts_are_unreachable(browser: Browser, site: Site, outside: Site) -> None:
    before = len(outside.hits)
    blocked, _, clicked, named = play(
        browser,
        [f"goto [{outside.url}/]", f"goto [{site.url}/?out={outside.url}/]", "click [{link:Outside}]",
         "goto [http://example.com/]"],
    )  # fmt: skip
    assert "was blocked: this browser may only visit the sites" in blocked
    assert "Item" not in clicked and "chrome-error://" in clicked  # the link led to Chromium's error page
    assert outside.hits[before:] == []  # not one request reached the outside server
    assert "was blocked" in named


def test_unreachable_goto_and_bad_ids_are_observations(browser: Browser, site: Site) -> None:
    closed = browser.closed_origin  # type: ignore[attr-defined]
    unreachable, bad_id, no_tab, back = play(
        browser, [f"goto [{closed}/]", "click [999]", "tab_focus [3]", "go_back"]
    )
    assert f"goto [{closed}/] failed: " in unreachable and "ERR_CONNECTION_REFUSED" in unreachable
    assert bad_id.startswith("There is no element [999] on this page")
    assert no_tab.startswith("There is no tab 3; the open tabs are 0 to 0.")
    assert "OBSERVATION:" in back


def test_tabs(browser: Browser, site: Site) -> None:
    opened, focused, closed = play(browser, [f"goto [{site.url}/]", "new_tab", "tab_focus [0]", "close_tab"])[
        1:
    ]
    assert "Tab 0: Home\tTab 1 (current): " in opened and "URL: about:blank" in opened
    assert "Tab 0 (current): Home\tTab 1: " in focused
    assert "Tab 0 (current): " in closed and "Tab 1" not in closed


def test_parse_action_grammar() -> None:
    assert parse_action("Thought: go\nAction: ```click [12]```") == Action("click", 12)
    assert parse_action("type [3] [a [b] c] [0]") == Action("type", 3, "a [b] c", enter=False)
    assert parse_action("type [3] [hello]") == Action("type", 3, "hello", enter=True)
    assert parse_action("stop [$24.00]") == Action("stop", arg="$24.00")
    assert parse_action("stop") == Action("stop", arg="")
    assert parse_action("Scroll [direction=down]") == Action("scroll", arg="down")
    assert parse_action("go_back") == Action("go_back")
    assert str(parse_action("type [3] [x] [0]")) == "type [3] [x] [0]"
    bad = parse_action("jump [3]")
    assert isinstance(bad, str) and bad.startswith("Invalid action 'jump [3]'") and "click [id]" in bad
    assert key_combination("ctrl+a") == "Control+a" and key_combination("Enter") == "Enter"


def test_url_guard() -> None:
    allowed = ("http://127.0.0.1:8000",)
    assert is_allowed("http://127.0.0.1:8000/a?b=1", allowed)
    assert not is_allowed("http://127.0.0.1:8001/", allowed)
    assert not is_allowed("file:///etc/passwd", allowed) and not is_allowed("javascript:1", allowed)
    assert origin_of("https://Example.com/x") == "https://example.com:443"
    with pytest.raises(ValueError, match="must be written as"):
        BrowserConfig(allowed_origins=("http://127.0.0.1:8000/",))


def test_tree_is_capped_with_a_marker() -> None:
    nodes = [{"nodeId": "1", "role": {"value": "RootWebArea"}, "name": {"value": "T"}, "childIds": []}]
    for i in range(2, 400):
        nodes[0]["childIds"].append(str(i))
        link = {"value": "link"}
        nodes.append(
            {"nodeId": str(i), "parentId": "1", "role": link, "name": {"value": f"L{i}"}, "childIds": []}
        )
    tree = render_tree(nodes, max_chars=500)
    assert len(tree.text) < 700 and tree.text.endswith(
        "go to a narrower page (a search, a filter, the next page) ...]"
    )
    assert "more lines cut" in tree.text and tree.lines == 399


BROWSER_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from horizonrl.envs.web.browser import Browser, BrowserConfig
    b = Browser(BrowserConfig(allowed_origins=("http://127.0.0.1:9",)))
    print(os.getpid(), flush=True)
    time.sleep(600)
    """
)


def chromium_descendants(pid: int) -> list[psutil.Process]:
    return [p for p in psutil.Process(pid).children(recursive=True) if "chrom" in p.name()]


def test_no_chromium_survives_a_sigkilled_owner() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", BROWSER_SCRIPT], stdout=subprocess.PIPE, env=os.environ.copy()
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    chromiums = chromium_descendants(proc.pid)
    assert len(chromiums) >= 2  # the browser and its zygote / renderer / utility processes
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    proc.stdout.close()
    gone, alive = psutil.wait_procs(chromiums, timeout=10)
    assert alive == [], f"chromium processes outlived their owner: {[p.pid for p in alive]}"
