"""What the distributed tests share: the tiny-model RL config and a torchrun launcher."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from horizonrl.config import Config, load_config

ROOT = Path(__file__).resolve().parents[2]


def tiny_config(out: Path, *extra: str) -> Config:
    """GRPO on the tiny random model (fp32, micro-batches of 2 rows of different lengths)."""
    return load_config(
        None,
        [
            "model.path=tiny",
            "model.bf16=false",
            f"trainer.output_dir={out}",
            "trainer.lr=1e-3",
            "trainer.micro_batch_size=2",
            "trainer.save_every=1",
            "trainer.keep_last=3",
            "trainer.num_threads=1",
            "data.families=[textcraft]",
            "data.batch_size=3",
            "rollout.n=3",
            "algorithm.kl_coef=0.001",
            "eval.at_end=false",
            "logging.tensorboard=false",
            "logging.console=false",
            *extra,
        ],
    )


def torchrun(
    script: str, *args: str, nproc: int = 2, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run `script` under `torchrun --standalone --nproc_per_node nproc`; raise with its output on failure."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    proc = subprocess.run(
        [*cmd, script, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"torchrun {script} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
        )
    return proc
