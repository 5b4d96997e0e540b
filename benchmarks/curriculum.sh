#!/usr/bin/env bash
# Task curriculum vs none (issue 19): GRPO from the quickstart's SFT checkpoint on TextCraft, the
# same steps, seed, turn schedule and eval; one run trains on depth 1-3 items throughout, the other
# on the curriculum depth 1 -> 1-3 (stepwise, one stage per step; the last stage holds). The two
# runs play one after the other; each ends with the greedy eval on the first EVAL_LIMIT depth 1-3
# test items (the test split is ordered by depth: the first 24 are 21 depth-1 and 3 depth-2 items).
#   bash benchmarks/curriculum.sh [SFT_MODEL_DIR] [OUT_DIR]
# Prints the table BENCHMARKS.md records (also written to OUT_DIR/table.md).
set -euo pipefail
MODEL=${1:-/work/main/runs/quickstart/sft/checkpoints/step_8/model}
OUT=${2:-runs/curriculum}
STEPS=${STEPS:-2}
EVAL_LIMIT=${EVAL_LIMIT:-24}
COMMON=(
  "model.path=$MODEL" "sft.warmup_steps=0" "data.train_files=[]"   # the quickstart's SFT phase skipped
  "trainer.total_steps=$STEPS" "trainer.save_every=0" "trainer.seed=0"
  "eval.categories=[depth 1, depth 2, depth 3]" "eval.limit=$EVAL_LIMIT" "eval.at_end=true" "eval.every=0"
)
STAGES=${STAGES:-"[{categories: [depth 1]}, {categories: [depth 1, depth 2, depth 3]}]"}

start=$(date +%s)
horizonrl train configs/quickstart.yaml "${COMMON[@]}" "trainer.output_dir=$OUT/none" \
  "data.categories=[depth 1, depth 2, depth 3]"
mid=$(date +%s)
horizonrl train configs/quickstart.yaml "${COMMON[@]}" "trainer.output_dir=$OUT/curriculum" \
  "data.categories=[]" "data.curriculum.stages=$STAGES" "data.curriculum.every=1"
end=$(date +%s)

python - "$OUT" "$((mid - start))" "$((end - mid))" <<'EOF'
import json, sys
from pathlib import Path

out, walls = Path(sys.argv[1]), sys.argv[2:]
rows = ["| run | train items by step | step success (train) | eval success | by category | wall s |",
        "|---|---|---|---|---|---|"]
for (name, what), wall in zip((("none", "depth 1-3"), ("curriculum", "curriculum stages")), walls):
    metrics = [json.loads(x) for x in (out / name / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "success/mean" in m]
    success = " / ".join(f"{m['success/mean']:.2f}" for m in steps)
    if name == "curriculum":
        what = " / ".join(f"stage {int(m['curriculum/stage'])}" for m in steps)
    report = json.loads((out / name / "eval" / "final" / "report.json").read_text())
    cats = ", ".join(f"{c} {v['success_rate']:.3f} ({v['n_items']})" for c, v in report["by_category"].items() if v["n_items"])
    rows.append(f"| {name} | {what} | {success} | {report['success_rate']:.3f} ({report['n_items']} items) "
                f"| {cats} | {wall} |")
table = "\n".join(rows)
(out / "table.md").write_text(table + "\n")
print(table)
EOF
