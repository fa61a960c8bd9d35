"""Figs. 7.7 and 7.8 drawn from the models: one unit per layer, direction and step; one
box per block of the LSTM and GRU units, gates yellow and internal states gray."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from seqlib import GRU, LSTM, RNN, GRUCell, LSTMCell  # noqa: E402
from seqlib.diagrams import COLOURS, legible  # noqa: E402
from seqlib.diagrams.gated import draw_recurrent, draw_unit  # noqa: E402


def boxes(fig, kind):
    """The number of rounded boxes of colour COLOURS[kind] in the figure."""
    colour = to_rgba(COLOURS[kind])
    return sum(1 for ax in fig.axes for patch in ax.patches
               if hasattr(patch, "get_boxstyle") and patch.get_facecolor() == colour)



@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("model, rows", [
    (RNN(3, 4, bidirectional=True), 2),  # Fig. 7.7 (a): reversing
    (RNN(3, 4, num_layers=3), 3),  # Fig. 7.7 (b): stacking
    (LSTM(3, 4, num_layers=2, bidirectional=True), 4),  # both combined
    (GRU(3, 4), 1),
])
@pytest.mark.parametrize("steps", [1, 3])
def test_one_unit_per_layer_direction_and_step(model, rows, steps):
    fig = draw_recurrent(model, steps)
    assert isinstance(fig, Figure)
    assert boxes(fig, "unit") == rows * steps == model.num_layers * model.directions * steps


def test_panels_on_given_axes():
    fig, axes = plt.subplots(2, 1)
    assert draw_recurrent(RNN(3, 4, bidirectional=True), 2, ax=axes[0]) is fig
    assert draw_recurrent(RNN(3, 4, num_layers=3), 2, ax=axes[1]) is fig
    assert boxes(fig, "unit") == 2 * 2 + 3 * 2


@pytest.mark.parametrize("cell, gates, states, other", [
    (LSTMCell(3, 4), 3, 1, 1),  # g_f, g_i, g_o; c_tilde; S_Tanh(c)
    (GRUCell(3, 4), 2, 1, 0),  # g_r, g_u; h_tilde
    (GRUCell(3, 4, reset_after=True), 2, 1, 1),  # and W_h~h h + b_hn before the reset
])
def test_units_of_fig_7_8(cell, gates, states, other):
    fig = draw_unit(cell)
    assert isinstance(fig, Figure)
    assert boxes(fig, "gate") == gates and boxes(fig, "state") == states
    assert boxes(fig, "input") == other
    assert gates + states == len(cell.blocks)  # one box per block of W_hh, W_hx, b_h


@pytest.mark.parametrize("model, steps", [(LSTM(3, 4, num_layers=2, bidirectional=True), 4),
                                          (RNN(3, 4, num_layers=3), 6), (GRU(3, 4), 1)])
def test_unrolled_models_fit_the_books_column(model, steps):
    assert legible(draw_recurrent(model, steps))


@pytest.mark.parametrize("cell", [LSTMCell(3, 4), GRUCell(3, 4), GRUCell(3, 4, reset_after=True)])
def test_units_fit_the_books_column(cell):
    assert legible(draw_unit(cell))


def test_bad_input():
    with pytest.raises(TypeError, match="seqlib RNN, LSTM or GRU"):
        draw_recurrent(LSTMCell(3, 4))
    with pytest.raises(ValueError, match="steps must be a positive int"):
        draw_recurrent(RNN(3, 4), 0)
    with pytest.raises(TypeError, match="LSTMCell or a GRUCell"):
        draw_unit(RNN(3, 4))
