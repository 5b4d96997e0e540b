"""Debian's headless Chromium driven by Playwright (sync API), for tests that check what a person sees.

    with chromium() as browser:
        page = browser.new_page()

`scripts/install.sh` installs `/usr/bin/chromium-headless-shell`; `playwright install` is never
needed. Tests skip when neither it nor `HORIZONRL_CHROMIUM` (a path) is there.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--no-first-run"]


def chromium_path() -> str | None:
    for candidate in (os.environ.get("HORIZONRL_CHROMIUM"), "/usr/bin/chromium-headless-shell"):
        if candidate and shutil.which(candidate):
            return candidate
    return shutil.which("chromium-headless-shell") or shutil.which("chromium")


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched browser; skips the test when no Chromium binary is installed."""
    path = chromium_path()
    if path is None:
        pytest.skip("no Chromium (scripts/install.sh installs chromium-headless-shell)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, args=ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()
