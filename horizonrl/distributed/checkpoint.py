"""Distributed checkpoints (`torch.distributed.checkpoint`) that reload at another world size,
and the plain HF export written beside them.

    step_N/dcp/        every model's and optimizer's state, each rank writing its own shards
                       (`get_model_state_dict` / `get_optimizer_state_dict`: keys are parameter
                       names, so DDP, FSDP2 and one process read each other's files)
    step_N/model/      the actor's full weights as safetensors + config (+ tokenizer), gathered
                       to rank 0 (`horizonrl eval --model step_N/model` loads it)

Loading reshards: a checkpoint written by 2 FSDP2 ranks loads into 1 process (no process
group: DCP then reads every shard itself) or into 4 ranks, and the optimizer state follows.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

DCP_DIR = "dcp"


def _states(models: dict[str, Any], optimizers: dict[str, Any]) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    state: dict[str, Any] = {f"model.{name}": get_model_state_dict(m) for name, m in models.items()}
    for name, (model, optimizer) in optimizers.items():
        state[f"optim.{name}"] = get_optimizer_state_dict(model, optimizer)
    return state


def save_sharded(path: Path, models: dict[str, Any], optimizers: dict[str, tuple[Any, Any]]) -> None:
    """Write `models` and `optimizers` (`name -> (model, optimizer)`) under `path` (collective)."""
    import torch.distributed.checkpoint as dcp

    dcp.save(_states(models, optimizers), checkpoint_id=str(path))


def load_sharded(path: Path, models: dict[str, Any], optimizers: dict[str, tuple[Any, Any]]) -> None:
    """Load what `save_sharded` wrote into `models` / `optimizers` in place, at any world size."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

    state = _states(models, optimizers)
    with warnings.catch_warnings():  # one process: DCP says it reads every shard itself, as meant
        warnings.filterwarnings("ignore", message=".*assuming the intent is to load in a single process.*")
        dcp.load(state, checkpoint_id=str(path))
    for name, model in models.items():
        set_model_state_dict(model, state[f"model.{name}"])
    for name, (model, optimizer) in optimizers.items():
        set_optimizer_state_dict(model, optimizer, state[f"optim.{name}"])


def full_state_dict(model: Any) -> dict[str, Any]:
    """The whole model's weights on CPU, on every rank (a collective when sharded)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def export_hf(model: Any, plain: Any, path: Path, tokenizer: Any = None, *, write: bool = True) -> None:
    """Gather `model`'s weights into `plain` (an unwrapped module of the same architecture) and,
    where `write` (rank 0), save it as a HF folder (safetensors + config + tokenizer)."""
    import torch

    full = full_state_dict(model)
    if not write:
        return
    with torch.no_grad():
        own = plain.state_dict()
        for name, value in full.items():
            own[name].copy_(value)
    plain.save_pretrained(path, safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)
