"""The `resources:` section (validation, `--dry-run` placement) and token-balanced row shares."""

from __future__ import annotations

import pytest

from horizonrl.cli import main
from horizonrl.config import ConfigError, load_config
from horizonrl.distributed.balance import partition_rows, rank_micro_batches, token_imbalance

FAMILY_CONFIGS = ["textcraft", "babyai", "sciworld", "search", "webarena"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["resources.env_replicas={textcraft: 2}"], "needs Ray"),
        (["resources.learner_world_size=3", "resources.nodes=2"], "multiple of resources.nodes"),
        (["resources.gpus_per_node=4", "resources.learner_world_size=8"], "one GPU per rank"),
        (["resources.strategy=zero3"], "choose one of: ddp, fsdp"),
        (["resources.ray=somewhere"], "null, auto, HOST:PORT"),
        (["resources.rollout_engines=3"], "generates on the learner's own ranks"),
        (["resources.learner_world_size=2", "model.lora.enabled=true"], "trains in one process"),
        (
            [
                "rollout.backend=vllm",
                "resources.gpus_per_node=8",
                "resources.learner_world_size=8",
                "resources.rollout_engines=4",
                "resources.rollout_tensor_parallel=2",
                "resources.rollout_colocated=false",
            ],
            "= 16 GPUs, but nodes x gpus_per_node = 8",
        ),
        (["resources.bogus=1"], "valid keys here: nodes, gpus_per_node"),
    ],
)
def test_bad_resources_are_refused_with_the_reason(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config("configs/quickstart.yaml", overrides)


@pytest.mark.parametrize("name", FAMILY_CONFIGS)
def test_paper_8_gpu_configs_pass_the_dry_run(name, capsys):
    assert main(["train", f"configs/{name}.yaml", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "8 GPU(s); learner world size 8 (fsdp)" in out
    assert sum("learner  rank" in line for line in out.splitlines()) == 8
    assert "cuda:7" in out and "Ray actor" in out and "--nproc_per_node 8" in out


def test_dry_run_takes_overrides_after_the_flag_and_starts_nothing(tmp_path, capsys):
    out_dir = tmp_path / "never"
    argv = ["train", "configs/quickstart.yaml", "--dry-run", "resources.learner_world_size=2"]
    assert main([*argv, f"trainer.output_dir={out_dir}"]) == 0
    out = capsys.readouterr().out
    assert "learner world size 2 (fsdp)" in out and "cpu, 1 thread(s)" in out
    assert not out_dir.exists()


def test_rows_are_balanced_by_tokens_not_by_count():
    lengths = [1000, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 900]
    parts = partition_rows(range(len(lengths)), lengths, 2)
    assert sorted(r for p in parts for r in p) == list(range(len(lengths)))
    loads = [sum(lengths[r] for r in p) for p in parts]
    assert max(loads) - min(loads) <= 100
    assert token_imbalance(range(len(lengths)), lengths, 2) == pytest.approx(max(loads) / (sum(lengths) / 2))
    # one long row against four short ones: 1 vs 4 rows, and the same number of micro-batches
    lengths = [2000, 500, 500, 500, 500]
    assert partition_rows(range(5), lengths, 2) == [[0], [1, 2, 3, 4]]
    shares = [rank_micro_batches(range(5), lengths, 2, 2, rank) for rank in (0, 1)]
    assert shares == [[[0], []], [[1, 2], [3, 4]]]  # `[]`: a dummy keeps rank 0 in lock-step
