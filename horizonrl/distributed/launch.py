"""torchrun plumbing: who am I, the process group, and `horizonrl train` relaunching itself.

    horizonrl train CONFIG resources.learner_world_size=2          # relaunches itself, as below
    torchrun --nproc_per_node 2 -m horizonrl.cli train CONFIG resources.learner_world_size=2

torchrun sets `RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `MASTER_ADDR`/`MASTER_PORT` in each process;
`world()` reads them (rank 0 of 1 outside torchrun). `init_process_group` picks `nccl` on CUDA and
`gloo` on CPU and gives each rank its GPU (`LOCAL_RANK`). On a CPU machine the ranks share the
cores: each rank gets `trainer.num_threads // nproc_per_node` torch threads (at least 1), so two
ranks on 2 cores do not oversubscribe them.

`relaunch_command` builds the torchrun command line for one node; on several nodes, run that
command (with `--nnodes`, `--node_rank` and `--rdzv_endpoint`) on every node (docs/scale.md).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

UNDER_TORCHRUN = "TORCHELASTIC_RUN_ID"
"""Set by torchrun in the processes it starts: `horizonrl train` is then one rank, not the launcher."""


@dataclass(frozen=True)
class World:
    rank: int = 0
    local_rank: int = 0
    size: int = 1
    local_size: int = 1

    @property
    def is_main(self) -> bool:
        """Rank 0 writes metrics, trajectories, reports and the non-sharded checkpoint files."""
        return self.rank == 0


def world() -> World:
    """This process's place among the ranks (from torchrun's environment variables)."""
    env = os.environ
    size = int(env.get("WORLD_SIZE", "1"))
    return World(
        rank=int(env.get("RANK", "0")),
        local_rank=int(env.get("LOCAL_RANK", "0")),
        size=size,
        local_size=int(env.get("LOCAL_WORLD_SIZE", str(size))),
    )


def under_torchrun() -> bool:
    return UNDER_TORCHRUN in os.environ and "RANK" in os.environ


def init_process_group(device_type: str) -> World:
    """Join the ranks of this torchrun (idempotent); `nccl` on CUDA, `gloo` otherwise."""
    import torch
    import torch.distributed as dist

    w = world()
    if not dist.is_initialized():
        if device_type == "cuda":
            torch.cuda.set_device(w.local_rank)
        dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    return w


def threads_per_rank(num_threads: int, local_size: int, device_type: str) -> int:
    """torch threads of one rank: CPU ranks split `num_threads` between them; GPU ranks keep it."""
    if device_type == "cuda":
        return num_threads
    return max(1, num_threads // max(1, local_size))


def relaunch_command(config: str, overrides: Sequence[str], nproc_per_node: int) -> list[str]:
    """The torchrun command line that runs `horizonrl train CONFIG overrides` on this node."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc_per_node}",
        "-m",
        "horizonrl.cli",
        "train",
        config,
        *overrides,
    ]
