"""`hf` backend: batched sampling with transformers models on CPU or GPU, with KV-cache reuse.

Our own sampling loop over `model(...)` instead of `model.generate`, because a rollout
needs three things `generate` does not give together:

- **logprobs under a stated distribution**: each sampled token's logprob under
  `softmax(logits / T)` (T = `SamplingParams.reported_temperature`: the sampling temperature
  unless asked otherwise; no top-k/top-p) in `GenerationResult.logprobs` — what the learner
  recomputes for PPO's ratio — and its logprob under the actual sampling distribution in
  `sampling_logprobs`;
- **KV-cache reuse across turns**: a request with a `cache_key` keeps the keys/values of
  its whole context when its turn ends. The next request under that key whose token ids
  extend the kept ones feeds only the new tokens (the observation turn), so each context
  token is computed once per episode instead of once per turn. `release(key)` drops it;
- **one batch for contexts of different lengths**: each row's kept cache is laid out
  right-aligned in a preallocated buffer, its new tokens follow (left-padded), and an
  explicit 4D attention mask hides every padding position. Finished rows leave the batch
  when half of it is done, so short turns do not pay for long ones.

The model can be shared with a learner: `HFBackend(model=module, tokenizer=tok)` uses the
given `nn.Module` as is, so weights the trainer updates are the ones the next rollout
samples from; call `clear()` after an update (kept caches were computed with the old
weights; the engine also drops them when each episode ends). Generation runs under
`torch.inference_mode()` with the module temporarily in eval mode.

Cache reuse needs plain full attention (the Llama / Qwen2 / Mistral-without-window /
SmolLM families); models with sliding-window or hybrid layers fall back to recomputing the
context every call (`supports_cache_reuse` tells which).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

from horizonrl.rollout.backends.base import GenerationRequest, GenerationResult, PolicyBackend, SamplingParams


@dataclass
class _KeptCache:
    token_ids: list[int]
    kv: torch.Tensor  # (layers, 2, kv_heads, L, head_dim)


class _BufferLayer(DynamicLayer):
    """A cache layer writing into a preallocated `(B, H, capacity, D)` buffer (no concat per step)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, length: int) -> None:
        super().__init__()
        self.kbuf, self.vbuf, self.length = keys, values, length
        self.is_initialized = True
        self.device = keys.device
        self.keys, self.values = keys[:, :, :length], values[:, :, :length]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        n = key_states.shape[-2]
        end = self.length + n
        self.kbuf[:, :, self.length : end] = key_states
        self.vbuf[:, :, self.length : end] = value_states
        self.length = end
        self.keys, self.values = self.kbuf[:, :, :end], self.vbuf[:, :, :end]
        return self.keys, self.values

    def get_seq_length(self, *args: Any, **kwargs: Any) -> int:
        return self.length


def supports_cache_reuse(model: Any) -> bool:
    """True for decoder-only models whose every layer is plain full attention."""
    config = model.config
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        return False
    layer_types = getattr(config, "layer_types", None)
    if layer_types and any(t != "full_attention" for t in layer_types):
        return False
    return getattr(config, "_attn_implementation", "sdpa") in ("sdpa", "eager")


def _filter_logits(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Temperature, top-k and top-p applied to `(B, V)` float logits."""
    x = logits / params.temperature
    if params.top_k and params.top_k < x.shape[-1]:
        kth = torch.topk(x, params.top_k, dim=-1).values[:, -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_x, order = torch.sort(x, dim=-1, descending=True)
        cum = torch.softmax(sorted_x, dim=-1).cumsum(dim=-1)
        drop_sorted = (cum - torch.softmax(sorted_x, dim=-1)) >= params.top_p  # keeps the top token always
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        x = x.masked_fill(drop, float("-inf"))
    return x


class HFBackend(PolicyBackend):
    """Token-level backend over a transformers causal LM (see the module docstring)."""

    name = "hf"
    token_level = True

    def __init__(
        self,
        model: Any = "default",
        tokenizer: Any = None,
        *,
        dtype: str = "float32",
        device: str | None = None,
        reuse_cache: bool = True,
        compact_fraction: float = 0.5,
    ) -> None:
        super().__init__()
        if isinstance(model, str):
            from horizonrl.models import load_model

            model, loaded_tok = load_model(model, dtype=dtype)
            tokenizer = tokenizer or loaded_tok
            if device:
                model = model.to(device)
        if tokenizer is None:
            raise ValueError("HFBackend(model=<nn.Module>) needs the tokenizer too")
        self.model = model
        self.tokenizer = tokenizer
        self.device = next(model.parameters()).device
        self.reuse_cache = reuse_cache and supports_cache_reuse(model)
        self.compact_fraction = compact_fraction
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.eos_ids = self._eos_ids()
        self._cache_kwarg = (
            "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        )
        self._keep_kwarg = "logits_to_keep" in inspect.signature(model.forward).parameters
        self._caches: dict[Hashable, _KeptCache] = {}

    # ----------------------------------------------------------------- public API

    def release(self, cache_key: Hashable) -> None:
        self._caches.pop(cache_key, None)

    def clear(self) -> None:
        self._caches.clear()

    def kept_tokens(self) -> int:
        """Context tokens currently held in kept caches (memory ~ this x layers x 2 x heads x dim)."""
        return sum(len(c.token_ids) for c in self._caches.values())

    def generate(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[GenerationResult]:
        if not requests:
            return []
        start = time.perf_counter()
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                out = self._generate(list(requests), params)
        finally:
            self.model.train(was_training)
        self.stats.calls += 1
        self.stats.generate_seconds += time.perf_counter() - start
        return out

    @torch.inference_mode()
    def compute_logprobs(
        self, sequences: Sequence[Sequence[int]], *, batch_size: int = 8
    ) -> list[list[float]]:
        """Teacher-forced raw logprobs; position 0 gets 0.0 (nothing predicts it)."""
        out: list[list[float]] = []
        was_training = self.model.training
        self.model.eval()
        try:
            for s in range(0, len(sequences), batch_size):
                out += self._score(sequences[s : s + batch_size])
        finally:
            self.model.train(was_training)
        return out

    # ----------------------------------------------------------------- internals

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        gen_eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        if isinstance(gen_eos, int):
            ids.add(gen_eos)
        elif gen_eos:
            ids.update(int(i) for i in gen_eos)
        return ids

    def _forward(
        self, input_ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: Any
    ) -> torch.Tensor:
        """Logits of the last position, `(B, V)` float. `mask`: 4D bool `(B, 1, q, kv)` or 2D `(B, kv)`."""
        kwargs: dict[str, Any] = {self._cache_kwarg: cache, "use_cache": True}
        if self._keep_kwarg:
            kwargs["logits_to_keep"] = 1
        if mask.dim() == 4 and getattr(self.model.config, "_attn_implementation", "sdpa") == "eager":
            dtype = next(self.model.parameters()).dtype
            additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
            mask = additive.masked_fill_(~mask, torch.finfo(dtype).min)
        elif mask.dim() == 2:
            mask = mask.long()
        logits = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions, **kwargs).logits
        return logits[:, -1, :].float()  # (B, V)

    def _take_cache(self, req: GenerationRequest) -> tuple[_KeptCache | None, int]:
        """The kept cache usable for `req` (cropped to the common prefix) and its length."""
        if not self.reuse_cache or req.cache_key is None:
            return None, 0
        kept = self._caches.pop(req.cache_key, None)
        if kept is None:
            return None, 0
        ids, n = req.token_ids, 0
        limit = min(len(kept.token_ids), len(ids) - 1)  # at least one token must be fed
        while n < limit and kept.token_ids[n] == ids[n]:
            n += 1
        if n == 0:
            return None, 0
        if n < len(kept.token_ids):
            kept = _KeptCache(kept.token_ids[:n], kept.kv[:, :, :, :n].clone())
        return kept, n

    def _generate(self, requests: list[GenerationRequest], params: SamplingParams) -> list[GenerationResult]:
        config = self.model.config
        dev = self.device
        B = len(requests)
        for req in requests:
            if not req.token_ids:
                raise ValueError("HFBackend needs GenerationRequest.token_ids (a token-level backend)")
        taken = [self._take_cache(r) for r in requests]
        kept: list[_KeptCache | None] = [k for k, _ in taken]
        cached = [c for _, c in taken]
        del taken
        new_tokens = [r.token_ids[c:] for r, c in zip(requests, cached, strict=True)]
        max_new = [min(params.max_tokens, r.max_tokens or params.max_tokens) for r in requests]
        steps = max(max_new)
        P = max(cached)
        N = max(len(t) for t in new_tokens)
        cap = P + N + steps
        self.stats.prefill_tokens += sum(len(t) for t in new_tokens)
        self.stats.reused_tokens += sum(cached)
        self.stats.padded_tokens += sum(N - len(t) for t in new_tokens)

        n_layers = config.num_hidden_layers
        heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        dtype = next(self.model.parameters()).dtype
        valid = torch.zeros(B, cap, dtype=torch.bool, device=dev)  # which cache columns hold real tokens
        buf: torch.Tensor | None = None
        if self.reuse_cache:
            buf = torch.zeros(n_layers, 2, B, heads, cap, head_dim, dtype=dtype, device=dev)
            for i, (k, c) in enumerate(zip(kept, cached, strict=True)):
                if k is not None:
                    buf[:, :, i, :, P - c : P] = k.kv.to(dev)
        kept.clear()  # the buffer holds them now; keep memory at one copy
        input_ids = torch.full((B, N), self.pad_id, dtype=torch.long, device=dev)
        positions = torch.zeros(B, N, dtype=torch.long, device=dev)
        for i, (toks, c) in enumerate(zip(new_tokens, cached, strict=True)):
            n = len(toks)
            valid[i, P - c : P] = True
            valid[i, P + N - n : P + N] = True
            input_ids[i, N - n :] = torch.tensor(toks, dtype=torch.long, device=dev)
            positions[i, N - n :] = torch.arange(c, c + n, device=dev)
        next_pos = torch.tensor([c + len(t) for c, t in zip(cached, new_tokens, strict=True)], device=dev)
        cache = self._make_cache(buf, P)

        # Prefill: causal over the new columns, padding hidden both as keys and (except to
        # itself, so no row of the mask is empty) as queries.
        q_cols = torch.arange(P, P + N, device=dev)
        k_cols = torch.arange(P + N, device=dev)
        causal = k_cols[None, :] <= q_cols[:, None]  # (N, P+N)
        if buf is not None:
            mask4 = (causal[None] & valid[:, None, : P + N]) | (
                k_cols[None, None, :] == q_cols[None, :, None]
            )
            logits = self._forward(input_ids, mask4[:, None], positions, cache)
        else:  # standard cache (maybe sliding layers): let transformers build the masks
            logits = self._forward(input_ids, valid[:, : P + N], positions, cache)

        generator = None
        if params.seed is not None and not params.greedy:
            generator = torch.Generator(device=dev).manual_seed(params.seed)
        stop_ids = set(params.stop_token_ids) | (set() if params.ignore_eos else self.eos_ids)
        stop_tensor = torch.tensor(sorted(stop_ids) or [-1], device=dev)
        rows: list[int | None] = list(range(B))  # request index of each batch row (None: finished)
        sampled: list[list[int]] = [[] for _ in range(B)]
        reported_lp: list[list[float]] = [[] for _ in range(B)]
        samp_lp: list[list[float]] = [[] for _ in range(B)]
        finish = ["length"] * B
        col = P + N
        lp_temperature = params.reported_temperature
        while True:
            reported = torch.log_softmax(logits / lp_temperature, dim=-1)  # (b, V)
            if params.greedy:
                tok = logits.argmax(dim=-1)
                s_lp = torch.zeros_like(tok, dtype=torch.float)
            else:
                filt = torch.log_softmax(_filter_logits(logits, params), dim=-1)
                tok = torch.multinomial(filt.exp(), 1, generator=generator).squeeze(-1)
                s_lp = filt.gather(-1, tok[:, None]).squeeze(-1)
            r_lp = reported.gather(-1, tok[:, None]).squeeze(-1)
            toks, stops, r_list, s_list = (
                tok.tolist(),
                torch.isin(tok, stop_tensor).tolist(),
                r_lp.tolist(),
                s_lp.tolist(),
            )
            alive = []
            for j, r in enumerate(rows):
                if r is None:  # finished earlier, riding along until the next compaction
                    continue
                sampled[r].append(toks[j])
                reported_lp[r].append(r_list[j])
                samp_lp[r].append(s_list[j])
                self.stats.decode_tokens += 1
                if stops[j]:
                    finish[r] = "stop"
                if stops[j] or len(sampled[r]) >= max_new[r]:
                    self._keep(requests[r], sampled[r], buf, valid, j, col)
                    rows[j] = None
                else:
                    alive.append(j)
            if not alive:
                break
            if len(alive) <= self.compact_fraction * len(rows):
                sel = torch.tensor(alive, device=dev)
                rows = [rows[j] for j in alive]
                valid, next_pos, tok = valid[sel], next_pos[sel], tok[sel]
                if buf is not None:
                    buf = buf[:, :, sel]
                cache = self._make_cache(buf, col, cache, sel)
                alive = list(range(len(rows)))
            else:
                self.stats.padded_tokens += len(rows) - len(alive)
            valid[torch.tensor(alive, device=dev), col] = True
            mask = valid[:, None, None, : col + 1] if buf is not None else valid[:, : col + 1]
            logits = self._forward(tok[:, None], mask, next_pos[:, None], cache)
            next_pos = next_pos + 1
            col += 1
        results = []
        for r in range(B):
            ids = sampled[r]
            body = ids[:-1] if finish[r] == "stop" else ids
            text = self.tokenizer.decode(body, skip_special_tokens=False)
            results.append(GenerationResult(ids, reported_lp[r], text, finish[r], samp_lp[r]))
        return results

    def _make_cache(
        self, buf: torch.Tensor | None, length: int, old: Any = None, sel: torch.Tensor | None = None
    ) -> Any:
        if buf is None:  # no reuse: a standard cache, rows selected in place
            if old is not None and sel is not None:
                old.batch_select_indices(sel)
                return old
            return DynamicCache(config=self.model.config)
        cache = DynamicCache()
        cache.layers = [_BufferLayer(buf[layer, 0], buf[layer, 1], length) for layer in range(buf.shape[0])]
        return cache

    def _keep(
        self,
        req: GenerationRequest,
        sampled: list[int],
        buf: torch.Tensor | None,
        valid: torch.Tensor,
        row: int,
        col: int,
    ) -> None:
        """Keep the finished row's cache: context + sampled ids except the last (never fed)."""
        if buf is None or req.cache_key is None:
            return
        cols = valid[row, :col].nonzero().squeeze(-1)
        kv = buf[:, :, row].index_select(-2, cols).clone()  # (layers, 2, H, L, D)
        ids = list(req.token_ids) + sampled[:-1]
        if kv.shape[-2] != len(ids):
            raise RuntimeError(f"kept cache has {kv.shape[-2]} positions for {len(ids)} tokens")
        self._caches[req.cache_key] = _KeptCache(ids, kv)

    def _score(self, batch: Sequence[Sequence[int]]) -> list[list[float]]:
        dev = self.device
        T = max(len(s) for s in batch)
        ids = torch.full((len(batch), T), self.pad_id, dtype=torch.long, device=dev)
        attn = torch.zeros(len(batch), T, dtype=torch.long, device=dev)
        for i, s in enumerate(batch):
            ids[i, : len(s)] = torch.tensor(list(s), dtype=torch.long, device=dev)
            attn[i, : len(s)] = 1
        decoder = self.model.get_decoder() if hasattr(self.model, "get_decoder") else None
        head = self.model.get_output_embeddings()
        out: list[list[float]] = []
        if decoder is not None and head is not None:
            hidden = decoder(input_ids=ids, attention_mask=attn).last_hidden_state  # (B, T, H)
            lps = torch.zeros(len(batch), T, device=dev)
            for c in range(0, T - 1, 512):  # lm head in chunks: (B, T, V) logits would not fit
                logits = head(hidden[:, c : min(c + 512, T - 1)]).float()
                target = ids[:, c + 1 : c + 1 + logits.shape[1]]
                lps[:, c + 1 : c + 1 + logits.shape[1]] = (
                    torch.log_softmax(logits, dim=-1).gather(-1, target[..., None]).squeeze(-1)
                )
        else:
            logits = self.model(input_ids=ids, attention_mask=attn).logits.float()
            lps = torch.zeros(len(batch), T, device=dev)
            lps[:, 1:] = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        for i, s in enumerate(batch):
            out.append([float(x) for x in lps[i, : len(s)]])
        return out
