#!/usr/bin/env bash
# The learning protocol (benchmarks/protocol.py) on one GPU: the same arms, eval items and
# statistics as the CPU run in BENCHMARKS.md, with more steps and seeds. Not run yet: it installs
# first (network) and needs about an hour; the GPU lent in session 18 had neither (15 minutes, no
# network), and ran benchmarks/gpu_protocol_short.sh instead. Its figures go to
# benchmarks/results/learning_protocol_gpu.* and a BENCHMARKS.md section of their own, marked GPU,
# never mixed with the CPU figures.
#
#   OUT=/some/dir bash benchmarks/gpu_protocol.sh            # STEPS=40 SEEDS=0,1,2,3,4 by default
#   STEPS=20 SEEDS=0,1,2 ARMS=sft,grpo,sft-equal bash benchmarks/gpu_protocol.sh
#
# 1. install (scripts/install.sh: the package, matplotlib, .venv-vllm/ with CUDA vllm==0.32.0);
# 2. one SFT checkpoint of the default model (SmolLM2-135M-Instruct) on the expert demos of
#    TextCraft (depth 1-2) and BabyAI (GoTo/Pickup; the first 400 train items' demos), 16 steps;
# 3. the core arms from it (SFT only, GRPO at lr 2e-5 and 5e-6, equal-compute SFT, the four turn-cap
#    arms on TextCraft depth 2-3 with caps 3/6/10), every seed, STEPS GRPO steps each, an eval every
#    STEPS/4 steps for the curves, final greedy eval on all 70 depth 1-2 TextCraft and 20
#    GoTo/Pickup BabyAI test items (turn cap 10: the expert needs 3-7 turns on depth 2);
# 4. the arms of issue 18's features (DAPO's dynamic sampling, GiGPO turn-level credit, mean-centred
#    with AdamW eps 1e-5, GRPO with that eps, invalid-action penalty, bounded context) as a second
#    invocation: where a feature is not in this checkout that invocation stops before running
#    anything and says which, and the core results stand;
# 5. the tables and curves of everything that finished (--report-only), copied to benchmarks/results.
# Sampling: the vllm backend when .venv-vllm imports vllm, else hf with a bf16 copy; the learner in
# bf16 autocast on cuda. Each invocation is resumable (a finished arm x seed is reused): rerun the
# script to continue after an interruption. Exit statuses are in $OUT/status.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/runs/protocol_gpu}"
STEPS="${STEPS:-40}"
SEEDS="${SEEDS:-0,1,2,3,4}"
ARMS="${ARMS:-sft,grpo,grpo-low-lr,sft-equal,cap-short,cap-long,cap-stepwise,cap-adaptive}"
FEATURE_ARMS="${FEATURE_ARMS:-grpo-dynamic,grpo-dynamic-cap5,grpo-turn,grpo-turn-centred-eps,grpo-eps,grpo-penalty,cap-long-ctx}"
source benchmarks/gpu_steps.sh   # $OUT, status.txt, the offline env, `step`

[ -n "${SKIP_INSTALL:-}" ] || step install bash scripts/install.sh
{ nvidia-smi; python3 -m pip freeze; } > "$OUT/env.txt" 2>&1

GPU=(model.bf16=true trainer.device=cuda trainer.num_threads=8 rollout.batch_size=128 eval.batch_size=128
     data.batch_size=8 rollout.n=8 eval.max_turns=10 trainer.micro_batch_size=8)
if .venv-vllm/bin/python -c "import vllm" >/dev/null 2>&1; then
  GPU+=(rollout.backend=vllm rollout.vllm.max_model_len=4096 rollout.vllm.gpu_memory_utilization=0.35
        rollout.vllm.enforce_eager=false rollout.vllm.sleep_during_update=true rollout.vllm.check_tolerance=0.1)
else
  GPU+=(rollout.backend=hf rollout.dtype=bfloat16)
fi
COMMON=(--families textcraft,babyai --sft-steps 16 --steps "$STEPS" --seeds "$SEEDS" --out "$OUT"
        --eval-every "$(( STEPS / 4 > 0 ? STEPS / 4 : 1 ))"
        --title "Learning protocol, GPU ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))")

step core python3 benchmarks/protocol.py "${COMMON[@]}" --arms "$ARMS" "${GPU[@]}"
step features python3 benchmarks/protocol.py "${COMMON[@]}" --arms "$FEATURE_ARMS" "${GPU[@]}"
step report python3 benchmarks/protocol.py "${COMMON[@]}" --report-only --results learning_protocol_gpu \
  "${GPU[@]}"
cat "$OUT/status.txt"
tail -n 40 "$OUT/report.log"
