#!/usr/bin/env bash
# The main job. For now: serve TextCraft over HTTP and let the expert play the test split through it.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_WAIT_POLICY=PASSIVE
port=${HORIZONRL_PORT:-36005}
horizonrl serve textcraft --port "$port" &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.2; done
horizonrl solve textcraft --split test --server "http://127.0.0.1:$port" --out runs/quickstart/expert_test.jsonl
