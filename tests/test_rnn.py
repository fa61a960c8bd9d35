"""The basic RNN (7.2)-(7.3): parameter count, equality with torch.nn.RNN, bad input."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import seqlib
from seqlib.rnn import RNN, RNNCell


def test_toy_example_has_the_chapters_748_parameters():
    # W_hh 20x20 + W_hx 20x8 + b_h 20 + W_yh 8x20 + b_y 8
    assert seqlib.count_parameters(RNN(8, 20, 8)) == 400 + 160 + 20 + 160 + 8 == 748


def test_output_feedback_adds_W_hy():
    model = RNN(8, 20, 8, output_feedback=True)
    assert model.W_hy.shape == (20, 8)
    assert seqlib.count_parameters(model) == 748 + 160


def torch_pair(p, m, q, dtype, nonlinearity="tanh", seed=0):
    torch.manual_seed(seed)
    rnn = nn.RNN(p, m, batch_first=True, nonlinearity=nonlinearity).to(dtype)
    linear = nn.Linear(m, q).to(dtype)
    return rnn, linear, RNN.from_torch(rnn, linear)


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_equal_to_torch_rnn_outputs_and_gradients(dtype, tol, nonlinearity):
    rnn, linear, model = torch_pair(5, 7, 3, dtype, nonlinearity)
    x = torch.randn(4, 9, 5, dtype=dtype)
    h0 = torch.randn(1, 4, 7, dtype=dtype)
    y, h = model(x, h0)
    states, h_ref = rnn(x, h0)
    y_ref = linear(states)
    torch.testing.assert_close(y, y_ref, atol=tol, rtol=tol)
    torch.testing.assert_close(h, h_ref, atol=tol, rtol=tol)
    (y.square().sum() + h.sum()).backward()
    (y_ref.square().sum() + h_ref.sum()).backward()
    pairs = [(model.cell.W_hh, rnn.weight_hh_l0), (model.cell.W_hx, rnn.weight_ih_l0),
             (model.cell.b_h, rnn.bias_ih_l0), (model.cell.b_h, rnn.bias_hh_l0),
             (model.W_yh, linear.weight), (model.b_y, linear.bias)]
    for ours, theirs in pairs:
        torch.testing.assert_close(ours.grad, theirs.grad, atol=tol, rtol=tol)


def test_without_output_layer_returns_states_like_torch():
    torch.manual_seed(1)
    rnn = nn.RNN(3, 4, batch_first=True).double()
    model = RNN.from_torch(rnn)
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    torch.testing.assert_close(model(x)[0], rnn(x)[0])


def test_cell_is_one_step_of_equation_7_2():
    cell = RNNCell(3, 4).double()
    x, h = torch.randn(2, 3, dtype=torch.float64), torch.randn(2, 4, dtype=torch.float64)
    expected = torch.tanh(cell.W_hh @ h.T + cell.W_hx @ x.T + cell.b_h[:, None]).T
    torch.testing.assert_close(cell(x, h), expected)


def test_output_feedback_follows_equation_7_3():
    model = RNN(3, 4, 2, output_feedback=True).double()
    x = torch.randn(2, 6, 3, dtype=torch.float64)
    c = model.cell
    h, y_hat, outputs = torch.zeros(2, 4).double(), torch.zeros(2, 2).double(), []
    for t in range(6):
        h = torch.tanh(h @ c.W_hh.T + x[:, t] @ c.W_hx.T + y_hat @ model.W_hy.T + c.b_h)
        logits = h @ model.W_yh.T + model.b_y
        outputs.append(logits)
        y_hat = torch.softmax(logits, -1)  # S_y: probabilities are fed back
    torch.testing.assert_close(model(x)[0], torch.stack(outputs, 1))


@settings(max_examples=25, deadline=None)
@given(B=st.integers(1, 3), T=st.integers(1, 6), p=st.integers(1, 5), m=st.integers(1, 6),
       q=st.integers(1, 4))
def test_shapes_for_any_sizes(B, T, p, m, q):
    y, h = RNN(p, m, q)(torch.randn(B, T, p))
    assert y.shape == (B, T, q) and h.shape == (1, B, m)


def test_gradcheck_tiny_float64():
    model = RNN(2, 3, 2).double()
    x = torch.randn(2, 4, 2, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(1, 2, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, h0: model(x, h0)[0], (x, h0))


@pytest.mark.parametrize("x, error, words", [
    (torch.randn(4, 5), ValueError, "3 dimensions"),
    (torch.randn(2, 4, 6), ValueError, "expected input_size=5"),
    (torch.randn(2, 0, 5), ValueError, "empty"),
    (torch.zeros(2, 4, 5, dtype=torch.long), TypeError, "floats"),
    ([[0.0] * 5], TypeError, "torch.Tensor"),
])
def test_bad_input_gets_a_clear_error(x, error, words):
    with pytest.raises(error, match=words):
        RNN(5, 3, 2)(x)


def test_mismatched_initial_state_batch_is_named():
    with pytest.raises(ValueError, match=r"h0 has shape \(1, 3, 3\), expected \(1, 2, 3\)"):
        RNN(5, 3, 2)(torch.randn(2, 4, 5), torch.zeros(1, 3, 3))


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="hidden_size"):
        RNN(5, 0, 2)
    with pytest.raises(ValueError, match="nonlinearity"):
        RNN(5, 3, 2, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="output_size"):
        RNN(5, 3, output_feedback=True)
    with pytest.raises(TypeError, match="torch.nn.RNN"):
        RNN.from_torch(nn.GRU(2, 3))
    with pytest.raises(ValueError, match="one unidirectional layer"):
        RNN(5, 3, 2, num_layers=2, output_feedback=True)


def test_same_seed_gives_bit_identical_outputs_twice():
    def run():
        gen = seqlib.seed_everything(123)
        model = RNN(4, 6, 3)
        x = torch.randn(2, 5, 4, generator=gen)
        return model(x)[0]

    assert torch.equal(run(), run())


def test_teacher_forcing_feeds_the_given_outputs_back():
    model = RNN(3, 4, 2, output_feedback=True).double()
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    free, _ = model(x)
    # Feeding back the model's own softmax outputs reproduces free running exactly.
    own = torch.cat([torch.zeros(2, 1, 2).double(), torch.softmax(free, -1)[:, :-1]], 1)
    torch.testing.assert_close(model(x, y_prev=own)[0], free)
    forced = torch.nn.functional.one_hot(torch.tensor([[0, 1, 1, 0, 1]] * 2), 2).double()
    assert not torch.allclose(model(x, y_prev=forced)[0], free)
    with pytest.raises(ValueError, match="y_prev has shape"):
        model(x, y_prev=forced[:, :3])
    with pytest.raises(ValueError, match="needs output_feedback"):
        RNN(3, 4, 2).double()(x, y_prev=forced)
