"""Agent strategies: plan turns take no env step and do not count against the cap, a `Plan:` block
revises the plan, a failed turn asks for a reflection, and every trajectory stays token-exact."""

from __future__ import annotations

import pytest

from horizonrl.agent.prompts import FamilyPrompt, get_prompt
from horizonrl.agent.strategies import (
    PLAN_INSTRUCTION,
    REFLECT_ASK,
    STRATEGIES,
    get_strategy,
    parse_plan,
    parse_reflection,
)
from horizonrl.envs.core import StepResult
from horizonrl.envs.registry import get_family
from horizonrl.models import load_model, load_tokenizer
from horizonrl.rollout.backends.hf import HFBackend
from horizonrl.rollout.engine import EngineConfig, RolloutEngine
from horizonrl.rollout.envpool import LocalEnvPool
from tests.rollout.helpers import CountingEnv, ScriptedBackend
from tests.rollout.test_engine import check_trajectory

TOY = FamilyPrompt(family="toy", instruction="Say win.")


def test_parse_plan_reads_numbered_steps_and_returns_the_rest():
    steps, rest = parse_plan("Plan:\n1. get logs\n2) craft planks\n\nThought: go\nAction: get 1 oak logs")
    assert steps == ["get logs", "craft planks"]
    assert rest == "Thought: go\nAction: get 1 oak logs"
    assert parse_plan("Plan: 1. only step")[0] == ["only step"]
    assert parse_plan("Thought: no plan\nAction: x") == (None, "Thought: no plan\nAction: x")
    assert parse_plan("Plan:\nThought: empty")[0] is None


def test_parse_reflection_takes_the_leading_line():
    assert parse_reflection("Reflection: wrong count.\nThought: t\nAction: a") == (
        "wrong count.",
        "Thought: t\nAction: a",
    )
    assert parse_reflection("Thought: t\nAction: a")[0] is None


def test_registry_names_the_known_strategies():
    assert {"react", "plan", "reflect"} <= set(STRATEGIES)
    with pytest.raises(KeyError, match="known"):
        get_strategy("tree-of-thought")
    with pytest.raises(ValueError, match="strategy must be one of"):
        EngineConfig(strategy="nope")


def test_react_leaves_the_prompt_and_observations_as_they_are():
    prompt = get_prompt("textcraft")
    react = get_strategy("react")
    assert react.initial_messages(prompt, "obs") == prompt.initial_messages("obs")
    state = react.start(prompt)
    assert state.read("Plan:\n1. x\nAction: y").text == "Plan:\n1. x\nAction: y"
    assert state.next_observation("same", failed=True) == "same" and state.meta() == {}


def test_plan_state_plans_first_then_revises():
    prompt = get_prompt("babyai")
    plan = get_strategy("plan")
    assert PLAN_INSTRUCTION in plan.initial_messages(prompt, "obs")[-1]["content"]
    state = plan.start(prompt)
    first = state.read("Plan:\n1. find the key\n2. open the door")
    assert first.is_plan and "Plan noted" in first.feedback and prompt.format_hint in first.feedback
    second = state.read("Thought: go\nAction: go to the red key")
    assert not second.is_plan and state.plan == ["find the key", "open the door"]
    third = state.read("Plan:\n1. pick up the key\nThought: t\nAction: pick up red key")
    assert third.text == "Thought: t\nAction: pick up red key"
    assert state.meta() == {
        "strategy": "plan",
        "plan_turns": [0],
        "plans": [
            {"turn": 0, "steps": ["find the key", "open the door"]},
            {"turn": 2, "steps": ["pick up the key"]},
        ],
    }
    assert state.free_turns == 1


def test_reflect_asks_after_invalid_unchanged_or_unparsed_turns():
    state = get_strategy("reflect").start(get_prompt("textcraft"))
    state.last_observation = "start"
    assert state.next_observation("Got 1 oak logs.", info={}) == "Got 1 oak logs."
    assert state.next_observation("Got 1 oak logs.", info={}).endswith(REFLECT_ASK)  # nothing changed
    assert state.next_observation("Could not craft.", info={"invalid_action": True}).endswith(REFLECT_ASK)
    # the family's flag wins over the unchanged-observation fallback
    assert state.next_observation("Could not craft.", info={"invalid_action": False}) == "Could not craft."
    assert state.next_observation("No Action: line.", failed=True).endswith(REFLECT_ASK)
    state.read("Reflection: count was wrong.\nThought: t\nAction: a")
    assert state.meta()["reflections"] == [{"turn": 0, "text": "count was wrong."}]


def _engine(tok, reply, make_env=CountingEnv, **cfg):
    cfg.setdefault("progress", False)
    backend = ScriptedBackend(tok, reply)
    pool = LocalEnvPool("toy", make_env=make_env)
    return backend, RolloutEngine(backend, pool, EngineConfig(**cfg), prompt=TOY)


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("tiny")


def test_plan_turn_takes_no_env_step_and_does_not_count_against_the_cap(tok):
    def reply(req):
        turn = sum(m["role"] == "assistant" for m in req.messages)
        return "Plan:\n1. look\n2. win" if turn == 0 else "Thought: t\nAction: look"

    backend, engine = _engine(tok, reply, max_turns=2, strategy="plan")
    [t] = engine.run(["toy_0"])
    check_trajectory(t, tok)
    assert t.num_turns == 3 and t.meta["stop_reason"] == "max_turns"  # 1 plan + 2 acting turns
    assert t.turn_rewards[0] == 0.0 and len(t.turn_ends) == 3
    assert t.messages[3]["content"].startswith("Plan noted.")  # the plan turn's feedback, not an env step
    assert t.meta["plan_turns"] == [0] and t.meta["plans"][0]["steps"] == ["look", "win"]
    assert t.meta["strategy"] == "plan" and t.meta["parse_errors"] == 0


def test_reflection_is_asked_after_an_unparsed_turn_and_is_sampled(tok):
    def reply(req):
        if req.messages[-1]["content"].endswith(REFLECT_ASK):
            return "Reflection: I forgot the action line.\nThought: t\nAction: win"
        return "Thought: I am not sure."

    backend, engine = _engine(tok, reply, max_turns=4, strategy="reflect")
    [t] = engine.run(["toy_0"])
    check_trajectory(t, tok)
    assert t.success and t.num_turns == 2
    assert t.messages[3]["content"].endswith(REFLECT_ASK)
    assert t.meta["reflections"] == [{"turn": 1, "text": "I forgot the action line."}]
    # the reflection line is part of the sampled (trained) tokens of turn 2
    start = t.turn_ends[1] - t.loss_mask[: t.turn_ends[1] + 1][::-1].index(0) + 1
    assert "Reflection:" in engine.fmt.decode(t.token_ids[start : t.turn_ends[1] + 1])


class _FlaggingEnv(CountingEnv):
    """Reports `invalid_action` on every action but "win"."""

    def step(self, action: str) -> StepResult:
        result = super().step(action)
        result.info["invalid_action"] = action != "win"
        return result


def test_reflect_uses_the_family_invalid_action_flag(tok):
    seen = []

    def reply(req):
        seen.append(req.messages[-1]["content"])
        return "Thought: t\nAction: win" if len(seen) > 1 else "Thought: t\nAction: jump"

    _, engine = _engine(tok, reply, make_env=_FlaggingEnv, max_turns=3, strategy="reflect")
    [t] = engine.run(["toy_0"])
    assert t.success and seen[1].endswith(REFLECT_ASK)


@pytest.mark.parametrize("strategy", ["react", "plan", "reflect"])
def test_tiny_model_plays_textcraft_with_each_strategy(strategy):
    model, tok = load_model("tiny")
    backend = HFBackend(model, tok)
    cfg = EngineConfig(max_turns=2, max_tokens=10, temperature=1.0, progress=False, strategy=strategy)
    engine = RolloutEngine(backend, LocalEnvPool("textcraft"), cfg)
    trajs = engine.run(get_family("textcraft").split("test")[:2])
    for t in trajs:
        check_trajectory(t, tok)
        assert len(t.turn_rewards) == len(t.turn_ends) == t.num_turns
        assert t.num_turns == 2 + (strategy == "plan")
        assert t.meta.get("strategy", "react") == strategy
    [lps] = backend.compute_logprobs([trajs[0].token_ids])  # plan/reflect tokens are the model's own
    for mask, lp, own in zip(trajs[0].loss_mask, trajs[0].logprobs, lps, strict=True):
        if mask:
            assert abs(own - lp) < 1e-4


def test_eval_report_names_the_strategy(tmp_path):
    import json

    from horizonrl.cli import main
    from horizonrl.rollout.trajectory import read_jsonl

    out = tmp_path / "ev"
    args = ["eval", "--model", "tiny", "--env", "babyai", "--limit", "1", "--max-turns", "1"]
    assert main([*args, "--out", str(out), "max_tokens=4", "strategy=plan", "progress=false"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["strategy"] == "plan" and report["settings"]["strategy"] == "plan"
    assert "Agent strategy: plan" in (out / "report.md").read_text()
    [t] = read_jsonl(out / "trajectories.jsonl")
    assert t.meta["strategy"] == "plan" and t.num_turns == 2 and t.meta["plan_turns"] == [0]
    with pytest.raises(SystemExit):
        main([*args, "--out", str(out), "strategy=dream"])
