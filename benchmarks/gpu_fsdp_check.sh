#!/usr/bin/env bash
# Prepared check for a GPU machine (NOT RUN YET: no GPU was lent to the task that wrote it).
# One GPU: (1) the learner's tokens/s and peak memory with SmolLM2-135M in bf16 (one process);
# (2) FSDP2 fully_shard over a 1-GPU NCCL mesh with bf16 MixedPrecisionPolicy: one forward,
# backward and AdamW step of the same model, its loss and peak memory. ~3 minutes.
#   bash benchmarks/gpu_fsdp_check.sh        # from the repository root; writes $OUT or /tmp
set -euo pipefail
export PYTHONPATH=$PWD HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-/tmp}
nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$OUT/gpu.txt"
timeout 300 python benchmarks/distributed_learner.py --device cuda --bf16 --repeats 3 \
  --out "$OUT/gpu_learner.md" | tee "$OUT/gpu_learner.log"
cat > "$OUT/fsdp_one_gpu.py" <<'PY'
import time, torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from horizonrl.models import load_model
dist.init_process_group("nccl"); torch.cuda.set_device(0)
model, _ = load_model("default")
model = model.cuda(); model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
mesh = init_device_mesh("cuda", (1,)); mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
for m in model.modules():
    if type(m).__name__ in model._no_split_modules: fully_shard(m, mesh=mesh, mp_policy=mp)
fully_shard(model, mesh=mesh, mp_policy=mp)
opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
ids = torch.randint(100, 40000, (8, 2048), device="cuda")
for k in range(3):
    torch.cuda.synchronize(); t = time.perf_counter()
    loss = model(input_ids=ids, labels=ids).loss; loss.backward(); opt.step(); opt.zero_grad()
    torch.cuda.synchronize()
    print(f"step {k}: loss {loss.item():.4f}, {8 * 2048 / (time.perf_counter() - t):.0f} tokens/s, "
          f"peak {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB", flush=True)
dist.destroy_process_group()
PY
timeout 240 python -m torch.distributed.run --standalone --nproc_per_node 1 "$OUT/fsdp_one_gpu.py" \
  | tee "$OUT/fsdp_one_gpu.log"
