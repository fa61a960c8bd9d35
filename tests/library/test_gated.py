"""LSTM (7.16)-(7.17), GRU (7.18)-(7.19), reversing (7.14) and stacking (7.15):
equal to torch.nn for every layout, fast path equal to the textbook path, the chapter's
names of the blocks and its neuron counts, clear errors."""

import itertools

import pytest
import torch
from torch import nn

import seqlib
from seqlib.gated import GRU, LSTM, GRUCell, LSTMCell, chapter_parameters
from seqlib.rnn import RNN

LAYOUTS = [(1, False), (2, False), (1, True), (3, True)]
UNITS = [(nn.RNN, RNN), (nn.LSTM, LSTM), (nn.GRU, GRU)]


def pair(torch_class, ours_class, layers, bidirectional, dtype, p=5, m=7, seed=0):
    torch.manual_seed(seed)
    ref = torch_class(p, m, num_layers=layers, bidirectional=bidirectional,
                      batch_first=True).to(dtype)
    return ref, ours_class.from_torch(ref)


def as_tuple(state):
    return state if isinstance(state, tuple) else (state,)


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
@pytest.mark.parametrize("layers, bidirectional", LAYOUTS)
@pytest.mark.parametrize("units", UNITS, ids=lambda u: u[1].__name__)
def test_from_torch_outputs_and_all_gradients_agree(units, layers, bidirectional, dtype, tol):
    ref, ours = pair(*units, layers, bidirectional, dtype)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 6, 5, generator=gen, dtype=dtype)
    x_ref = x.clone().requires_grad_(True)
    x_ours = x.clone().requires_grad_(True)
    out_ref, state_ref = ref(x_ref)
    out, state = ours(x_ours)
    torch.testing.assert_close(out, out_ref, atol=tol, rtol=tol)
    for a, b in zip(as_tuple(state), as_tuple(state_ref), strict=True):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)
    weights = torch.randn(out.shape, generator=gen, dtype=dtype)
    loss = (out * weights).sum() + sum(s.square().sum() for s in as_tuple(state))
    loss_ref = (out_ref * weights).sum() + sum(s.square().sum() for s in as_tuple(state_ref))
    loss.backward()
    loss_ref.backward()
    torch.testing.assert_close(x_ours.grad, x_ref.grad, atol=tol, rtol=tol)
    m = ref.hidden_size
    for k, cell in enumerate(ours.cells):
        layer, direction = divmod(k, ours.directions)
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        grad = {n: getattr(ref, f"{n}{suffix}").grad for n in
                ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
        # The GRU's update gate is g_u = 1 - z: its rows are torch's negated.
        signs = cell.torch_signs()[:, None] if isinstance(ours, GRU) else 1
        torch.testing.assert_close(signs * cell.W_hx.grad, grad["weight_ih"], atol=tol, rtol=tol)
        torch.testing.assert_close(signs * cell.W_hh.grad, grad["weight_hh"], atol=tol, rtol=tol)
        if isinstance(ours, GRU):  # b_h[r, u] is b_ih + b_hh; b_h[h] is b_in; b_hn apart
            b_grad = signs[:, 0] * cell.b_h.grad
            torch.testing.assert_close(b_grad, grad["bias_ih"], atol=tol, rtol=tol)
            torch.testing.assert_close(b_grad[:2 * m], grad["bias_hh"][:2 * m],
                                       atol=tol, rtol=tol)
            torch.testing.assert_close(cell.b_hn.grad, grad["bias_hh"][2 * m:],
                                       atol=tol, rtol=tol)
        else:
            torch.testing.assert_close(cell.b_h.grad, grad["bias_ih"], atol=tol, rtol=tol)
            torch.testing.assert_close(cell.b_h.grad, grad["bias_hh"], atol=tol, rtol=tol)


@pytest.mark.parametrize("layers, bidirectional", LAYOUTS)
@pytest.mark.parametrize("make", [
    lambda **k: RNN(4, 6, **k), lambda **k: LSTM(4, 6, **k), lambda **k: GRU(4, 6, **k),
    lambda **k: GRU(4, 6, reset_after=True, **k)], ids=["RNN", "LSTM", "GRU", "GRU-after"])
def test_fast_path_equals_textbook_path(make, layers, bidirectional):
    torch.manual_seed(0)
    fast = make(num_layers=layers, bidirectional=bidirectional).double()
    textbook = make(num_layers=layers, bidirectional=bidirectional, fast=False).double()
    textbook.load_state_dict(fast.state_dict())
    x = torch.randn(2, 5, 4, dtype=torch.float64)
    out_fast, state_fast = fast(x)
    out_text, state_text = textbook(x)
    torch.testing.assert_close(out_fast, out_text, atol=1e-12, rtol=1e-12)
    for a, b in zip(as_tuple(state_fast), as_tuple(state_text), strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-12)
    out_fast.sum().backward()
    out_text.sum().backward()
    for (name, a), b in zip(fast.named_parameters(), textbook.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-12, rtol=1e-12, msg=name)


def test_initial_states_are_used_like_torch():
    ref, ours = pair(nn.LSTM, LSTM, 2, True, torch.float64)
    h0, c0 = torch.randn(2, 4, 3, 7, dtype=torch.float64).unbind(0)
    x = torch.randn(3, 5, 5, dtype=torch.float64)
    torch.testing.assert_close(ours(x, (h0, c0))[0], ref(x, (h0, c0))[0])
    ref, ours = pair(nn.GRU, GRU, 2, True, torch.float64)
    torch.testing.assert_close(ours(x, h0)[0], ref(x, h0)[0])


def test_uneven_sizes():
    for (torch_class, ours_class), (p, m) in itertools.product(UNITS, [(1, 9), (11, 2)]):
        torch.manual_seed(0)
        ref = torch_class(p, m, num_layers=2, bidirectional=True, batch_first=True).double()
        x = torch.randn(2, 3, p, dtype=torch.float64)
        torch.testing.assert_close(ours_class.from_torch(ref)(x)[0], ref(x)[0])


def test_parameter_inventory_of_the_chapter():
    p, m, q = 10, 16, 5
    lstm, gru = LSTM(p, m), GRU(p, m)
    # LSTM: four m x m, four m x p, five bias vectors once the output layer is added.
    assert seqlib.count_parameters(lstm) + q * m + q == 4 * m * m + 4 * m * p + q * m + 4 * m + q
    # GRU: three m x m, three m x p, four bias vectors with the output layer.
    assert seqlib.count_parameters(gru) + q * m + q == 3 * m * m + 3 * m * p + q * m + 3 * m + q
    # PyTorch's form carries one more bias vector, b_hn, inside the reset product.
    assert seqlib.count_parameters(GRU(p, m, reset_after=True)) == seqlib.count_parameters(gru) + m


def test_gru_update_gate_follows_the_chapter():
    """(7.18): h = (1 - g_u) h_prev + g_u h_tilde, so g_u = 1 updates fully and g_u = 0
    keeps the state; torch.nn.GRU's z = 1 - g_u is what from_torch maps."""
    torch.manual_seed(0)
    for fast in (False, True):
        gru = GRU(3, 4, fast=fast).double()
        x = torch.randn(2, 1, 3, dtype=torch.float64)
        h0 = torch.randn(1, 2, 4, dtype=torch.float64)
        with torch.no_grad():
            cell = gru.cell
            cell.W_hx[4:8] = 0
            cell.W_hh[4:8] = 0
            cell.b_h[4:8] = 50.0  # g_u = sigmoid(50) = 1 to double precision: update
            updated = gru(x, h0)[0][:, 0]
            g_r = torch.sigmoid(x[:, 0] @ cell.W_hx[:4].T + h0[0] @ cell.W_hh[:4].T + cell.b_h[:4])
            h_tilde = torch.tanh(x[:, 0] @ cell.W_hx[8:].T + (g_r * h0[0]) @ cell.W_hh[8:].T
                                 + cell.b_h[8:])
            torch.testing.assert_close(updated, h_tilde, atol=1e-12, rtol=0)
            cell.b_h[4:8] = -50.0  # g_u = 0: keep the previous state
            torch.testing.assert_close(gru(x, h0)[0][:, 0], h0[0], atol=1e-12, rtol=0)


def test_from_torch_gru_negates_only_the_update_gate():
    torch.manual_seed(0)
    ref = nn.GRU(3, 4, batch_first=True).double()
    cell = GRU.from_torch(ref).cell
    signs = torch.tensor([1.0] * 4 + [-1.0] * 4 + [1.0] * 4, dtype=torch.float64)
    torch.testing.assert_close(cell.W_hx, signs[:, None] * ref.weight_ih_l0)
    torch.testing.assert_close(cell.W_hh, signs[:, None] * ref.weight_hh_l0)
    summed = torch.cat([ref.bias_ih_l0[:8] + ref.bias_hh_l0[:8], ref.bias_ih_l0[8:]])
    torch.testing.assert_close(cell.b_h, signs * summed)
    torch.testing.assert_close(cell.b_hn, ref.bias_hh_l0[8:])


def test_gru_forms_differ():
    torch.manual_seed(0)
    chapter = GRU(3, 4).double()
    after = GRU(3, 4, reset_after=True).double()
    after.load_state_dict(chapter.state_dict(), strict=False)
    nn.init.zeros_(after.cell.b_hn)
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    assert not torch.allclose(chapter(x)[0], after(x)[0])


def test_only_h_goes_up_the_stack():
    torch.manual_seed(0)
    lstm = LSTM(3, 4, num_layers=2).double()
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    first = LSTM(3, 4).double()
    first.cell.load_state_dict(lstm.cell.state_dict())
    second = LSTM(4, 4).double()
    second.cell.load_state_dict(lstm.cell_l1.state_dict())
    torch.testing.assert_close(lstm(x)[0], second(first(x)[0])[0])


@pytest.mark.parametrize("cls", [LSTM, GRU, RNN])
def test_bad_input(cls):
    model = cls(4, 3, num_layers=2)
    with pytest.raises(ValueError, match="expected input_size=4"):
        model(torch.randn(2, 5, 6))
    with pytest.raises(ValueError, match="empty"):
        model(torch.randn(2, 0, 4))
    with pytest.raises(ValueError, match="3 dimensions"):
        model(torch.randn(5, 4))
    bad = torch.zeros(1, 2, 3)  # one layer's worth of state for two layers
    with pytest.raises(ValueError, match=r"h0 has shape \(1, 2, 3\), expected \(2, 2, 3\)"):
        model(torch.randn(2, 5, 4), (bad, bad) if cls is LSTM else bad)
    with pytest.raises(ValueError, match="num_layers"):
        cls(4, 3, num_layers=0)


def test_lstm_state_must_be_a_pair_and_torch_types_checked():
    with pytest.raises(TypeError, match=r"tuple \(h0, c0\)"):
        LSTM(4, 3)(torch.randn(2, 5, 4), torch.zeros(1, 2, 3))
    with pytest.raises(TypeError, match="torch.nn.LSTM"):
        LSTM.from_torch(nn.GRU(4, 3))
    with pytest.raises(ValueError, match="reset_after=True"):
        GRU(4, 3).cell.load_torch(*nn.GRU(4, 3).parameters())


@pytest.mark.parametrize("cls, gates", [(LSTM, 4), (GRU, 3)])
def test_output_layer_gives_the_chapters_inventory(cls, gates):
    p, m, q = 6, 5, 3
    model = cls(p, m, output_size=q).double()
    # G m x m, G m x p, one q x m, and G + 1 bias vectors (7.16)-(7.19).
    assert seqlib.count_parameters(model) == gates * (m * m + m * p + m) + q * m + q
    x = torch.randn(2, 4, p, dtype=torch.float64)
    logits, _ = model(x)
    states, _ = cls.recur(model, x)
    torch.testing.assert_close(logits, states @ model.W_yh.T + model.b_y)
    with pytest.raises(ValueError, match="no output layer"):
        cls(p, m).output(states)


@pytest.mark.parametrize("cell, groups", [
    (LSTMCell(3, 5), ["g_f", "g_i", "g_o", "c_tilde", "c", "h"]),  # m = 6 m~
    (GRUCell(3, 5), ["g_r", "g_u", "h_tilde", "h"]),  # m = 4 m~
    (GRUCell(3, 5, reset_after=True), ["g_r", "g_u", "h_tilde", "h"]),
])
def test_neurons_of_one_step(cell, groups):
    x = torch.randn(2, 3)
    state = (torch.randn(2, 5), torch.randn(2, 5)) if isinstance(cell, LSTMCell) \
        else torch.randn(2, 5)
    neurons = cell.neurons(x, state)
    assert list(neurons) == groups
    assert all(v.shape == (2, 5) for v in neurons.values())
    out = cell(x, state)
    if isinstance(cell, LSTMCell):
        assert torch.equal(out[0], neurons["h"]) and torch.equal(out[1], neurons["c"])
    else:
        assert torch.equal(out, neurons["h"])


def test_chapter_names_of_the_lstm_blocks_match_torch():
    """torch.nn.LSTMCell's blocks are (i, f, g, o): g is the chapter's c_tilde."""
    torch.manual_seed(0)
    ref = nn.LSTMCell(3, 4).double()
    cell = LSTMCell(3, 4).double()
    cell.load_torch(ref.weight_ih, ref.weight_hh, ref.bias_ih, ref.bias_hh)
    W = chapter_parameters(cell)
    assert list(W) == [f"{k}_{s}{e}" for s in ("i", "f", "c~", "o")
                       for k, e in (("W", "h"), ("W", "x"), ("b", ""))]
    x = torch.randn(2, 3, dtype=torch.float64)
    h, c = torch.randn(2, 2, 4, dtype=torch.float64)
    gate = {s: x @ W[f"W_{s}x"].T + h @ W[f"W_{s}h"].T + W[f"b_{s}"] for s in cell.blocks}
    g_f, g_i, g_o = (torch.sigmoid(gate[s]) for s in "fio")
    c_new = g_f * c + g_i * torch.tanh(gate["c~"])  # (7.16)
    h_ref, c_ref = ref(x, (h, c))
    torch.testing.assert_close(c_new, c_ref)
    torch.testing.assert_close(g_o * torch.tanh(c_new), h_ref)


def test_chapter_names_of_the_gru_blocks():
    cell = GRUCell(3, 4)
    W = chapter_parameters(cell)
    assert set(W) == {"W_rh", "W_rx", "b_r", "W_uh", "W_ux", "b_u", "W_h~h", "W_h~x", "b_h~"}
    assert W["W_uh"].shape == (4, 4) and W["W_h~x"].shape == (4, 3) and W["b_r"].shape == (4,)
    assert torch.equal(W["W_h~h"], cell.W_hh[8:])  # views of the stacked blocks
    with pytest.raises(TypeError, match="LSTMCell or a GRUCell"):
        chapter_parameters(RNN(3, 4).cell)
