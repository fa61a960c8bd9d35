"""The fast path (seqlib.fastpath: backpropagation through time written by hand) against
the textbook path and torch.nn: outputs, last states and the gradients of the inputs, the
initial states and every parameter, for every unit and layout, on every device."""

import pytest
import torch
from torch import nn

from seqlib.gated import GRU, LSTM
from seqlib.rnn import RNN, Recurrent

LAYOUTS = [(1, False), (2, False), (1, True), (3, True)]
UNITS = {
    "RNN-tanh": lambda **k: RNN(4, 6, **k),
    "RNN-relu": lambda **k: RNN(4, 6, nonlinearity="relu", **k),
    "LSTM": lambda **k: LSTM(4, 6, **k),
    "GRU": lambda **k: GRU(4, 6, **k),
    "GRU-reset-after": lambda **k: GRU(4, 6, reset_after=True, **k),
}
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5}


def twins(make, layers, bidirectional, dtype, device):
    """The same model twice, fast path and textbook path."""
    torch.manual_seed(0)
    fast = make(num_layers=layers, bidirectional=bidirectional).to(device, dtype)
    textbook = make(num_layers=layers, bidirectional=bidirectional, fast=False)
    textbook.load_state_dict(fast.state_dict())
    return fast, textbook.to(device, dtype)


def run(model: Recurrent, x, state, weights):
    """Outputs, last states and every gradient of a loss that uses them all."""
    x = x.clone().requires_grad_(True)
    state = tuple(s.clone().requires_grad_(True) for s in state)
    out, last = model.recur(x, state)
    loss = (out * weights).sum() + sum((s * s).sum() for s in last)
    params = list(model.parameters())
    grads = torch.autograd.grad(loss, [x, *state, *params])
    return out, last, grads


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("layers, bidirectional", LAYOUTS)
@pytest.mark.parametrize("unit", UNITS)
def test_fast_equals_textbook_with_initial_states(unit, layers, bidirectional, dtype, device):
    fast, textbook = twins(UNITS[unit], layers, bidirectional, dtype, device)
    gen = torch.Generator().manual_seed(1)
    B, T, D = 3, 7, fast.directions

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype).to(device)

    x = rand(B, T, 4)
    state = tuple(rand(layers * D, B, 6) for _ in range(fast.state_count))
    weights = rand(B, T, D * 6)
    tol = TOLERANCE[dtype]
    results = [run(model, x, state, weights) for model in (fast, textbook)]
    (out, last, grads), (out_ref, last_ref, grads_ref) = results
    torch.testing.assert_close(out, out_ref, atol=tol, rtol=tol)
    for a, b in zip(last, last_ref, strict=True):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)
    names = ["x", *(f"state {i}" for i in range(len(state))), *dict(fast.named_parameters())]
    assert len(grads) == len(names) == len(grads_ref)
    for name, a, b in zip(names, grads, grads_ref, strict=True):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol, msg=name)


@pytest.mark.parametrize("units", [(nn.RNN, RNN), (nn.LSTM, LSTM), (nn.GRU, GRU)],
                         ids=["RNN", "LSTM", "GRU"])
def test_fast_equals_torch_nn_in_float64(units):
    """Through from_torch, with initial states and a loss on every output."""
    torch_class, ours_class = units
    torch.manual_seed(0)
    ref = torch_class(4, 6, num_layers=2, bidirectional=True, batch_first=True).double()
    ours = ours_class.from_torch(ref)
    assert ours.fast
    x = torch.randn(3, 5, 4, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(4, 3, 6, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(4, 3, 6, dtype=torch.float64, requires_grad=True)
    state = (h0, c0) if torch_class is nn.LSTM else h0
    out, last = ours(x, state)
    out_ref, last_ref = ref(x, state)
    last, last_ref = (last, last_ref) if torch_class is nn.LSTM else ((last,), (last_ref,))
    torch.testing.assert_close(out, out_ref, atol=1e-12, rtol=1e-12)
    w = torch.randn(out.shape, dtype=torch.float64)
    inputs = [x, h0, c0] if torch_class is nn.LSTM else [x, h0]
    grads = torch.autograd.grad((out * w).sum() + sum(s.sum() for s in last), inputs)
    grads_ref = torch.autograd.grad((out_ref * w).sum() + sum(s.sum() for s in last_ref), inputs)
    for a, b in zip(grads, grads_ref, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("unit", UNITS)
def test_one_step_sequences_and_frozen_weights(unit):
    """T = 1, and weights that need no gradient: only the input's gradient is computed."""
    fast, textbook = twins(UNITS[unit], 2, True, torch.float64, "cpu")
    for model in (fast, textbook):
        model.requires_grad_(False)
    x = torch.randn(2, 1, 4, dtype=torch.float64)
    grads = []
    for model in (fast, textbook):
        x_ = x.clone().requires_grad_(True)
        out, _ = model(x_)
        torch.testing.assert_close(out, textbook(x)[0], atol=1e-12, rtol=1e-12)
        grads.append(torch.autograd.grad(out.square().sum(), x_)[0])
    torch.testing.assert_close(*grads, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("unit", UNITS)
def test_without_grad_the_forward_pass_is_the_same(unit):
    fast, textbook = twins(UNITS[unit], 2, True, torch.float64, "cpu")
    x = torch.randn(2, 5, 4, dtype=torch.float64)
    with torch.no_grad():
        out, _ = fast(x)
    assert out.grad_fn is None and not out.requires_grad
    torch.testing.assert_close(out, textbook(x)[0], atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("unit", UNITS)
def test_the_graph_does_not_grow_with_the_sequence(unit):
    """The fast path is one autograd node per unit and direction, whatever T is; the
    textbook path records every operation of every step."""

    def nodes(model, T):
        out = model(torch.randn(2, T, 4, dtype=torch.float64))[0]
        seen, stack = set(), [out.grad_fn]
        while stack:
            node = stack.pop()
            if node is not None and node not in seen:
                seen.add(node)
                stack.extend(next_fn for next_fn, _ in node.next_functions)
        return len(seen)

    fast, textbook = twins(UNITS[unit], 1, False, torch.float64, "cpu")
    assert nodes(fast, 3) == nodes(fast, 30) < 15
    assert nodes(textbook, 30) - nodes(textbook, 3) >= 3 * 27  # a few nodes a step


@pytest.mark.parametrize("unit", ["LSTM", "GRU", "GRU-reset-after"])
def test_double_backward_is_refused_clearly(unit):
    fast, _ = twins(UNITS[unit], 1, False, torch.float64, "cpu")
    x = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(fast(x)[0].square().sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()


def test_an_activation_without_a_written_backward_falls_back_to_autograd():
    """An activation the hand-written pass does not know runs `fused_step` under autograd."""
    torch.manual_seed(0)
    fast, textbook = RNN(4, 6).double(), RNN(4, 6, fast=False).double()
    textbook.load_state_dict(fast.state_dict())
    for model in (fast, textbook):
        model.cell.nonlinearity, model.cell.S_h = "softsign", nn.functional.softsign
    x = torch.randn(2, 5, 4, dtype=torch.float64)
    out, out_ref = fast(x)[0], textbook(x)[0]
    torch.testing.assert_close(out, out_ref, atol=1e-12, rtol=1e-12)
    assert "Scan" not in type(out.grad_fn).__name__
    g = torch.autograd.grad(out.sum(), fast.cell.W_hh)[0]
    torch.testing.assert_close(g, torch.autograd.grad(out_ref.sum(), textbook.cell.W_hh)[0])


@pytest.mark.parametrize("unit", ["LSTM", "GRU"])
def test_a_masked_recur_keeps_stepping_with_fused_step(unit):
    """With a mask, Recurrent.recur runs `fused_step` step by step; on a batch without
    padding it equals the hand-written fast path."""
    fast, _ = twins(UNITS[unit], 2, True, torch.float64, "cpu")
    x = torch.randn(3, 5, 4, dtype=torch.float64)
    out, last = fast.recur(x, mask=torch.ones(3, 5, dtype=torch.bool))
    out_ref, last_ref = fast.recur(x)
    torch.testing.assert_close(out, out_ref, atol=1e-12, rtol=1e-12)
    for a, b in zip(last, last_ref, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("unit", UNITS)
def test_the_backward_pass_leaves_the_incoming_gradients_alone(unit):
    """The buffers of the backward loop are its own: the output gradients it receives
    (which autograd may share with other nodes) are the same after it."""
    fast, textbook = twins(UNITS[unit], 1, False, torch.float64, "cpu")
    x = torch.randn(2, 4, 4, dtype=torch.float64)
    out, last = fast.recur(x)
    incoming = [torch.randn(o.shape, dtype=torch.float64) for o in (out, *last)]
    saved = [g.clone() for g in incoming]
    grads = []
    for model in (fast, textbook):
        out, last = model.recur(x)
        outputs = (out, *last)
        grads.append(torch.autograd.grad(outputs, list(model.parameters()), incoming))
        for g, g0 in zip(incoming, saved, strict=True):
            assert torch.equal(g, g0)
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-12)
