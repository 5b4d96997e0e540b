"""The workflow registry: one entry per algorithm name, and the facts the learner reads from it."""

from __future__ import annotations

import pytest

from horizonrl.config import ALGORITHM_NAMES
from horizonrl.trainer.workflows import WORKFLOWS, get_workflow


def test_every_algorithm_name_has_a_workflow_whose_trainer_imports():
    assert set(WORKFLOWS) == set(ALGORITHM_NAMES)
    for name in ALGORITHM_NAMES:
        assert callable(get_workflow(name).trainer_class())


def test_reference_policy_facts():
    assert get_workflow("dpo").needs_reference(kl_coef=0.0)
    assert get_workflow("grpo").needs_reference(kl_coef=0.001)
    assert not get_workflow("grpo").needs_reference(kl_coef=0.0)
    assert not get_workflow("sft").needs_reference(kl_coef=0.1)
    with pytest.raises(KeyError, match="valid: ppo"):
        get_workflow("a2c")


def test_an_aborted_run_ends_with_one_line_naming_the_run(tmp_path, monkeypatch):
    from horizonrl.config import load_config
    from horizonrl.trainer import main as train_main
    from horizonrl.trainer.workflows import RunAborted, Workflow

    class Aborts:
        def __init__(self, cfg, *, env_urls):
            pass

        def fit(self):
            raise RunAborted("every episode failed in 3 consecutive steps")

    monkeypatch.setattr(Workflow, "trainer_class", lambda self: Aborts)
    cfg = load_config(None, ["model.path=tiny", f"trainer.output_dir={tmp_path}"])
    with pytest.raises(SystemExit, match=rf"horizonrl grpo: stopped at {tmp_path}: every episode failed"):
        train_main.run(cfg)
