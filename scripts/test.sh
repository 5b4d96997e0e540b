#!/usr/bin/env bash
# The whole test suite, as CI runs it: lint, types, then pytest (real components included).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
ruff check horizonrl tests benchmarks
mypy horizonrl
python3 -m pytest -q -ra tests "$@"
