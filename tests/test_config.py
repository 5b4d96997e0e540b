"""Config loading: YAML + dotted overrides onto frozen dataclasses, friendly errors, aliases."""

from __future__ import annotations

from pathlib import Path

import pytest

from horizonrl.config import Config, ConfigError, load_config, to_yaml

CONFIGS = sorted((Path(__file__).parent.parent / "configs").glob("*.yaml"))


def test_design_keys_work_as_named(tmp_path):
    cfg = load_config(
        None,
        [
            "model.path=tiny",
            "trainer.total_steps=4",
            f"trainer.output_dir={tmp_path}",
            "data.batch_size=3",
            "rollout.n=2",
            "rollout.max_tokens=16",
            "algorithm.adv_estimator=rloo",
            "schedule.type=stepwise",
            "schedule.rounds=[2,4,6]",
            "schedule.every=1",
            "trainer.resume=never",
            "data.train_files=[a.json,b.json]",
            "algorithm.name=sft",
        ],
    )
    assert cfg.model.path == "tiny" and cfg.trainer.total_steps == 4
    assert cfg.trainer.output_dir == str(tmp_path) and cfg.trainer.resume == "never"
    assert (cfg.data.batch_size, cfg.rollout.n, cfg.rollout.max_tokens) == (3, 2, 16)
    assert cfg.algorithm.estimator == "rloo" and cfg.algorithm.name == "sft"
    assert (cfg.schedule.type, cfg.schedule.rounds, cfg.schedule.every) == ("stepwise", [2, 4, 6], 1)
    assert cfg.data.train_files == ["a.json", "b.json"]


def test_yaml_file_then_overrides_win(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("trainer:\n  total_steps: 7\n  lr: 2.0e-6\nrollout:\n  n: 8\n")
    cfg = load_config(path, ["rollout.n=2"])
    assert cfg.trainer.total_steps == 7 and cfg.trainer.lr == 2e-6 and cfg.rollout.n == 2


def test_unknown_key_names_the_valid_ones():
    with pytest.raises(
        ConfigError, match=r"unknown config key 'rollout.samples'.*valid keys here: max_tokens, .*backend, n,"
    ):
        load_config(None, ["rollout.samples=4"])


def test_wrong_type_is_a_friendly_error():
    with pytest.raises(ConfigError, match=r"bad value for 'data.batch_size'"):
        load_config(None, ["data.batch_size=many"])
    with pytest.raises(ConfigError, match=r"key=value"):
        load_config(None, ["trainer.total_steps"])


def test_validation_runs_on_load():
    with pytest.raises(ConfigError, match=r"algorithm.adv_estimator='remax'.*gae, grpo, rloo, reinforce_pp"):
        load_config(None, ["algorithm.adv_estimator=remax"])
    with pytest.raises(ConfigError, match="rollout.n must be >= 1"):
        load_config(None, ["rollout.n=0"])
    with pytest.raises(ConfigError, match=r"release_memory_above is a share .* in \[0, 1\], got 8"):
        load_config(None, ["trainer.release_memory_above=8"])  # GB meant: a clear error, not "never"


def test_cross_key_checks_name_both_keys():
    with pytest.raises(ConfigError, match=r"rollout.dtype=bfloat16.*recompute_old_logprobs=true"):
        load_config(None, ["rollout.dtype=bfloat16", "algorithm.recompute_old_logprobs=false"])
    with pytest.raises(ConfigError, match=r"filter_groups needs a group estimator.*'gae'"):
        load_config(None, ["algorithm.filter_groups=true", "algorithm.name=ppo"])
    with pytest.raises(ConfigError, match=r"rollout.dtype='float16' is not valid"):
        load_config(None, ["rollout.dtype=float16"])
    with pytest.raises(ConfigError, match=r"model.bf16=true .* first PPO ratio .*recompute_old_logprobs"):
        load_config(None, ["algorithm.recompute_old_logprobs=false"])  # model.bf16 is the default
    assert not load_config(None, ["algorithm.recompute_old_logprobs=false", "model.bf16=false"]).model.bf16
    with pytest.raises(ConfigError, match=r"bootstrap_truncated needs a critic estimator"):
        load_config(None, ["algorithm.bootstrap_truncated=true", "algorithm.name=grpo"])
    with pytest.raises(ConfigError, match=r"logprob_temperature='warm': use rollout or a number"):
        load_config(None, ["algorithm.logprob_temperature=warm"])


def test_logprob_temperature_follows_the_rollout_unless_given():
    assert load_config(None, ["rollout.temperature=0.8"]).logprob_temperature == 0.8
    assert load_config(None, ["rollout.temperature=0"]).logprob_temperature == 1.0
    cfg = load_config(None, ["rollout.temperature=0.8", "algorithm.logprob_temperature=1.0"])
    assert cfg.logprob_temperature == 1.0
    assert load_config(None, ["algorithm.name=ppo"]).algorithm.bootstraps_truncated
    assert not load_config(None, ["algorithm.name=grpo"]).algorithm.bootstraps_truncated
    assert load_config(None, ["algorithm.filter_groups=true", "algorithm.name=rloo"]).algorithm.filter_groups


def test_algorithm_name_implies_the_estimator():
    assert load_config(None, ["algorithm.name=ppo"]).algorithm.estimator == "gae"
    assert load_config(None, ["algorithm.name=reinforce_pp"]).algorithm.estimator == "reinforce_pp"
    assert (
        load_config(None, ["algorithm.name=ppo", "algorithm.adv_estimator=grpo"]).algorithm.estimator
        == "grpo"
    )


def test_reference_rounds_ctrl_aliases(tmp_path):
    path = tmp_path / "ref.yaml"
    path.write_text(
        "algorithm:\n  rounds_ctrl:\n    type: scaling_inter_stepwise\n    rounds: [5, 8, 10]\n"
        "    steps_scaling_inter: 100\n"
    )
    cfg = load_config(path)
    assert (cfg.schedule.type, cfg.schedule.rounds, cfg.schedule.every) == ("stepwise", [5, 8, 10], 100)
    cfg = load_config(None, ["algorithm.rounds_ctrl.type=fixed", "algorithm.rounds_ctrl.rounds=[5]"])
    assert (cfg.schedule.type, cfg.schedule.rounds) == ("fixed", [5])
    with pytest.raises(ConfigError, match="rounds_ctrl.steps"):
        load_config(None, ["algorithm.rounds_ctrl.steps=3"])


def test_resolved_yaml_round_trips(tmp_path):
    cfg = load_config(None, ["schedule.rounds=[3,6]", "env.servers={textcraft: 'http://h:1'}"])
    path = tmp_path / "resolved.yaml"
    path.write_text(to_yaml(cfg))
    assert load_config(path) == cfg
    assert isinstance(cfg, Config)


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_configs_load(path):
    cfg = load_config(path)
    assert cfg.trainer.total_steps >= 1
