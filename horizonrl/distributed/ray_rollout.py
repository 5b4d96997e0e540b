"""Rollout workers placed by Ray (`resources.rollout_workers: ray`, `resources.rollout_engines` of them).

    workers = start_rollout_workers(cfg)                   # Ray actors, each with its own backend
    backend = RayRolloutBackend(workers, tokenizer)        # a token-level PolicyBackend on the driver
    backend.load_state(actor.state_dict(), version=1)      # every worker gets the weights
    [result] = backend.generate([GenerationRequest(token_ids=ids, cache_key="ep0")], params)

Each worker is a Ray actor (`RolloutWorkerActor`) holding the run's token-level backend, built
from `model.path` in `rollout.dtype`: `hf` (on the GPU Ray gives it, else CPU) or `vllm` (its
engine process sees the GPUs Ray gave the actor). An actor reserves
`resources.rollout_worker_cpus` CPUs and, on GPU nodes, `resources.rollout_tensor_parallel` GPUs,
so Ray puts workers wherever those are free: the GPU nodes of a cluster, or this machine.

The driver-side `RayRolloutBackend` routes every request to one worker, sticky by `cache_key`
(an episode's turns all go to the worker that keeps its KV cache; a new key goes to the live
worker with the fewest keys), sends each worker its share of a batch at once and waits for all
(`generate`, order kept), or, from the asynchronous engine, batches each worker's requests on
their own (`agenerate`: one coalescer per worker, so a slow worker holds up only its own
episodes). Sampling seeds are offset per worker, so two workers never draw the same stream.

A worker that dies mid-rollout (its process killed, its node gone) fails only its requests:
they come back as `GenerationResult(error=...)` naming the worker, the engine fails those
episodes, and the worker is left out until the next `load_state`. Actors are created with
`max_restarts`, so Ray starts a dead worker again, but with its initial weights: `load_state`
waits for every worker, pushes the weights to all of them (one `ray.put`), and only then takes
them back. A worker that answers with another weight version than the last push (restarted in
between) is treated as dead too, so no rollout ever samples from stale weights.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from horizonrl.config import Config
from horizonrl.rollout.backends.base import GenerationRequest, GenerationResult, PolicyBackend, SamplingParams

MAX_RESTARTS = 3
"""Times Ray restarts one worker's process before giving up on it."""
STARTUP_TIMEOUT_S = 600.0
SEED_STRIDE = 1_000_003
"""Worker k samples with seed `seed + k * SEED_STRIDE` (distinct random streams per worker)."""


def _load_hf(backend: Any, state: dict[str, Any]) -> None:
    backend.model.load_state_dict(state, strict=True)


def _load_vllm(backend: Any, state: dict[str, Any]) -> None:
    backend.load_weights(state)


def _hf_kwargs(cfg: Config) -> dict[str, Any]:
    return {"dtype": cfg.rollout.dtype, "device": "cuda" if cfg.resources.gpus_per_node else None}


def _vllm_kwargs(cfg: Config) -> dict[str, Any]:
    v = cfg.rollout.vllm
    return dict(
        python=v.python or None,
        dtype=cfg.rollout.dtype,
        max_model_len=v.max_model_len,
        gpu_memory_utilization=v.gpu_memory_utilization,
        tensor_parallel_size=cfg.resources.rollout_tensor_parallel,
        kv_cache_gb=v.kv_cache_gb,
        enforce_eager=v.enforce_eager,
        seed=cfg.trainer.seed,
        start_timeout_s=v.start_timeout_s,
    )


@dataclass(frozen=True)
class WorkerKind:
    """What a rollout worker of one backend needs: how it is built, loaded and checked."""

    kwargs: Callable[[Config], dict[str, Any]]
    """The backend's keyword arguments (besides `model`) for this run."""
    load: Callable[[Any, dict[str, Any]], None]
    """Puts a state dict into the worker's backend."""
    tolerance: Callable[[Config], float]
    """Max abs probe-logprob difference allowed after a sync (0: no check)."""
    tolerance_key: str


WORKER_KINDS: dict[str, WorkerKind] = {
    "hf": WorkerKind(
        _hf_kwargs,
        _load_hf,
        lambda cfg: cfg.resources.rollout_worker_check_tolerance,
        "resources.rollout_worker_check_tolerance",
    ),
    "vllm": WorkerKind(
        _vllm_kwargs, _load_vllm, lambda cfg: cfg.rollout.vllm.check_tolerance, "rollout.vllm.check_tolerance"
    ),
}


class RolloutWorkerActor:
    """The body of one worker actor: a backend of `WORKER_KINDS` over `model`, and its weight version."""

    def __init__(self, backend: str, model: str, kwargs: dict[str, Any]) -> None:
        from horizonrl.rollout.backends.base import make_backend

        self.kind = WORKER_KINDS[backend]
        self.backend = make_backend(backend, model=model, **kwargs)
        self.version = 0
        """The push whose weights this worker holds (0: the initial ones of `model`)."""

    def generate(
        self, requests: list[GenerationRequest], params: SamplingParams
    ) -> tuple[int, list[GenerationResult]]:
        return self.version, self.backend.generate(requests, params)

    def compute_logprobs(self, sequences: list[list[int]]) -> tuple[int, list[list[float]]]:
        return self.version, self.backend.compute_logprobs(sequences)

    def load_state(self, state: dict[str, Any], version: int) -> int:
        self.backend.clear()
        self.kind.load(self.backend, state)
        self.version = version
        return version

    def release(self, keys: list[Hashable]) -> None:
        for key in keys:
            self.backend.release(key)

    def clear(self) -> None:
        self.backend.clear()

    def weight_version(self) -> int:
        return self.version

    def stats(self) -> dict[str, Any]:
        return self.backend.stats.as_dict()

    def pid(self) -> int:
        return os.getpid()


def start_rollout_workers(cfg: Config, *, max_restarts: int = MAX_RESTARTS) -> list[Any]:
    """`resources.rollout_engines` worker actors of `rollout.backend` over `model.path` (Ray connected)."""
    import ray

    r = cfg.resources
    kind = WORKER_KINDS[cfg.rollout.backend]
    gpus = r.rollout_tensor_parallel if r.gpus_per_node else 0
    remote: Any = ray.remote(num_cpus=r.rollout_worker_cpus, num_gpus=gpus, max_restarts=max_restarts)(
        RolloutWorkerActor
    )
    actors = [remote.remote(cfg.rollout.backend, cfg.model.path, kind.kwargs(cfg)) for _ in range(r.engines)]
    try:
        ray.get([a.pid.remote() for a in actors], timeout=STARTUP_TIMEOUT_S)  # built, or the error now
    except ray.exceptions.GetTimeoutError:
        for a in actors:
            ray.kill(a, no_restart=True)
        raise RuntimeError(
            f"Ray did not start {r.engines} rollout worker(s) of {r.rollout_worker_cpus:g} CPU and "
            f"{gpus} GPU(s) each within {STARTUP_TIMEOUT_S:g} s; the cluster has {ray.cluster_resources()} "
            "(lower resources.rollout_engines / rollout_worker_cpus, or add nodes)"
        ) from None
    return actors


def export_state(module: Any) -> dict[str, Any]:
    """The module's weights as the workers load them: CPU tensors by HF name, peft adapters merged."""
    if hasattr(module, "merge_and_unload"):
        import copy

        module = copy.deepcopy(module).merge_and_unload()
    return {k: v.detach().cpu() for k, v in module.state_dict().items()}


class _Worker(PolicyBackend):
    """The driver's handle on one worker; its own `agenerate` coalescer batches its requests."""

    name = "ray-worker"

    def __init__(self, owner: RayRolloutBackend, index: int, actor: Any) -> None:
        super().__init__()
        self.owner, self.index, self.actor = owner, index, actor
        self.tokenizer = owner.tokenizer

    def submit(self, requests: Sequence[GenerationRequest], params: SamplingParams) -> Any:
        if params.seed is not None:
            params = replace(params, seed=(params.seed + self.index * SEED_STRIDE) % 2**31)
        self.owner.served[self.index] += len(requests)
        return self.actor.generate.remote(list(requests), params)

    def collect(self, ref: Any, n: int) -> list[GenerationResult]:
        """The results of `submit`, or `n` error results when the worker died or came back fresh."""
        from ray.exceptions import RayActorError

        down = self.owner.down.get(self.index)
        if down is None:
            try:
                version, results = self.owner.ray.get(ref)
            except RayActorError as exc:
                down = self.owner.mark_down(self.index, f"died ({type(exc).__name__})")
            else:
                if version == self.owner.version:
                    return list(results)
                down = self.owner.mark_down(
                    self.index, f"restarted since weight sync v{self.owner.version} (it has v{version})"
                )
        return [GenerationResult([], [], "", "error", error=down) for _ in range(n)]

    def generate(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[GenerationResult]:
        if self.index in self.owner.down:
            return self.collect(None, len(requests))
        return self.collect(self.submit(requests, params), len(requests))


class RayRolloutBackend(PolicyBackend):
    """Token-level backend over rollout-worker actors (see the module docstring)."""

    name = "ray"
    token_level = True

    def __init__(self, actors: Sequence[Any], tokenizer: Any) -> None:
        super().__init__()
        import ray

        if not actors:
            raise ValueError("RayRolloutBackend needs at least one worker actor")
        self.ray = ray
        self.tokenizer = tokenizer
        self.workers = [_Worker(self, k, a) for k, a in enumerate(actors)]
        self.version = 0
        """The weight version every live worker holds (the last `load_state`)."""
        self.down: dict[int, str] = {}
        """Worker index -> why it is left out (until the next `load_state`)."""
        self.served = [0] * len(actors)
        """Requests sent to each worker so far (tests and benchmarks read it)."""
        self._route: dict[Hashable, int] = {}
        self._keys = [0] * len(actors)
        self._turn = -1
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- routing

    def mark_down(self, index: int, why: str) -> str:
        reason = f"rollout worker {index} {why}; its episodes fail, the others go on"
        self.down.setdefault(index, reason)
        return self.down[index]

    def worker_of(self, request: GenerationRequest) -> int:
        """The worker that serves `request`: its key's worker, else the live one with fewest keys
        (no key: the live workers in turn)."""
        with self._lock:
            key = request.cache_key
            if key is not None and key in self._route:
                return self._route[key]
            every = range(len(self.workers))
            live = [k for k in every if k not in self.down] or list(every)
            if key is None:  # no cache to keep: the live workers in turn
                self._turn += 1
                return live[self._turn % len(live)]
            index = min(live, key=lambda k: (self._keys[k], self.served[k]))
            self._route[key] = index
            self._keys[index] += 1
            return index

    # ----------------------------------------------------------------- PolicyBackend

    def generate(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[GenerationResult]:
        start = time.perf_counter()
        shares: dict[int, list[int]] = {}
        for i, request in enumerate(requests):
            shares.setdefault(self.worker_of(request), []).append(i)
        refs = {
            k: self.workers[k].submit([requests[i] for i in rows], params)
            for k, rows in shares.items()
            if k not in self.down
        }
        out: list[GenerationResult | None] = [None] * len(requests)
        for k, rows in shares.items():
            for i, result in zip(rows, self.workers[k].collect(refs.get(k), len(rows)), strict=True):
                out[i] = result
        self.stats.calls += 1
        self.stats.decode_tokens += sum(len(r.token_ids) for r in out if r is not None)
        self.stats.generate_seconds += time.perf_counter() - start
        return [r for r in out if r is not None]

    async def agenerate(self, request: GenerationRequest, params: SamplingParams) -> GenerationResult:
        worker = self.workers[self.worker_of(request)]
        result = await worker.agenerate(request, params)
        self.stats.decode_tokens += len(result.token_ids)
        return result

    def compute_logprobs(
        self, sequences: Sequence[Sequence[int]], *, batch_size: int = 8
    ) -> list[list[float]]:
        """Scored on the first live worker."""
        live = [k for k in range(len(self.workers)) if k not in self.down]
        if not live:
            raise RuntimeError(f"no live rollout worker: {'; '.join(self.down.values())}")
        return self.worker_logprobs(sequences, workers=live[:1])[live[0]]

    def worker_logprobs(
        self, sequences: Sequence[Sequence[int]], *, workers: Sequence[int] | None = None
    ) -> dict[int, list[list[float]]]:
        """Teacher-forced logprobs of `sequences` on each of `workers` (default: all), in parallel."""
        chosen = list(range(len(self.workers))) if workers is None else list(workers)
        seqs = [list(s) for s in sequences]
        refs = [self.workers[k].actor.compute_logprobs.remote(seqs) for k in chosen]
        return {k: lps for k, (_, lps) in zip(chosen, self.ray.get(refs), strict=True)}

    def release(self, cache_key: Hashable) -> None:
        with self._lock:
            index = self._route.pop(cache_key, None)
            if index is None:
                return
            self._keys[index] -= 1
        if index not in self.down:
            self.workers[index].actor.release.remote([cache_key])

    def clear(self) -> None:
        with self._lock:
            self._route.clear()
            self._keys = [0] * len(self.workers)
        from ray.exceptions import RayActorError

        live = [w for w in self.workers if w.index not in self.down]
        for w, ref in [(w, w.actor.clear.remote()) for w in live]:
            try:
                self.ray.get(ref)
            except RayActorError as exc:  # dead or restarting: out until the next weight push
                self.mark_down(w.index, f"died ({type(exc).__name__})")

    def close(self) -> None:
        for w in self.workers:
            self.ray.kill(w.actor, no_restart=True)

    # ----------------------------------------------------------------- weights

    def load_state(self, state: dict[str, Any], version: int, timeout: float = 300.0) -> float:
        """Push `state` to every worker (restarted ones included, waiting for them); seconds taken.
        Every worker is live again afterwards, at `version`."""
        start = time.perf_counter()
        ref = self.ray.put(state)
        self._each(self.workers, lambda w: w.actor.load_state.remote(ref, version), "load weights", timeout)
        self.version = version
        self.down.clear()
        return time.perf_counter() - start

    def worker_stats(self) -> list[dict[str, Any]]:
        """Each worker's backend counters (`BackendStats.as_dict`)."""
        return list(self.ray.get([w.actor.stats.remote() for w in self.workers]))

    def pids(self) -> list[int]:
        return list(self.ray.get([w.actor.pid.remote() for w in self.workers]))

    def _each(
        self, workers: Sequence[_Worker], call: Callable[[_Worker], Any], what: str, timeout: float = 60.0
    ) -> None:
        """`call` on every worker; a restarting one is asked again until `timeout`; one dead for
        good raises, naming it."""
        from ray.exceptions import ActorUnavailableError, RayActorError

        deadline = time.monotonic() + timeout
        pending = list(workers)
        while pending:
            refs = [call(w) for w in pending]
            retry = []
            for w, ref in zip(pending, refs, strict=True):
                try:
                    self.ray.get(ref, timeout=max(1.0, deadline - time.monotonic()))
                except (ActorUnavailableError, RayActorError) as exc:  # restarting: ask again
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"rollout worker {w.index} could not {what}: {exc}") from exc
                    retry.append(w)
            pending = retry
            if pending:
                time.sleep(0.5)
