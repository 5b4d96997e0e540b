"""Helpers for trainer tests: a scripted rollout that builds token-level trajectories by hand."""

from __future__ import annotations

import random

import pytest

from horizonrl.config import load_config
from horizonrl.models import load_tokenizer
from horizonrl.rollout.trajectory import Trajectory


class ScriptedRollout:
    """Deterministic stand-in for the rollout engine (update-phase tests only).

    Each episode gets a chat-template prompt, then turns of "sampled" tokens (loss_mask 1,
    with made-up logprobs) and observation tokens (loss_mask 0). Even samples succeed, so
    every group has reward variance. `num_turns` is `2 + sample_index`, cut at the cap.
    """

    def __init__(self) -> None:
        self.tokenizer = load_tokenizer("tiny")
        self.calls: list[list[int]] = []

    def __call__(self, episodes, *, step, greedy=False):
        self.calls.append([e.max_turns for e in episodes])
        out = []
        for e in episodes:
            rng = random.Random(f"{e.seed}:{e.sample_index}:{step}")
            messages = [{"role": "user", "content": f"Craft item {e.item_id}."}]
            ids = list(
                self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            )
            if not isinstance(ids[0], int):  # BatchEncoding in some transformers versions
                ids = list(
                    self.tokenizer.apply_chat_template(messages, add_generation_prompt=True)["input_ids"]
                )
            prompt_length = len(ids)
            mask, logprobs, turn_ends = [0] * len(ids), [None] * len(ids), []
            turns = min(e.max_turns, 2 + e.sample_index)
            for turn in range(turns):
                n = rng.randint(3, 6)
                ids += [rng.randrange(100, 5000) for _ in range(n)]
                mask += [1] * n
                logprobs += [-rng.uniform(0.5, 4.0) for _ in range(n)]
                turn_ends.append(len(ids) - 1)
                if turn < turns - 1:
                    obs = [rng.randrange(100, 5000) for _ in range(4)]
                    ids += obs
                    mask += [0] * 4
                    logprobs += [None] * 4
            success = e.sample_index % 2 == 0
            out.append(
                Trajectory(
                    item_id=e.item_id,
                    category="depth 1",
                    success=success,
                    score=float(success),
                    reward=float(success),
                    num_turns=turns,
                    turn_rewards=[0.0] * (turns - 1) + [float(success)],
                    token_ids=ids,
                    loss_mask=mask,
                    logprobs=logprobs,
                    prompt_length=prompt_length,
                    turn_ends=turn_ends,
                    max_turns=e.max_turns,
                    seed=e.seed,
                    group_id=e.group_id,
                    sample_index=e.sample_index,
                    terminated=success,
                    truncated=not success,
                )
            )
        return out


def scripted_rl_config(tmp_path, *overrides):
    """A one-step RL config on the tiny model (2 textcraft items x 2 samples, no eval, no loggers)
    for a trainer fed by `ScriptedRollout`; `overrides` come last, so they win."""
    return load_config(
        None,
        [
            "model.path=tiny",
            "model.bf16=false",
            f"trainer.output_dir={tmp_path}",
            "trainer.total_steps=1",
            "data.families=[textcraft]",
            "data.batch_size=2",
            "rollout.n=2",
            "eval.at_end=false",
            "logging.tensorboard=false",
            "logging.console=false",
            *overrides,
        ],
    )


@pytest.fixture
def scripted_rollout():
    return ScriptedRollout()
