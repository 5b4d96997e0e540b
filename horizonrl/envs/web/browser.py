"""One headless Chromium, driven by Playwright, that can reach only the configured hosts.

    browser = Browser(BrowserConfig(allowed_origins=("http://127.0.0.1:8001",)))
    context = browser.call(browser.new_context, "tenant-token")   # one context per session
    browser.close()

- Chromium is Debian's `chromium-headless-shell` (or `chromium`), found by `find_chromium`:
  `env.kwargs.chromium`, then `$HORIZONRL_CHROMIUM`, then `/usr/bin/chromium-headless-shell`,
  `chromium-headless-shell` and `chromium` on the PATH (`playwright install` is not needed).
- Playwright's sync API is bound to the thread that started it, and the env's callers
  (a local env pool's threads) are not always the same thread, so every Playwright call
  runs on the browser's own thread: `Browser.call(fn, *args)`.
- Only the configured origins are reachable, twice over: `--host-resolver-rules` maps every
  host name except the allowed ones to NOTFOUND, and each context routes every request
  through `is_allowed`, aborting the rest (IP literals never pass the resolver).
- Each context sends `X-Horizonrl-Tenant: <token>`, so the sites serve that session's
  copy of their database.
- No Chromium outlives its process: Playwright talks to Chromium over a pipe
  (`--remote-debugging-pipe`) from its Node driver, which reads its commands from this
  process's pipe. When this process dies, even by SIGKILL, the driver reads EOF and exits,
  Chromium reads EOF on its pipe and exits, and its zygote and renderers follow.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from horizonrl.envs.core import EnvError

T = TypeVar("T")

TENANT_HEADER = "X-Horizonrl-Tenant"
CHROMIUM_CANDIDATES = ("/usr/bin/chromium-headless-shell", "chromium-headless-shell", "chromium")
INSTALL_HINT = (
    "install Debian's headless Chromium with `apt-get install chromium-headless-shell` (scripts/install.sh "
    "does), or point env.kwargs.chromium / $HORIZONRL_CHROMIUM at a Chromium binary"
)
CHROMIUM_ARGS = ("--disable-background-networking", "--disable-component-update", "--no-first-run")


class ChromiumNotFoundError(EnvError):
    """No Chromium binary to drive."""


def find_chromium(path: str | None = None) -> str:
    """The Chromium executable to launch (see the module docstring for the search order)."""
    if path:
        found = shutil.which(path) or (path if Path(path).is_file() else None)
        if not found:
            raise ChromiumNotFoundError(f"env.kwargs.chromium={path!r} is not an executable; {INSTALL_HINT}")
        return found
    for candidate in (os.environ.get("HORIZONRL_CHROMIUM"), *CHROMIUM_CANDIDATES):
        found = shutil.which(candidate) if candidate else None
        if found:
            return found
    raise ChromiumNotFoundError(f"no Chromium found; {INSTALL_HINT}")


def origin_of(url: str) -> str:
    """`scheme://host:port` of a URL, with the default port made explicit."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{parts.hostname.lower()}:{port}"


def is_allowed(url: str, allowed_origins: Sequence[str]) -> bool:
    """Whether the browser may load `url`: an http(s) URL on one of the allowed origins."""
    try:
        return origin_of(url) in allowed_origins
    except ValueError:
        return False


def launch_args(allowed_origins: Sequence[str]) -> list[str]:
    """Chromium's command-line switches: quiet, sandbox off as root, host names pinned."""
    args = list(CHROMIUM_ARGS)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium refuses to start its sandbox as root
    hosts = sorted({urlsplit(o).hostname or "" for o in allowed_origins} - {""})
    rules = ", ".join(["MAP * ~NOTFOUND", *(f"EXCLUDE {h}" for h in hosts)])
    args.append(f"--host-resolver-rules={rules}")
    return args


@dataclass(frozen=True)
class BrowserConfig:
    """How the browser is launched and what it may reach."""

    allowed_origins: tuple[str, ...]
    """`scheme://host:port` origins the browser may load (the sites'); everything else is aborted."""
    chromium: str | None = None
    """Chromium binary (default: `find_chromium`'s search)."""
    viewport: tuple[int, int] = (1280, 720)
    """Page size in CSS pixels (WebArena's)."""
    action_timeout_s: float = 10.0
    """Bound on one navigation or input action."""
    settle_timeout_s: float = 5.0
    """Bound on waiting for a page to settle after an action (load state, then no request in flight)."""
    quiet_ms: int = 50
    """A page is settled once no request has been in flight for this long (Playwright's networkidle
    uses 500 ms; the sites are on loopback)."""

    def __post_init__(self) -> None:
        for origin in self.allowed_origins:
            if origin != origin_of(origin):
                raise ValueError(f"allowed origin {origin!r} must be written as {origin_of(origin)!r}")


class Browser:
    """A Playwright driver and one Chromium, used from any thread through `call`."""

    def __init__(self, config: BrowserConfig) -> None:
        self.config = config
        self.executable = find_chromium(config.chromium)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="horizonrl-browser")
        self._lock = threading.Lock()
        self._playwright: Any = None
        self._browser: Any = None
        self._closed = False
        self.call(self._launch)

    def _launch(self) -> None:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        try:
            self._browser = self._playwright.chromium.launch(
                executable_path=self.executable,
                headless=True,
                args=launch_args(self.config.allowed_origins),
                timeout=60_000,
            )
        except Exception as exc:
            self._playwright.stop()
            raise EnvError(f"could not start Chromium ({self.executable}): {exc}; {INSTALL_HINT}") from exc

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run `fn(*args, **kwargs)` on the browser's thread and return its result."""
        if self._closed:
            raise EnvError("the browser is closed")
        with self._lock:
            return self._thread.submit(fn, *args, **kwargs).result()

    @property
    def connected(self) -> bool:
        """False once Chromium died or was closed (call from the browser's thread)."""
        return self._browser is not None and bool(self._browser.is_connected())

    @property
    def pid(self) -> int | None:
        """Process id of Playwright's Node driver (Chromium is its child)."""
        transport = getattr(getattr(self._playwright, "_connection", None), "_transport", None)
        proc = getattr(transport, "_proc", None)
        return getattr(proc, "pid", None)

    def new_context(self, tenant: str | None, storage_state: str | None = None) -> Any:
        """A fresh context (no cookies, no history; or the cookies of a Playwright `storage_state`
        file: WebArena's logins) that sends the tenant header and reaches only the allowed origins.
        Call on the browser's thread."""
        width, height = self.config.viewport
        headers = {TENANT_HEADER: tenant} if tenant else {}
        context = self._browser.new_context(
            viewport={"width": width, "height": height},
            extra_http_headers=headers,
            service_workers="block",
            storage_state=storage_state,
        )
        context.set_default_timeout(self.config.action_timeout_s * 1000)
        allowed = self.config.allowed_origins

        def guard(route: Any) -> None:
            if is_allowed(route.request.url, allowed):
                route.continue_()
            else:
                route.abort("blockedbyclient")

        context.route("**/*", guard)
        return context

    def close(self) -> None:
        """Close Chromium and the driver; safe to call twice or after Chromium died."""

        def stop() -> None:
            for thing in (self._browser, self._playwright):
                if thing is None:
                    continue
                with contextlib.suppress(Exception):  # a dead browser cannot be closed politely
                    thing.close() if thing is self._browser else thing.stop()
            self._browser = self._playwright = None

        if self._closed:
            return
        self._closed = True
        try:
            self._thread.submit(stop).result(timeout=30)
        except Exception:  # noqa: BLE001 - a hung driver: its thread is left behind, the process goes on
            pass
        finally:
            self._thread.shutdown(wait=False)
