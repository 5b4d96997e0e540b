"""WebArena's action grammar: parsing (`parse_action`) and what each action does in the browser (`Tabs`).

| action | does |
|---|---|
| `click [id]` | clicks the centre of element `id`'s box (scrolled into view first) |
| `type [id] [text] [0\\|1]` | clicks `id`, clears it, types `text`, then Enter unless `[0]` (default 1) |
| `hover [id]` | moves the mouse to the centre of `id` |
| `press [key_comb]` | presses keys: `press [Enter]`, `press [Control+a]` (`ctrl`, `cmd`, `esc`... too) |
| `scroll [up\\|down]` | scrolls the page by one viewport height |
| `new_tab` / `tab_focus [i]` / `close_tab` | opens a blank tab / goes to tab `i` (from 0) / closes this tab |
| `goto [url]` | loads `url` (only the sites' hosts are allowed) |
| `go_back` / `go_forward` | browser history |
| `stop [answer]` | ends the episode; `answer` is what string-match evaluators read (may be empty) |

The action may come bare (`click [12]`: what the agent's parser sends) or inside triple
backticks anywhere in the text (the model's whole response, as WebArena parses it).
After every action the page is given time to settle: its document loaded and no request
in flight for `BrowserConfig.quiet_ms`, bounded by `settle_timeout_s` (no fixed sleep).
Whatever goes wrong in the page (an unknown id, a blocked or unreachable URL, a key
Playwright does not know) is returned as a message that becomes part of the observation;
only a dead browser raises (`EnvError`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from horizonrl.envs.core import EnvError
from horizonrl.envs.web.browser import BrowserConfig, is_allowed

GRAMMAR = (
    "click [id], type [id] [text] [0|1], hover [id], press [key_comb], scroll [up|down], new_tab, "
    "tab_focus [tab_index], close_tab, goto [url], go_back, go_forward, stop [answer]"
)
NO_ARGUMENT = ("new_tab", "close_tab", "go_back", "go_forward")
KEY_NAMES = {
    "ctrl": "Control", "control": "Control", "cmd": "Meta", "meta": "Meta", "command": "Meta",
    "alt": "Alt", "option": "Alt", "shift": "Shift", "enter": "Enter", "return": "Enter",
    "esc": "Escape", "escape": "Escape", "tab": "Tab", "backspace": "Backspace", "delete": "Delete",
    "space": " ", "up": "ArrowUp", "down": "ArrowDown", "left": "ArrowLeft", "right": "ArrowRight",
    "pageup": "PageUp", "pagedown": "PageDown", "home": "Home", "end": "End",
}  # fmt: skip
_PLAYWRIGHT_PREFIX = re.compile(r"^[A-Za-z]+\.[A-Za-z_]+: ")  # "Page.goto: ", the API name, not news
_BACKTICKS = re.compile(r"```(?:[a-z]*\n)?(.*?)```", re.DOTALL)
_FORMS = [
    ("type", re.compile(r"^type \[(\d+)\] \[(.*)\] \[([01])\]$", re.DOTALL)),
    ("type", re.compile(r"^type \[(\d+)\] \[(.*)\]$", re.DOTALL)),
    ("click", re.compile(r"^click \[(\d+)\]$")),
    ("hover", re.compile(r"^hover \[(\d+)\]$")),
    ("press", re.compile(r"^press \[(.+)\]$")),
    ("scroll", re.compile(r"^scroll \[(?:direction=)?(up|down)\]$", re.IGNORECASE)),
    ("tab_focus", re.compile(r"^tab_focus \[(\d+)\]$")),
    ("goto", re.compile(r"^goto \[(.+)\]$")),
    ("stop", re.compile(r"^stop(?: \[(.*)\])?$", re.DOTALL)),
]


@dataclass(frozen=True)
class Action:
    """One parsed action; `arg` is the id, key, direction, tab index, URL or answer."""

    kind: str
    element: int | None = None
    arg: str = ""
    enter: bool = True

    def __str__(self) -> str:
        if self.kind in NO_ARGUMENT:
            return self.kind
        if self.kind == "type":
            return f"type [{self.element}] [{self.arg}] [{int(self.enter)}]"
        if self.kind in ("click", "hover"):
            return f"{self.kind} [{self.element}]"
        return f"{self.kind} [{self.arg}]"


def parse_action(text: str) -> Action | str:
    """The action in `text`, or a message saying why there is none."""
    found = _BACKTICKS.findall(text)
    raw = (found[0] if found else text).strip()
    name, _, rest = raw.partition(" ")
    command = f"{name.lower()} {rest.strip()}".strip()
    if command in NO_ARGUMENT:
        return Action(command)
    for kind, form in _FORMS:
        match = form.match(command)
        if match is None:
            continue
        groups = match.groups()
        if kind == "type":
            return Action("type", int(groups[0]), groups[1], len(groups) < 3 or groups[2] == "1")
        if kind in ("click", "hover"):
            return Action(kind, int(groups[0]))
        return Action(kind, arg=(groups[0] or "").strip() if kind != "scroll" else groups[0].lower())
    shown = raw if len(raw) <= 80 else raw[:80] + "..."
    return f"Invalid action {shown!r}. Give exactly one action, one of: {GRAMMAR}."


def key_combination(keys: str) -> str:
    """WebArena's key names as Playwright's: `ctrl+a` -> `Control+a`, `Enter` stays."""
    return "+".join(KEY_NAMES.get(k.strip().lower(), k.strip()) for k in keys.split("+"))


class Tabs:
    """The open tabs of one session's context, and the ids of the last observation of the current one."""

    def __init__(self, context: Any, config: BrowserConfig) -> None:
        self.context = context
        self.config = config
        self.pages: list[Any] = []
        self.current = 0
        self.backend_ids: dict[int, int | None] = {}
        self.adopt_new_pages = True
        """Pages the site opens (target=_blank) become tabs; off while an evaluator opens its own."""
        self._inflight: set[Any] = set()
        self._last_activity = time.monotonic()
        self._cdp: dict[Any, Any] = {}
        context.on("request", self._started)
        context.on("requestfinished", self._ended)
        context.on("requestfailed", self._ended)
        context.on("page", self._opened)
        self._opened(context.new_page())

    # ---- request tracking (the settle rule) -----------------------------------------------------

    def _started(self, request: Any) -> None:
        self._inflight.add(request)
        self._last_activity = time.monotonic()

    def _ended(self, request: Any) -> None:
        self._inflight.discard(request)
        self._last_activity = time.monotonic()

    def _opened(self, page: Any) -> None:  # a link with target=_blank: the new tab becomes current
        if self.adopt_new_pages and page not in self.pages:
            self.pages.append(page)
            self.current = len(self.pages) - 1

    @property
    def page(self) -> Any:
        return self.pages[self.current]

    def cdp(self, page: Any | None = None) -> Any:
        page = page or self.page
        if page not in self._cdp:
            self._cdp[page] = self.context.new_cdp_session(page)
        return self._cdp[page]

    def settle(self) -> None:
        """Wait until the current page's document is loaded and no request has been in flight for
        `quiet_ms`, at most `settle_timeout_s`."""
        start = time.monotonic()
        self._last_activity = max(self._last_activity, start)
        quiet = self.config.quiet_ms / 1000
        while time.monotonic() - start < self.config.settle_timeout_s:
            idle = not self._inflight and time.monotonic() - self._last_activity >= quiet
            if idle and self._ready():
                return
            self.page.wait_for_timeout(5)

    def _ready(self) -> bool:
        try:
            return bool(self.page.evaluate("document.readyState") == "complete")
        except Exception:  # noqa: BLE001 - a navigation replaced the document mid-call
            return False

    # ---- actions --------------------------------------------------------------------------------

    def run(self, action: Action) -> str | None:
        """Do `action` (not `stop`) and let the page settle; a message if it could not be done."""
        from playwright.sync_api import Error as PlaywrightError

        try:
            message = getattr(self, f"_do_{action.kind}")(action)
        except PlaywrightError as exc:
            if not self.context.browser or not self.context.browser.is_connected():
                raise EnvError(f"the browser died during {action}: {exc}") from exc
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            message = f"{action} failed: {_PLAYWRIGHT_PREFIX.sub('', first)}"
        try:
            self.settle()
        except PlaywrightError as exc:
            if not self.context.browser or not self.context.browser.is_connected():
                raise EnvError(f"the browser died after {action}: {exc}") from exc
        return message

    def _centre(self, element: int | None) -> tuple[float, float] | str:
        known = len(self.backend_ids)
        if element not in self.backend_ids:
            return f"There is no element [{element}] on this page (its ids are 1 to {known})."
        backend = self.backend_ids[element]
        if backend is None:
            return f"Element [{element}] is not an element of the page's DOM; pick another id."
        cdp = self.cdp()
        cdp.send("DOM.scrollIntoViewIfNeeded", {"backendNodeId": backend})
        quads = cdp.send("DOM.getContentQuads", {"backendNodeId": backend}).get("quads") or []
        if not quads:
            return f"Element [{element}] is not visible on the page."
        quad = quads[0]
        return sum(quad[0::2]) / 4, sum(quad[1::2]) / 4

    def _do_click(self, action: Action) -> str | None:
        centre = self._centre(action.element)
        if isinstance(centre, str):
            return centre
        self.page.mouse.click(*centre)
        return None

    def _do_hover(self, action: Action) -> str | None:
        centre = self._centre(action.element)
        if isinstance(centre, str):
            return centre
        self.page.mouse.move(*centre)
        return None

    def _do_type(self, action: Action) -> str | None:
        centre = self._centre(action.element)
        if isinstance(centre, str):
            return centre
        keyboard = self.page.keyboard
        self.page.mouse.click(*centre)
        keyboard.press("Control+a")
        keyboard.press("Delete")
        keyboard.type(action.arg)
        if action.enter:
            keyboard.press("Enter")
        return None

    def _do_press(self, action: Action) -> str | None:
        self.page.keyboard.press(key_combination(action.arg))
        return None

    def _do_scroll(self, action: Action) -> str | None:
        sign = "-" if action.arg == "up" else ""
        self.page.evaluate(f"window.scrollBy(0, {sign}window.innerHeight)")
        return None

    def _do_new_tab(self, action: Action) -> str | None:
        page = self.context.new_page()  # the "page" event makes it current
        self._opened(page)
        return None

    def _do_tab_focus(self, action: Action) -> str | None:
        index = int(action.arg)
        if not 0 <= index < len(self.pages):
            return f"There is no tab {index}; the open tabs are 0 to {len(self.pages) - 1}."
        self.current = index
        self.page.bring_to_front()
        return None

    def _do_close_tab(self, action: Action) -> str | None:
        page = self.pages.pop(self.current)
        self._cdp.pop(page, None)
        page.close()
        if not self.pages:
            self.pages.append(self.context.new_page())
        self.current = len(self.pages) - 1
        self.page.bring_to_front()
        return None

    def _do_goto(self, action: Action) -> str | None:
        url = action.arg
        if not is_allowed(url, self.config.allowed_origins):
            sites = ", ".join(self.config.allowed_origins)
            return f"goto [{url}] was blocked: this browser may only visit the sites ({sites})."
        self.page.goto(url, wait_until="load")
        return None

    def _do_go_back(self, action: Action) -> str | None:
        if self.page.go_back(wait_until="load") is None:
            return "go_back: there is no previous page in this tab's history."
        return None

    def _do_go_forward(self, action: Action) -> str | None:
        if self.page.go_forward(wait_until="load") is None:
            return "go_forward: there is no next page in this tab's history."
        return None
