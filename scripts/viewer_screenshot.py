"""Screenshot one page of `horizonrl view ROOT` in headless Chromium (how docs/images/ are made).

    python scripts/viewer_screenshot.py runs/ "#/compare?runs=a,b&metric=success/mean" out.png

Starts the viewer on a free loopback port, opens the page, waits for `--wait-for` (a CSS
selector; default: any chart or table), writes the PNG and stops the viewer.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("hash", help='the page, e.g. "#/run/rl" or "#/compare?runs=a,b"')
    parser.add_argument("out")
    parser.add_argument("--wait-for", default="svg.chart, table")
    parser.add_argument("--width", type=int, default=1200)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--chromium", default="/usr/bin/chromium-headless-shell")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    cmd = [sys.executable, "-m", "horizonrl.cli", "view", args.root, "--port", "0"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if " at http" not in line:
                print(f"viewer did not start: {line!r}", file=sys.stderr)
                return 1
            url = line.rsplit(" at ", 1)[1].strip()
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": args.width, "height": args.height})
                page.goto(url + args.hash)
                page.wait_for_selector(args.wait_for, timeout=30_000)
                page.wait_for_timeout(500)
                page.screenshot(path=args.out)
                browser.close()
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
