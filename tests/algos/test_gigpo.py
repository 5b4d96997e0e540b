"""GiGPO: a hand-computed example, the invariants, and the registry fact `filter_groups` reads."""

from __future__ import annotations

import random

import pytest
import torch

from horizonrl.algos.advantages import ESTIMATORS, EstimatorParams, TurnSteps

N = -1  # no turn / no state


def _example():
    """Group 0: A = [prompt, a0, a0, obs, a1, pad] solves (outcome 1 on a1); B = [prompt, b0, obs,
    b1, obs, b2] fails. States: A starts turns in s0, s1; B in s0, s0 (its first action changed
    nothing), s1. Group 1: C = [prompt, c0] alone, also from "s0", solves."""
    mask = torch.tensor([[0, 1, 1, 0, 1, 0], [0, 1, 0, 1, 0, 1], [0, 1, 0, 0, 0, 0]])
    turn_index = torch.tensor([[N, 0, 0, N, 1, N], [N, 0, N, 1, N, 2], [N, 0, N, N, N, N]])
    s0, s1 = 0, 1
    state_ids = torch.tensor([[N, s0, s0, N, s1, N], [N, s0, N, s0, N, s1], [N, s0, N, N, N, N]])
    rewards = torch.zeros(3, 6)
    rewards[0, 4] = 1.0
    rewards[2, 1] = 1.0
    return rewards, mask, torch.tensor([0, 0, 1]), TurnSteps(turn_index, state_ids)


def test_hand_computed_mean_centred():
    """step_gamma 0.5, no std division, w = 1.

    Episode (GRPO): A 1 - 0.5 = 0.5, B -0.5, C 0 (a group of one).
    Step returns: A G0 = 0.5 * 1 = 0.5, G1 = 1; B all 0; C G0 = 1.
    Step group (0, s0) = {A0 0.5, B0 0, B1 0}: mean 1/6 -> A0 1/3, B0 = B1 = -1/6.
    Step group (0, s1) = {A1 1, B2 0}: mean 0.5 -> A1 0.5, B2 -0.5.
    C's turn is in group 1: a singleton step group (not joined with group 0's s0) -> 0."""
    rewards, mask, groups, turns = _example()
    p = EstimatorParams(grpo_norm_by_std=False, step_gamma=0.5, step_adv_weight=1.0, turns=turns)
    adv, ret = ESTIMATORS["gigpo"](rewards, mask, None, groups, p)
    a0, a1 = 0.5 + 1 / 3, 0.5 + 0.5
    b0 = b1 = -0.5 - 1 / 6
    b2 = -0.5 - 0.5
    expected = torch.tensor([[0, a0, a0, 0, a1, 0], [0, b0, 0, b1, 0, b2], [0, 0, 0, 0, 0, 0]])
    torch.testing.assert_close(adv, expected)
    torch.testing.assert_close(ret, adv)


def test_hand_computed_with_std_and_weight():
    """As above with std division and w = 0.5 (eps 0): episode std of (1, 0) is sqrt(0.5), so
    A^E = +-0.5 / sqrt(0.5) = +-sqrt(0.5). Step group s0 {0.5, 0, 0}: std sqrt(1/12) -> A0
    (1/3) / sqrt(1/12) = 2/sqrt(3), B0 = B1 = -1/sqrt(3). s1 {1, 0}: +-sqrt(0.5)."""
    rewards, mask, groups, turns = _example()
    p = EstimatorParams(norm_eps=0.0, step_gamma=0.5, step_adv_weight=0.5, turns=turns)
    adv, _ = ESTIMATORS["gigpo"](rewards, mask, None, groups, p)
    e, r3 = 0.5**0.5, 3**0.5
    assert adv[0, 1].item() == pytest.approx(e + 0.5 * 2 / r3)
    assert adv[0, 4].item() == pytest.approx(e + 0.5 * e)
    assert adv[1, 1].item() == pytest.approx(-e - 0.5 / r3)
    assert adv[1, 3].item() == pytest.approx(-e - 0.5 / r3)
    assert adv[1, 5].item() == pytest.approx(-e - 0.5 * e)


def test_equal_episode_returns_still_give_turn_level_signal():
    """Both samples solve (equal returns: GRPO gives all 0), but A took one turn more from s0:
    its first turn, two turns from the reward, gets less credit than B's direct one."""
    mask = torch.tensor([[0, 1, 0, 1, 0, 1], [0, 1, 0, 1, 0, 0]])
    turn_index = torch.tensor([[N, 0, N, 1, N, 2], [N, 0, N, 1, N, N]])
    state_ids = torch.tensor([[N, 0, N, 0, N, 1], [N, 0, N, 1, N, N]])
    rewards = torch.zeros(2, 6)
    rewards[0, 5] = rewards[1, 3] = 1.0
    groups = torch.tensor([0, 0])
    p = EstimatorParams(turns=TurnSteps(turn_index, state_ids))
    assert float(ESTIMATORS["grpo"](rewards, mask, None, groups, p)[0].abs().sum()) == 0.0
    adv, _ = ESTIMATORS["gigpo"](rewards, mask, None, groups, p)
    assert adv[0, 1] < adv[1, 1]  # the detour from s0 is worse than going on directly
    assert adv[0, 3] > adv[0, 1]  # ... and A's second visit of s0, closer to the reward, better
    assert adv[0, 5] == adv[1, 3] == 0  # s1 then the goal: equal returns, no step signal


def _gigpo_loop(rewards, mask, turn_index, state_ids, groups, p):
    """Plain loops: turn rewards, discounted returns, step groups by (group, state), then sum."""
    B, T = rewards.shape
    episode = ESTIMATORS["grpo"](rewards, mask, None, groups, p)[0]
    G: dict[tuple[int, int], float] = {}
    state: dict[tuple[int, int], int] = {}
    for i in range(B):
        R: dict[int, float] = {}
        for t in range(T):
            if mask[i, t] and turn_index[i, t] >= 0:
                k = int(turn_index[i, t])
                R[k] = R.get(k, 0.0) + float(rewards[i, t])
                state[i, k] = int(state_ids[i, t])
        g = 0.0
        for k in range(max(R, default=-1), -1, -1):
            g = R.get(k, 0.0) + p.step_gamma * g
            G[i, k] = g
    members: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for (i, k), s in state.items():
        if s >= 0:
            members.setdefault((int(groups[i]), s), []).append((i, k))
    step = {}
    for turns in members.values():
        values = torch.tensor([G[m] for m in turns], dtype=torch.float64)
        for m, v in zip(turns, values, strict=True):
            a = v - values.mean() if len(turns) > 1 else torch.tensor(0.0)
            if len(turns) > 1 and p.grpo_norm_by_std:
                a = a / (values.std() + p.norm_eps)
            step[m] = float(a)
    out = episode.clone()
    for i in range(B):
        for t in range(T):
            if mask[i, t] and turn_index[i, t] >= 0:
                out[i, t] += p.step_adv_weight * step.get((i, int(turn_index[i, t])), 0.0)
    return out


def _random_batch(seed):
    rng = random.Random(seed)
    B, T = 6, 24
    mask = torch.zeros(B, T, dtype=torch.long)
    turn_index = torch.full((B, T), N)
    state_ids = torch.full((B, T), N)
    rewards = torch.zeros(B, T)
    for i in range(B):
        t, k = 1, 0
        while t < T - 2:
            n = rng.randint(1, 3)
            s = rng.choice([N, 0, 1, 2])
            for _ in range(min(n, T - t)):
                mask[i, t], turn_index[i, t], state_ids[i, t] = 1, k, s
                t += 1
            rewards[i, t - 1] = rng.choice([0.0, 0.0, -0.1, 0.3])
            t += rng.randint(1, 3)  # observation tokens
            k += 1
        rewards[i, int(mask[i].nonzero().max())] += float(rng.random() < 0.5)
    return rewards, mask, torch.tensor([0, 0, 0, 1, 1, 1]), TurnSteps(turn_index, state_ids)


@pytest.mark.parametrize("norm", [True, False])
def test_vectorised_equals_loop(norm):
    for seed in range(5):
        rewards, mask, groups, turns = _random_batch(seed)
        p = EstimatorParams(grpo_norm_by_std=norm, step_adv_weight=0.7, step_gamma=0.9, turns=turns)
        adv, _ = ESTIMATORS["gigpo"](rewards, mask, None, groups, p)
        expected = _gigpo_loop(rewards, mask, turns.turn_index, turns.state_ids, groups, p)
        torch.testing.assert_close(adv, expected, rtol=1e-5, atol=1e-5)


def test_invariants_weight_zero_unknown_states_and_masked_positions():
    rewards, mask, groups, turns = _random_batch(7)
    grpo = ESTIMATORS["grpo"](rewards, mask, None, groups, EstimatorParams())[0]
    gigpo = ESTIMATORS["gigpo"]
    # w = 0, or no state known anywhere: exactly GRPO
    assert torch.equal(
        gigpo(rewards, mask, None, groups, EstimatorParams(step_adv_weight=0, turns=turns))[0], grpo
    )
    unknown = TurnSteps(turns.turn_index, torch.full_like(turns.state_ids, N))
    assert torch.equal(gigpo(rewards, mask, None, groups, EstimatorParams(turns=unknown))[0], grpo)
    # what sits at non-sampled positions never matters, and advantages are 0 there
    p = EstimatorParams(turns=turns)
    adv = gigpo(rewards, mask, None, groups, p)[0]
    off = mask == 0
    noisy = TurnSteps(torch.where(off, 3, turns.turn_index), torch.where(off, 5, turns.state_ids))
    torch.testing.assert_close(gigpo(rewards, mask, None, groups, EstimatorParams(turns=noisy))[0], adv)
    assert float(adv[off].abs().sum()) == 0.0
    # each step group's step advantages sum to zero; with groups' episode advantages also summing
    # to zero, so does the per-turn total of every GRPO group
    step = adv - grpo
    for g in (0, 1):
        rows = (groups == g).nonzero().flatten().tolist()
        per_turn = [
            float(step[i][(turns.turn_index[i] == k) & mask[i].bool()][0])
            for i in rows
            for k in range(int(turns.turn_index[i].max()) + 1)
            if int(turns.state_ids[i][turns.turn_index[i] == k][0]) >= 0
        ]
        assert abs(sum(per_turn)) < 1e-4


def test_needs_the_turn_structure_and_is_a_step_level_group_estimator():
    rewards, mask, groups, turns = _example()
    with pytest.raises(ValueError, match="gigpo needs the batch's turn structure"):
        ESTIMATORS["gigpo"](rewards, mask, None, groups, EstimatorParams())
    short = TurnSteps(turns.turn_index[:, :3], turns.state_ids[:, :3])
    with pytest.raises(ValueError, match="shaped like loss_mask"):
        ESTIMATORS["gigpo"](rewards, mask, None, groups, EstimatorParams(turns=short))
    assert [n for n, e in ESTIMATORS.items() if e.step_level] == ["gigpo"]
    assert ESTIMATORS["gigpo"].group_relative
