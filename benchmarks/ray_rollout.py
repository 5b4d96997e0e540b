"""One greedy rollout in process (`hf`) vs on 2 Ray rollout workers (`resources.rollout_workers=ray`).

    python benchmarks/ray_rollout.py --model default --out benchmarks/results/ray_rollout.md

The same lock-step rollout (TextCraft, `--items` items x 2 samples, `--turns` turns of up to
`--max-tokens` tokens, greedy, in-process envs) played twice: by an `HFBackend` over the model in
this process with `--threads` torch threads, and by `RaySampler`'s 2 `hf` workers on a local Ray
cluster (`num_cpus=--threads`, 1 CPU and so 1 torch thread each), after one weight sync (timed:
`weight_sync/push_s` is the state dict's `ray.put` plus every worker's `load_state_dict`). Each
path warms up with one short batch first. Also counted: trajectories whose token ids are the
same on both paths (greedy; a split batch pads differently, so a near-tie can flip).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path


def _rollout(backend, args):  # type: ignore[no-untyped-def]
    from horizonrl.rollout.engine import EngineConfig, RolloutEngine
    from horizonrl.rollout.envpool import LocalEnvPool

    items = [f"textcraft_{i}" for i in range(args.items)]
    config = EngineConfig(max_turns=args.turns, progress=False, max_tokens=args.max_tokens, temperature=0.0)
    start = time.perf_counter()
    trajectories = RolloutEngine(backend, LocalEnvPool("textcraft"), config).run(items, n=2, seed=0)
    return time.perf_counter() - start, trajectories


def _warm_up(backend, tokenizer) -> None:  # type: ignore[no-untyped-def]
    from horizonrl.rollout.backends.base import GenerationRequest, SamplingParams

    hi = [{"role": "user", "content": "hi"}]
    ids = [int(i) for i in tokenizer.apply_chat_template(hi, add_generation_prompt=True, return_dict=False)]
    two = [GenerationRequest(ids), GenerationRequest(ids)]
    backend.generate(two, SamplingParams(max_tokens=4))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="default")
    parser.add_argument("--items", type=int, default=4)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray
    import torch

    from horizonrl.config import load_config
    from horizonrl.models import load_model
    from horizonrl.rollout.backends.hf import HFBackend
    from horizonrl.trainer.weight_sync import make_sampler

    torch.set_num_threads(args.threads)
    model, tokenizer = load_model(args.model)
    local = HFBackend(model=model, tokenizer=tokenizer)
    _warm_up(local, tokenizer)
    local_s, local_trajs = _rollout(local, args)

    ray.init(
        num_cpus=args.threads, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False
    )
    try:
        overrides = [f"model.path={args.model}", "resources.ray=auto", "resources.rollout_workers=ray"]
        overrides += ["resources.rollout_engines=2", f"resources.rollout_worker_cpus={args.threads / 2:g}"]
        sampler = make_sampler(load_config(None, overrides), model, tokenizer)
        sync = sampler.sync()
        _warm_up(sampler.backend, tokenizer)
        ray_s, ray_trajs = _rollout(sampler.backend, args)
        served = list(sampler.backend.served)
        sampler.close()
    finally:
        ray.shutdown()
    same = sum(a.token_ids == b.token_ids for a, b in zip(local_trajs, ray_trajs, strict=True))
    tokens = sum(sum(t.loss_mask) for t in local_trajs)
    lines = [
        "| path | rollout s | sampled tokens/s | ratio to in-process |",
        "|---|---|---|---|",
        f"| in-process hf, {args.threads} threads | {local_s:.1f} | {tokens / local_s:.1f} | 1.00 |",
        f"| 2 Ray hf workers, {args.threads / 2:g} CPU each | {ray_s:.1f} | {tokens / ray_s:.1f} | "
        f"{local_s / ray_s:.2f} |",
    ]
    notes = (
        f"weight sync before the Ray rollout: push {sync['weight_sync/push_s']:.2f} s, whole sync "
        f"{sync['weight_sync/seconds']:.2f} s, probe diff {sync['weight_sync/max_logprob_diff']:.1e}; "
        f"requests per worker {served}; identical trajectories {same}/{len(local_trajs)}; "
        f"{tokens} sampled tokens"
    )
    text = "\n".join(lines) + "\n\n" + notes
    print(text)
    if args.out:
        cmd = "python benchmarks/ray_rollout.py " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if v is not None
        )
        Path(args.out).write_text(
            f"# One greedy rollout: in process vs 2 Ray rollout workers\n\n`{cmd}`\n\n{text}\n"
        )


if __name__ == "__main__":
    main()
