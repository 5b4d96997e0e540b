"""The vllm backend against hf on one model: start-up, greedy parity, decode speed, weight sync.

    python benchmarks/vllm_backend.py --model default --batches 4,16 --max-tokens 64 --syncs 3

In one process: start the vLLM worker (wall time, and vLLM's own engine start); greedy turns on
B chat prompts with both backends (identical ids? max logprob difference; generated tokens/s,
`ignore_eos` so every row decodes `--max-tokens`); then `--syncs` weight syncs of the model's
weights (each perturbed by N(0, 0.01^2) noise) with the post-sync check of
`horizonrl.trainer.weight_sync` (seconds, max logprob difference of the probe sequence).
Prints a Markdown table and, with `--json`, writes the figures there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch

from horizonrl.models import load_model
from horizonrl.rollout.backends.base import GenerationRequest, SamplingParams
from horizonrl.rollout.backends.hf import HFBackend
from horizonrl.rollout.backends.vllm import VLLMBackend
from horizonrl.trainer.weight_sync import probe_ids

PROMPTS = [
    "Write a short poem about the sea.",
    "Explain what a hash table is.",
    "List three uses of copper.",
    "Describe a sunrise over the mountains.",
]


def _prompt_ids(tok, n):
    texts = [PROMPTS[i % len(PROMPTS)] + f" (#{i})" for i in range(n)]
    return [
        list(
            tok.apply_chat_template(
                [{"role": "user", "content": t}], add_generation_prompt=True, tokenize=True, return_dict=False
            )
        )
        for t in texts
    ]


def _max_diff(got, want):
    """Max logprob difference over the tokens both sampled alike (up to where greedy ids part)."""
    diffs = []
    for g, w, x, y in zip(got.token_ids, want.token_ids, got.logprobs, want.logprobs, strict=False):
        if g != w:
            break
        diffs.append(abs(x - y))
    return max(diffs, default=0.0)


def _timed_generate(backend, prompts, params):
    start = time.perf_counter()
    results = backend.generate([GenerationRequest(token_ids=p) for p in prompts], params)
    seconds = time.perf_counter() - start
    return results, seconds, sum(len(r.token_ids) for r in results) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--batches", default="4,16")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--syncs", type=int, default=3)
    parser.add_argument("--max-model-len", type=int, default=1024)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    model, tok = load_model(args.model)
    hf = HFBackend(model, tok)
    start = time.perf_counter()
    engine = VLLMBackend(args.model, tok, max_model_len=args.max_model_len)
    figures: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}",
        "vllm": engine.info["vllm"],
        "start_s": round(time.perf_counter() - start, 1),
        "engine_start_s": round(engine.info["start_s"], 1),
        "generate": [],
        "syncs": [],
    }
    params = SamplingParams(max_tokens=args.max_tokens, temperature=0.0, ignore_eos=True)
    for b in [int(x) for x in args.batches.split(",")]:
        prompts = _prompt_ids(tok, b)
        engine.generate([GenerationRequest(token_ids=prompts[0])], SamplingParams(max_tokens=2))  # warm-up
        got, _, v_tps = _timed_generate(engine, prompts, params)
        want, _, h_tps = _timed_generate(hf, prompts, params)
        figures["generate"].append(
            {
                "batch": b,
                "vllm_tok_s": round(v_tps, 1),
                "hf_tok_s": round(h_tps, 1),
                "same_ids": all(g.token_ids == w.token_ids for g, w in zip(got, want, strict=True)),
                "max_logprob_diff": max(_max_diff(g, w) for g, w in zip(got, want, strict=True)),
            }
        )
    probe = probe_ids(tok)
    gen = torch.Generator().manual_seed(0)
    for _ in range(args.syncs):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=gen) * 0.01)
        pushed = engine.load_weights(model)
        [e] = engine.compute_logprobs([probe])
        [h] = hf.compute_logprobs([probe])
        figures["syncs"].append(
            {
                "seconds": round(pushed["seconds"], 2),
                "save_s": round(pushed["save_s"], 2),
                "load_s": round(pushed["load_s"], 2),
                "max_logprob_diff": max(abs(x - y) for x, y in zip(e[1:], h[1:], strict=True)),
            }
        )
    engine.close()

    print(
        f"vllm {figures['vllm']} on {figures['machine']}: start {figures['start_s']} s "
        f"(engine {figures['engine_start_s']} s)"
    )
    print("\n| batch | vllm tok/s | hf tok/s | same greedy ids | max logprob diff |\n|---|---|---|---|---|")
    for r in figures["generate"]:
        print(
            f"| {r['batch']} | {r['vllm_tok_s']} | {r['hf_tok_s']} | {r['same_ids']} "
            f"| {r['max_logprob_diff']:.1e} |"
        )
    print("\n| sync | seconds (save + load) | max logprob diff after |\n|---|---|---|")
    for i, r in enumerate(figures["syncs"], 1):
        print(f"| {i} | {r['seconds']} ({r['save_s']} + {r['load_s']}) | {r['max_logprob_diff']:.1e} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
