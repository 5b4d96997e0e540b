"""`horizonrl solve FAMILY`: play items with the family's scripted expert.

The expert sees only what a model would see (the observations), and its moves are
written with the family's prompt format, so the trajectories it writes are ready-made
SFT demonstrations in the same text format as model rollouts.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from horizonrl.agent.prompts import get_prompt
from horizonrl.envs.core import EnvError, TextEnv
from horizonrl.envs.registry import FamilySpec, get_family
from horizonrl.envs.wrappers import TurnLimit
from horizonrl.eval.metrics import success_summary
from horizonrl.rollout.trajectory import Trajectory, write_jsonl

DEFAULT_MAX_TURNS = 100


def play_expert(
    env: TextEnv, spec: FamilySpec, item_id: str, *, seed: int = 0, max_turns: int = DEFAULT_MAX_TURNS
) -> Trajectory:
    """Play one item with the family's expert; env failures give a `failed` trajectory."""
    if spec.make_expert is None:
        raise ValueError(f"family {spec.name!r} has no expert")
    prompt = get_prompt(spec.name)
    expert = spec.make_expert()
    traj = Trajectory(item_id=item_id, category=spec.category_of(item_id), seed=seed, max_turns=max_turns)
    capped = TurnLimit(env, max_turns)
    try:
        observation, info = capped.reset(item_id, seed=seed)
        traj.messages = prompt.initial_messages(observation)
        expert.reset(item_id, observation, info)
        while True:
            thought, action = expert.act(observation)
            traj.messages.append({"role": "assistant", "content": prompt.format_response(thought, action)})
            result = capped.step(action)
            observation = result.observation
            traj.num_turns += 1
            traj.turn_rewards.append(float(result.reward))
            traj.reward += float(result.reward)
            traj.success = bool(result.info["success"])
            traj.score = float(result.info["score"])
            if result.done:
                traj.terminated, traj.truncated = result.terminated, result.truncated
                traj.meta["final_observation"] = observation
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
    max_turns: int = DEFAULT_MAX_TURNS,
    workers: int = 1,
) -> list[Trajectory]:
    """Play every item with the expert, `workers` at a time, each worker with its own env."""

    def run(chunk: Sequence[str]) -> list[Trajectory]:
        env = make_env()
        try:
            return [play_expert(env, spec, item, seed=seed, max_turns=max_turns) for item in chunk]
        finally:
            env.close()

    workers = max(1, min(workers, len(item_ids)))
    chunks = [list(item_ids[i::workers]) for i in range(workers)]
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(run, chunks))
    by_item = {t.item_id: t for chunk in results for t in chunk}
    return [by_item[i] for i in item_ids]


def solve_main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import track

    spec = get_family(args.family)
    item_ids = spec.split(args.split)[: args.limit] if args.limit else spec.split(args.split)
    max_turns = args.max_turns or DEFAULT_MAX_TURNS

    def make_env() -> TextEnv:
        if args.server:
            from horizonrl.server.client import RemoteEnv

            return RemoteEnv(args.server, family=spec.name)
        return spec.make_env()

    trajectories: list[Trajectory] = []
    batch = max(1, args.workers) * 8
    for start in track(
        range(0, len(item_ids), batch),
        description=f"solving {spec.name}/{args.split}",
        transient=True,
        console=Console(stderr=True),
    ):
        chunk = item_ids[start : start + batch]
        trajectories += solve_items(
            make_env, spec, chunk, seed=args.seed, max_turns=max_turns, workers=args.workers
        )
    if args.out:
        write_jsonl(args.out, trajectories)
    summary = success_summary(trajectories, spec.categories)
    by_category = {
        c: {"n": v["n"], "success_rate": v["success_rate"]} for c, v in summary["by_category"].items()
    }
    failed = [t for t in trajectories if t.failed]
    if failed:
        print(f"{len(failed)} episodes failed; first: {failed[0].item_id}: {failed[0].fail_reason}")
    print(
        json.dumps(
            {
                "family": spec.name,
                "split": args.split,
                "n": summary["n"],
                "success_rate": summary["success_rate"],
                "mean_score": summary["mean_score"],
                "by_category": by_category,
            }
        )
    )
    return 0
