"""One conformance checker for every registered family, local or through HTTP.

    from horizonrl.envs.checker import check_env, run_checks
    check_env(spec.make_env(), spec, item_ids=spec.split("test")[:3])    # raises on the first break
    for result in run_checks(env, spec, item_ids):                       # one result per property
        print(result.line())

Properties (`PROPERTIES`), each a pass/fail with the first problem found:
- `types`: `reset` gives `(str, dict)` with a non-empty observation, `step` a `StepResult` of
  the right types (reward a finite number), `available_actions` None or a list of str;
- `info keys`: `info` always carries `success` (bool), `score` (number in [0, 1]) and
  `category` (matching `spec.category_of(item_id)`); nothing is solved at reset;
- `invalid actions`: garbage, empty and very long actions come back as a non-empty observation,
  never an exception, and never count as a success;
- `terminated/truncated`: both are bools on every step, and a step reporting success has
  terminated (the turn cap, not the env, truncates);
- `seed determinism`: the same item and seed, then the same actions, give the same
  observations, rewards, flags and infos;
- `JSON round trip`: infos, step results and whole episodes survive a JSON round trip
  unchanged (what crossing HTTP does);
- `unknown item`: an unknown item id raises `UnknownItemError` (or `KeyError`/`ValueError`).

An exception raised by the env while a property is being checked fails that property with the
exception's message; the other properties are still checked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from horizonrl.envs.core import REQUIRED_INFO_KEYS, StepResult, TextEnv, json_roundtrip
from horizonrl.envs.registry import FamilySpec

INVALID_ACTIONS = ("", "xyzzy plugh", "Action: ???", "a" * 5000)
PROPERTIES = (
    "types",
    "info keys",
    "invalid actions",
    "terminated/truncated",
    "seed determinism",
    "JSON round trip",
    "unknown item",
)


class CheckFailed(AssertionError):
    """One property broke; `prop` names it."""

    def __init__(self, prop: str, message: str) -> None:
        super().__init__(message)
        self.prop = prop


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one property over all checked items."""

    prop: str
    ok: bool
    message: str = ""
    """The first problem found (empty when it passed)."""

    def line(self) -> str:
        return f"PASS  {self.prop}" if self.ok else f"FAIL  {self.prop}: {self.message}"


def _expect(ok: bool, prop: str, message: str) -> None:
    if not ok:
        raise CheckFailed(prop, message)


def _check_info(info: Any, where: str, category: str | None) -> None:
    _expect(isinstance(info, dict), "types", f"{where}: info must be a dict, got {type(info).__name__}")
    for key in REQUIRED_INFO_KEYS:
        _expect(key in info, "info keys", f"{where}: info lacks {key!r} (has {sorted(info)})")
    _expect(isinstance(info["success"], bool), "info keys", f"{where}: info['success'] must be bool")
    score = info["score"]
    _expect(
        isinstance(score, (int, float)) and not isinstance(score, bool),
        "info keys",
        f"{where}: info['score'] must be a number, got {score!r:.40}",
    )
    _expect(
        not math.isnan(score) and 0.0 <= float(score) <= 1.0,
        "info keys",
        f"{where}: score {score} not in [0, 1]",
    )
    _expect(isinstance(info["category"], str), "info keys", f"{where}: info['category'] must be str")
    if category is not None:
        _expect(
            info["category"] == category,
            "info keys",
            f"{where}: category {info['category']!r} != {category!r} (the family's category_of)",
        )
    _expect(
        json_roundtrip(info) == info, "JSON round trip", f"{where}: info does not survive a JSON round trip"
    )


def _check_step(result: Any, where: str, category: str | None) -> StepResult:
    _expect(
        isinstance(result, StepResult),
        "types",
        f"{where}: step must return StepResult, got {type(result).__name__}",
    )
    _expect(isinstance(result.observation, str), "types", f"{where}: observation must be str")
    reward = result.reward
    _expect(
        isinstance(reward, (int, float)) and not isinstance(reward, bool) and math.isfinite(reward),
        "types",
        f"{where}: reward must be a finite number, got {reward!r:.40}",
    )
    _expect(
        isinstance(result.terminated, bool) and isinstance(result.truncated, bool),
        "terminated/truncated",
        f"{where}: terminated and truncated must be bools, "
        f"got {result.terminated!r:.20} / {result.truncated!r:.20}",
    )
    _check_info(result.info, where, category)
    _expect(
        not result.info["success"] or result.terminated,
        "terminated/truncated",
        f"{where}: a step that reports success must set terminated=True",
    )
    _expect(
        json_roundtrip(result.to_dict()) == result.to_dict(),
        "JSON round trip",
        f"{where}: step result does not survive a JSON round trip",
    )
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


def _first_difference(first: list[Any], second: list[Any]) -> str:
    for i, (a, b) in enumerate(zip(first, second, strict=False)):
        if a != b:
            what = "reset observation" if i == 0 else "reset info" if i == 1 else f"step {i - 2}"
            return f"{what}: {str(a)[:120]!r} vs {str(b)[:120]!r}"
    return f"{len(first) - 2} steps vs {len(second) - 2} steps"


def _phase(failures: dict[str, str], default_prop: str, fn: Any, *args: Any) -> None:
    """Run one group of checks; record its first failure (or the exception the env raised)."""
    try:
        fn(*args)
    except CheckFailed as exc:
        failures.setdefault(exc.prop, str(exc))
    except Exception as exc:  # noqa: BLE001 (the env's own failure is the finding)
        failures.setdefault(default_prop, f"raised {type(exc).__name__}: {exc}")


def _check_reset(env: TextEnv, spec: FamilySpec, item_id: str, seed: int) -> None:
    where = f"{spec.name}:{item_id} reset"
    category = spec.category_of(item_id)
    result = env.reset(item_id, seed=seed)
    _expect(
        isinstance(result, tuple) and len(result) == 2,
        "types",
        f"{where}: reset must return (observation, info)",
    )
    obs, info = result
    _expect(isinstance(obs, str) and bool(obs), "types", f"{where}: observation must be a non-empty str")
    _check_info(info, where, category)
    _expect(info["success"] is False, "info keys", f"{where}: an episode cannot be solved at reset")
    available = env.available_actions()
    _expect(
        available is None or (isinstance(available, list) and all(isinstance(a, str) for a in available)),
        "types",
        f"{where}: available_actions must be None or list[str], got {available!r:.60}",
    )


def _check_reset_determinism(env: TextEnv, spec: FamilySpec, item_id: str, seed: int) -> None:
    first = list(env.reset(item_id, seed=seed))
    second = list(env.reset(item_id, seed=seed))
    _expect(
        first == second,
        "seed determinism",
        f"{spec.name}:{item_id}: two resets with seed {seed} gave different episodes; "
        + _first_difference(first, second),
    )


def _check_invalid(env: TextEnv, spec: FamilySpec, item_id: str, seed: int) -> None:
    category = spec.category_of(item_id)
    env.reset(item_id, seed=seed)
    for bad in INVALID_ACTIONS:
        where = f"{spec.name}:{item_id} invalid action {bad[:20]!r}"
        try:
            result = env.step(bad)
        except Exception as exc:  # noqa: BLE001
            raise CheckFailed("invalid actions", f"{where} raised {type(exc).__name__}: {exc}") from exc
        result = _check_step(result, where, category)
        _expect(bool(result.observation.strip()), "invalid actions", f"{where} gave an empty observation")
        _expect(not result.info["success"], "invalid actions", f"{where} counted as a success")
        if result.done:
            env.reset(item_id, seed=seed)


def _check_episodes(env: TextEnv, spec: FamilySpec, item_id: str, seed: int, n_actions: int) -> None:
    where = f"{spec.name}:{item_id}"
    category = spec.category_of(item_id)
    actions = _probe_actions(env, spec, item_id, seed, n_actions)
    first = _play(env, item_id, seed, actions)
    for i, step in enumerate(first[2:]):
        _check_step(StepResult.from_dict(step), f"{where} step {i} ({actions[i][:30]!r})", category)
    second = _play(env, item_id, seed, actions)
    _expect(
        first == second,
        "seed determinism",
        f"{where}: same item, seed and actions gave different episodes; first difference at "
        + _first_difference(first, second),
    )
    _expect(json_roundtrip(first) == first, "JSON round trip", f"{where}: episode is not JSON-stable")


def _check_unknown(env: TextEnv, spec: FamilySpec, seed: int) -> None:
    unknown = f"{spec.name}_999999999"
    try:
        env.reset(unknown, seed=seed)
    except (KeyError, ValueError):
        return
    raise CheckFailed("unknown item", f"{spec.name}: reset({unknown!r}) should raise UnknownItemError")


def run_checks(
    env: TextEnv, spec: FamilySpec, item_ids: Sequence[str], *, seed: int = 0, n_actions: int = 4
) -> list[CheckResult]:
    """Check every property of `PROPERTIES` on `env` over `item_ids`; one result per property."""
    if not item_ids:
        raise ValueError("run_checks needs at least one item id")
    failures: dict[str, str] = {}
    for item_id in item_ids:
        _phase(failures, "types", _check_reset, env, spec, item_id, seed)
        _phase(failures, "seed determinism", _check_reset_determinism, env, spec, item_id, seed)
        _phase(failures, "invalid actions", _check_invalid, env, spec, item_id, seed)
        _phase(failures, "seed determinism", _check_episodes, env, spec, item_id, seed, n_actions)
    _phase(failures, "unknown item", _check_unknown, env, spec, seed)
    return [CheckResult(p, p not in failures, failures.get(p, "")) for p in PROPERTIES]


def check_env(
    env: TextEnv, spec: FamilySpec, item_ids: Sequence[str], *, seed: int = 0, n_actions: int = 4
) -> None:
    """Run every conformance check on `env` for the given items; raise AssertionError on failure."""
    assert item_ids, "check_env needs at least one item id"
    failed = [r for r in run_checks(env, spec, item_ids, seed=seed, n_actions=n_actions) if not r.ok]
    if failed:
        raise AssertionError("; ".join(f"{r.prop}: {r.message}" for r in failed))
