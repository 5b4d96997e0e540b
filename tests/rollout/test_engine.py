"""RolloutEngine: episodes end for the right reason, budgets hold during the rollout, env failures
fail one episode only, and every trajectory is token-exact and aligned."""

from __future__ import annotations

import pytest

from horizonrl.agent.chat import ChatFormat, render
from horizonrl.agent.prompts import FamilyPrompt
from horizonrl.envs.registry import get_family
from horizonrl.envs.wrappers import TurnLimit
from horizonrl.models import load_model, load_tokenizer
from horizonrl.rollout.backends.hf import HFBackend
from horizonrl.rollout.engine import EngineConfig, RolloutEngine
from horizonrl.rollout.envpool import LocalEnvPool
from horizonrl.rollout.trajectory import Trajectory
from tests.rollout.helpers import CountingEnv, ScriptedBackend, run_past_response_budget

TOY_PROMPT = FamilyPrompt(family="toy", instruction="Say win when asked twice.")


def check_trajectory(traj: Trajectory, tokenizer, *, max_response_length: int | None = None) -> None:
    """Alignment and token-exactness every model trajectory must satisfy."""
    n = len(traj.token_ids)
    assert n > traj.prompt_length > 0
    assert len(traj.loss_mask) == n == len(traj.logprobs)
    for mask, lp in zip(traj.loss_mask, traj.logprobs, strict=True):
        assert (mask == 1) == (lp is not None)
    assert traj.loss_mask[: traj.prompt_length] == [0] * traj.prompt_length
    assert len(traj.turn_ends) == sum(m["role"] == "assistant" for m in traj.messages)
    assert all(traj.loss_mask[i] == 1 for i in traj.turn_ends)
    assert len(traj.turn_rewards) == traj.num_turns
    assert ChatFormat(tokenizer).decode(traj.token_ids) == render(
        tokenizer, traj.messages, add_generation_prompt=False
    )
    if max_response_length is not None:
        assert traj.response_length <= max_response_length


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("tiny")


def _engine(backend, make_env=CountingEnv, **cfg):
    cfg.setdefault("progress", False)
    return RolloutEngine(
        backend, LocalEnvPool("toy", make_env=make_env), EngineConfig(**cfg), prompt=TOY_PROMPT
    )


def _win_on_second_turn(req):
    asked = sum(m["role"] == "assistant" for m in req.messages)
    return "Thought: now.\nAction: win" if asked >= 1 else "Thought: wait.\nAction: look"


def test_scripted_episodes_succeed_with_exact_tokens(tok):
    backend = ScriptedBackend(tok, _win_on_second_turn)
    engine = _engine(backend, max_turns=5)
    finished: list[Trajectory] = []
    trajs = engine.run(["toy_0", "toy_1"], on_finish=finished.append)
    assert sorted(t.item_id for t in finished) == ["toy_0", "toy_1"] and finished[0].token_ids
    for t in trajs:
        assert (t.success, t.terminated, t.truncated, t.failed) == (True, True, False, False)
        assert t.num_turns == 2 and t.turn_rewards == [0.0, 1.0] and t.reward == 1.0
        assert t.meta["stop_reason"] == "terminated" and t.meta["final_observation"] == "You win."
        assert t.category == "toy"
        assert t.messages[-1] == {"role": "assistant", "content": "Thought: now.\nAction: win"}
        check_trajectory(t, tok)
    assert sorted(backend.released) == [0, 1]  # every episode's cache was dropped
    # the second request of an episode extends the first (what KV reuse relies on)
    first, second = backend.requests[0], backend.requests[2]
    assert second.token_ids[: len(first.token_ids)] == first.token_ids


def test_unparsable_responses_count_as_turns_and_get_the_error_as_observation(tok):
    backend = ScriptedBackend(tok, lambda req: "Thought: I am not sure what to do.")
    [t] = _engine(backend, max_turns=3).run(["toy_0"])
    assert t.num_turns == 3 and t.truncated and not t.terminated and t.meta["stop_reason"] == "max_turns"
    assert t.meta["parse_errors"] == 3 and t.turn_rewards == [0.0, 0.0, 0.0]
    assert "no 'Action:' line" in t.messages[3]["content"]
    check_trajectory(t, tok)


def test_the_engine_is_the_one_turn_counter(tok):
    """Every assistant turn counts once, parsed or not; on the cap's turn the stop reason is the cap
    even when the env (here a `TurnLimit` a user wrapped it in) truncates on the same step."""
    replies = iter(["Thought: hm.", "Thought: hm.\nAction: look"] * 10)
    backend = ScriptedBackend(tok, lambda req: next(replies))
    [mixed] = _engine(backend, make_env=lambda: TurnLimit(CountingEnv(), 10), max_turns=4).run(["toy_0"])
    assert (mixed.num_turns, mixed.meta["parse_errors"], mixed.meta["stop_reason"]) == (4, 2, "max_turns")

    backend = ScriptedBackend(tok, lambda req: "Thought: hm.\nAction: look")
    [same] = _engine(backend, make_env=lambda: TurnLimit(CountingEnv(), 3), max_turns=3).run(["toy_0"])
    assert (same.num_turns, same.meta["stop_reason"], same.truncated) == (3, "max_turns", True)
    assert not same.terminated
    assert same.turn_rewards == [0.0] * 3
    # an env's own limit before the cap is the env's truncation
    [short] = _engine(backend, make_env=lambda: TurnLimit(CountingEnv(), 2), max_turns=5).run(["toy_0"])
    assert (short.num_turns, short.meta["stop_reason"], short.truncated) == (2, "env_truncated", True)


def test_response_budget_is_enforced_during_the_rollout(tok):
    budget = 150
    backend, trajs = run_past_response_budget(tok, _engine, budget)
    for t in trajs:
        assert t.truncated and t.meta["stop_reason"] == "max_response_length"
        assert t.num_turns < 20
        check_trajectory(t, tok, max_response_length=budget)
    # the per-turn cap shrinks to what is left of the budget
    assert min(r.max_tokens or 64 for r in backend.requests) < 64


def test_the_backends_context_limit_truncates_the_episode_instead_of_failing_it(tok):
    """vllm refuses a prompt longer than its `max_model_len` ("model error", a failed episode):
    the engine keeps every request within the backend's `context_limit` and ends the episode as
    truncated when the next observation would not fit."""
    limit = 260
    backend, trajs = run_past_response_budget(tok, _engine, 10_000, context_limit=limit)
    for t in trajs:
        assert not t.failed and t.truncated and t.meta["stop_reason"] == "context_limit"
        assert 1 < t.num_turns < 20
        assert len(t.token_ids) <= limit
        check_trajectory(t, tok)
    assert all(len(r.token_ids) + r.max_tokens <= limit for r in backend.requests)
    assert min(r.max_tokens or 64 for r in backend.requests) < 64


def test_groups_share_a_seed_and_caps_per_item(tok):
    backend = ScriptedBackend(tok, lambda req: "Thought: hm.\nAction: look")
    engine = _engine(backend, max_turns=4, batch_size=4)
    trajs = engine.run(["toy_0", "toy_1"], n=3, seed=[7, 11], max_turns=[2, 3])
    assert [(t.item_id, t.group_id, t.sample_index) for t in trajs] == [
        (f"toy_{g}", g, k) for g in range(2) for k in range(3)
    ]
    assert [t.seed for t in trajs] == [7, 7, 7, 11, 11, 11]
    assert {t.seed for t in engine.run(["toy_0", "toy_1"], seed=5)} == {5}
    with pytest.raises(ValueError, match="seed has 1 values for 2 items"):
        engine.run(["toy_0", "toy_1"], seed=[5])
    assert [t.num_turns for t in trajs] == [2, 2, 2, 3, 3, 3]
    assert [t.max_turns for t in trajs] == [2, 2, 2, 3, 3, 3]


def test_batch_size_bounds_live_episodes(tok):
    backend = ScriptedBackend(tok, _win_on_second_turn)
    engine = _engine(backend, max_turns=4, batch_size=2)
    trajs = engine.run([f"toy_{i}" for i in range(5)])
    assert all(t.success for t in trajs)
    assert max(engine.stats.round_sizes) == 2


def test_env_error_and_timeout_fail_only_their_episode(tok):
    backend = ScriptedBackend(tok, _win_on_second_turn)
    engine = _engine(
        backend,
        make_env=lambda: CountingEnv(fail_on="toy_1", hang_on="toy_2"),
        max_turns=4,
        env_timeout_s=1.0,
    )
    ok, crashed, hung = engine.run(["toy_0", "toy_1", "toy_2"])
    assert ok.success and not ok.failed
    assert crashed.failed and "backend crashed on toy_1" in (crashed.fail_reason or "")
    assert hung.failed and "timed out after 1s" in (hung.fail_reason or "")
    for t in (crashed, hung):
        assert t.meta["stop_reason"] == "failed" and not t.success
        check_trajectory(t, tok)  # what was played before the failure is kept, aligned


def test_textcraft_expert_through_the_engine_solves_items(tok):
    """A backend that voices the family's expert solves TextCraft items: the engine, parser and
    env agree end to end."""
    spec = get_family("textcraft")
    items = spec.split("test")[:2]
    experts: dict[int, object] = {}

    def expert_reply(req):
        key = req.cache_key
        obs = req.messages[-1]["content"]
        if key not in experts:
            experts[key] = spec.make_expert()
            first_obs = obs.split("\n\n", 1)[-1] if obs.startswith(TOY_PROMPT.instruction) else obs
            experts[key].reset(items[key], first_obs, {})  # type: ignore[attr-defined]
        thought, action = experts[key].act(obs)  # type: ignore[attr-defined]
        return f"Thought: {thought}\nAction: {action}"

    backend = ScriptedBackend(tok, expert_reply)
    engine = RolloutEngine(backend, LocalEnvPool("textcraft"), EngineConfig(max_turns=40, progress=False))
    for t in engine.run(items):
        assert t.success and t.terminated and t.score == 1.0, t.messages[-2:]
        assert t.category == spec.category_of(t.item_id)
        check_trajectory(t, tok)


def test_tiny_model_on_textcraft_is_token_exact_and_aligned():
    model, tok = load_model("tiny")
    backend = HFBackend(model, tok)
    engine = RolloutEngine(
        backend,
        LocalEnvPool("textcraft"),
        EngineConfig(max_turns=3, max_tokens=12, temperature=1.0, max_response_length=2048, progress=False),
    )
    trajs = engine.run(get_family("textcraft").split("test")[:3], n=2)
    assert len(trajs) == 6 and not any(t.failed for t in trajs)
    for t in trajs:
        check_trajectory(t, tok, max_response_length=2048)
        assert t.num_turns == 3 and t.meta["stop_reason"] == "max_turns"
    # sampled logprobs are the model's own: teacher forcing over the saved ids gives them back
    t = trajs[0]
    [lps] = backend.compute_logprobs([t.token_ids])
    for i, (mask, lp) in enumerate(zip(t.loss_mask, t.logprobs, strict=True)):
        if mask:
            assert abs(lps[i] - lp) < 1e-4
    assert backend.kept_tokens() == 0  # caches are dropped when episodes end
    assert engine.stats.sampled_tokens == sum(sum(t.loss_mask) for t in trajs)
