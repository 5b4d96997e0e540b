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
