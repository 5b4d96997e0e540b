"""Run under `torchrun --nproc_per_node 2`: RL steps of the tiny model on scripted trajectories.

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/distributed/worker.py OUT STEPS

For each strategy (ddp, fsdp) the trainer runs STEPS steps into OUT/<strategy> (a checkpoint every
step); rank 0 then writes the actor's full weights to OUT/<strategy>/params.pt.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from horizonrl.distributed.checkpoint import full_state_dict
from horizonrl.trainer.rl import RLTrainer
from tests.distributed.common import tiny_config
from tests.trainer.conftest import ScriptedRollout


def main() -> None:
    out, steps = Path(sys.argv[1]), int(sys.argv[2])
    for strategy in ("ddp", "fsdp"):
        cfg = tiny_config(
            out / strategy,
            f"trainer.total_steps={steps}",
            f"resources.strategy={strategy}",
            "resources.learner_world_size=2",
        )
        trainer = RLTrainer(cfg, rollout=ScriptedRollout())
        trainer.fit()
        params = full_state_dict(trainer.learner.actor)
        if trainer.is_main:
            torch.save(params, out / strategy / "params.pt")
        trainer.parallel.barrier()


if __name__ == "__main__":
    main()
