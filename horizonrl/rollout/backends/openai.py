"""`openai` backend: any OpenAI-compatible chat-completions endpoint (API models, vLLM/TGI servers).

    backend = OpenAIBackend(model="gpt-4o-mini", base_url="https://api.openai.com/v1")
    # key from $OPENAI_API_KEY (or the variable named by api_key_env); none sent if unset

It is message-level: each request sends the conversation as role/content messages, so API
models are evaluated on the same environments with the same prompts and parsers as local
ones. Trajectories then have `messages` but no token fields (the provider's tokens are
not ours). Requests of one batch go out concurrently (`max_concurrency`), with bounded
retries on connection errors, 429 and 5xx. A request that still fails returns a result
with `error` set, and the engine marks that episode failed instead of stopping the eval.

Greedy (temperature 0) sends `temperature: 0`; `seed` is sent when given (providers that
support it make sampling reproducible).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from horizonrl.rollout.backends.base import GenerationRequest, GenerationResult, PolicyBackend, SamplingParams

_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


class OpenAIBackend(PolicyBackend):
    name = "openai"
    token_level = False

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 1.0,
        max_concurrency: int = 16,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip(
            "/"
        )
        self.retries = retries
        self.backoff = backoff
        self.max_concurrency = max_concurrency
        self.extra_body = dict(extra_body or {})
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=timeout,
            trust_env=False,
            limits=httpx.Limits(max_connections=max_concurrency),
        )

    def generate(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[GenerationResult]:
        start = time.perf_counter()
        with ThreadPoolExecutor(max(1, min(self.max_concurrency, len(requests)))) as pool:
            results = list(pool.map(lambda r: self._one(r, params), requests))
        self.stats.calls += 1
        self.stats.decode_tokens += sum(r.num_tokens for r in results)
        self.stats.generate_seconds += time.perf_counter() - start
        return results

    def _body(self, req: GenerationRequest, params: SamplingParams) -> dict[str, Any]:
        if not req.messages:
            raise ValueError("OpenAIBackend needs GenerationRequest.messages (a message-level backend)")
        body: dict[str, Any] = {
            "model": self.model,
            "messages": req.messages,
            "max_tokens": min(params.max_tokens, req.max_tokens or params.max_tokens),
            "temperature": params.temperature,
            "n": 1,
        }
        if params.top_p < 1.0:
            body["top_p"] = params.top_p
        if params.seed is not None:
            body["seed"] = params.seed
        body.update(self.extra_body)
        return body

    def _one(self, req: GenerationRequest, params: SamplingParams) -> GenerationResult:
        body = self._body(req, params)
        url = f"{self.base_url}/chat/completions"
        error = "no attempt made"
        for attempt in range(self.retries + 1):
            try:
                response = self._client.post(url, json=body)
            except httpx.TransportError as exc:
                error = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code == 200:
                    return _parse(response.json())
                error = f"HTTP {response.status_code}: {response.text[:300]}"
                if response.status_code not in _RETRY_STATUS:
                    break
            if attempt < self.retries:
                time.sleep(self.backoff * 2**attempt)
        return GenerationResult([], [], "", "error", error=f"{url}: {error}")

    def close(self) -> None:
        self._client.close()


def _parse(data: dict[str, Any]) -> GenerationResult:
    try:
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
        finish = choice.get("finish_reason") or "stop"
    except (KeyError, IndexError, TypeError) as exc:
        return GenerationResult([], [], "", "error", error=f"malformed chat completion: {exc!r}")
    tokens = (data.get("usage") or {}).get("completion_tokens")
    return GenerationResult(
        [], [], text, "length" if finish == "length" else "stop", completion_tokens=tokens
    )
