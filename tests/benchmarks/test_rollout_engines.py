"""`benchmarks/rollout.py --compare-engines` on the tiny model: varied reply lengths (`--reply-min`)
are drawn per context, so both engines play the same greedy episodes with the same reply lengths."""

from __future__ import annotations

from argparse import Namespace

from benchmarks import rollout
from horizonrl.envs.registry import get_family
from horizonrl.rollout.backends.base import GenerationRequest
from horizonrl.rollout.backends.hf import HFBackend


def test_varied_replies_give_both_engines_the_same_episodes_with_lengths_in_range():
    model, tok = rollout.engines_model("tiny", "float32")
    assert model.config.hidden_size // model.config.num_attention_heads == 64  # what vLLM's CPU kernels run
    backend = HFBackend(model, tok)
    args = Namespace(turns=3, max_tokens=24, reply_min=2, step_ms=0.0, jitter=1.0, seed=0)
    items = get_family("textcraft").split("test")[:4]
    runs = {engine: rollout.run_engine(backend, engine, items, args) for engine in ("lockstep", "async")}
    assert runs["lockstep"]["token_ids"] == runs["async"]["token_ids"]
    fixed = len(items) * args.turns * args.max_tokens  # the tiny model never stops by itself
    assert 0 < runs["lockstep"]["sampled"] < fixed

    varied = rollout.VariedReplies(backend, 2, 24)
    lengths = [varied._cap(GenerationRequest(token_ids=[1, 2, n])).max_tokens for n in range(40)]
    assert all(length is not None and 2 <= length <= 24 for length in lengths)
    assert len(set(lengths)) > 5  # they vary with the context
    assert lengths == [varied._cap(GenerationRequest(token_ids=[1, 2, n])).max_tokens for n in range(40)]
    assert varied._cap(GenerationRequest(token_ids=[1], max_tokens=1)).max_tokens == 1  # a lower cap stays
