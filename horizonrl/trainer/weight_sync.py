"""The rollout's sampler and how the learner's weights reach it after each update.

`make_sampler(cfg, model, tokenizer)` builds the backend of `rollout.backend` around the learner's
actor; `sampler.sync()` makes the backend sample from the actor's current weights and returns
what it measured (the trainer logs it with `time/weight_sync`, the phase's wall time):

- `hf`, fp32: the backend samples from the actor's own module; nothing to copy.
- `hf`, `rollout.dtype: bfloat16`: a bf16 copy; its parameters are copied from the actor.
- `vllm`: a vLLM engine in its own process (`horizonrl.rollout.backends.vllm`). The actor's
  weights (LoRA adapters merged) are written as safetensors under /dev/shm and loaded in place
  by the engine (`rollout.vllm.weight_sync: file`, CPU and GPU), then checked: the engine's
  teacher-forced logprobs of a fixed chat sequence must equal the actor's (fp32, eval mode) to
  `rollout.vllm.check_tolerance` (max abs, default 2e-4; measured 2e-5 to 7e-5 for SmolLM2-135M
  in fp32 on CPU).
  `weight_sync/max_logprob_diff` is logged every step; a larger difference stops the run
  (`WeightDesync`), since the rollouts would then come from other weights than the learner
  trains. Colocated on GPUs, `rollout.vllm.sleep_during_update` frees the engine's memory
  between its rollout and the next sync (`vllm.sleep` / `wake_up`; no-op on CPU).
- `resources.rollout_workers: ray`: `resources.rollout_engines` workers of `rollout.backend` (`hf`
  or `vllm`) placed by Ray (`horizonrl.distributed.ray_rollout`). The actor's state dict goes to
  every worker in one `ray.put` (`weight_sync/push_s`), then every worker's probe logprobs are
  checked the same way (`resources.rollout_worker_check_tolerance` for `hf` workers, measured 0.0
  for fp32 on CPU: the same kernels; `rollout.vllm.check_tolerance` for `vllm`).

The GPU-only transfer paths (not implemented here; the file path is their fallback and works on
GPUs too): *colocated*, CUDA-IPC handles of the actor's tensors sent over the same channel and
loaded with `model.load_weights` in the engine's worker (no host copy); *separate GPUs*, an NCCL
group between the learner's rank 0 and the engine's workers (vLLM's `NCCLWeightTransferEngine`,
`weight_transfer_config={"backend": "nccl"}`) broadcasting each tensor. Both slot in as further
`rollout.vllm.weight_sync` values; `benchmarks/gpu_check.sh` is where they get measured.
"""

from __future__ import annotations

import copy
import time
from typing import Any, Protocol

import torch

from horizonrl.config import Config
from horizonrl.rollout.backends.base import PolicyBackend
from horizonrl.rollout.backends.hf import HFBackend
from horizonrl.trainer.workflows import RunAborted

PROBE_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Craft a wooden pickaxe. What do you need first?"},
    {"role": "assistant", "content": "Thought: I need planks and sticks.\nAction: get 3 oak logs"},
]
"""The fixed sequence of the post-sync check (rendered by the tokenizer's chat template)."""


class WeightDesync(RunAborted):
    """After a weight sync, the engine's logprobs differ from the learner's beyond the tolerance."""


class Sampler(Protocol):
    backend: PolicyBackend

    def sync(self) -> dict[str, float]:
        """Make `backend` sample from the actor's current weights; returns metrics to log."""
        ...

    def after_rollout(self) -> None:
        """A training rollout ended; the learner updates next."""
        ...

    def retarget(self, model: Any) -> None:
        """Sample from `model`'s weights from the next `sync` on (a later run of this process took
        the sampler over, `TrainingRun.adopt_engine`)."""
        ...

    def close(self) -> None: ...


class HFSampler:
    """The `hf` backend over the actor itself (fp32) or over a copy in `rollout.dtype`."""

    def __init__(self, cfg: Config, model: Any, tokenizer: Any) -> None:
        self.dtype = getattr(torch, cfg.rollout.dtype)
        self.tokenizer = tokenizer
        self._bind(model)

    def _bind(self, model: Any) -> None:
        self.source = model
        self.sampler_model = model
        if next(model.parameters()).dtype != self.dtype:
            self.sampler_model = copy.deepcopy(model).eval().requires_grad_(False)
            for p in self.sampler_model.parameters():
                p.data = p.data.to(self.dtype)
        self.backend: PolicyBackend = HFBackend(model=self.sampler_model, tokenizer=self.tokenizer)

    def retarget(self, model: Any) -> None:
        """Sample from `model` (another learner's actor) from now on."""
        self.backend.close()
        self._bind(model)

    @torch.no_grad()
    def sync(self) -> dict[str, float]:
        if self.sampler_model is not self.source:
            for dst, src in zip(self.sampler_model.parameters(), self.source.parameters(), strict=True):
                dst.copy_(src)
        return {}

    def after_rollout(self) -> None:
        pass

    def close(self) -> None:
        self.backend.close()


def probe_ids(tokenizer: Any) -> list[int]:
    """Token ids of `PROBE_MESSAGES` as the chat template renders them."""
    ids = tokenizer.apply_chat_template(PROBE_MESSAGES, tokenize=True, return_dict=False)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    return [int(i) for i in ids]


class ProbeCheck:
    """The post-sync check: engines' teacher-forced logprobs of the probe sequence against the
    actor's own (fp32, eval mode, no autocast); a difference above `tolerance` (the config key
    `setting`) raises `WeightDesync`."""

    def __init__(self, model: Any, tokenizer: Any, tolerance: float, setting: str) -> None:
        self.probe = probe_ids(tokenizer)
        self.tolerance = tolerance
        self.setting = setting
        self._reference = HFBackend(model=model, tokenizer=tokenizer)

    def retarget(self, model: Any) -> None:
        """Check against `model` (another learner's actor) from now on."""
        self._reference = HFBackend(model=model, tokenizer=self._reference.tokenizer)

    def max_diff(self, engine: list[float]) -> float:
        """Max abs difference of one engine's probe logprobs from the actor's (first token skipped)."""
        [learner] = self._reference.compute_logprobs([self.probe])
        return max(abs(a - b) for a, b in zip(engine[1:], learner[1:], strict=True))

    def __call__(self, engines: dict[str, list[float]], version: int) -> dict[str, float]:
        """`{engine name: its probe logprobs}` checked; `weight_sync/max_logprob_diff` (the worst)."""
        diffs = {name: self.max_diff(lps) for name, lps in engines.items()}
        worst = max(diffs, key=lambda name: diffs[name])
        if diffs[worst] > self.tolerance:
            raise WeightDesync(
                f"after weight sync v{version} {worst}'s logprobs of the probe sequence differ from the "
                f"learner's by {diffs[worst]:.3g} ({self.setting}={self.tolerance:g}): it is not sampling "
                "from the weights being trained. Check rollout.dtype / model.path, or raise the "
                "tolerance for a bf16 engine."
            )
        return {"weight_sync/max_logprob_diff": diffs[worst]}


class PushedSampler:
    """What the samplers that push the actor's weights to an engine (and check them) share."""

    source: Any
    check: ProbeCheck

    def retarget(self, model: Any) -> None:
        """Push and check `model`'s weights (another learner's actor) from the next `sync` on."""
        self.source = model
        self.check.retarget(model)


class VLLMSampler(PushedSampler):
    """A vLLM engine whose weights are pushed from the actor and checked (module docstring)."""

    def __init__(self, cfg: Config, model: Any, tokenizer: Any) -> None:
        from horizonrl.rollout.backends.vllm import VLLMBackend

        v = cfg.rollout.vllm
        self.cfg = cfg
        self.source = model
        self.sleep_during_update = v.sleep_during_update
        self.backend: VLLMBackend = VLLMBackend(
            cfg.model.path,
            tokenizer,
            python=v.python or None,
            dtype=cfg.rollout.dtype,
            max_model_len=v.max_model_len,
            gpu_memory_utilization=v.gpu_memory_utilization,
            tensor_parallel_size=v.tensor_parallel_size,
            devices=v.devices,
            kv_cache_gb=v.kv_cache_gb,
            enforce_eager=v.enforce_eager,
            seed=cfg.trainer.seed,
            start_timeout_s=v.start_timeout_s,
        )
        self.check = ProbeCheck(model, tokenizer, v.check_tolerance, "rollout.vllm.check_tolerance")
        self.asleep = False

    def sync(self) -> dict[str, float]:
        start = time.perf_counter()
        if self.asleep:
            self.backend.wake_up()
            self.asleep = False
        pushed = self.backend.load_weights(self.source)
        stats = {
            "weight_sync/push_s": pushed["seconds"],
            "weight_sync/version": float(self.backend.weight_version),
        }
        if self.check.tolerance > 0:
            [engine] = self.backend.compute_logprobs([self.check.probe])
            stats |= self.check({"the vLLM engine": engine}, self.backend.weight_version)
        stats["weight_sync/seconds"] = time.perf_counter() - start
        return stats

    def after_rollout(self) -> None:
        """Colocated GPUs: free the engine's memory for the update (the next `sync` wakes it)."""
        if self.sleep_during_update and not self.asleep:
            self.backend.sleep(level=1)
            self.asleep = True

    def close(self) -> None:
        self.backend.close()


class RaySampler(PushedSampler):
    """Rollout workers placed by Ray (`resources.rollout_workers: ray`, `horizonrl.distributed.ray_rollout`):
    `sync()` pushes the actor's weights to every worker at once (one `ray.put`; a worker Ray restarted
    gets them too), then checks every worker's probe logprobs against the actor's (`ProbeCheck`, the
    tolerance of the worker backend's `WORKER_KINDS` entry)."""

    def __init__(self, cfg: Config, model: Any, tokenizer: Any) -> None:
        from horizonrl.distributed.ray_envs import connect
        from horizonrl.distributed.ray_rollout import WORKER_KINDS, RayRolloutBackend, start_rollout_workers

        if cfg.rollout.backend not in WORKER_KINDS:
            raise SystemExit(
                f"resources.rollout_workers=ray: rollout.backend={cfg.rollout.backend!r} has no Ray worker; "
                f"choose one of: {', '.join(WORKER_KINDS)}"
            )
        assert cfg.resources.ray is not None
        self.started_ray = connect(cfg.resources.ray)
        kind = WORKER_KINDS[cfg.rollout.backend]
        self.source = model
        self.backend: RayRolloutBackend = RayRolloutBackend(start_rollout_workers(cfg), tokenizer)
        self.check = ProbeCheck(model, tokenizer, kind.tolerance(cfg), kind.tolerance_key)

    def sync(self) -> dict[str, float]:
        from horizonrl.distributed.ray_rollout import export_state

        start = time.perf_counter()
        version = self.backend.version + 1
        pushed = self.backend.load_state(export_state(self.source), version)
        stats = {"weight_sync/push_s": pushed, "weight_sync/version": float(version)}
        if self.check.tolerance > 0:
            stats |= self.check_workers()
        stats["weight_sync/seconds"] = time.perf_counter() - start
        return stats

    def check_workers(self) -> dict[str, float]:
        """The post-sync check on every worker (`WeightDesync` names the worst one)."""
        scored = self.backend.worker_logprobs([self.check.probe])
        return self.check({f"rollout worker {k}": lps for k, [lps] in scored.items()}, self.backend.version)

    def after_rollout(self) -> None:
        pass

    def close(self) -> None:
        self.backend.close()
        if self.started_ray:
            import ray

            ray.shutdown()


SAMPLERS: dict[str, type[HFSampler] | type[VLLMSampler] | type[RaySampler]] = {
    "hf": HFSampler,
    "vllm": VLLMSampler,
}
RAY_SAMPLER = RaySampler
"""The sampler when `resources.rollout_workers=ray`, whatever `rollout.backend` the workers run."""


def make_sampler(cfg: Config, model: Any, tokenizer: Any) -> HFSampler | VLLMSampler | RaySampler:
    """The sampler of `cfg.rollout.backend` around the learner's actor `model` (on Ray's rollout
    workers when `resources.rollout_workers=ray`)."""
    if cfg.resources.rollout_workers == "ray":
        return RAY_SAMPLER(cfg, model, tokenizer)
    if cfg.rollout.backend not in SAMPLERS:
        raise SystemExit(
            f"rollout.backend={cfg.rollout.backend!r} cannot train; choose one of: {', '.join(SAMPLERS)}"
        )
    return SAMPLERS[cfg.rollout.backend](cfg, model, tokenizer)
