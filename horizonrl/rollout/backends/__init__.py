"""Policy backends: `hf` (transformers, default), `vllm` (vLLM in a worker process of its own
virtualenv), `openai` (any OpenAI-compatible endpoint).

`make_backend(name, **kwargs)` builds one by name; see `base.py` for the interface.
"""

from horizonrl.rollout.backends.base import (
    BACKENDS,
    BackendStats,
    GenerationRequest,
    GenerationResult,
    PolicyBackend,
    SamplingParams,
    make_backend,
)

__all__ = [
    "BACKENDS",
    "BackendStats",
    "GenerationRequest",
    "GenerationResult",
    "PolicyBackend",
    "SamplingParams",
    "make_backend",
]
