"""`horizonrl solve FAMILY`: play items with the family's scripted expert.

The expert sees only what a model would see (the observations), and its moves are
written with the family's prompt format, so the trajectories it writes are ready-made
SFT demonstrations in the same text format as model rollouts.

Turn cap: none unless one is asked for (`--max-turns`, `max_turns=`). An expert's episode
is as long as its plan (SciWorld's gold paths for boiling take up to ~180 steps), and a
cap that only exists to bound the expert would count long plans as failures. Without a
cap the episode runs until the env ends it; an expert still playing after
`EXPERT_TURN_GUARD` turns is stopped and its trajectory marked `failed` with that reason
(a stuck expert, not a truncation). With a cap, episodes it cuts are `truncated`, and the
summary counts them.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from horizonrl.agent.prompts import get_prompt
from horizonrl.envs.core import EnvError, StepResult, TextEnv
from horizonrl.envs.registry import Expert, FamilySpec, get_family
from horizonrl.envs.wrappers import TurnLimit
from horizonrl.eval.metrics import success_summary
from horizonrl.rollout.trajectory import Trajectory, record_view, write_jsonl

EXPERT_TURN_GUARD = 1000
"""Turns after which an uncapped expert episode is stopped as `failed` (5x the longest gold path seen)."""


def check_detours(spec: FamilySpec, detours: float) -> None:
    """`ValueError` unless `detours` is a probability the family can play (it has a `detour`)."""
    if not 0.0 <= detours <= 1.0:
        raise ValueError(f"detours is a probability from 0 to 1, got {detours}")
    if detours and spec.detour is None:
        raise ValueError(f"family {spec.name!r} has no detour (wrong actions) for its expert to recover from")


def build_expert(spec: FamilySpec, kwargs: dict[str, Any] | None = None) -> Expert:
    """The family's expert, its factory given `kwargs` (`--expert-kwargs`); `ValueError` when the
    family has none or its factory does not take `kwargs`."""
    if spec.make_expert is None:
        raise ValueError(f"family {spec.name!r} has no expert")
    try:
        return spec.make_expert(**(kwargs or {}))
    except TypeError as exc:
        raise ValueError(f"the {spec.name} expert does not take --expert-kwargs {kwargs}: {exc}") from None


def other_expert_variants(trajectories: Iterable[Trajectory], expert_kwargs: dict[str, Any] | None) -> str:
    """Empty when the expert with `expert_kwargs` wrote every one of `trajectories`; else the variants
    that wrote them, each `meta["expert_kwargs"]` as sorted JSON (`{}`: the default expert, and
    trajectories no expert wrote), joined by " and "."""
    held = {json.dumps(t.meta.get("expert_kwargs", {}), sort_keys=True) for t in trajectories}
    return "" if held == {json.dumps(expert_kwargs or {}, sort_keys=True)} else " and ".join(sorted(held))


def play_expert(
    env: TextEnv,
    spec: FamilySpec,
    item_id: str,
    *,
    seed: int = 0,
    max_turns: int | None = None,
    detours: float = 0.0,
    expert_kwargs: dict[str, Any] | None = None,
) -> Trajectory:
    """Play one item with the family's expert, until the episode ends or `max_turns` (None: no cap).

    `detours`: the chance, at each expert turn, that a wrong move (the family's `detour`) is
    played first, its reply weighted 0 for SFT (`"weight": 0`), and the expert's move follows
    the env's rejection, its thought the detour's lesson alone (`meta["detours"]` counts them): a
    recovery that says what changed rather than the wrong thought again. Lessons stay short: a
    reply cap such as the quickstart's 48 tokens cuts a longer reply's action off. Drawn from a
    generator seeded by `seed` and the item, so a file is the same on every run.

    `expert_kwargs`: passed to the family's expert factory (TextCraft: `{"worked": true}`) and kept
    in `meta["expert_kwargs"]`, so a demo file says which expert wrote it.

    Env failures, a detour the env accepts, and an uncapped expert still playing after
    `EXPERT_TURN_GUARD` turns give a `failed` trajectory with the reason.
    """
    expert = build_expert(spec, expert_kwargs)
    check_detours(spec, detours)
    rng = random.Random(f"{seed}:{item_id}")
    prompt = get_prompt(spec.name)
    traj = Trajectory(item_id=item_id, category=spec.category_of(item_id), seed=seed, max_turns=max_turns)
    if expert_kwargs:
        traj.meta["expert_kwargs"] = dict(expert_kwargs)
    played: TextEnv = env if max_turns is None else TurnLimit(env, max_turns)

    def take(thought: str, action: str, weight: int) -> StepResult:
        """Play one reply (SFT weight 0 or 1) and record its step."""
        message = {"role": "assistant", "content": prompt.format_response(thought, action)}
        traj.messages.append(message if weight else {**message, "weight": 0})
        result = played.step(action)
        traj.num_turns += 1
        traj.turn_rewards.append(float(result.reward))
        traj.reward += float(result.reward)
        traj.success = bool(result.info["success"])
        traj.score = float(result.info["score"])
        record_view(traj, result.info)
        if result.done:
            traj.terminated, traj.truncated = result.terminated, result.truncated
            traj.meta["final_observation"] = result.observation
        return result

    try:
        observation, info = played.reset(item_id, seed=seed)
        traj.messages = prompt.initial_messages(observation)
        record_view(traj, info)
        expert.reset(item_id, observation, info)
        task = observation
        while True:
            thought, action = expert.act(observation)
            wrong = spec.detour(task, action, rng) if spec.detour and rng.random() < detours else None
            if wrong is not None:
                result = take(wrong.thought, wrong.action, 0)
                if not result.info.get("invalid_action"):
                    traj.failed = True
                    traj.fail_reason = f"detour {wrong.action!r} was not rejected: {result.observation}"
                    break
                if result.done:  # the turn cap
                    break
                traj.messages.append({"role": "user", "content": result.observation})
                traj.meta["detours"] = traj.meta.get("detours", 0) + 1
                thought = wrong.lesson
            result = take(thought, action, 1)
            observation = result.observation
            if result.done:
                break
            if max_turns is None and traj.num_turns >= EXPERT_TURN_GUARD:
                traj.failed = True
                traj.fail_reason = f"expert still playing after {EXPERT_TURN_GUARD} turns (no cap was asked)"
                break
            traj.messages.append({"role": "user", "content": observation})
    except EnvError as exc:
        traj.failed, traj.fail_reason = True, str(exc)
    return traj


def solve_items(
    make_env: Callable[[], TextEnv],
    spec: FamilySpec,
    item_ids: Sequence[str],
    *,
    seed: int = 0,
    max_turns: int | None = None,
    workers: int = 1,
    detours: float = 0.0,
    expert_kwargs: dict[str, Any] | None = None,
) -> list[Trajectory]:
    """Play every item with the expert, `workers` at a time, each worker with its own env."""

    def run(chunk: Sequence[str]) -> list[Trajectory]:
        env = make_env()
        try:
            play = functools.partial(
                play_expert,
                env,
                spec,
                seed=seed,
                max_turns=max_turns,
                detours=detours,
                expert_kwargs=expert_kwargs,
            )
            return [play(item) for item in chunk]
        finally:
            env.close()

    workers = max(1, min(workers, len(item_ids)))
    chunks = [list(item_ids[i::workers]) for i in range(workers)]
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(run, chunks))
    by_item = {t.item_id: t for chunk in results for t in chunk}
    return [by_item[i] for i in item_ids]


def solve_split(
    spec: FamilySpec,
    split: str,
    *,
    limit: int | None = None,
    server: str | None = None,
    out: str | Path | None = None,
    seed: int = 0,
    max_turns: int | None = None,
    workers: int = 1,
    env_kwargs: dict[str, Any] | None = None,
    detours: float = 0.0,
    expert_kwargs: dict[str, Any] | None = None,
) -> list[Trajectory]:
    """What `horizonrl solve` plays: the first `limit` items of `split` (all when None), through
    `server` when given (else local envs built with `env_kwargs`), with a progress bar on stderr;
    written to `out` as JSONL when given (all at once, so an interrupted run leaves no partial file)."""
    item_ids = spec.split(split)[:limit] if limit else spec.split(split)
    with contextlib.ExitStack() as services:
        # local envs: the family's shared backends (web: the sites) run while the items are played
        kwargs = {} if server else services.enter_context(spec.services(env_kwargs))

        def make_env() -> TextEnv:
            if server:
                from horizonrl.server.client import RemoteEnv

                return RemoteEnv(server, family=spec.name)
            return spec.make_env(**kwargs)

        trajectories = _solve_batches(
            spec, split, item_ids, make_env, seed=seed, max_turns=max_turns, workers=workers,
            detours=detours, expert_kwargs=expert_kwargs,
        )  # fmt: skip
    if out:
        out = Path(out)
        tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
        write_jsonl(tmp, trajectories)
        os.replace(tmp, out)
    return trajectories


def _solve_batches(
    spec: FamilySpec,
    split: str,
    item_ids: Sequence[str],
    make_env: Callable[[], TextEnv],
    *,
    seed: int,
    max_turns: int | None,
    workers: int,
    detours: float,
    expert_kwargs: dict[str, Any] | None,
) -> list[Trajectory]:
    """`solve_items` over batches of `item_ids`, with a progress bar on stderr."""
    from rich.console import Console
    from rich.progress import track

    trajectories: list[Trajectory] = []
    batch = max(1, workers) * 8
    for start in track(
        range(0, len(item_ids), batch),
        description=f"solving {spec.name}/{split}",
        transient=True,
        console=Console(stderr=True),
    ):
        chunk = item_ids[start : start + batch]
        trajectories += solve_items(
            make_env, spec, chunk, seed=seed, max_turns=max_turns, workers=workers, detours=detours,
            expert_kwargs=expert_kwargs,
        )  # fmt: skip
    return trajectories


def solve_summary(
    trajectories: Sequence[Trajectory], spec: FamilySpec, split: str, max_turns: int | None
) -> dict[str, Any]:
    """The JSON line `horizonrl solve` ends with (DESIGN §8 keys, plus the cap and truncations)."""
    summary = success_summary(trajectories, spec.categories)
    by_category = {
        c: {"n": v["n"], "success_rate": v["success_rate"]} for c, v in summary["by_category"].items()
    }
    return {
        "family": spec.name,
        "split": split,
        "n": summary["n"],
        "success_rate": summary["success_rate"],
        "mean_score": summary["mean_score"],
        "by_category": by_category,
        "max_turns": max_turns,
        "truncated": sum(t.truncated for t in trajectories),
    }


def solve_main(args: argparse.Namespace) -> int:
    try:
        spec = get_family(args.family)
        build_expert(spec, args.expert_kwargs)
        check_detours(spec, args.detours)
    except ValueError as exc:
        raise SystemExit(f"horizonrl solve: {exc}") from None
    trajectories = solve_split(
        spec,
        args.split,
        limit=args.limit,
        server=args.server,
        out=args.out,
        seed=args.seed,
        max_turns=args.max_turns,
        workers=args.workers,
        detours=args.detours,
        expert_kwargs=args.expert_kwargs,
    )
    summary = solve_summary(trajectories, spec, args.split, args.max_turns)
    failed = [t for t in trajectories if t.failed]
    if failed:
        print(f"{len(failed)} episodes failed; first: {failed[0].item_id}: {failed[0].fail_reason}")
    if summary["truncated"]:
        by = (
            f"at --max-turns {args.max_turns} (or by the env's own limit); without it the expert plays on"
            if args.max_turns
            else "by the env's own step limit"
        )
        print(f"{summary['truncated']} of {summary['n']} episodes truncated (unsolved) {by}")
    print(json.dumps(summary))
    return 0
