from __future__ import annotations

import json

import pytest

from horizonrl.envs.checker import check_env
from horizonrl.envs.core import StepResult, UnknownItemError, make_info, parse_item_id
from horizonrl.envs.registry import FamilySpec, get_family, read_item_file, register, write_item_file
from horizonrl.envs.wrappers import TurnLimit
from tests.envs.toy import TOY_SPEC, CountEnv


def test_parse_item_id_accepts_family_index_and_rejects_garbage():
    assert parse_item_id("textcraft_12") == ("textcraft", 12)
    assert parse_item_id("my_family_3") == ("my_family", 3)
    for bad in ("textcraft", "textcraft_", "_3", "textcraft_x", "", "textcraft_-1"):
        with pytest.raises(UnknownItemError, match="item id"):
            parse_item_id(bad)


def test_make_info_rejects_scores_outside_unit_interval():
    assert make_info(True, 1.0, "depth 1", goal="stick") == {
        "success": True,
        "score": 1.0,
        "category": "depth 1",
        "goal": "stick",
    }
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="score"):
            make_info(False, bad, "x")


def test_step_result_round_trips_through_json_and_keeps_flags_apart():
    result = StepResult("obs", 0.5, False, True, make_info(False, 0.5, "c"))
    again = StepResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    assert again.done and not again.terminated and again.truncated


def test_turn_limit_truncates_at_cap_without_terminating():
    env = TurnLimit(CountEnv(), max_turns=2)
    env.reset("toy_2")  # target 3: cannot finish in 2 turns
    first = env.step("inc")
    assert not first.truncated and not first.terminated
    second = env.step("inc")
    assert second.truncated and not second.terminated
    with pytest.raises(RuntimeError, match="max_turns=2"):
        env.step("inc")
    env.reset("toy_2")
    assert env.turns == 0


def test_turn_limit_leaves_termination_on_the_last_allowed_turn_alone():
    env = TurnLimit(CountEnv(), max_turns=1)
    env.reset("toy_0")  # target 1
    result = env.step("inc")
    assert result.terminated and not result.truncated and result.info["success"]


def test_turn_limit_rejects_non_positive_caps():
    with pytest.raises(ValueError, match="max_turns"):
        TurnLimit(CountEnv(), max_turns=0)


def test_registry_registers_and_names_known_families_on_error():
    register(TOY_SPEC, overwrite=True)
    assert get_family("toy") is TOY_SPEC
    assert TOY_SPEC.split("test") == ["toy_8", "toy_9"]
    with pytest.raises(KeyError, match="textcraft"):
        get_family("no_such_family")
    with pytest.raises(KeyError, match="splits: \\['test', 'train'\\]"):
        TOY_SPEC.split("dev")
    with pytest.raises(ValueError, match="already registered"):
        register(TOY_SPEC)


def test_check_item_rejects_items_of_other_families():
    assert TOY_SPEC.check_item("toy_4") == 4
    with pytest.raises(UnknownItemError, match="does not belong"):
        TOY_SPEC.check_item("babyai_4")


def test_data_id_files_round_trip_in_the_reference_format(tmp_path):
    path = tmp_path / "toy_test.json"
    write_item_file(path, ["toy_8", "toy_9"])
    assert json.loads(path.read_text()) == [{"item_id": "toy_8"}, {"item_id": "toy_9"}]
    assert read_item_file(path) == ["toy_8", "toy_9"]
    path.write_text('{"item_id": "toy_8"}')
    with pytest.raises(ValueError, match="JSON list"):
        read_item_file(path)


def test_checker_passes_a_conforming_env():
    check_env(CountEnv(), TOY_SPEC, ["toy_0", "toy_1", "toy_2"])


class _RaisesOnBadAction(CountEnv):
    def step(self, action: str) -> StepResult:
        if action.strip() != "inc":
            raise ValueError("bad action")
        return super().step(action)


class _NoCategory(CountEnv):
    def step(self, action: str) -> StepResult:
        result = super().step(action)
        del result.info["category"]
        return result


class _Nondeterministic(CountEnv):
    calls = 0

    def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict]:
        obs, info = super().reset(item_id, seed=seed)
        _Nondeterministic.calls += 1
        return f"{obs} (visit {_Nondeterministic.calls})", info


class _AcceptsUnknownItems(CountEnv):
    def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict]:
        known = int(item_id.rpartition("_")[2]) < 10
        return super().reset(item_id if known else "toy_0", seed=seed)


@pytest.mark.parametrize(
    ("env_cls", "message"),
    [
        (_RaisesOnBadAction, "bad action"),
        (_NoCategory, "lacks 'category'"),
        (_Nondeterministic, "different episodes"),
        (_AcceptsUnknownItems, "UnknownItemError"),
    ],
)
def test_checker_catches_each_kind_of_contract_break(env_cls, message):
    with pytest.raises((AssertionError, ValueError), match=message):
        check_env(env_cls(), TOY_SPEC, ["toy_1"])


def test_spec_is_frozen():
    with pytest.raises(AttributeError):
        TOY_SPEC.name = "other"  # type: ignore[misc]
    assert isinstance(TOY_SPEC, FamilySpec)
