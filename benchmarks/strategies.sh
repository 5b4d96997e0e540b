#!/usr/bin/env bash
# Issue 19: success of the SFT'd default model with each agent strategy on TextCraft and BabyAI.
#   bash benchmarks/strategies.sh            (from the repo root; writes runs/strategies/)
# TextCraft: the quickstart's SFT checkpoint (SFT_TEXTCRAFT), 24 depth-1-2 test items, 5 turns, 48 tokens.
# BabyAI: SFT on GoTo/Pickup expert demos (configs/sft_babyai.yaml, 8 steps), then the 20 GoTo/Pickup
# test items, 8 turns, 48 tokens. Greedy, fp32, one eval after the other. BACKEND=vllm plays the evals
# through the vllm backend (the same greedy tokens as hf in fp32, ~2.4x faster here; BENCHMARKS.md).
set -euo pipefail
SFT_TEXTCRAFT=${SFT_TEXTCRAFT:-/work/main/runs/quickstart/sft/checkpoints/step_8/model}
OUT=${OUT:-runs/strategies}
STRATEGIES=${STRATEGIES:-react plan reflect}
BACKEND=${BACKEND:-hf}
FAMILIES=${FAMILIES:-textcraft babyai}
mkdir -p "$OUT"
[[ " $FAMILIES " == *" textcraft "* ]] && for s in $STRATEGIES; do
  horizonrl eval --backend "$BACKEND" --model "$SFT_TEXTCRAFT" --env textcraft --split test --limit 24 --max-turns 5 \
    --dtype float32 --out "$OUT/textcraft_$s" "categories=[depth 1,depth 2]" max_tokens=48 strategy=$s progress=false max_model_len=4096
done
[[ " $FAMILIES " == *" babyai "* ]] || exit 0
if [ ! -d runs/sft_babyai/checkpoints/step_8/model ]; then
  horizonrl train configs/sft_babyai.yaml logging.console=false
fi
for s in $STRATEGIES; do
  horizonrl eval --backend "$BACKEND" --model runs/sft_babyai/checkpoints/step_8/model --env babyai --split test --limit 20 \
    --max-turns 8 --dtype float32 --out "$OUT/babyai_$s" "categories=[GoTo,Pickup]" max_tokens=48 strategy=$s progress=false max_model_len=4096
done
