"""Backpropagation through time written out, (7.4)-(7.13), agrees with autograd."""

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
@pytest.mark.parametrize("nonlinearity", ["tanh", "relu", "identity"])
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


def test_jacobian_is_the_transpose_of_autograds():
    """(7.11) in the layout of (7.6): entry (i, j) is dh_j^<t+1>/dh_i^<t>, with x^<t+1>."""
    model, x, _, h0 = problem()
    h_t = h0[0]
    h_next = model.cell(x[:, 0], h_t)  # x[:, 0] plays x^<t+1>
    ours = bptt.jacobian(model, h_next)
    for b in range(x.shape[0]):
        expected = torch.autograd.functional.jacobian(lambda h, b=b: model.cell(x[b, 0], h),
                                                      h_t[b])
        torch.testing.assert_close(ours[b], expected.T)


def test_lumped_recursion_is_exact_for_a_loss_at_the_last_step_only():
    model, x, y, h0 = problem()
    exact = bptt.bptt(model, x, y, h0, last_only=True)
    lumped = bptt.bptt(model, x, y, h0, last_only=True, lumped=True)
    assert torch.equal(exact.zeta, lumped.zeta)
    assert all(torch.equal(exact.grads[name], lumped.grads[name]) for name in exact.grads)
    full = bptt.bptt(model, x, y, h0)  # a loss at every step: the lumped form is off
    off = bptt.bptt(model, x, y, h0, lumped=True)
    error = (off.grads["cell.W_hh"] - full.grads["cell.W_hh"]).norm() / full.grads[
        "cell.W_hh"].norm()
    assert error > 0.1
    torch.testing.assert_close(off.grads["W_yh"], full.grads["W_yh"])  # not through zeta


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu", "identity"])
def test_double_sum_over_single_losses_is_the_gradient(nonlinearity):
    """(7.10) with the adjoints of the single losses C_t; exchanging the sums gives bptt."""
    model, x, y, h0 = problem(nonlinearity=nonlinearity)
    T = x.shape[1]
    zeta_terms, h = bptt.per_term_adjoints(model, x, y, h0)
    assert zeta_terms.shape == (3, T, T, 5)
    later = torch.ones(T, T, dtype=torch.bool).triu(1)  # tau > t: C_t does not see h^<tau>
    assert torch.all(zeta_terms[:, later] == 0)
    result = bptt.bptt(model, x, y, h0)
    torch.testing.assert_close(zeta_terms.sum(1) / T, result.zeta, rtol=0, atol=1e-14)
    double_sum = bptt.state_terms(model, h, zeta_terms).sum((0, 1)) / T  # over t, tau
    reference = bptt.autograd_reference(model, x, y, h0)["cell.W_hh"]
    torch.testing.assert_close(double_sum, reference, rtol=0, atol=1e-13)


def test_neuron_derivative_is_autograds_jacobian_of_one_neuron():
    """(7.9): dh_j^<tau>/dW_hh with h^<tau-1> held fixed."""
    model, x, _, h0 = problem(B=1)
    h_prev, x_t = h0[0, 0], x[0, 3]
    cell = model.cell
    jac = torch.autograd.functional.jacobian(
        lambda W: torch.tanh(W @ h_prev + cell.W_hx @ x_t + cell.b_h), cell.W_hh.detach())
    for j in range(model.hidden_size):
        torch.testing.assert_close(bptt.neuron_derivative(model, h_prev, x_t, j), jac[j])
    with pytest.raises(ValueError, match="j must be a neuron index"):
        bptt.neuron_derivative(model, h_prev, x_t, 5)


@pytest.mark.parametrize("kwargs", [{"lumped": True}, {"last_only": True}])
def test_linear_adjoints_are_powers_of_W_hh_transposed(kwargs):
    """(7.12) is exact for the identity activation with zero input and bias."""
    model, x, y, h0 = problem(nonlinearity="identity", T=9)
    with torch.no_grad():
        model.cell.b_h.zero_()
    zeta = bptt.bptt(model, torch.zeros_like(x), y, h0, **kwargs).zeta
    W = model.cell.W_hh.detach()
    for t in range(1, 10):
        expected = zeta[:, -1] @ torch.linalg.matrix_power(W.T, 9 - t).T
        torch.testing.assert_close(zeta[:, t - 1], expected, rtol=1e-12, atol=1e-15)


def test_near_effects():
    model, x, y, h0 = problem(T=8)
    full = bptt.bptt(model, x, y, h0)
    torch.testing.assert_close(bptt.near_effects(model, x, y, 1, h0), full.grads["cell.W_hh"])
    terms = bptt.state_terms(model, full.h, full.zeta)  # (T, m, m)
    torch.testing.assert_close(bptt.near_effects(model, x, y, 6, h0), terms[5:].sum(0))
    for T0 in (0, 9, 2.0):
        with pytest.raises(ValueError, match="T0 must be"):
            bptt.near_effects(model, x, y, T0, h0)


def test_rnn_with_spectral_radius():
    gen = torch.Generator().manual_seed(0)
    model = bptt.rnn_with_spectral_radius(0.7, 3, 6, 2, generator=gen)
    radius = torch.linalg.eigvals(model.cell.W_hh.detach()).abs().max()
    assert abs(radius.item() - 0.7) < 1e-12 and model.cell.W_hh.dtype == torch.float64
    assert torch.all(model.cell.b_h == 0) and torch.all(model.b_y == 0)
    with pytest.raises(ValueError, match="radius must be a positive number"):
        bptt.rnn_with_spectral_radius(0.0, 3, 6, 2)


def test_sigma_dot_needs_a_known_activation():
    model, *_ = problem()
    model.cell.nonlinearity = "softsign"
    with pytest.raises(ValueError, match="no derivative known"):
        bptt.sigma_dot(model, torch.zeros(2))


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
