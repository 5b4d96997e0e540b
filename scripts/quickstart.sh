#!/usr/bin/env bash
# The main job: the warm-started recipe on TextCraft (depth 1-2) with SmolLM2-135M-Instruct on CPU.
#   1. expert demos of the train split (once; `horizonrl solve`, about a second)
#   2. `horizonrl train configs/quickstart.yaml`: a short SFT on the demos, eval,
#      GRPO with the stepwise turn schedule, eval (each phase resumes if interrupted); with
#      `rollout.backend=vllm` when .venv-vllm/ exists
#   3. the before/after success table (also in runs/quickstart/summary.md); the zero-shot row
#      (0.0% in every run so far) is measured only with `sft.eval_before=true`
# Extra arguments are dotted overrides, e.g. `bash scripts/quickstart.sh trainer.total_steps=8`.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_WAIT_POLICY=PASSIVE   # busy-waiting OpenMP threads slow everything ~10x on shared cores
demos=runs/demos/textcraft_train.jsonl
out=${QUICKSTART_OUT:-runs/quickstart}   # QUICKSTART_OUT=DIR: another run folder (a fresh run next to a finished one)
start=$(date +%s)
if [ ! -s "$demos" ]; then
  echo "[quickstart] 1/3 expert demos -> $demos"
  horizonrl solve textcraft --split train --out "$demos" | tail -1
else
  echo "[quickstart] 1/3 expert demos: $demos exists"
fi
# Rollouts and evals on vLLM where scripts/install.sh made .venv-vllm/ (the same greedy episodes as
# hf, 2.4x faster evals: 649-959 s in all on an idle 2-core machine; ~8 min more on hf)
backend=()
# (the vllm backend's own lookup: .venv-vllm/, else this python when it can import vllm)
if python3 -c "from horizonrl.rollout.backends.vllm import default_python; default_python()" 2>/dev/null; then
  backend=(rollout.backend=vllm rollout.vllm.max_model_len=2048 rollout.vllm.kv_cache_gb=2)
else
  echo "[quickstart] no .venv-vllm/ (HORIZONRL_VLLM=none?): rollouts and evals on hf, ~8 min slower"
fi
echo "[quickstart] 2/3 SFT, GRPO (stepwise turn caps), evals -> $out"
# no activation checkpointing: ~20% faster steps for a peak of 11.2 GB here (the config keeps it on,
# since longer contexts than the quickstart's, e.g. BabyAI's, need it)
horizonrl train configs/quickstart.yaml "data.train_files=[$demos]" "trainer.output_dir=$out" \
  model.gradient_checkpointing=false "${backend[@]}" "$@"
echo
echo "[quickstart] 3/3 greedy success on the same TextCraft test items (depth 1-2), $(( $(date +%s) - start )) s in all:"
cat "$out/summary.md"
