"""The basic RNN (7.1)-(7.3): parameter count, equality with torch.nn.RNN, output
feedback in the chapter's form and the matrix form, bad input."""

import functools

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


def test_chapters_output_feedback_keeps_the_748_parameters():
    model = RNN(8, 20, 8, output_feedback=True)  # (7.3) with T the identity (p = q)
    assert isinstance(model.feedback_map, nn.Identity) and not hasattr(model, "W_hy")
    assert seqlib.count_parameters(model) == 748


def test_matrix_feedback_adds_W_hy():
    model = RNN(8, 20, 8, output_feedback=True, feedback="matrix")
    assert model.W_hy.shape == (20, 8)
    assert seqlib.count_parameters(model) == 748 + 160


def test_state_is_f_nested_t_times_equation_7_1():
    model = RNN(3, 5).double()
    x = torch.randn(2, 6, 3, dtype=torch.float64)
    states, _ = model(x)  # (B, T, m)
    h0 = torch.zeros(2, 5, dtype=torch.float64)
    for t in range(1, 7):
        h_t = functools.reduce(lambda h, x_t: model.cell(x_t, h), x.unbind(1)[:t], h0)
        torch.testing.assert_close(states[:, t - 1], h_t)


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu", "identity"])
def test_the_plain_loop_of_7_1_is_the_fast_paths_computation(nonlinearity):
    """RNN.recursion, one call of the unit per step, gives the states of forward: exactly
    those of the textbook path (the same products), and the fast path's to rounding, with
    the same gradients."""
    torch.manual_seed(0)
    fast, textbook = (RNN(3, 5, nonlinearity=nonlinearity, fast=f).double()
                      for f in (True, False))
    textbook.load_state_dict(fast.state_dict())
    x = torch.randn(2, 6, 3, dtype=torch.float64, requires_grad=True)
    loop = fast.recursion(x)  # (B, T, m)
    assert torch.equal(loop, textbook(x)[0])
    states = fast(x)[0]
    torch.testing.assert_close(loop, states, rtol=0, atol=1e-12)
    target = torch.randn_like(loop)
    by_loop = torch.autograd.grad((loop * target).sum(), [x, *fast.parameters()])
    by_fast = torch.autograd.grad((states * target).sum(), [x, *fast.parameters()])
    for a, b in zip(by_loop, by_fast, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_the_plain_loop_is_for_one_unidirectional_layer():
    for model in (RNN(3, 5, num_layers=2), RNN(3, 5, bidirectional=True),
                  RNN(3, 5, 3, output_feedback=True)):
        with pytest.raises(ValueError, match="one unidirectional layer"):
            model.recursion(torch.randn(2, 4, 3))
    with pytest.raises(ValueError):
        RNN(3, 5).recursion(torch.randn(2, 4, 4))


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


def unrolled_feedback(model, x, T_map=None, W_hy=None, fed=None):
    """(7.3) written out: h = tanh(W_hh h + W_hx (x + T(y)) + b_h), or with W_hy y."""
    c = model.cell
    B, q = x.shape[0], model.output_size
    h, y, outputs = torch.zeros(B, c.hidden_size).double(), torch.zeros(B, q).double(), []
    for t in range(x.shape[1]):  # y_hat^<0> = 0
        if fed is not None:
            y = fed[:, t]
        u = x[:, t] if W_hy is not None else x[:, t] + T_map(y)
        z = h @ c.W_hh.T + u @ c.W_hx.T + c.b_h
        h = torch.tanh(z if W_hy is None else z + y @ W_hy.T)
        logits = h @ model.W_yh.T + model.b_y
        outputs.append(logits)
        y = torch.softmax(logits, -1)  # S_y: probabilities are fed back
    return torch.stack(outputs, 1)


def test_output_feedback_follows_equation_7_3():
    x = torch.randn(2, 6, 3, dtype=torch.float64)
    model = RNN(3, 4, 3, output_feedback=True).double()  # p = q: T is the identity
    torch.testing.assert_close(model(x)[0], unrolled_feedback(model, x, lambda y: y))
    A = nn.Linear(2, 3, bias=False).double()  # p = 3, q = 2: a linear T(y) = A y
    model = RNN(3, 4, 2, output_feedback=True, feedback_map=A).double()
    torch.testing.assert_close(model(x)[0], unrolled_feedback(model, x, A))
    assert seqlib.count_parameters(model) == seqlib.count_parameters(RNN(3, 4, 2)) + 6
    model(x)[0].sum().backward()
    assert A.weight.grad is not None  # T is part of the model: it trains with it


def test_matrix_feedback_follows_its_equation():
    x = torch.randn(2, 6, 3, dtype=torch.float64)
    model = RNN(3, 4, 2, output_feedback=True, feedback="matrix").double()
    torch.testing.assert_close(model(x)[0], unrolled_feedback(model, x, W_hy=model.W_hy))


def test_matrix_form_with_W_hy_equal_to_W_hx_A_is_the_chapters_form():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 3, dtype=torch.float64)
    A = torch.randn(3, 2, dtype=torch.float64)  # T(y) = A y, (B, q) -> (B, p)
    chapter = RNN(3, 4, 2, output_feedback=True, feedback_map=lambda y: y @ A.T).double()
    matrix = RNN(3, 4, 2, output_feedback=True, feedback="matrix").double()
    state = {k: v for k, v in chapter.state_dict().items()}
    matrix.load_state_dict({**state, "W_hy": chapter.cell.W_hx.detach() @ A})
    y_prev = torch.randn(2, 6, 2, dtype=torch.float64)
    torch.testing.assert_close(matrix(x)[0], chapter(x)[0])
    torch.testing.assert_close(matrix(x, y_prev=y_prev)[0], chapter(x, y_prev=y_prev)[0])


def test_teacher_forcing_with_identity_T_is_the_basic_rnn_on_x_plus_y_prev():
    torch.manual_seed(0)
    feedback = RNN(4, 5, 4, output_feedback=True).double()
    basic = RNN(4, 5, 4).double()
    basic.load_state_dict(feedback.state_dict())
    x = torch.randn(3, 7, 4, dtype=torch.float64)
    y_prev = torch.randn(3, 7, 4, dtype=torch.float64)
    torch.testing.assert_close(feedback(x, y_prev=y_prev)[0], basic(x + y_prev)[0])


def test_bad_feedback_arguments_get_clear_errors():
    with pytest.raises(ValueError, match="pass feedback_map"):
        RNN(5, 3, 2, output_feedback=True)  # p != q and no T
    with pytest.raises(TypeError, match="feedback_map must be a callable"):
        RNN(5, 3, 2, output_feedback=True, feedback_map=3)
    with pytest.raises(ValueError, match="feedback must be one of"):
        RNN(5, 3, 5, output_feedback=True, feedback="output")
    with pytest.raises(ValueError, match="set output_feedback=True"):
        RNN(5, 3, 5, feedback="matrix")
    with pytest.raises(ValueError, match="used with feedback='input' only"):
        RNN(5, 3, 5, output_feedback=True, feedback="matrix", feedback_map=nn.Identity())
    model = RNN(5, 3, 2, output_feedback=True, feedback_map=nn.Linear(2, 4))  # 4, not p = 5
    with pytest.raises(ValueError, match=r"feedback_map \(T of \(7.3\)\) returned \(2, 4\)"):
        model(torch.randn(2, 3, 5))


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
        torch.manual_seed(123)
        gen = torch.Generator().manual_seed(123)
        model = RNN(4, 6, 3)
        x = torch.randn(2, 5, 4, generator=gen)
        return model(x)[0]

    assert torch.equal(run(), run())


@pytest.mark.parametrize("feedback", ["input", "matrix"])
def test_teacher_forcing_feeds_the_given_outputs_back(feedback):
    model = RNN(3, 4, 2, output_feedback=True, feedback=feedback,
                feedback_map=nn.Linear(2, 3) if feedback == "input" else None).double()
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
