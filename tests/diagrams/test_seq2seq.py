"""Figs. 7.9 and 7.10 are drawn from the models: one unit box per layer and step, per
direction, the code z fed where the model feeds it, the score and output it uses."""

import matplotlib
import matplotlib.pyplot as plt
import pytest
from matplotlib.patches import FancyBboxPatch

from seqlib.diagrams.seq2seq import (
    CODE_COLOUR,
    FIG_7_9_SOURCE,
    FIG_7_9_TARGET,
    draw_attention_encoder_decoder,
    draw_encoder_decoder,
)
from seqlib.seq2seq import AttentionSeq2Seq, Seq2Seq


def texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def units(fig, name):
    """The boxes whose text names the unit, e.g. "GRU" (the state z is a box too)."""
    return [t for t in texts(fig) if t.split("\n")[0] == name]


def code_arrows(fig):
    return [p for ax in fig.axes for p in ax.patches if not isinstance(p, FancyBboxPatch)
            and matplotlib.colors.same_color(p.get_edgecolor(), CODE_COLOUR)]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("feed_code", [False, True])
def test_fig_7_9_one_unit_per_layer_and_step(feed_code, layers):
    model = Seq2Seq(10, 12, 4, 5, unit="lstm", num_layers=layers, feed_code=feed_code)
    fig = draw_encoder_decoder(model)
    assert isinstance(fig, plt.Figure)
    steps = len(FIG_7_9_SOURCE) + len(FIG_7_9_TARGET)
    assert len(units(fig, "LSTM")) == layers * steps
    words = texts(fig)
    assert "$z$" in words and "<start>" in words and "<end>" in words
    assert words.count("Nous") == 2  # written at step 1, read at step 2
    # z to the decoder's initial state, one arrow per layer each way; (b) adds one arrow
    # into every decoder step and one into every output
    extra = 2 * len(FIG_7_9_TARGET) if feed_code else 0
    assert len(code_arrows(fig)) == 2 * layers + extra


def test_fig_7_9_reads_a_reversed_source_backwards():
    fig = draw_encoder_decoder(Seq2Seq(10, 12, 4, 5, reverse_source=True),
                               source=["I", "am", "going"], target=["je", "vais", "<stop>"])
    words = [t for t in texts(fig) if t in ("I", "am", "going")]
    assert words == ["going", "am", "I"]
    assert len(units(fig, "GRU")) == 3 + 3


def test_fig_7_10_one_row_per_direction_and_the_models_score():
    model = AttentionSeq2Seq(10, 12, 4, 6, encoder_size=3, score="general")
    fig = draw_attention_encoder_decoder(model, title="Fig. 7.10")
    assert isinstance(fig, plt.Figure)
    boxes = units(fig, "GRU")
    forward = [t for t in boxes if "h_f" in t]
    reverse = [t for t in boxes if "h_r" in t]
    assert len(forward) == len(reverse) == 2  # tau = 1 and T_in, each direction
    assert len([t for t in boxes if "s^" in t]) == 4  # s^<1>, s^<t-1>, s^<t>, s^<T_out>
    attention = [t for t in texts(fig) if t.startswith("attention")]
    assert len(attention) == 1 and "general score" in attention[0]
    assert "<start>" in texts(fig) and "<stop>" in texts(fig)


def test_fig_7_10_shows_the_deep_output_only_when_the_model_has_it():
    def dashed(fig):
        return [p for ax in fig.axes for p in ax.patches if p.get_linestyle() == "--"]

    plain = AttentionSeq2Seq(10, 12, 4, 6, unit="lstm")
    deep = AttentionSeq2Seq(10, 12, 4, 6, unit="lstm", deep_output=True)
    assert len(units(draw_attention_encoder_decoder(plain), "LSTM")) == 2 * 2 + 4
    assert dashed(draw_attention_encoder_decoder(plain)) == []
    assert len(dashed(draw_attention_encoder_decoder(deep))) == 2


def test_the_drawings_draw_onto_given_axes():
    fig, axes = plt.subplots(2, 1)
    assert draw_encoder_decoder(Seq2Seq(10, 12, 4, 5), ax=axes[0]) is fig
    assert draw_attention_encoder_decoder(AttentionSeq2Seq(10, 12, 4, 6), ax=axes[1]) is fig


def test_clear_errors():
    with pytest.raises(TypeError, match="seqlib.seq2seq.Seq2Seq"):
        draw_encoder_decoder(AttentionSeq2Seq(10, 12, 4, 6))
    with pytest.raises(TypeError, match="AttentionSeq2Seq"):
        draw_attention_encoder_decoder(Seq2Seq(10, 12, 4, 5))
    with pytest.raises(TypeError, match="source must be a non-empty sequence of words"):
        draw_encoder_decoder(Seq2Seq(10, 12, 4, 5), source="We enjoyed")


def test_fig_7_10_draws_where_s0_comes_from():
    """s^<0> = tanh(W_init h_r^<1> + b_init): a line leaves the box of h_r^<1>, enters the
    tanh layer, and the arrow labelled s^<0> goes on into the decoder's first unit."""
    fig = draw_attention_encoder_decoder(AttentionSeq2Seq(10, 12, 4, 6, encoder_size=3))
    ax = fig.axes[0]
    (r1,) = [t for t in ax.texts if t.get_text() == "GRU\n$h_r^{\\langle 1 \\rangle}$"]
    (layer,) = [t for t in ax.texts if t.get_text() == r"$\tanh$"]
    (line,) = [line for line in ax.lines
               if matplotlib.colors.same_color(line.get_color(), CODE_COLOUR)]
    (x0, y0), (x1, y1) = line.get_xydata()[0], line.get_xydata()[-1]
    (x_r1, y_r1), (x_layer, y_layer) = r1.get_position(), layer.get_position()
    assert abs(x0 - x_r1) < 0.95 / 2 and y0 == pytest.approx(y_r1 - 0.8 / 2)  # its bottom
    assert y1 == pytest.approx(y_layer) and x1 < x_layer  # into the tanh layer
    assert "$s^{\\langle 0 \\rangle}$" in texts(fig)
    assert len(code_arrows(fig)) == 1  # from the tanh layer into the decoder
