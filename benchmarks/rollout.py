"""Rollout overhead and KV-cache reuse of the hf backend over TextCraft; the rollout engines
compared over a slow env.

    python benchmarks/rollout.py --models tiny,default --batches 8,32 --turns 3 --max-tokens 32
    python benchmarks/rollout.py --compare-engines --models tiny,default --batches 16 --turns 4 \
        --max-tokens 16 --step-ms 100 --jitter 3

For each model and batch size B it runs, in one process:

1. **rollout**: `RolloutEngine` on B TextCraft test items (sampling at temperature 1,
   `--turns` turns of at most `--max-tokens` tokens), recording every `generate` call's
   context lengths and per-row token counts;
2. **plain**: the same backend's batched `generate` replayed on random prompts of exactly
   those lengths, forced to produce exactly the same number of tokens per row
   (`ignore_eos`), with no cache keys, i.e. plain batched generation that prefills every
   prompt in full;
3. **no reuse**: the rollout again with `reuse_cache=False` (the context recomputed every turn).

Figures: generated tokens/s of each; `rollout / plain` (aim >= 0.85: the engine, env steps
and token bookkeeping cost little); prefill tokens computed vs the minimum (every context
token once: the prompt, then per turn only the tokens after the previous turn's fed
context; aim <= 1.3 with reuse).

`--compare-engines` instead plays B TextCraft items with each of `--engines` (default: hf
lock-step, hf async, vllm async), greedy, `--turns` turns each, every turn's whole reply being
the action (so every turn steps the env; the models here rarely write an `Action:` line), in
envs whose steps first sleep `--step-ms` times a factor drawn log-uniformly from
[1/jitter, jitter] per (item, turn), the same for every engine; with `--reply-min`, each reply
stops at a length drawn log-uniformly in [reply-min, max-tokens] per context (`VariedReplies`: a
trained policy's natural stops, which the tiny random model never makes). Figures: rollout wall time,
generated tokens/s, the speed-up over hf lock-step, and whether the trajectories' token ids
equal hf lock-step's (greedy: they should). With `--repeats`, the runs alternate between the
engines and each engine's fastest is kept; a backend starts once per model (vllm's start-up is
not in its wall time). vllm runs where its worker starts (for `tiny`, which exists only in
memory, from a copy saved to a temporary folder; here `tiny` has head dim 64, which vLLM's CPU
kernels need); otherwise its row says why it was skipped.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from horizonrl.agent.parsing import ParsedAction
from horizonrl.agent.prompts import FamilyPrompt, get_prompt
from horizonrl.envs.core import StepResult
from horizonrl.envs.registry import get_family
from horizonrl.models import TINY_MODEL_ALIASES, load_model
from horizonrl.rollout.backends.base import GenerationRequest, SamplingParams, make_backend
from horizonrl.rollout.backends.hf import HFBackend
from horizonrl.rollout.engine import EngineConfig, RolloutEngine
from horizonrl.rollout.engines import make_engine
from horizonrl.rollout.envpool import LocalEnvPool
from horizonrl.rollout.trajectory import Trajectory


class RecordingBackend(HFBackend):
    """An HFBackend that records the shape of every generate call."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[list[int], list[int]]] = []

    def generate(self, requests, params):  # type: ignore[no-untyped-def]
        results = super().generate(requests, params)
        self.calls.append(([len(r.token_ids) for r in requests], [len(r.token_ids) for r in results]))
        return results


def min_prefill(traj: Trajectory) -> int:
    """Context tokens that must go through the model at least once outside decode steps."""
    runs, start = [], None
    for i, m in enumerate([*traj.loss_mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i))
            start = None
    if not runs:
        return 0
    # decode feeds every sampled token but the last of each turn; the last turn's context is
    # everything before its first sampled token
    return runs[-1][0] - sum(end - begin - 1 for begin, end in runs[:-1])


def engine_config(args: argparse.Namespace, n_items: int, *, temperature: float) -> EngineConfig:
    """The benchmark's rollout settings: every item in one batch, `--turns` and `--max-tokens`."""
    return EngineConfig(
        max_turns=args.turns,
        max_tokens=args.max_tokens,
        temperature=temperature,
        batch_size=n_items,
        max_response_length=8192,
        progress=False,
    )


def run_rollout(
    model: Any, tok: Any, items: list[str], args: argparse.Namespace, reuse: bool
) -> dict[str, Any]:
    backend = RecordingBackend(model, tok, reuse_cache=reuse)
    cfg = engine_config(args, len(items), temperature=1.0)
    engine = RolloutEngine(backend, LocalEnvPool("textcraft"), cfg)
    start = time.perf_counter()
    trajs = engine.run(items, seed=args.seed)
    wall = time.perf_counter() - start
    sampled = sum(sum(t.loss_mask) for t in trajs)
    minimum = sum(min_prefill(t) for t in trajs)
    return {
        "wall_s": wall,
        "generate_s": backend.stats.generate_seconds,
        "sampled": sampled,
        "tok_s": sampled / wall,
        "prefill": backend.stats.prefill_tokens,
        "min_prefill": minimum,
        "prefill_ratio": backend.stats.prefill_tokens / max(1, minimum),
        "padded": backend.stats.padded_tokens,
        "calls": backend.calls,
        "failed": sum(t.failed for t in trajs),
    }


def run_plain(model: Any, tok: Any, calls: list[tuple[list[int], list[int]]], seed: int) -> dict[str, Any]:
    backend = HFBackend(model, tok)
    g = torch.Generator().manual_seed(seed)
    tokens, seconds = 0, 0.0
    for lengths, produced in calls:
        requests = [
            GenerationRequest(token_ids=torch.randint(200, 40000, (n,), generator=g).tolist(), max_tokens=k)
            for n, k in zip(lengths, produced, strict=True)
        ]
        params = SamplingParams(max_tokens=max(produced), temperature=1.0, seed=seed, ignore_eos=True)
        start = time.perf_counter()
        results = backend.generate(requests, params)
        seconds += time.perf_counter() - start
        assert [len(r.token_ids) for r in results] == produced
        tokens += sum(produced)
    return {
        "wall_s": seconds,
        "sampled": tokens,
        "tok_s": tokens / seconds,
        "prefill": backend.stats.prefill_tokens,
    }


class WholeReplyPrompt(FamilyPrompt):
    """A family's prompt whose parser takes the whole reply as the action: every turn steps the env."""

    def parse_action(self, text: str) -> ParsedAction:
        return ParsedAction(text.strip() or "inventory")


class SlowEnv:
    """A real TextCraft env whose steps first sleep `step_ms` x a log-uniform factor in
    [1/jitter, jitter], drawn from (item, turn) so that every engine sees the same latencies."""

    def __init__(self, step_ms: float, jitter: float) -> None:
        self.env = get_family("textcraft").make_env()
        self.step_s, self.log_jitter = step_ms / 1000, math.log(jitter)
        self.item, self.turn = "", 0

    def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.item, self.turn = item_id, 0
        return self.env.reset(item_id, seed=seed)

    def step(self, action: str) -> StepResult:
        self.turn += 1
        rng = random.Random(f"{self.item}:{self.turn}")
        time.sleep(self.step_s * math.exp(rng.uniform(-self.log_jitter, self.log_jitter)))
        return self.env.step(action)

    def close(self) -> None:
        self.env.close()


class VariedReplies:
    """A backend whose replies stop at a length drawn log-uniformly from [lo, max_tokens] per
    context (so the same for every engine): a trained policy's replies end where it emits its
    end-of-turn token and vary in length, which the tiny random model (it never emits one) does not.
    Lock-step then waits each round for its longest reply; async only for an episode's own."""

    def __init__(self, backend: Any, lo: int, hi: int) -> None:
        self.backend, self.log_lo, self.log_hi = backend, math.log(lo), math.log(hi)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def _cap(self, request: GenerationRequest) -> GenerationRequest:
        rng = random.Random(hash(tuple(request.token_ids)))  # ints hash the same in every process
        length = round(math.exp(rng.uniform(self.log_lo, self.log_hi)))
        return replace(request, max_tokens=min(request.max_tokens or length, length))

    def generate(self, requests: list[GenerationRequest], params: SamplingParams) -> Any:
        return self.backend.generate([self._cap(r) for r in requests], params)

    async def agenerate(self, request: GenerationRequest, params: SamplingParams) -> Any:
        return await self.backend.agenerate(self._cap(request), params)


def run_engine(backend: Any, engine: str, items: list[str], args: argparse.Namespace) -> dict[str, Any]:
    cfg = engine_config(args, len(items), temperature=0.0)
    base = get_prompt("textcraft")
    prompt = WholeReplyPrompt(family="textcraft", instruction=base.instruction, system=base.system)
    pool = LocalEnvPool("textcraft", make_env=lambda: SlowEnv(args.step_ms, args.jitter))
    policy = VariedReplies(backend, args.reply_min, args.max_tokens) if args.reply_min else backend
    rollout = make_engine(engine, policy, pool, cfg, prompt=prompt)
    start = time.perf_counter()
    trajs = rollout.run(items, seed=args.seed)
    wall = time.perf_counter() - start
    sampled = sum(sum(t.loss_mask) for t in trajs)
    return {
        "wall_s": wall,
        "sampled": sampled,
        "tok_s": sampled / wall,
        "turns": sum(t.num_turns for t in trajs),
        "env_steps": sum(t.num_turns - t.meta["parse_errors"] for t in trajs),
        "generate_calls": backend.stats.calls,
        # lock-step: wall-clock seconds of generation / env steps; async: summed over episodes
        "generate_s": rollout.stats.generate_seconds,
        "env_s": rollout.stats.env_seconds,
        "failed": sum(t.failed for t in trajs),
        "token_ids": [t.token_ids for t in trajs],
    }


def _compare_batch(
    model: str, backends: dict[str, Any], items: list[str], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """One row per engine; the runs alternate between engines, each engine's fastest kept."""
    specs = args.engines.split(",")
    best: dict[str, dict[str, Any]] = {}
    for _ in range(args.repeats):  # alternated, so load from other processes hits every engine alike
        for spec in specs:
            backend = backends[spec.partition(":")[0]]
            if isinstance(backend, str):
                continue
            backend.stats = type(backend.stats)()
            r = run_engine(backend, spec.partition(":")[2], items, args)
            if spec not in best or r["wall_s"] < best[spec]["wall_s"]:
                best[spec] = r
    rows: list[dict[str, Any]] = []
    reference = best.get(specs[0])
    for spec in specs:
        backend_name, _, engine = spec.partition(":")
        row: dict[str, Any] = {"model": model, "batch": len(items), "backend": backend_name, "engine": engine}
        if spec not in best:
            row["note"] = backends[backend_name]
        else:
            row |= best[spec]
            ids = row.pop("token_ids")
            if reference is not None:
                row["speedup"] = reference["wall_s"] / row["wall_s"]
                row["same_tokens"] = ids == reference["token_ids"]
        rows.append(row)
        print(json.dumps(row, default=float), flush=True)
    return rows


def engines_model(name: str, dtype: str) -> tuple[Any, Any]:
    """`load_model(name)`, but for `tiny` a head dim of 64 (hidden 128, 2 heads): vLLM's CPU
    attention kernels reject the unit tests' head dim of 16, and both backends must run one model."""
    tiny = dict(hidden_size=128, num_attention_heads=2, num_key_value_heads=1)
    return load_model(name, dtype=dtype, tiny_config=tiny)


def vllm_model(name: str, model: Any, tok: Any, tmp: Path) -> str:
    """What the vllm backend loads for `name`: the in-memory tiny model is saved to `tmp` first."""
    if name not in TINY_MODEL_ALIASES:
        return name
    folder = tmp / name
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def compare_engines(args: argparse.Namespace) -> int:
    items_all = get_family("textcraft").split("test")
    rows: list[dict[str, Any]] = []
    load = [os.getloadavg()[0]]
    tmp = Path(tempfile.mkdtemp(prefix="horizonrl-bench-"))
    for name in args.models.split(","):
        model, tok = engines_model(name, args.dtype)
        backends: dict[str, Any] = {}
        for backend_name in dict.fromkeys(spec.partition(":")[0] for spec in args.engines.split(",")):
            try:  # one backend each, kept for every run (vllm starts once)
                backends[backend_name] = (
                    HFBackend(model, tok)
                    if backend_name == "hf"
                    else make_backend(
                        backend_name, model=vllm_model(name, model, tok, tmp), tokenizer=tok, dtype=args.dtype
                    )
                )
            except Exception as exc:  # noqa: BLE001 (a backend that cannot start here is reported)
                backends[backend_name] = f"skipped: {type(exc).__name__}: {str(exc)[:160]}"
        try:
            for batch in (int(b) for b in args.batches.split(",")):
                rows += _compare_batch(name, backends, items_all[:batch], args)
                load.append(os.getloadavg()[0])
        finally:
            for backend in backends.values():
                if not isinstance(backend, str):
                    backend.close()
    shutil.rmtree(tmp, ignore_errors=True)
    print()
    cpu, j = platform.processor() or platform.machine(), args.jitter
    replies = f"{args.reply_min}-{args.max_tokens}" if args.reply_min else f"<= {args.max_tokens}"
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, {cpu}, "
        f"repeats {args.repeats} (best), env step {args.step_ms:g} ms x [1/{j:g}, {j:g}], "
        f"replies {replies} tokens, load average {min(load):.1f}-{max(load):.1f}"
    )
    print(
        "| model | episodes | backend | engine | rollout wall s | generated tok/s | vs first row "
        "| same token ids | note |"
    )
    print("|---|---:|---|---|---:|---:|---:|---|---|")
    for r in rows:
        head = f"| {r['model']} | {r['batch']} | {r['backend']} | {r['engine']} |"
        if "wall_s" not in r:
            print(f"{head} | | | | {r['note']} |")
            continue
        print(
            f"{head} {r['wall_s']:.1f} | {r['tok_s']:.1f} | {r.get('speedup', float('nan')):.2f}x | "
            f"{r.get('same_tokens', '')} | |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=float))
    print(" ".join(["python", *sys.argv]))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="tiny,default")
    parser.add_argument("--batches", default="8,32")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1, help="runs of each kind; the best is kept")
    parser.add_argument("--no-reuse-run", action="store_true", help="skip the reuse_cache=False rollout")
    parser.add_argument("--json", default=None, help="also write the rows as JSON here")
    parser.add_argument("--compare-engines", action="store_true", help="the engine comparison (see above)")
    parser.add_argument("--engines", default="hf:lockstep,hf:async,vllm:async", help="backend:engine, ...")
    parser.add_argument("--step-ms", type=float, default=100.0, help="env step latency (median), ms")
    parser.add_argument("--jitter", type=float, default=3.0, help="latency factor range [1/j, j]")
    parser.add_argument(
        "--reply-min",
        type=int,
        default=0,
        help="replies stop at a length drawn log-uniformly in [this, --max-tokens] (0: at --max-tokens)",
    )
    args = parser.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if args.compare_engines:
        return compare_engines(args)
    items_all = get_family("textcraft").split("test")
    rows = []
    for name in args.models.split(","):
        model, tok = load_model(name, dtype=args.dtype)
        for batch in (int(b) for b in args.batches.split(",")):
            items = items_all[:batch]
            # alternate the runs and keep each one's best, so load from other processes hits both alike
            ro = plain = nr = None
            for _ in range(args.repeats):
                r1 = run_rollout(model, tok, items, args, reuse=True)
                p1 = run_plain(model, tok, r1.pop("calls"), args.seed)
                ro = r1 if ro is None or r1["tok_s"] > ro["tok_s"] else ro
                plain = p1 if plain is None or p1["tok_s"] > plain["tok_s"] else plain
                if not args.no_reuse_run:
                    n1 = run_rollout(model, tok, items, args, reuse=False)
                    n1.pop("calls")
                    nr = n1 if nr is None or n1["tok_s"] > nr["tok_s"] else nr
            assert ro is not None and plain is not None
            row: dict[str, Any] = {"model": name, "batch": batch, "rollout": ro, "plain": plain}
            if nr is not None:
                row["no_reuse"] = nr
            row["ratio"] = ro["tok_s"] / plain["tok_s"]
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items()}, default=float), flush=True)
    print()
    cpu = platform.processor() or platform.machine()
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, {cpu}, repeats {args.repeats} (best)"
    )
    print(
        "| model | batch | rollout tok/s | plain generate tok/s | rollout / plain | prefill / min (reuse) "
        "| prefill / min (no reuse) | no-reuse rollout tok/s | failed |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        nr = r.get("no_reuse", {})
        nan = float("nan")
        print(
            f"| {r['model']} | {r['batch']} | {r['rollout']['tok_s']:.1f} | {r['plain']['tok_s']:.1f} | "
            f"{r['ratio']:.2f} | {r['rollout']['prefill_ratio']:.2f} | {nr.get('prefill_ratio', nan):.2f} | "
            f"{nr.get('tok_s', nan):.1f} | {r['rollout']['failed']} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=float))
    print(" ".join(["python", *sys.argv]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
