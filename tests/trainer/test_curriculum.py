"""Task curriculum (`data.curriculum`): stages of items, advanced like a schedule, resume-exact."""

from __future__ import annotations

import json

import pytest

from horizonrl.config import ConfigError, load_config
from horizonrl.envs.registry import family_of
from horizonrl.trainer.data import CurriculumSampler, make_item_sampler
from horizonrl.trainer.rl import RLTrainer
from tests.trainer.conftest import scripted_rl_config

DEPTHS = (
    "data.curriculum.stages=[{categories: [depth 1]}, {categories: [depth 1, depth 2]},"
    " {categories: [depth 1, depth 2, depth 3]}]"
)
ADAPTIVE = ["data.curriculum.type=adaptive", "data.curriculum.every=1", "data.curriculum.window=1"]


def _data(*overrides):
    return load_config(None, ["data.families=[textcraft]", *overrides]).data


def _depths(items):
    return {family_of(i).category_of(i) for i in items}


def test_stepwise_stages_draw_from_their_categories():
    sampler = make_item_sampler(_data(DEPTHS, "data.curriculum.every=2", "data.batch_size=8"), seed=0)
    assert isinstance(sampler, CurriculumSampler)
    assert [sampler.stage(step) for step in range(7)] == [1, 1, 2, 2, 3, 3, 3]
    assert _depths(sampler.next_batch(8, 0) + sampler.next_batch(8, 1)) == {"depth 1"}
    later = [i for step in range(4, 10) for i in sampler.next_batch(8, step)]
    assert _depths(later) == {"depth 1", "depth 2", "depth 3"}
    assert sampler.stats(4) == {"curriculum/stage": 3.0}


def test_adaptive_curriculum_advances_on_the_success_threshold():
    data = _data(DEPTHS, *ADAPTIVE, "data.curriculum.threshold=0.5")
    sampler = make_item_sampler(data, seed=0)
    sampler.update(0, 0.2)
    assert sampler.stage(1) == 1
    sampler.update(1, 0.75)
    assert sampler.stage(2) == 2
    state = json.loads(json.dumps(sampler.state_dict()))
    again = make_item_sampler(data, seed=0)
    again.load_state_dict(state)
    assert again.stage(2) == 2 and again.next_batch(4, 2) == sampler.next_batch(4, 2)


def test_mixed_curriculum_draws_a_fraction_of_groups_from_the_next_stage():
    data = _data(DEPTHS, "data.curriculum.type=mixed", "data.curriculum.every=100",
                 "data.curriculum.mixed_fraction=0.5")  # fmt: skip
    batch = make_item_sampler(data, seed=0).next_batch(8, 0)
    assert sorted(family_of(i).category_of(i) for i in batch).count("depth 1") >= 4
    stage2 = make_item_sampler(data, seed=0).stages[1].items
    assert sum(i in stage2 for i in batch) >= 4


def test_item_list_stages():
    data = _data("data.curriculum.stages=[{items: [textcraft_0, textcraft_1]}, {categories: [depth 3]}]")
    sampler = make_item_sampler(data, seed=0)
    assert sorted(sampler.stages[0].items) == ["textcraft_0", "textcraft_1"]
    assert set(sampler.next_batch(4, 0)) <= {"textcraft_0", "textcraft_1"}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data.curriculum.stages=[{categories: [depth 1]}, {}]"], r"stages\[1\] is empty"),
        (
            ["data.curriculum.stages=[{categories: [depth 1]}]", "data.curriculum.type=fixed"],
            "stepwise, adaptive",
        ),
        (["data.curriculum.stages=[{categories: [depth 1]}]", "data.categories=[depth 1]"], "both pick"),
    ],
)
def test_bad_curriculum_configs_are_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        _data(*overrides)


def test_unknown_category_or_item_names_the_stage():
    with pytest.raises(ValueError, match=r"stages\[1\]: unknown categories \['depth 9'\]; valid: depth 1"):
        make_item_sampler(
            _data("data.curriculum.stages=[{categories: [depth 1]}, {categories: [depth 9]}]"), 0
        )
    with pytest.raises(ValueError, match=r"stages\[0\]: items \['textcraft_99999'\] are not training items"):
        make_item_sampler(_data("data.curriculum.stages=[{items: [textcraft_99999]}]"), 0)


def test_checkpoint_with_and_without_curriculum_do_not_mix():
    plain = make_item_sampler(_data(), 0)
    curriculum = make_item_sampler(_data(DEPTHS), 0)
    with pytest.raises(ValueError, match="without data.curriculum"):
        curriculum.load_state_dict(plain.state_dict())
    with pytest.raises(ValueError, match="with data.curriculum"):
        plain.load_state_dict(curriculum.state_dict())


def test_resumed_curriculum_run_draws_what_the_uninterrupted_run_drew(tmp_path, scripted_rollout):
    """Adaptive stages (scripted success 0.5 >= threshold) and per-stage cursors across a resume."""
    extra = [
        DEPTHS,
        *ADAPTIVE,
        "data.curriculum.threshold=0.5",
        "trainer.save_every=1",
        "trainer.keep_last=0",
    ]

    def items(out):  # the item ids of each step's trajectories
        files = sorted((out / "trajectories").glob("step_*.jsonl"))
        return [[json.loads(line)["item_id"] for line in f.read_text().splitlines()] for f in files]

    RLTrainer(
        scripted_rl_config(tmp_path / "a", "trainer.total_steps=4", *extra), rollout=scripted_rollout
    ).fit()
    RLTrainer(
        scripted_rl_config(tmp_path / "b", "trainer.total_steps=2", *extra), rollout=scripted_rollout
    ).fit()
    resumed = RLTrainer(
        scripted_rl_config(tmp_path / "b", "trainer.total_steps=4", *extra), rollout=scripted_rollout
    )
    assert resumed.step == 2
    resumed.fit()
    a, b = items(tmp_path / "a"), items(tmp_path / "b")
    assert len(a) == 4 and a == b
    stages = [
        json.loads(x)["curriculum/stage"] for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    ]
    assert stages == [1, 2, 3, 3]
    assert _depths(a[0]) == {"depth 1"}
