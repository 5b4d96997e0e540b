"""The hf backend: sampled tokens and their raw logprobs agree with a plain teacher-forced forward,
with and without KV-cache reuse, for rows of different lengths in one batch."""

from __future__ import annotations

import pytest
import torch

from horizonrl.models import load_model
from horizonrl.rollout.backends.base import GenerationRequest, SamplingParams, make_backend
from horizonrl.rollout.backends.hf import HFBackend


@pytest.fixture(scope="module")
def tiny():
    model, tok = load_model("tiny")
    return model, tok


def _prompts(tok, n=3):
    texts = ["Hi", "Write a long poem about the sea, the sky and the birds above them.", "x y z"][:n]
    return [tok.encode(f"<|im_start|>user\n{t}<|im_end|>\n<|im_start|>assistant\n") for t in texts]


def _assert_matches_teacher_forcing(backend, context, result, tol=1e-4):
    [lps] = backend.compute_logprobs([context + result.token_ids])
    got = lps[len(context) :]
    assert len(got) == len(result.logprobs)
    assert max(abs(a - b) for a, b in zip(got, result.logprobs, strict=True)) < tol


def test_sampled_logprobs_are_raw_model_logprobs_across_turns_with_cache_reuse(tiny):
    model, tok = tiny
    backend = HFBackend(model, tok)
    assert backend.reuse_cache
    contexts = _prompts(tok)
    obs = [
        tok.encode(f"<|im_start|>user\nobservation {'x ' * (3 * i)}<|im_end|>\n<|im_start|>assistant\n")
        for i in range(3)
    ]
    for turn in range(3):
        params = SamplingParams(max_tokens=6 + 3 * turn, temperature=1.0, top_k=50, seed=turn)
        requests = [GenerationRequest(token_ids=c, cache_key=i) for i, c in enumerate(contexts)]
        before = backend.stats.prefill_tokens
        results = backend.generate(requests, params)
        if turn > 0:  # only the new tokens of each row were prefilled
            new = sum(len(obs[i]) + 1 for i in range(3))  # + the last sampled token, never fed during decode
            assert backend.stats.prefill_tokens - before == new
        for c, r in zip(contexts, results, strict=True):
            _assert_matches_teacher_forcing(backend, c, r)
            assert r.sampling_logprobs is not None and len(r.sampling_logprobs) == len(r.token_ids)
        contexts = [c + r.token_ids + obs[i] for i, (c, r) in enumerate(zip(contexts, results, strict=True))]
    assert backend.kept_tokens() > 0
    for i in range(3):
        backend.release(i)
    assert backend.kept_tokens() == 0


def test_reuse_gives_the_same_tokens_as_recomputing(tiny):
    model, tok = tiny
    reuse, fresh = HFBackend(model, tok), HFBackend(model, tok, reuse_cache=False)
    contexts = _prompts(tok)
    params = SamplingParams(max_tokens=8, temperature=1.0, seed=1)
    first = reuse.generate(
        [GenerationRequest(token_ids=c, cache_key=i) for i, c in enumerate(contexts)], params
    )
    nxt = [c + r.token_ids + tok.encode("\nok") for c, r in zip(contexts, first, strict=True)]
    a = reuse.generate([GenerationRequest(token_ids=c, cache_key=i) for i, c in enumerate(nxt)], params)
    b = fresh.generate([GenerationRequest(token_ids=c) for c in nxt], params)
    assert [r.token_ids for r in a] == [r.token_ids for r in b]
    assert reuse.stats.reused_tokens > 0 and fresh.stats.reused_tokens == 0
    assert reuse.stats.prefill_tokens < fresh.stats.prefill_tokens + sum(len(c) for c in contexts)


def test_greedy_matches_transformers_generate(tiny):
    model, tok = tiny
    backend = HFBackend(model, tok)
    [prompt] = _prompts(tok, 1)
    [r] = backend.generate(
        [GenerationRequest(token_ids=prompt)], SamplingParams(max_tokens=10, temperature=0.0)
    )
    ref = model.generate(torch.tensor([prompt]), max_new_tokens=10, do_sample=False)[
        0, len(prompt) :
    ].tolist()
    assert r.token_ids == ref[: len(r.token_ids)]
    assert r.sampling_logprobs == [0.0] * len(r.token_ids)


def test_max_tokens_and_stop(tiny):
    model, tok = tiny
    backend = HFBackend(model, tok)
    prompts = _prompts(tok, 2)
    params = SamplingParams(max_tokens=7, temperature=1.0, seed=0, ignore_eos=True)
    res = backend.generate(
        [GenerationRequest(token_ids=prompts[0]), GenerationRequest(token_ids=prompts[1], max_tokens=3)],
        params,
    )
    assert [len(r.token_ids) for r in res] == [7, 3]
    assert all(r.finish_reason == "length" for r in res)
    # a stop id ends the turn and is kept as sampled; the text leaves it out
    stop = res[0].token_ids[2]
    [r] = backend.generate(
        [GenerationRequest(token_ids=prompts[0])],
        SamplingParams(max_tokens=7, temperature=1.0, seed=0, stop_token_ids=(stop,), ignore_eos=True),
    )
    assert r.finish_reason == "stop" and r.token_ids[-1] == stop and stop not in r.token_ids[:-1]
    assert r.text == tok.decode(r.token_ids[:-1])


def test_shared_module_uses_updated_weights_and_restores_train_mode(tiny):
    model, tok = tiny
    backend = make_backend("hf", model=model, tokenizer=tok)
    [prompt] = _prompts(tok, 1)
    params = SamplingParams(max_tokens=5, temperature=1.0, seed=3)
    r1 = backend.generate([GenerationRequest(token_ids=prompt, cache_key="e")], params)[0]
    model.train()
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        with torch.no_grad():  # what an optimizer step does to the shared module
            model.model.norm.weight.mul_(3.0)
        backend.clear()
        r2 = backend.generate([GenerationRequest(token_ids=prompt, cache_key="e")], params)[0]
        assert model.training  # the learner's mode is left as it was
        assert r2.logprobs != r1.logprobs
        _assert_matches_teacher_forcing(backend, prompt, r2)
    finally:
        model.load_state_dict(saved)
        model.eval()
