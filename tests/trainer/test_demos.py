"""Missing trajectory files of `data.train_files` become expert demos (`horizonrl.trainer.demos`)."""

from __future__ import annotations

import dataclasses

import pytest

from horizonrl.config import load_config
from horizonrl.envs.registry import register
from horizonrl.rollout.trajectory import iter_jsonl
from horizonrl.trainer import demos
from horizonrl.trainer.demos import ensure_demos
from horizonrl.trainer.main import run
from tests.envs.toy import TOY_SPEC


def _cfg(*overrides):
    return load_config("configs/quickstart.yaml", list(overrides))


def test_missing_file_named_after_a_family_gets_its_experts_demos(tmp_path, capsys):
    path = tmp_path / "demos" / "textcraft_train.jsonl"
    cfg = _cfg(f"data.train_files=[{path}]")
    assert ensure_demos(cfg) == [path]
    trajs = list(iter_jsonl(path))
    assert len(trajs) == 444 and all(t.item_id.startswith("textcraft_") for t in trajs)
    assert all(t.success and t.terminated and not t.failed for t in trajs)
    [line] = capsys.readouterr().out.splitlines()
    assert str(path) in line and "textcraft/train" in line and "444 solved" in line
    assert ensure_demos(cfg) == []  # already there: nothing made, nothing printed
    assert capsys.readouterr().out == ""


def test_other_names_use_the_configs_only_family_and_split(tmp_path, capsys):
    path = tmp_path / "sft.jsonl"
    assert ensure_demos(_cfg(f"data.train_files=[{path}]", "data.split=test")) == [path]
    trajs = list(iter_jsonl(path))
    assert len(trajs) == 100 and all(t.success for t in trajs)
    assert "textcraft/test" in capsys.readouterr().out


def test_ambiguous_family_stops_with_the_solve_command(tmp_path):
    path = tmp_path / "demos.jsonl"
    with pytest.raises(SystemExit, match=r"not found; expert demos are made with `horizonrl solve FAMILY"):
        ensure_demos(_cfg(f"data.train_files=[{path}]", "data.families=[textcraft,babyai]"))
    assert not path.exists()


def test_family_without_expert_stops_and_makes_nothing(tmp_path):
    register(dataclasses.replace(TOY_SPEC, name="plaintoy", make_expert=None), overwrite=True)
    made, cannot = tmp_path / "textcraft_train.jsonl", tmp_path / "plaintoy_train.jsonl"
    with pytest.raises(SystemExit, match="family 'plaintoy' has no scripted expert"):
        ensure_demos(_cfg(f"data.train_files=[{made},{cannot}]"))
    assert not made.exists() and not cannot.exists()


def test_dpo_does_not_get_demos(tmp_path):
    path = tmp_path / "textcraft_train.jsonl"
    with pytest.raises(SystemExit, match="horizonrl dpo: trajectory file .* DPO pairs need failed"):
        ensure_demos(_cfg(f"data.train_files=[{path}]", "algorithm.name=dpo"))
    assert not path.exists()


def test_training_run_makes_missing_demos_first(tmp_path, monkeypatch):
    class Reached(Exception):
        pass

    def fake_ensure_demos(cfg):
        raise Reached

    monkeypatch.setattr(demos, "ensure_demos", fake_ensure_demos)
    with pytest.raises(Reached):
        run(_cfg(f"data.train_files=[{tmp_path / 'textcraft_train.jsonl'}]"))


def test_a_count_at_the_end_of_the_name_limits_the_items(tmp_path, capsys):
    path = tmp_path / "babyai_train_3.jsonl"  # BabyAI's train split has 40,000 items
    assert ensure_demos(_cfg(f"data.train_files=[{path}]", "data.families=[textcraft,babyai]")) == [path]
    assert [t.item_id for t in iter_jsonl(path)] == ["babyai_0", "babyai_1", "babyai_2"]
    assert "--split train --limit 3 --out" in capsys.readouterr().out


def test_an_expert_variant_writes_the_missing_demos_and_an_existing_file_must_be_its(tmp_path, capsys):
    plain = tmp_path / "plain" / "textcraft_train_20.jsonl"
    ensure_demos(_cfg(f"data.train_files=[{plain}]"))
    path = tmp_path / "textcraft_train_20.jsonl"
    worked = _cfg(f"data.train_files=[{path}]", "data.expert_kwargs={textcraft: {worked: true}}")
    assert ensure_demos(worked) == [path]
    trajs = list(iter_jsonl(path))
    assert len(trajs) == 20 and all(t.success and t.meta["expert_kwargs"] == {"worked": True} for t in trajs)
    for made, default in zip(trajs, iter_jsonl(plain), strict=True):  # the same moves, other thoughts
        thought, action = made.messages[2]["content"].split("Action:")
        default_thought, default_action = default.messages[2]["content"].split("Action:")
        assert thought != default_thought and action == default_action
    assert """--limit 20 --expert-kwargs '{"worked": true}' --out""" in capsys.readouterr().out
    assert ensure_demos(worked) == []  # its own variant's file: used as it is
    refused = r'kwargs \{"worked": true\} but data.expert_kwargs.textcraft is \{\}'
    with pytest.raises(SystemExit, match=refused):
        ensure_demos(_cfg(f"data.train_files=[{path}]", "data.expert_kwargs={textcraft: {}}"))
    assert ensure_demos(_cfg(f"data.train_files=[{path}]")) == []  # no variant named: not checked
    with pytest.raises(SystemExit, match=r"with kwargs \{\} but data.expert_kwargs.textcraft is"):
        ensure_demos(_cfg(f"data.train_files=[{plain}]", "data.expert_kwargs={textcraft: {worked: true}}"))


def test_kwargs_the_expert_does_not_take_stop_the_run_before_anything_is_made(tmp_path):
    path = tmp_path / "textcraft_train.jsonl"
    with pytest.raises(SystemExit, match="the textcraft expert does not take --expert-kwargs"):
        ensure_demos(_cfg(f"data.train_files=[{path}]", "data.expert_kwargs={textcraft: {wroked: true}}"))
    assert not path.exists()
