"""Losses and KL estimators: hand-computed examples and invariants."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from horizonrl.algos.kl import kl_estimate
from horizonrl.algos.losses import (
    PolicyLossParams,
    aggregate,
    entropy_from_logits,
    kl_loss,
    kl_reward_penalty,
    logprobs_from_logits,
    ppo_policy_loss,
    value_loss,
)


def test_aggregation_modes_hand_computed():
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0], [9.0, 9.0, 9.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])
    assert float(aggregate(loss, mask, "token-mean")) == pytest.approx(10 / 4)
    assert float(aggregate(loss, mask, "seq-mean-token-sum")) == pytest.approx((6 + 4) / 2)
    assert float(aggregate(loss, mask, "seq-mean-token-mean")) == pytest.approx((2 + 4) / 2)
    with pytest.raises(KeyError, match="valid: token-mean"):
        aggregate(loss, mask, "sum")


def test_ppo_loss_hand_computed_clip_and_dual_clip():
    old = torch.zeros(1, 4)
    new = torch.log(torch.tensor([[1.5, 0.5, 1.1, 4.0]]))
    adv = torch.tensor([[1.0, -1.0, 2.0, -1.0]])
    mask = torch.ones(1, 4)
    loss, stats = ppo_policy_loss(new, old, adv, mask, PolicyLossParams(clip_low=0.2, clip_high=0.2))
    # token losses: max(-1.5, -1.2) = -1.2; max(0.5, 0.8) = 0.8; max(-2.2, -2.2) = -2.2; max(4, 1.2) = 4
    assert float(loss) == pytest.approx((-1.2 + 0.8 - 2.2 + 4.0) / 4, rel=1e-5)
    assert float(stats["clip_frac"]) == pytest.approx(0.5)
    dual, _ = ppo_policy_loss(new, old, adv, mask, PolicyLossParams(dual_clip=3.0))
    assert float(dual) == pytest.approx((-1.2 + 0.8 - 2.2 + 3.0) / 4, rel=1e-5)
    with pytest.raises(ValueError):
        ppo_policy_loss(new, old, adv, mask, PolicyLossParams(dual_clip=0.5))


def test_ppo_loss_ignores_masked_tokens_and_its_gradient_follows_advantage():
    new = torch.zeros(2, 3, requires_grad=True)
    adv = torch.tensor([[1.0, -1.0, 1000.0], [2.0, 0.0, -1000.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 0]])
    loss, _ = ppo_policy_loss(new, torch.zeros(2, 3), adv, mask, PolicyLossParams())
    loss.backward()
    assert float(loss.detach()) == pytest.approx(-(1 - 1 + 2 + 0) / 4)
    assert new.grad is not None
    torch.testing.assert_close(new.grad, -adv * mask / 4)


def test_value_loss_clipped_hand_computed():
    values = torch.tensor([[1.0, 0.0]])
    old = torch.tensor([[0.0, 0.0]])
    returns = torch.tensor([[2.0, 0.5]])
    loss, stats = value_loss(values, old, returns, torch.ones(1, 2), clip_range=0.2)
    # token 1: max((1-2)^2, (0.2-2)^2) = 3.24; token 2: max(0.25, 0.25) = 0.25
    assert float(loss) == pytest.approx(0.5 * (3.24 + 0.25) / 2)
    assert float(stats["clip_frac"]) == pytest.approx(0.5)
    plain, _ = value_loss(values, old, returns, torch.ones(1, 2), clip_range=None)
    assert float(plain) == pytest.approx(0.5 * (1 + 0.25) / 2)


def test_kl_estimators_hand_computed():
    lp = torch.tensor([[math.log(0.5)]])
    ref = torch.tensor([[math.log(0.25)]])
    d = math.log(2)
    assert float(kl_estimate(lp, ref, "k1")) == pytest.approx(d)
    assert float(kl_estimate(lp, ref, "k2")) == pytest.approx(0.5 * d * d)
    assert float(kl_estimate(lp, ref, "k3")) == pytest.approx(0.5 - math.log(0.5) - 1)
    assert float(kl_estimate(lp, ref, "low_var_kl")) == float(kl_estimate(lp, ref, "k3"))
    with pytest.raises(KeyError, match="valid: k1, k2, k3"):
        kl_estimate(lp, ref, "k4")


def test_kl_is_zero_for_identical_policies_and_k3_estimates_true_kl():
    x = torch.randn(3, 5)
    for kind in ("k1", "k2", "k3"):
        assert float(kl_estimate(x, x, kind).abs().max()) == 0.0
    # Sample from p, estimate KL(p || q) with k3 and k1: both unbiased.
    p = torch.tensor([0.7, 0.2, 0.1])
    q = torch.tensor([0.4, 0.4, 0.2])
    true_kl = float((p * (p / q).log()).sum())
    samples = torch.multinomial(p, 200_000, replacement=True, generator=torch.Generator().manual_seed(0))
    lp, ref = p.log()[samples][None], q.log()[samples][None]
    assert float(kl_estimate(lp, ref, "k3").mean()) == pytest.approx(true_kl, abs=3e-3)
    assert float(kl_estimate(lp, ref, "k1").mean()) == pytest.approx(true_kl, abs=3e-3)


def test_kl_loss_and_reward_penalty_use_only_sampled_tokens():
    lp = torch.tensor([[0.0, -1.0, -2.0]])
    ref = torch.tensor([[-1.0, -1.0, 0.0]])
    mask = torch.tensor([[1, 1, 0]])
    assert float(kl_loss(lp, ref, mask, kind="k1")) == pytest.approx(0.5)
    rewards, kl = kl_reward_penalty(torch.zeros(1, 3), lp, ref, mask, coef=0.1, kind="k1")
    torch.testing.assert_close(rewards, torch.tensor([[-0.1, 0.0, 0.0]]))
    torch.testing.assert_close(kl, torch.tensor([[1.0, 0.0, 0.0]]))


def test_logprobs_and_entropy_from_logits():
    logits = torch.tensor([[[0.0, 0.0], [math.log(3.0), 0.0]]])
    labels = torch.tensor([[1, 0]])
    torch.testing.assert_close(
        logprobs_from_logits(logits, labels), torch.tensor([[math.log(0.5), math.log(0.75)]])
    )
    ent = entropy_from_logits(logits)
    assert float(ent[0, 0]) == pytest.approx(math.log(2))
    assert float(ent[0, 1]) == pytest.approx(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_blockwise_logprobs_equal_the_plain_formula_bit_for_bit(dtype, temperature):
    """Values and gradients of `logprobs_from_logits` (blocks of positions) are exactly those of
    autograd on the whole tensor, also for a strided view of the logits (the learner's `[:, :-1]`)."""
    torch.manual_seed(0)
    full = (torch.randn(2, 12, 50) * 4).to(dtype)
    labels = torch.randint(0, 50, (2, 11))
    weights = torch.randn(2, 11)

    def run(fn):
        leaf = full.clone().requires_grad_(True)
        lp = fn(leaf[:, :-1], labels)
        (lp * weights).sum().backward()
        return lp.detach(), leaf.grad

    plain = lambda x, y: F.log_softmax(x.float() / temperature, dim=-1).gather(-1, y[..., None])[..., 0]  # noqa: E731
    got, got_grad = run(lambda x, y: logprobs_from_logits(x, y, temperature, block=3))  # 3, 3, 3, 2
    want, want_grad = run(plain)
    assert got.dtype == torch.float32 and got_grad.dtype == dtype
    assert torch.equal(got, want) and torch.equal(got_grad, want_grad)
    with torch.no_grad():  # the scoring pass: no graph, the same values
        assert torch.equal(logprobs_from_logits(full[:, :-1], labels, temperature, block=3), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_blockwise_entropy_with_the_logprobs_equals_the_plain_formulas_bit_for_bit(dtype, temperature):
    """The learner's update takes the labels' logprobs and the entropy from the same logits, the
    loss weighing both: values and the summed gradient in blocks are exactly autograd's on the
    whole tensor, for a (2, T, V) and a (T, V) view."""
    torch.manual_seed(1)
    full = (torch.randn(2, 12, 50) * 4).to(dtype)
    labels = torch.randint(0, 50, (2, 11))
    w_lp, w_ent = torch.randn(2, 11), torch.randn(2, 11)

    def plain_lp(x, y):
        return F.log_softmax(x.float() / temperature, dim=-1).gather(-1, y[..., None])[..., 0]

    def plain_ent(x):
        logp = F.log_softmax(x.float() / temperature, dim=-1)
        return -(logp.exp() * logp).sum(dim=-1)

    def run(lp_fn, ent_fn, row=None):
        leaf = full.clone().requires_grad_(True)
        x, y, a, b = leaf[:, :-1], labels, w_lp, w_ent
        if row is not None:
            x, y, a, b = x[row], y[row], a[row], b[row]
        lp, ent = lp_fn(x, y), ent_fn(x)
        ((lp * a).sum() - 0.001 * (ent * b).sum()).backward()
        return lp.detach(), ent.detach(), leaf.grad

    for row in (None, 1):
        want = run(plain_lp, plain_ent, row)
        got = run(
            lambda x, y: logprobs_from_logits(x, y, temperature, block=4),  # 4, 4, 3
            lambda x: entropy_from_logits(x, temperature, block=4),
            row,
        )
        assert got[1].dtype == torch.float32 and got[2].dtype == dtype
        for g, w in zip(got, want, strict=True):
            assert torch.equal(g, w)
    with torch.no_grad():
        assert torch.equal(entropy_from_logits(full[:, :-1], temperature, block=5), plain_ent(full[:, :-1]))


@pytest.mark.parametrize("block", [0, 4])
def test_in_blocks_the_graph_keeps_only_the_logits(block):
    """What autograd keeps for the backward: the whole tensor's way saves float32 (T, V) tensors
    (the log-softmax, its exp) for each of the logprobs and the entropy; in blocks only the bf16
    logits are saved (the same storage for both), whatever T is."""
    logits = torch.randn(2, 40, 64).to(torch.bfloat16).requires_grad_(True)
    labels = torch.randint(0, 64, (2, 40))
    saved: list[torch.Tensor] = []

    def keep(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        logprobs_from_logits(logits, labels, 0.9, block=block)
        entropy_from_logits(logits, 0.9, block=block)
    big = [t for t in saved if t.dtype == torch.float32 and t.numel() >= logits.numel()]
    if block:
        assert not big
        assert {t.untyped_storage().data_ptr() for t in saved if t.dim() == 3} == {
            logits.untyped_storage().data_ptr()
        }
    else:
        assert len(big) >= 2  # what the blocks save the learner from


def test_logprobs_and_entropy_at_a_temperature_hand_computed():
    """Two tokens, logits [2, 0] at T = 0.5: softmax([4, 0]) -> p = (1/(1+e^-4), e^-4/(1+e^-4))."""
    logits = torch.tensor([[[2.0, 0.0], [2.0, 0.0]]])  # (1, 2, V=2)
    labels = torch.tensor([[0, 1]])
    lp = logprobs_from_logits(logits, labels, temperature=0.5)
    z = math.log(1 + math.exp(-4))
    assert lp.tolist()[0] == pytest.approx([-z, -4 - z], abs=1e-6)
    p = 1 / (1 + math.exp(-4))
    ent = entropy_from_logits(logits, temperature=0.5)
    assert float(ent[0, 0]) == pytest.approx(-(p * math.log(p) + (1 - p) * math.log(1 - p)), rel=1e-5)
    raw = logprobs_from_logits(logits, labels)  # T = 1: softmax([2, 0])
    assert float(raw[0, 0]) == pytest.approx(-math.log(1 + math.exp(-2)), abs=1e-6)
