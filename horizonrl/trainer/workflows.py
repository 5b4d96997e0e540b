"""The training workflows by `algorithm.name`, with the facts the learner and the CLI need.

    WORKFLOWS["dpo"].reference        # "always": DPO needs the frozen reference policy
    get_workflow("grpo").trainer       # "horizonrl.trainer.rl:RLTrainer"

One entry per name of `horizonrl.config.ALGORITHM_NAMES`; nothing else branches on a name.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal


class RunAborted(RuntimeError):
    """A run that cannot make progress (envs down, gradients non-finite); the message says why."""


@dataclass(frozen=True)
class Workflow:
    trainer: str
    """`module:Class` of its trainer (imported when the workflow runs: torch start-up cost)."""
    reference: Literal["always", "kl", "never"]
    """When the learner keeps a frozen reference policy: always (DPO's implicit KL), when
    `algorithm.kl_coef > 0` (RL), or never (SFT and AgentEvol have no KL term)."""
    reads_trajectories: bool
    """`data.train_files` are trajectory JSONL files (demos, rollouts), not Data-ID item files."""
    needs_train_files: bool
    """Nothing to train on without `data.train_files`."""
    warm_start: bool = False
    """`sft.warmup_steps > 0` runs an SFT phase first and this workflow from its weights."""
    data_parallel: bool = False
    """Trains under torchrun (`resources.learner_world_size > 1`); the others run in one process."""

    def trainer_class(self) -> Any:
        module, _, name = self.trainer.partition(":")
        return getattr(importlib.import_module(module), name)

    def needs_reference(self, kl_coef: float) -> bool:
        return self.reference == "always" or (self.reference == "kl" and kl_coef > 0)


_RL = Workflow(
    "horizonrl.trainer.rl:RLTrainer",
    "kl",
    reads_trajectories=False,
    needs_train_files=False,
    warm_start=True,
    data_parallel=True,
)

WORKFLOWS: dict[str, Workflow] = {
    "ppo": _RL,
    "grpo": _RL,
    "rloo": _RL,
    "reinforce_pp": _RL,
    "sft": Workflow(
        "horizonrl.trainer.sft:SFTTrainer", "never", reads_trajectories=True, needs_train_files=True
    ),
    "dpo": Workflow(
        "horizonrl.trainer.dpo:DPOTrainer", "always", reads_trajectories=True, needs_train_files=True
    ),
    "agentevol": Workflow(
        "horizonrl.trainer.agentevol:AgentEvolTrainer",
        "never",
        reads_trajectories=True,
        needs_train_files=False,
    ),
}


def get_workflow(name: str) -> Workflow:
    if name not in WORKFLOWS:
        raise KeyError(f"unknown workflow {name!r}; valid: {', '.join(WORKFLOWS)}")
    return WORKFLOWS[name]
