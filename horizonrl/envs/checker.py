"""One conformance checker for every registered family, local or through HTTP.

    from horizonrl.envs.checker import check_env
    check_env(spec.make_env(), spec, item_ids=spec.split("test")[:3])

It checks, and raises `AssertionError` naming what broke:
- API types: `reset` gives `(str, dict)`, `step` gives a `StepResult` of the right types;
- `info` always carries `success` (bool), `score` (float in [0, 1]) and `category`
  (matching `spec.category_of(item_id)`);
- seed determinism: the same item and seed, then the same actions, give the same
  observations, rewards and flags;
- everything survives a JSON round trip unchanged (what crossing HTTP does);
- invalid actions (garbage, empty, very long) come back as a non-empty observation,
  never an exception, and do not end the episode as a success;
- an unknown item id raises `UnknownItemError` (or `KeyError`/`ValueError`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from horizonrl.envs.core import REQUIRED_INFO_KEYS, StepResult, TextEnv, json_roundtrip
from horizonrl.envs.registry import FamilySpec

INVALID_ACTIONS = ("", "xyzzy plugh", "Action: ???", "a" * 5000)


def _check_info(info: Any, where: str, category: str | None) -> None:
    assert isinstance(info, dict), f"{where}: info must be a dict, got {type(info).__name__}"
    for key in REQUIRED_INFO_KEYS:
        assert key in info, f"{where}: info lacks {key!r} (has {sorted(info)})"
    assert isinstance(info["success"], bool), f"{where}: info['success'] must be bool"
    score = info["score"]
    assert isinstance(score, (int, float)) and not isinstance(score, bool), f"{where}: score must be a number"
    assert 0.0 <= float(score) <= 1.0 and not math.isnan(score), f"{where}: score {score} not in [0, 1]"
    assert isinstance(info["category"], str), f"{where}: category must be str"
    if category is not None:
        assert info["category"] == category, f"{where}: category {info['category']!r} != {category!r}"
    assert json_roundtrip(info) == info, f"{where}: info does not survive a JSON round trip"


def _check_step(result: Any, where: str, category: str | None) -> StepResult:
    assert isinstance(result, StepResult), (
        f"{where}: step must return StepResult, got {type(result).__name__}"
    )
    assert isinstance(result.observation, str), f"{where}: observation must be str"
    assert isinstance(result.reward, (int, float)) and not isinstance(result.reward, bool), (
        f"{where}: reward must be a number"
    )
    assert isinstance(result.terminated, bool) and isinstance(result.truncated, bool), (
        f"{where}: terminated/truncated must be bool"
    )
    _check_info(result.info, where, category)
    assert json_roundtrip(result.to_dict()) == result.to_dict(), f"{where}: step result not JSON-stable"
    return result


def _play(env: TextEnv, item_id: str, seed: int, actions: Sequence[str]) -> list[Any]:
    obs, info = env.reset(item_id, seed=seed)
    trace: list[Any] = [obs, info]
    for action in actions:
        result = env.step(action)
        trace.append(result.to_dict())
        if result.done:
            break
    return trace


def _probe_actions(env: TextEnv, spec: FamilySpec, item_id: str, seed: int, n: int) -> list[str]:
    """Pick a few plausible actions: the expert's, else the env's available actions."""
    obs, info = env.reset(item_id, seed=seed)
    if spec.make_expert is not None:
        expert = spec.make_expert()
        expert.reset(item_id, obs, info)
        actions = []
        for _ in range(n):
            _, action = expert.act(obs)
            actions.append(action)
            result = env.step(action)
            obs = result.observation
            if result.done:
                break
        return actions
    available = env.available_actions() or []
    return list(available[:n]) or ["look"]


def check_env(
    env: TextEnv, spec: FamilySpec, item_ids: Sequence[str], *, seed: int = 0, n_actions: int = 4
) -> None:
    """Run every conformance check on `env` for the given items; raise AssertionError on failure."""
    assert item_ids, "check_env needs at least one item id"
    for item_id in item_ids:
        category = spec.category_of(item_id)
        where = f"{spec.name}:{item_id}"
        obs, info = env.reset(item_id, seed=seed)
        assert isinstance(obs, str) and obs, f"{where}: reset must return a non-empty str observation"
        _check_info(info, f"{where} reset", category)
        assert info["success"] is False, f"{where}: an episode cannot be solved at reset"
        available = env.available_actions()
        assert available is None or (
            isinstance(available, list) and all(isinstance(a, str) for a in available)
        ), f"{where}: available_actions must be None or list[str]"

        for bad in INVALID_ACTIONS:
            result = _check_step(env.step(bad), f"{where} invalid action {bad[:20]!r}", category)
            assert result.observation.strip(), (
                f"{where}: invalid action {bad[:20]!r} gave an empty observation"
            )
            assert not result.info["success"], f"{where}: invalid action {bad[:20]!r} counted as success"
            if result.done:
                env.reset(item_id, seed=seed)

        actions = _probe_actions(env, spec, item_id, seed, n_actions)
        first = _play(env, item_id, seed, actions)
        for i, step in enumerate(first[2:]):
            _check_step(StepResult.from_dict(step), f"{where} step {i}", category)
        second = _play(env, item_id, seed, actions)
        assert first == second, f"{where}: same item, seed and actions gave different episodes"
        assert json_roundtrip(first) == first, f"{where}: episode is not JSON-stable"

    unknown = f"{spec.name}_999999999"
    try:
        env.reset(unknown, seed=seed)
    except (KeyError, ValueError):
        pass
    else:
        raise AssertionError(f"{spec.name}: reset({unknown!r}) should raise UnknownItemError")
