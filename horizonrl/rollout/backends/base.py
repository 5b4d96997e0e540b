"""The policy backend interface: generate continuations with logprobs, score given tokens.

A backend is either *token-level* (`hf`, `vllm`): it takes the conversation as the
exact token ids the trajectory holds and returns the ids it sampled with their logprobs,
so nothing is ever decoded and re-encoded; or *message-level* (`openai`): it takes
role/content messages and returns text (API models; the trajectory then has messages but
no token fields).

Logprobs: `GenerationResult.logprobs` are under the model's **raw** distribution
(softmax of the logits at temperature 1, no top-k/top-p), which is what PPO's ratio
needs as `old_logprobs`. The logprobs under the actual sampling distribution
(temperature, top-k, top-p applied) are in `sampling_logprobs` when the backend has them.

    backend = make_backend("hf", model="tiny")
    [result] = backend.generate([GenerationRequest(token_ids=prompt_ids, cache_key="ep0")],
                                SamplingParams(max_tokens=64, temperature=0.0))
    result.token_ids, result.logprobs, result.finish_reason      # "stop" or "length"
    backend.release("ep0")                                       # drop that episode's KV cache

    result = await backend.agenerate(request, params)            # one request, from a coroutine

`agenerate` is how the asynchronous engine asks: one request per call, from many episodes
at once. The default implementation coalesces the calls of one event loop into `generate`
batches run in a worker thread, with no round barrier: the first call starts a batch at
once, calls made while it runs wait, and when it returns every waiting request with the
same `SamplingParams` forms the next batch (continuous micro-batching for `hf`). One
`generate` runs at a time per backend (a lock), so the backend's own state (the `hf` KV
caches kept per `cache_key`) is never touched by two batches at once. A backend with its own
continuous batching (vLLM's async engine) overrides `agenerate` to stream each request in.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one batch of turns."""

    max_tokens: int = 256
    """Most tokens sampled per request (per turn); a request's own `max_tokens` can lower it."""
    temperature: float = 0.0
    """0 means greedy (argmax); evaluation uses greedy by default."""
    top_p: float = 1.0
    top_k: int = 0
    """0 disables top-k."""
    stop_token_ids: tuple[int, ...] = ()
    """Extra token ids that end a turn, besides the backend's own end-of-turn ids."""
    seed: int | None = None
    """Seeds the sampling generator of this call (reproducible sampling for a fixed batch)."""
    ignore_eos: bool = False
    """Keep sampling past end-of-turn tokens (benchmarks that need fixed lengths)."""
    logprob_temperature: float | None = None
    """T of the distribution `softmax(logits / T)` that `GenerationResult.logprobs` are under;
    None: the sampling temperature (1.0 when greedy). 1.0 gives the raw model's logprobs."""

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if self.logprob_temperature is not None and self.logprob_temperature <= 0:
            raise ValueError(f"logprob_temperature must be > 0, got {self.logprob_temperature}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def reported_temperature(self) -> float:
        """The T that `GenerationResult.logprobs` are computed at (see `logprob_temperature`)."""
        if self.logprob_temperature is not None:
            return self.logprob_temperature
        return 1.0 if self.greedy else self.temperature


@dataclass
class GenerationRequest:
    """One continuation to generate: the whole conversation so far."""

    token_ids: list[int] = field(default_factory=list)
    """Full context as token ids (token-level backends)."""
    messages: list[dict[str, str]] | None = None
    """Full context as role/content messages (message-level backends)."""
    max_tokens: int | None = None
    """Per-request cap (e.g. what is left of the response budget); min with `SamplingParams`."""
    cache_key: Hashable | None = None
    """Token-level backends keep this request's KV cache under this key for the next call
    whose context extends it (one key per live episode); None: no reuse."""


@dataclass
class GenerationResult:
    token_ids: list[int]
    """Sampled ids, including the end-of-turn token when the model emitted it."""
    logprobs: list[float]
    """Logprob of each sampled id under `softmax(logits / SamplingParams.reported_temperature)`."""
    text: str
    """Decoded text of the sampled ids without the end-of-turn token (for parsing and messages)."""
    finish_reason: str
    """`stop` (an end-of-turn token was sampled) or `length` (cut by max_tokens)."""
    sampling_logprobs: list[float] | None = None
    """Logprob of each id under the sampling distribution (temperature/top-k/top-p), if known."""
    completion_tokens: int | None = None
    """Tokens the model produced, when the backend has no ids (API models report a count)."""
    error: str | None = None
    """Set when this request failed (e.g. the API refused it); the engine fails that episode."""

    @property
    def num_tokens(self) -> int:
        return self.completion_tokens if self.completion_tokens is not None else len(self.token_ids)


@dataclass
class BackendStats:
    """Counters a backend accumulates; benchmarks and progress read them."""

    calls: int = 0
    prefill_tokens: int = 0
    """Context tokens run through the model in prefill passes (padding excluded)."""
    reused_tokens: int = 0
    """Context tokens whose KV came from a kept cache instead of being recomputed."""
    decode_tokens: int = 0
    """Tokens sampled."""
    padded_tokens: int = 0
    """Padding positions computed (prefill and decode): work done for nothing."""
    generate_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class PolicyBackend(ABC):
    """Base class of every backend (see the module docstring)."""

    name: str = "base"
    token_level: bool = True
    """True: requests carry token ids and results carry sampled ids + logprobs."""
    tokenizer: Any = None
    """The HF tokenizer whose chat template renders the conversation (token-level backends)."""
    context_limit: int | None = None
    """Most tokens one sequence (context + sampled) may hold, where the engine refuses longer ones
    (vllm: its `max_model_len`); None: no such limit. The rollout ends an episode that would pass
    it as truncated (stop reason "context_limit") instead of sending a request that fails."""

    def __init__(self) -> None:
        self.stats = BackendStats()
        self._generate_lock = threading.Lock()
        self._coalescer: _Coalescer | None = None

    @abstractmethod
    def generate(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[GenerationResult]:
        """One continuation per request, in order, generated as one batch where possible."""

    async def agenerate(self, request: GenerationRequest, params: SamplingParams) -> GenerationResult:
        """One continuation, awaited; concurrent calls are coalesced into `generate` batches (see the
        module docstring). With `params.seed` set, batch k is sampled with seed `params.seed + k`
        (a fixed seed per call would sample every batch's rows from the same random stream)."""
        loop = asyncio.get_running_loop()
        if self._coalescer is None or self._coalescer.loop is not loop:
            self._coalescer = _Coalescer(self, loop)
        return await self._coalescer.submit(request, params)

    def compute_logprobs(
        self, sequences: Sequence[Sequence[int]], *, batch_size: int = 8
    ) -> list[list[float]]:
        """Teacher-forced logprob of each token given the ones before it (first token: 0.0)."""
        raise NotImplementedError(f"backend {self.name!r} cannot score given tokens")

    def release(self, cache_key: Hashable) -> None:  # noqa: B027 (optional hook, no-op by default)
        """Forget the cache kept under `cache_key` (the episode ended)."""

    def clear(self) -> None:  # noqa: B027
        """Forget every kept cache (weights changed, or a new rollout starts)."""

    def close(self) -> None:  # noqa: B027
        """Free connections and memory."""


class _Coalescer:
    """The waiting `agenerate` calls of one event loop and the task that batches them."""

    def __init__(self, backend: PolicyBackend, loop: asyncio.AbstractEventLoop) -> None:
        self.backend = backend
        self.loop = loop
        self.waiting: list[tuple[GenerationRequest, SamplingParams, asyncio.Future[GenerationResult]]] = []
        self.worker: asyncio.Task[None] | None = None
        self.batches = 0
        self.batch_sizes: list[int] = []
        """Rows of each `generate` call made so far (tests and benchmarks read it)."""

    async def submit(self, request: GenerationRequest, params: SamplingParams) -> GenerationResult:
        future: asyncio.Future[GenerationResult] = self.loop.create_future()
        self.waiting.append((request, params, future))
        if self.worker is None or self.worker.done():
            self.worker = self.loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self.waiting:
            params = self.waiting[0][1]
            batch = [w for w in self.waiting if w[1] == params and not w[2].done()]  # done: caller cancelled
            self.waiting = [w for w in self.waiting if w[1] != params]
            if not batch:
                continue
            call = (
                params if params.seed is None else replace(params, seed=(params.seed + self.batches) % 2**31)
            )
            self.batches += 1
            self.batch_sizes.append(len(batch))
            try:
                results = await asyncio.to_thread(self._generate, [r for r, _, _ in batch], call)
            except Exception as exc:  # noqa: BLE001 (every caller of the batch gets the error)
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, _, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)
            # let the callers just answered run up to their next await: one whose turn needs no
            # env step (an unparsable action) asks again at once and joins the next batch
            await asyncio.sleep(0)

    def _generate(self, requests: list[GenerationRequest], params: SamplingParams) -> list[GenerationResult]:
        with self.backend._generate_lock:
            return self.backend.generate(requests, params)


BACKENDS: dict[str, str] = {
    "hf": "horizonrl.rollout.backends.hf:HFBackend",
    "openai": "horizonrl.rollout.backends.openai:OpenAIBackend",
    "vllm": "horizonrl.rollout.backends.vllm:VLLMBackend",
}


def make_backend(name: str, **kwargs: Any) -> PolicyBackend:
    """Build a registered backend by name (`hf`, `openai`, `vllm`) with its keyword arguments."""
    if name not in BACKENDS:
        raise KeyError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}")
    module, _, cls_name = BACKENDS[name].partition(":")
    cls = getattr(importlib.import_module(module), cls_name)
    backend: PolicyBackend = cls(**kwargs)
    return backend
