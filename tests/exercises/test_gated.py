"""The checkers of the exercises on the LSTM and the GRU accept the book's solutions and
explain typical wrong attempts, naming the gate that looks wrong."""

import pytest
import torch

from seqlib.exercises import ExerciseError, check_peephole_lstm, check_pytorch_gru


def peephole(x, state, cell, w_f, w_i, w_o, *, output_reads=None, swap=False, outside=False):
    """The book's solution, and with a switch the slips the checker must name."""
    h, c = state
    if swap:
        w_f, w_i = w_i, w_f
    g_i = torch.sigmoid(cell.block(0, x, h) + w_i * c)
    g_f = torch.sigmoid(cell.block(1, x, h) + w_f * c)
    if outside:  # the peephole added after the sigmoid
        g_f = torch.sigmoid(cell.block(1, x, h)) + w_f * c
    c_tilde = torch.tanh(cell.block(2, x, h))
    c_new = g_f * c + g_i * c_tilde
    g_o = torch.sigmoid(cell.block(3, x, h) + w_o * (c if output_reads == "old" else c_new))
    return g_o * torch.tanh(c_new), c_new


def test_output_gate_reading_the_old_cell_state():
    with pytest.raises(ExerciseError, match=r"g_o looks at the old cell state c\^<t-1>"):
        check_peephole_lstm(lambda *args: peephole(*args, output_reads="old"))


def test_forget_and_input_peepholes_swapped():
    with pytest.raises(ExerciseError, match="w_f belongs to the forget gate"):
        check_peephole_lstm(lambda *args: peephole(*args, swap=True))


def test_peephole_outside_the_sigmoid():
    with pytest.raises(ExerciseError, match="only w_f nonzero, c.* differs: check the peephole "
                                            "of g_f"):
        check_peephole_lstm(lambda *args: peephole(*args, outside=True))


def test_gate_blocks_in_the_wrong_order():
    def attempt(x, state, cell, w_f, w_i, w_o):
        h, c = state
        g_f = torch.sigmoid(cell.block(0, x, h) + w_f * c)  # block 0 is g_i, not g_f
        g_i = torch.sigmoid(cell.block(1, x, h) + w_i * c)
        c = g_f * c + g_i * torch.tanh(cell.block(2, x, h))
        return torch.sigmoid(cell.block(3, x, h) + w_o * c) * torch.tanh(c), c

    with pytest.raises(ExerciseError, match="w_f = w_i = w_o = 0 .* c\\^<t> differs: check "
                                            "the gate blocks"):
        check_peephole_lstm(attempt)


def test_peephole_wrong_return():
    with pytest.raises(ExerciseError, match=r"return a tuple \(h, c\), got Tensor"):
        check_peephole_lstm(lambda *args: peephole(*args)[0])
    with pytest.raises(ExerciseError, match=r"h has shape"):
        check_peephole_lstm(lambda *args: tuple(s.T for s in peephole(*args)))


def gru_step(x, h, cell, *, slip=None):
    """The book's solution (slip=None), and the slips the checker must name."""
    m = cell.hidden_size
    x_r, x_z, x_n = (x @ cell.weight_ih.T + cell.bias_ih).split(m, dim=-1)
    h_r, h_z, h_n = (h @ cell.weight_hh.T + cell.bias_hh).split(m, dim=-1)
    if slip == "blocks":
        x_r, x_z, h_r, h_z = x_z, x_r, h_z, h_r
    r = torch.sigmoid(x_r + h_r)
    z = torch.sigmoid(x_z + h_z)
    if slip == "before":  # the chapter's form
        n = torch.tanh(x_n + (r * h) @ cell.weight_hh[2 * m:].T + cell.bias_hh[2 * m:])
    else:
        n = torch.tanh(x_n + r * h_n)
    if slip == "update":
        return z * n + (1 - z) * h
    return (1 - z) * n + z * h


@pytest.mark.parametrize("slip, message", [
    ("before", "reset gate before the product, W_hn \\(r \\* h\\), which is the chapter's form"),
    ("update", "update is the wrong way round"),
    ("blocks", "first two blocks are swapped"),
])
def test_gru_slips_are_named(slip, message):
    with pytest.raises(ExerciseError, match=message):
        check_pytorch_gru(lambda x, h, cell: gru_step(x, h, cell, slip=slip))


def test_gru_other_errors():
    with pytest.raises(ExerciseError, match="differs from the expected values"):
        check_pytorch_gru(lambda x, h, cell: torch.tanh(gru_step(x, h, cell)))
    with pytest.raises(ExerciseError, match=r"has shape \(4, 5\), expected \(B, m~\)"):
        check_pytorch_gru(lambda x, h, cell: gru_step(x, h, cell).T)
