"""Advantage estimators: hand-computed examples and invariants."""

from __future__ import annotations

import math

import pytest
import torch

from horizonrl.algos.advantages import (
    ESTIMATORS,
    EstimatorParams,
    TurnSteps,
    bootstrap_truncated,
    get_estimator,
    place_rewards,
)

P = EstimatorParams(gamma=1.0, lam=1.0, whiten_advantages=False)


def _gae_loop(rewards, mask, values, gamma, lam):
    """Plain per-row loop: compact the sampled tokens, run textbook GAE, scatter back."""
    out = torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        idx = [t for t in range(rewards.shape[1]) if mask[b, t]]
        adv_next, v_next = 0.0, 0.0
        for t in reversed(idx):
            delta = float(rewards[b, t]) + gamma * v_next - float(values[b, t])
            adv_next = delta + gamma * lam * adv_next
            v_next = float(values[b, t])
            out[b, t] = adv_next
    return out


def test_gae_hand_computed_skips_observation_tokens():
    # prompt, a1, a2, obs, obs, a3 (reward 1 on a3)
    mask = torch.tensor([[0, 1, 1, 0, 0, 1]])
    rewards = torch.tensor([[0, 0, 0, 0, 0, 1.0]])
    values = torch.tensor([[9, 0.5, 0.25, 9, 9, 0.75]])
    p = EstimatorParams(gamma=0.5, lam=0.5, whiten_advantages=False)
    adv, ret = ESTIMATORS["gae"](rewards, mask, values, torch.tensor([0]), p)
    # a3: delta = 1 - 0.75 = 0.25 -> A = 0.25
    # a2: delta = 0 + 0.5*0.75 - 0.25 = 0.125 -> A = 0.125 + 0.25*0.25 = 0.1875
    # a1: delta = 0 + 0.5*0.25 - 0.5 = -0.375 -> A = -0.375 + 0.25*0.1875 = -0.328125
    expected = torch.tensor([[0, -0.328125, 0.1875, 0, 0, 0.25]])
    torch.testing.assert_close(adv, expected)
    torch.testing.assert_close(ret, expected + values * mask)


def test_gae_vectorised_equals_loop():
    g = torch.Generator().manual_seed(0)
    mask = (torch.rand(5, 17, generator=g) > 0.4).long()
    rewards = torch.randn(5, 17, generator=g) * mask
    values = torch.randn(5, 17, generator=g)
    p = EstimatorParams(gamma=0.9, lam=0.8, whiten_advantages=False)
    adv, _ = ESTIMATORS["gae"](rewards, mask, values, torch.arange(5), p)
    torch.testing.assert_close(adv, _gae_loop(rewards, mask, values * mask, 0.9, 0.8))


def test_gae_ignores_values_on_non_sampled_tokens():
    g = torch.Generator().manual_seed(1)
    mask = (torch.rand(4, 12, generator=g) > 0.5).long()
    rewards = torch.randn(4, 12, generator=g) * mask
    values = torch.randn(4, 12, generator=g)
    changed = values + (1 - mask) * 100.0
    p = EstimatorParams(gamma=0.99, lam=0.95)
    a1, r1 = ESTIMATORS["gae"](rewards, mask, values, torch.arange(4), p)
    a2, r2 = ESTIMATORS["gae"](rewards, mask, changed, torch.arange(4), p)
    torch.testing.assert_close(a1, a2)
    torch.testing.assert_close(r1, r2)


def test_gae_without_values_is_an_error():
    with pytest.raises(ValueError, match="critic"):
        ESTIMATORS["gae"](torch.zeros(1, 3), torch.ones(1, 3), None, torch.tensor([0]), P)


def test_grpo_hand_computed_and_group_sums_to_zero():
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 1, 1], [1, 1, 1]])
    rewards = place_rewards(mask, torch.tensor([1.0, 0.0, 0.0, 5.0]))
    groups = torch.tensor([7, 7, 7, 3])
    adv, ret = ESTIMATORS["grpo"](rewards, mask, None, groups, P)
    mean, std = 1 / 3, math.sqrt(((2 / 3) ** 2 + 2 * (1 / 3) ** 2) / 2)
    eps = P.norm_eps
    expected_rows = torch.tensor([(1 - mean) / (std + eps), -mean / (std + eps), -mean / (std + eps), 0.0])
    torch.testing.assert_close(adv, expected_rows[:, None] * mask)
    torch.testing.assert_close(ret, adv)
    seq = adv.sum(-1) / mask.sum(-1)
    assert abs(float(seq[:3].sum())) < 1e-5


def test_rloo_hand_computed_group_of_one_gets_zero():
    mask = torch.ones(4, 2, dtype=torch.long)
    rewards = place_rewards(mask, torch.tensor([1.0, 0.0, 0.5, 1.0]))
    groups = torch.tensor([0, 0, 0, 1])
    adv, _ = ESTIMATORS["rloo"](rewards, mask, None, groups, P)
    expected = torch.tensor([1 - 0.25, 0 - 0.75, 0.5 - 0.5, 0.0])
    torch.testing.assert_close(adv[:, 0], expected)
    assert abs(float(adv[:3, 0].sum())) < 1e-6


def test_reinforce_pp_discounts_over_sampled_tokens_and_whitens():
    mask = torch.tensor([[1, 0, 1, 1], [1, 1, 0, 0]])
    rewards = torch.tensor([[0, 0, 0, 1.0], [0, 0, 0, 0]])
    p = EstimatorParams(gamma=0.5)
    adv, ret = ESTIMATORS["reinforce_pp"](rewards, mask, None, torch.tensor([0, 1]), p)
    torch.testing.assert_close(ret, torch.tensor([[0.25, 0, 0.5, 1.0], [0, 0, 0, 0]]))
    valid = ret[mask.bool()]
    expected = (valid - valid.mean()) / (valid.std(unbiased=False) + p.norm_eps)
    torch.testing.assert_close(adv[mask.bool()], expected)
    assert float(adv[mask == 0].abs().sum()) == 0.0


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_success_vs_failure_gives_nonzero_advantages(name):
    # prompt(2) action(3) obs(2) action(2) obs(1): outcome on the last sampled token, never on obs.
    row = [0, 0, 1, 1, 1, 0, 0, 1, 1, 0]
    mask = torch.tensor([row, row])
    rewards = place_rewards(mask, torch.tensor([1.0, 0.0]))
    assert rewards[0, 8] == 1.0 and rewards[0, 9] == 0.0
    values = torch.zeros(2, 10) if ESTIMATORS[name].needs_critic else None
    turns = TurnSteps(torch.where(mask.bool(), 0, -1), torch.where(mask.bool(), 0, -1))  # gigpo's input
    adv, _ = ESTIMATORS[name](rewards, mask, values, torch.tensor([0, 0]), EstimatorParams(turns=turns))
    sampled = mask.bool()
    assert bool((adv[0][sampled[0]] != 0).all()), adv
    assert float(adv[0][sampled[0]].min()) > float(adv[1][sampled[1]].max())
    assert float(adv[~sampled].abs().sum()) == 0.0


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_reward_on_observation_token_is_rejected(name):
    mask = torch.tensor([[0, 1, 1, 0]])
    rewards = torch.tensor([[0, 0, 0, 1.0]])  # the reference's placement
    values = torch.zeros(1, 4)
    with pytest.raises(ValueError, match="non-sampled"):
        ESTIMATORS[name](rewards, mask, values, torch.tensor([0]), P)


def test_registry_flags_and_unknown_name():
    assert [n for n, e in ESTIMATORS.items() if e.needs_critic] == ["gae"]
    with pytest.raises(KeyError, match="valid: gae, grpo, rloo, reinforce_pp, gigpo"):
        get_estimator("remax")


def test_place_rewards_turn_rewards_on_turn_ends():
    mask = torch.tensor([[0, 1, 1, 0, 1, 1]])
    r = place_rewards(mask, torch.tensor([0.5]), turn_ends=[[2, 5]], turn_rewards=[[0.25, 1.0]])
    torch.testing.assert_close(r, torch.tensor([[0, 0, 0.25, 0, 0, 1.5]]))
    with pytest.raises(ValueError, match="not a sampled token"):
        place_rewards(mask, torch.tensor([0.0]), turn_ends=[[3]], turn_rewards=[[1.0]])


def test_gae_bootstraps_a_truncated_episode_from_the_value_at_the_cut():
    """Tokens [prompt, a, b]; V = [., 0.5, 0.6]; no reward; cut after b with V(s_cut) = 0.8.

    gamma 0.9, lambda 1:  delta_b = 0 + 0.9 * 0.8 - 0.6 = 0.12;  delta_a = 0.9 * 0.6 - 0.5 = 0.04
    A_b = 0.12, A_a = 0.04 + 0.9 * 0.12 = 0.148;  returns R_b = 0.72, R_a = 0.648.
    Treated as terminal instead: A_b = -0.6, A_a = -0.5."""
    mask = torch.tensor([[0, 1, 1], [0, 1, 1]])
    values = torch.tensor([[0.0, 0.5, 0.6], [0.0, 0.5, 0.6]])
    rewards = torch.zeros(2, 3)
    p = EstimatorParams(gamma=0.9, lam=1.0, whiten_advantages=False)
    boot = bootstrap_truncated(
        rewards, mask, torch.tensor([True, False]), torch.tensor([0.8, 0.8]), gamma=p.gamma
    )
    adv, ret = ESTIMATORS["gae"](boot, mask, values, torch.tensor([0, 1]), p)
    assert adv[0].tolist() == pytest.approx([0.0, 0.148, 0.12], abs=1e-6)
    assert ret[0].tolist() == pytest.approx([0.0, 0.648, 0.72], abs=1e-6)
    assert adv[1].tolist() == pytest.approx([0.0, -0.5, -0.6], abs=1e-6)  # not truncated: terminal
