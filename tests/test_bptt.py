"""Backpropagation through time written out (7.6)-(7.11) agrees with autograd."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from seqlib import bptt
from seqlib.rnn import RNN


def problem(B=3, T=7, p=4, m=5, q=3, nonlinearity="tanh", seed=0):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = RNN(p, m, q, nonlinearity=nonlinearity).double()
    x = torch.randn(B, T, p, generator=gen, dtype=torch.float64)
    y = torch.randint(0, q, (B, T), generator=gen)
    h0 = torch.randn(1, B, m, generator=gen, dtype=torch.float64)
    return model, x, y, h0


@pytest.mark.parametrize("kwargs", [{}, {"last_only": True}, {"truncate": 1}, {"truncate": 3},
                                    {"truncate": 2, "last_only": True}])
@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_every_gradient_agrees_with_autograd(kwargs, nonlinearity):
    model, x, y, h0 = problem(nonlinearity=nonlinearity)
    ours = bptt.bptt(model, x, y, h0, **kwargs)
    reference = bptt.autograd_reference(model, x, y, h0, **kwargs)
    assert set(ours.grads) == set(reference)
    for name, g in reference.items():
        assert (ours.grads[name] - g).abs().max() < 1e-10, name


@settings(max_examples=20, deadline=None)
@given(B=st.integers(1, 3), T=st.integers(1, 8), m=st.integers(1, 5), seed=st.integers(0, 99))
def test_agreement_for_any_sizes(B, T, m, seed):
    model, x, y, h0 = problem(B=B, T=T, m=m, seed=seed)
    ours = bptt.bptt(model, x, y, h0)
    for name, g in bptt.autograd_reference(model, x, y, h0).items():
        assert (ours.grads[name] - g).abs().max() < 1e-10, name


def test_loss_and_states_agree_with_the_module():
    model, x, y, h0 = problem()
    result = bptt.bptt(model, x, y, h0)
    logits, h_n = model(x, h0)
    torch.testing.assert_close(result.loss, bptt.sequence_loss(logits, y).detach())
    torch.testing.assert_close(result.h[:, -1], h_n[0].detach())


def test_adjoint_recursion_is_the_total_derivative():
    model, x, y, h0 = problem(T=5)
    result = bptt.bptt(model, x, y, h0)
    for t in range(1, 6):  # perturb h^<t> and rerun the rest of the sequence
        def loss_from(h_t, t=t):
            h, outputs = h_t, []
            for s in range(t, x.shape[1]):
                h = model.cell(x[:, s], h)
                outputs.append(h)
            before = result.h[:, 1:t]
            states = torch.cat([before, h_t.unsqueeze(1), *[o.unsqueeze(1) for o in outputs]], 1)
            return bptt.sequence_loss(model.output(states), y)

        h_t = result.h[:, t].clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(loss_from(h_t), h_t)
        assert (grad - result.zeta[:, t - 1]).abs().max() < 1e-10


def test_jacobian_matches_autograd():
    model, x, _, h0 = problem(B=1)
    h_prev = h0[0]
    h_t = model.cell(x[:, 0], h_prev)
    expected = torch.autograd.functional.jacobian(lambda h: model.cell(x[:, 0], h)[0], h_prev[0])
    torch.testing.assert_close(bptt.jacobian(model, h_t)[0], expected)


def test_gradcheck_of_the_loss():
    model, x, y, h0 = problem(B=2, T=3, p=2, m=3, q=2)
    assert torch.autograd.gradcheck(lambda h0: bptt.sequence_loss(model(x, h0)[0], y), (
        h0.clone().requires_grad_(True),))


def test_bad_input():
    model, x, y, h0 = problem()
    with pytest.raises(ValueError, match="targets has shape"):
        bptt.bptt(model, x, y[:, :-1], h0)
    with pytest.raises(ValueError, match="truncate"):
        bptt.bptt(model, x, y, h0, truncate=0)
    with pytest.raises(ValueError, match="output layer"):
        bptt.bptt(RNN(4, 5), x.float(), y)


def test_masked_loss_leaves_padded_steps_out():
    model, x, y, h0 = problem(B=2, T=5)
    logits = model(x, h0)[0]
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    expected = (bptt.sequence_loss(logits[:1], y[:1])
                + bptt.sequence_loss(logits[1:, :3], y[1:, :3])) / 2
    torch.testing.assert_close(bptt.sequence_loss(logits, y, mask=mask), expected)
    with pytest.raises(ValueError, match="mask has shape"):
        bptt.sequence_loss(logits, y, mask=mask[:, :4])
