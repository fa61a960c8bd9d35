"""Every text of every figure that seqlib.diagrams draws lies inside the figure: no title,
tick label, axis label, legend entry or annotation cut at an edge (seqlib.diagrams.
texts_outside). The drawings are called with small inputs, as the pages call them."""

import importlib
import inspect

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from pages.test_decoding import END, GO, MISSED  # noqa: E402

from seqlib import GRU, LSTM, RNN, GRUCell, LSTMCell  # noqa: E402
from seqlib.diagrams import canvas, texts_outside  # noqa: E402
from seqlib.diagrams import rnn as rnn_diagrams  # noqa: E402
from seqlib.diagrams import transformer as transformer_diagrams  # noqa: E402
from seqlib.diagrams.beam import draw_beam_search  # noqa: E402
from seqlib.diagrams.bptt import bptt_flow  # noqa: E402
from seqlib.diagrams.gated import draw_recurrent, draw_unit  # noqa: E402
from seqlib.diagrams.labels import label_points  # noqa: E402
from seqlib.diagrams.plot import plot_losses  # noqa: E402
from seqlib.diagrams.seq2seq import (  # noqa: E402
    draw_attention_encoder_decoder,
    draw_encoder_decoder,
)
from seqlib.diagrams.widgets import plot_adjoint_norms  # noqa: E402
from seqlib.pages.decoding import beam_trace  # noqa: E402
from seqlib.self_attention import MultiHeadAttention  # noqa: E402
from seqlib.seq2seq import AttentionSeq2Seq, Seq2Seq  # noqa: E402
from seqlib.transformer import (  # noqa: E402
    PreNormBlock,
    PreNormDecoderBlock,
    Transformer,
    TransformerBlock,
    TransformerDecoderBlock,
)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_a_cut_tick_label_and_an_axis_label_past_the_edge_are_found():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1, 2], [0, 1, 2])
    ax.set_yticks([0, 1, 2], ["zero", "a long tick label", "two"])
    ax.set_xlabel("the x-axis label")
    ax.set_title("a title that fits")
    fig.subplots_adjust(left=0.2, bottom=0.05)  # too little room for both
    outside = texts_outside(fig)
    assert any(o.startswith("'a long tick label' (y tick label)") and o.endswith("at the left")
               for o in outside), outside
    assert any(o.startswith("'the x-axis label' (x-axis label)") and o.endswith("bottom")
               for o in outside), outside
    assert not any("zero" in o or "title" in o for o in outside), outside  # these fit
    fig.tight_layout()
    assert texts_outside(fig) == []


def test_rotated_labels_legends_and_annotations_are_measured_as_drawn():
    fig, ax = plt.subplots(figsize=(3, 2.5))
    ax.imshow([[0, 1], [1, 0]])
    ax.set_xticks([0, 1], ["apprentissage", "profondeur"], rotation=60, ha="right")
    ax.plot([0, 1], [0, 1], label="a legend entry far too long to fit")
    ax.legend(loc="center left", bbox_to_anchor=(0.9, 0.5))
    ax.annotate("a note", (1, 1), xytext=(1.2, 1.0), textcoords="axes fraction")
    kinds = {o.split(" (")[1].split(")")[0] for o in texts_outside(fig)}
    assert kinds == {"x tick label", "legend", "text"}
    fig, ax = plt.subplots(figsize=(3, 2.5))
    ax.set_xlim(0, 10)  # the ticks the locator puts beyond the limits are not drawn
    ax.axis("off")
    ax.text(5, 0.5, "inside")
    assert texts_outside(fig) == []


def beam_steps(beam_size):
    src, mask = torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.bool)
    _, trace = beam_trace(MISSED, src, mask, start_id=GO, stop_id=END, max_len=4,
                          beam_size=beam_size, length_penalty=0)
    return [step[0] for step in trace]


def beams_stacked():
    """Page 16's figure: two trees on one figure."""
    fig, axes = plt.subplots(2, 1, figsize=(8, 8.4))
    for ax, k in zip(axes, (2, 3), strict=True):
        draw_beam_search(beam_steps(k), ["<start>", "<stop>", "x", "y", "z"], ax=ax,
                         title=f"beam of {k}")
    fig.tight_layout()
    return fig


def two_rows(draw, first, second, figsize):
    """Two drawings on one figure, a row each, as pages 4, 5 and 7 show them."""
    fig, axes = plt.subplots(2, 1, figsize=figsize)
    draw(*first, ax=axes[0])
    draw(*second, ax=axes[1])
    fig.tight_layout()
    return fig


def labelled_points():
    """Page 1's scatter of words: labels beside points that reach the axes' edges."""
    fig, ax = plt.subplots(figsize=(4.5, 4.6))
    xy = [(-1.0, -1.0), (1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (0.0, 0.0), (0.02, 0.01)]
    ax.scatter(*zip(*xy, strict=True))
    ax.set(xlabel="principal component 1", ylabel="principal component 2")
    fig.tight_layout()
    label_points(ax, xy, ["king", "queen", "daughter", "morning", "thou", "thee"])
    return fig


def unrolled_alone():
    fig, ax = canvas(8, 3.5)
    rnn_diagrams.unrolled(ax, ["A", "B", rnn_diagrams.DOTS, "D"], ["x1", "x2", None, "x4"],
                          [None, "y2", None, "y4"], state_in=True, state_out=True)
    return fig


def adjoint_norms_alone():
    """Page 3's curves, on a figure of their own (the page draws them on its own axes)."""
    plot_adjoint_norms([0.9, 1.0, 1.1], T=10)
    return plt.gcf()


TRANSLATION = ["<start>", "nous", "aimons", "l'", "apprentissage", "en", "profondeur"]
# One entry per drawing, named for the function it calls and how: each returns the figure.
DRAWINGS = {
    "rnn.tasks": lambda: rnn_diagrams.tasks(
        "I like reading this terribly instructive book", ["happy", "sad", "indifferent"],
        "We enjoyed writing this book", "nous avons aimé écrire ce livre <end>",
        "Three good friends having fun"),
    "rnn.paradigms": lambda: rnn_diagrams.paradigms({
        "(a) one-to-many": ([1, 0, 0], [1, 1, 1]), "(b) many-to-one": ([1, 1, 1], [0, 0, 1]),
        "(c) many-to-many,\npartial": ([1, 1, 1, 0, 0], [0, 0, 0, 1, 1]),
        "(d) many-to-many,\ncomplete": ([1, 1, 1], [1, 1, 1])}),
    "rnn.recursive_and_unfolded": lambda: rnn_diagrams.recursive_and_unfolded(3),
    "rnn.recursive_and_unfolded, 6 steps": lambda: rnn_diagrams.recursive_and_unfolded(6),
    "rnn.unit": lambda: rnn_diagrams.unit(RNN(8, 20, 8)),
    "rnn.unit, output feedback": lambda: rnn_diagrams.unit(RNN(8, 20, 8, output_feedback=True)),
    "rnn.lookahead": lambda: rnn_diagrams.lookahead(
        "the mathematical engineering of deep learning".split(),
        "mathematical engineering of engineering learning".split()),
    "rnn.lookahead, probabilities": lambda: rnn_diagrams.lookahead(
        "the mathematical engineering of deep learning".split(),
        "mathematical engineering of deep learning".split(), [0.5, 0.25, 0.9, 0.1, 0.75]),
    "rnn.unrolled": unrolled_alone,
    "bptt.bptt_flow": lambda: bptt_flow(),
    "bptt.bptt_flow, T = 4": lambda: bptt_flow(4),
    "gated.draw_recurrent, bidirectional": lambda: draw_recurrent(RNN(3, 4, bidirectional=True),
                                                                  3),
    "gated.draw_recurrent, 3 layers": lambda: draw_recurrent(RNN(3, 4, num_layers=3), 3),
    "gated.draw_recurrent, LSTM 2 layers both ways": lambda: draw_recurrent(
        LSTM(3, 4, num_layers=2, bidirectional=True), 4,
        title="A stacked (L = 2) bidirectional LSTM unrolled over T = 4 steps"),
    "gated.draw_recurrent, GRU": lambda: draw_recurrent(GRU(3, 4), 1),
    "gated.draw_recurrent, page 4's two rows": lambda: two_rows(
        draw_recurrent, (RNN(3, 4, bidirectional=True), 3), (RNN(3, 4, num_layers=3), 3),
        (8, 9)),
    "gated.draw_unit, LSTM": lambda: draw_unit(LSTMCell(3, 4)),
    "gated.draw_unit, GRU": lambda: draw_unit(GRUCell(3, 4)),
    "gated.draw_unit, GRU reset after": lambda: draw_unit(
        GRUCell(3, 4, reset_after=True),
        title="PyTorch's form of the GRU unit: the reset gate after the product"),
    "gated.draw_unit, page 5's two rows": lambda: two_rows(
        draw_unit, (LSTMCell(3, 4),), (GRUCell(3, 4),), (8, 10)),
    "seq2seq.draw_encoder_decoder": lambda: draw_encoder_decoder(Seq2Seq(10, 12, 4, 5)),
    "seq2seq.draw_encoder_decoder, LSTM 2 layers, code fed": lambda: draw_encoder_decoder(
        Seq2Seq(10, 12, 4, 5, unit="lstm", num_layers=2, feed_code=True)),
    "seq2seq.draw_encoder_decoder, page 7's two rows": lambda: two_rows(
        draw_encoder_decoder, (Seq2Seq(10, 12, 4, 5),), (Seq2Seq(10, 12, 4, 5, feed_code=True),),
        (9, 6)),
    "seq2seq.draw_attention_encoder_decoder": lambda: draw_attention_encoder_decoder(
        AttentionSeq2Seq(10, 12, 4, 6, encoder_size=3, score="general"), title="Fig. 7.10"),
    "seq2seq.draw_attention_encoder_decoder, LSTM deep output": lambda:
        draw_attention_encoder_decoder(AttentionSeq2Seq(10, 12, 4, 6, unit="lstm",
                                                        deep_output=True)),
    "transformer.self_attention_flow": lambda: transformer_diagrams.self_attention_flow(),
    "transformer.self_attention_flow, fixed, causal": lambda:
        transformer_diagrams.self_attention_flow(learned=False, non_causal=False),
    "transformer.multi_head_attention": lambda: transformer_diagrams.multi_head_attention(
        MultiHeadAttention(8, 3, m=2)),
    "transformer.multi_head_attention, 5 heads": lambda:
        transformer_diagrams.multi_head_attention(MultiHeadAttention(8, 5, m=2), max_heads=5),
    "transformer.multi_head_attention, 8 heads, 4 shown": lambda:
        transformer_diagrams.multi_head_attention(MultiHeadAttention(8, 8, m=2)),
    "transformer.transformer_blocks": lambda: transformer_diagrams.transformer_blocks(
        TransformerBlock(8, 2, n1=16), TransformerDecoderBlock(8, 2, n1=16)),
    "transformer.transformer_blocks, pre-norm": lambda: transformer_diagrams.transformer_blocks(
        PreNormBlock(8, 2, n1=16), PreNormDecoderBlock(8, 2, n1=16)),
    "transformer.encoder_decoder": lambda: transformer_diagrams.encoder_decoder(
        Transformer(7, 9, 8, 2, 16, 2, num_decoder_layers=3)),
    "transformer.encoder_decoder, 6 blocks": lambda: transformer_diagrams.encoder_decoder(
        Transformer(7, 9, 8, 2, 16, 6)),
    "transformer.autoregressive_decoding": lambda: transformer_diagrams.autoregressive_decoding(
        "we love deep learning <stop>".split(),
        [(TRANSLATION[: t + 1], word) for t, word in enumerate(TRANSLATION[1:] + ["<stop>"])]),
    "transformer.autoregressive_decoding, one row": lambda:
        transformer_diagrams.autoregressive_decoding(
            ["we"], [(["<start>"], "nous"), (["<start>", "nous"], "<stop>")], per_row=8),
    "beam.draw_beam_search": lambda: draw_beam_search(beam_steps(3),
                                                      ["<start>", "<stop>", "x", "y", "z"]),
    "beam.draw_beam_search, page 16's two trees": beams_stacked,
    "labels.label_points": labelled_points,
    "plot.plot_losses": lambda: plot_losses({"a run": [3.0, 2.0, 1.5, 1.2, 1.1]})[0],
    "plot.plot_losses, several, smoothed, log": lambda: plot_losses(
        {"lookahead RNN, 748 parameters": [3.0, 2.0, 1.5, 1.2, 1.1, 1.0],
         "another run": [2.0, 1.8, 1.1, 0.9, 0.7, 0.6]}, smooth=2, log_y=True)[0],
    "widgets.plot_adjoint_norms": adjoint_norms_alone,
}
# Public functions of seqlib.diagrams that draw no figure of their own, or only through one
# of the drawings above.
NOT_DRAWINGS = {"state_label", "adjoint_norms", "spectral_radius_explorer"}
MODULES = ["beam", "bptt", "gated", "labels", "plot", "rnn", "seq2seq", "transformer",
           "widgets"]


def test_every_drawing_function_is_checked():
    """A new drawing of seqlib.diagrams gets its entry in DRAWINGS."""
    checked = {name.split(",")[0] for name in DRAWINGS}
    public = set()
    for name in MODULES:
        module = importlib.import_module(f"seqlib.diagrams.{name}")
        public |= {f"{name}.{fn}" for fn, obj in inspect.getmembers(module, inspect.isfunction)
                   if obj.__module__ == module.__name__ and not fn.startswith("_")
                   and fn not in NOT_DRAWINGS}
    assert public <= checked, f"drawings with no entry in DRAWINGS: {sorted(public - checked)}"


@pytest.mark.parametrize("name", DRAWINGS)
def test_every_text_of_the_drawing_lies_inside_its_figure(name):
    outside = texts_outside(DRAWINGS[name]())
    assert not outside, f"{name}: texts outside the figure: {outside}"
