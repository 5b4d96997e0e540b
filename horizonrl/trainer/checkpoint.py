"""Checkpoints: everything a resumed run needs to continue exactly where it stopped.

    <output_dir>/checkpoints/step_N/
        model/              save_pretrained: safetensors + config (+ tokenizer): `horizonrl eval
                            --model <that dir>` loads it; with LoRA, the adapter only
        critic/             the value model, when the estimator has one
        optimizer.pt        optimizer(s) and LR scheduler(s) state
        rng.pt              torch / python / numpy RNG states
        trainer_state.json  step, schedule state, data cursor, anything else JSON
    <output_dir>/checkpoints/best/      with a validation eval (`data.val_fraction`, `eval.every`)
        model/              the weights of the step with the best validation success (ties: the
                            earlier step), as in `step_N/model`
        best.json           {"step": N, "success": x, "eval": "eval/step_N"}

A checkpoint is written to `step_N.tmp` and renamed when complete, so a crash mid-save never
leaves a half checkpoint that `resume: auto` would pick up.

Written by a torchrun learner (`resources.learner_world_size > 1`), models and optimizers go to
`dcp/` instead (`horizonrl.distributed.checkpoint`: sharded, reloadable at any world size, also
by one process), `model/` is the actor gathered to rank 0, `optimizer.pt` holds the LR
schedulers only, and `trainer_state.json` records `world_size`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import torch

from horizonrl.distributed.checkpoint import DCP_DIR, export_hf, load_sharded, save_sharded
from horizonrl.distributed.parallel import SingleProcess
from horizonrl.models import BEST_DIR, BEST_FILE, CHECKPOINTS_DIR, STATE_FILE, run_checkpoints


def checkpoint_dir(output_dir: str | Path, step: int) -> Path:
    return Path(output_dir) / CHECKPOINTS_DIR / f"step_{step}"


def list_checkpoints(output_dir: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints under `output_dir`, oldest first, as `(step, path)` (never `best`)."""
    return run_checkpoints(output_dir)


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    found = list_checkpoints(output_dir)
    return found[-1][1] if found else None


def resolve_resume(resume: str, output_dir: str | Path) -> Path | None:
    """The checkpoint `trainer.resume` points at: `auto` (latest, if any), `never`, or a path."""
    if resume == "never":
        return None
    if resume == "auto":
        return latest_checkpoint(output_dir)
    path = Path(resume)
    if not (path / STATE_FILE).exists():
        raise FileNotFoundError(f"trainer.resume={resume!r}: no {STATE_FILE} there")
    return path


def rng_state() -> dict[str, Any]:
    import numpy as np

    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import numpy as np

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_model(model: Any, path: Path, tokenizer: Any = None) -> None:
    """`save_pretrained` (safetensors) so the directory loads like any HF model."""
    model.save_pretrained(path, safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)


def load_model_weights(model: Any, path: Path) -> None:
    """Load safetensors written by `save_model` into `model` in place (exact values).

    Tied weights (e.g. input and output embeddings) are stored once; any other missing or
    unexpected key is an error.
    """
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no .safetensors files in {path}")
    if (path / "adapter_config.json").exists():  # peft adapter only
        from peft import set_peft_model_state_dict

        for file in files:
            set_peft_model_state_dict(model, load_file(file))
        return
    state: dict[str, torch.Tensor] = {}
    for file in files:
        state.update(load_file(file))
    missing, unexpected = model.load_state_dict(state, strict=False)
    loaded = {t.data_ptr() for name, t in model.state_dict().items() if name in state}
    truly_missing = [k for k in missing if model.state_dict()[k].data_ptr() not in loaded]
    if truly_missing or unexpected:
        raise ValueError(f"{path}: missing keys {truly_missing[:5]}, unexpected keys {unexpected[:5]}")


def save_checkpoint(
    output_dir: str | Path,
    step: int,
    *,
    models: dict[str, Any],
    optimizers: dict[str, Any],
    trainer_state: dict[str, Any],
    tokenizer: Any = None,
    keep_last: int = 0,
    parallel: SingleProcess | None = None,
    plain_model: Any = None,
) -> Path:
    """Write checkpoint `step` (see module docstring); keep only the newest `keep_last` (0: all).
    Under torchrun (`parallel.lockstep`) every rank calls it; `plain_model` is an unwrapped actor
    the gathered weights are exported through."""
    if parallel is not None and parallel.lockstep:
        return _save_distributed(
            output_dir, step, models, optimizers, trainer_state, tokenizer, keep_last, parallel, plain_model
        )
    final = checkpoint_dir(output_dir, step)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name, model in models.items():
        save_model(model, tmp / name, tokenizer if name == "model" else None)
    torch.save({name: opt.state_dict() for name, opt in optimizers.items()}, tmp / "optimizer.pt")
    torch.save(rng_state(), tmp / "rng.pt")
    (tmp / STATE_FILE).write_text(json.dumps({"step": step, **trainer_state}, indent=1) + "\n")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    if keep_last > 0:
        for _, old in list_checkpoints(output_dir)[:-keep_last]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def _optimizer_pairs(models: dict[str, Any], optimizers: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """`optimizer` -> (models["model"], it), `critic_optimizer` -> (models["critic"], it)."""
    pairs = {}
    for name, opt in optimizers.items():
        if isinstance(opt, torch.optim.Optimizer):
            pairs[name] = (models["model" if name == "optimizer" else name.removesuffix("_optimizer")], opt)
    return pairs


def _save_distributed(
    output_dir: str | Path,
    step: int,
    models: dict[str, Any],
    optimizers: dict[str, Any],
    trainer_state: dict[str, Any],
    tokenizer: Any,
    keep_last: int,
    parallel: SingleProcess,
    plain_model: Any,
) -> Path:
    main = parallel.world.is_main
    final = checkpoint_dir(output_dir, step)
    tmp = final.with_name(final.name + ".tmp")
    if main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    parallel.barrier()
    save_sharded(tmp / DCP_DIR, models, _optimizer_pairs(models, optimizers))
    export_hf(models["model"], plain_model, tmp / "model", tokenizer, write=main)
    if main:
        schedulers = {
            n: o.state_dict() for n, o in optimizers.items() if not isinstance(o, torch.optim.Optimizer)
        }
        torch.save(schedulers, tmp / "optimizer.pt")
        torch.save(rng_state(), tmp / "rng.pt")
        state = {"step": step, "world_size": parallel.world.size, **trainer_state}
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=1) + "\n")
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        if keep_last > 0:
            for _, old in list_checkpoints(output_dir)[:-keep_last]:
                shutil.rmtree(old, ignore_errors=True)
    parallel.barrier()
    return final


def load_checkpoint(
    path: str | Path,
    *,
    models: dict[str, Any],
    optimizers: dict[str, Any],
    parallel: SingleProcess | None = None,
) -> dict[str, Any]:
    """Restore models, optimizers/schedulers and RNG states in place; return the trainer state.
    A `dcp/` checkpoint (written by a torchrun learner) loads at any world size."""
    path = Path(path)
    if (path / DCP_DIR).is_dir():
        load_sharded(path / DCP_DIR, models, _optimizer_pairs(models, optimizers))
        saved = torch.load(path / "optimizer.pt", weights_only=False)
        for name, opt in optimizers.items():
            if not isinstance(opt, torch.optim.Optimizer):
                opt.load_state_dict(saved[name])
        set_rng_state(torch.load(path / "rng.pt", weights_only=False))
        sharded: dict[str, Any] = json.loads((path / STATE_FILE).read_text())
        return sharded
    if parallel is not None and parallel.lockstep:
        raise ValueError(
            f"{path} was written by one learner process (no {DCP_DIR}/): resume it with "
            "resources.learner_world_size=1, or start a new run from its weights with "
            f"model.path={path / 'model'}"
        )
    for name, model in models.items():
        load_model_weights(model, path / name)
    saved = torch.load(path / "optimizer.pt", weights_only=False)
    for name, opt in optimizers.items():
        opt.load_state_dict(saved[name])
    set_rng_state(torch.load(path / "rng.pt", weights_only=False))
    state: dict[str, Any] = json.loads((path / STATE_FILE).read_text())
    return state


def read_best(output_dir: str | Path) -> dict[str, Any] | None:
    """The best checkpoint's record (`best.json`: step, success), or None when there is none."""
    path = Path(output_dir) / CHECKPOINTS_DIR / BEST_DIR / BEST_FILE
    if not path.exists():
        return None
    record: dict[str, Any] = json.loads(path.read_text())
    return record


def save_best(
    output_dir: str | Path,
    record: dict[str, Any],
    *,
    model: Any,
    tokenizer: Any = None,
    parallel: SingleProcess | None = None,
    plain_model: Any = None,
) -> Path:
    """Write `checkpoints/best` (the model and `record`, see the module docstring), replacing the
    old one only once the new one is complete. Under torchrun every rank calls it."""
    final = Path(output_dir) / CHECKPOINTS_DIR / BEST_DIR
    tmp = final.with_name(final.name + ".tmp")
    lockstep = parallel is not None and parallel.lockstep
    main = parallel is None or parallel.world.is_main
    if main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    if lockstep:
        assert parallel is not None
        parallel.barrier()
        export_hf(model, plain_model, tmp / "model", tokenizer, write=main)
    else:
        save_model(model, tmp / "model", tokenizer)
    if main:
        (tmp / BEST_FILE).write_text(json.dumps(record, indent=1) + "\n")
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    if lockstep:
        assert parallel is not None
        parallel.barrier()
    return final
