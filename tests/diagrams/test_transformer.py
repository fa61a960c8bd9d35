"""The figures of Section 7.5 drawn by seqlib.diagrams.transformer: each draws without
error and returns a figure, and those read off a model draw one element per head, per
step of a block (in forward's order) and per block of a stack."""

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import FancyArrowPatch  # noqa: E402

from seqlib.diagrams import legible  # noqa: E402
from seqlib.diagrams import transformer as diagrams  # noqa: E402
from seqlib.self_attention import MultiHeadAttention  # noqa: E402
from seqlib.transformer import (  # noqa: E402
    PreNormBlock,
    PreNormDecoderBlock,
    Transformer,
    TransformerBlock,
    TransformerDecoderBlock,
)


def gids(fig, gid):
    return [p for ax in fig.axes for p in ax.patches if p.get_gid() == gid]


def texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts]



@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("learned", [True, False])
@pytest.mark.parametrize("non_causal", [True, False])
def test_self_attention_flow_fig_7_12(learned, non_causal):
    fig = diagrams.self_attention_flow(learned=learned, non_causal=non_causal)
    assert isinstance(fig, Figure)
    drawn = texts(fig)
    assert ("$W_q$" in drawn) == learned
    assert any("t+1" in t for t in drawn) == non_causal
    assert any(r"\langle t \rangle" in t and "u" in t for t in drawn)
    # every learned matrix is fed by an input: W_k and W_v by each x^<tau>, W_q by x^<t>
    into_matrices = [p for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch)
                     and math.isclose(p._posA_posB[1][1], 1.55 - 0.21)]
    assert len(into_matrices) == ((2 * (6 if non_causal else 4) + 1) if learned else 0)


@pytest.mark.parametrize("heads, shown", [(1, 1), (3, 3), (4, 4), (8, 3)])
def test_multi_head_attention_fig_7_13_one_column_per_head(heads, shown):
    fig = diagrams.multi_head_attention(MultiHeadAttention(8, heads, m=2))
    assert isinstance(fig, Figure)
    assert len(gids(fig, "head")) == shown  # past max_heads: heads 1, 2, ..., H
    assert f"head {heads}" in texts(fig)
    with pytest.raises(TypeError, match="MultiHeadAttention"):
        diagrams.multi_head_attention(TransformerBlock(8, 2))


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_blocks_fig_7_15_one_element_per_step(norm_first):
    encoder = (PreNormBlock if norm_first else TransformerBlock)(8, 2, n1=16)
    decoder = (PreNormDecoderBlock if norm_first else TransformerDecoderBlock)(8, 2, n1=16)
    fig = diagrams.transformer_blocks(encoder, decoder)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    for ax, block in zip(fig.axes, (encoder, decoder), strict=True):
        drawn = [p.get_gid() for p in ax.patches if p.get_gid() in ("sublayer", "norm")]
        # the sublayers and LayerNorms in the order of the block's steps (forward's order)
        expected = ["norm" if name in ("LayerNorm", "residual + LayerNorm") else "sublayer"
                    for name, _ in block.steps()]
        assert drawn == expected
        assert len([p for p in ax.patches if p.get_gid() == "residual"]) == \
            len(block.sublayers())
        assert ("pre-norm" if norm_first else "post-norm") in ax.get_title()
    labels = texts(fig)
    assert "Multi-head cross-attention" in labels and "$z$" in labels
    assert ("$u_{[5]}$" in labels) != norm_first  # the chapter's u_[k] label post-norm
    with pytest.raises(TypeError, match="decoder_block"):
        diagrams.transformer_blocks(encoder, encoder)


@pytest.mark.parametrize("n_enc, n_dec, shown_enc, shown_dec", [(1, 1, 1, 1), (2, 3, 2, 3),
                                                                 (6, 6, 2, 2)])
def test_encoder_decoder_fig_7_16_one_box_per_block(n_enc, n_dec, shown_enc, shown_dec):
    model = Transformer(7, 9, 8, 2, 16, n_enc, num_decoder_layers=n_dec)
    fig = diagrams.encoder_decoder(model)
    assert isinstance(fig, Figure)
    assert len(gids(fig, "encoder block")) == shown_enc
    assert len(gids(fig, "decoder block")) == shown_dec
    drawn = texts(fig)
    assert f"Encoder: {n_enc} transformer blocks" in drawn
    assert f"Decoder: {n_dec} decoder blocks" in drawn
    assert f"Transformer Block {n_enc}" in drawn and f"Decoder Block {n_dec}" in drawn
    with pytest.raises(TypeError, match="Transformer"):
        diagrams.encoder_decoder(TransformerBlock(8, 2))


def test_autoregressive_decoding_fig_7_17_one_decoder_call_per_step():
    steps = [(["<start>"], "nous"), (["<start>", "nous"], "aimons"),
             (["<start>", "nous", "aimons"], "<stop>")]
    fig = diagrams.autoregressive_decoding("we love deep learning <stop>".split(), steps)
    assert isinstance(fig, Figure)
    assert len(gids(fig, "decoder step")) == 3
    drawn = texts(fig)
    assert all(word in drawn for word in ["nous", "aimons", "<stop>", "learning"])
    with pytest.raises(ValueError, match="steps must be"):
        diagrams.autoregressive_decoding(["we"], [])
    with pytest.raises(ValueError, match="source must be"):
        diagrams.autoregressive_decoding([], steps)


def test_autoregressive_decoding_wraps_its_calls_into_rows_that_fit_the_column():
    """Eight calls: two rows of four, z reaching every call, at most MAX_WIDTH wide."""
    outputs = "nous adorons l' apprentissage profond en mathématiques <stop>".split()
    steps = [(["<start>"] + outputs[:k], word) for k, word in enumerate(outputs)]
    fig = diagrams.autoregressive_decoding("we love deep learning . <stop>".split(), steps)
    calls = gids(fig, "decoder step")
    assert len(calls) == 8 and legible(fig)
    rows = sorted({round(p.get_y(), 6) for p in calls}, reverse=True)
    assert len(rows) == 2
    assert [sum(round(p.get_y(), 6) == y for p in calls) for y in rows] == [4, 4]
    drawn = texts(fig)
    assert [f"call {k}" in drawn for k in range(1, 9)] == [True] * 8
    one_row = diagrams.autoregressive_decoding(["we"], steps, per_row=8)
    assert len({round(p.get_y(), 6) for p in gids(one_row, "decoder step")}) == 1
    with pytest.raises(ValueError, match="per_row"):
        diagrams.autoregressive_decoding(["we"], steps, per_row=0)


def test_the_other_figures_fit_the_books_column():
    figures = [diagrams.self_attention_flow(),
               diagrams.multi_head_attention(MultiHeadAttention(8, 5, m=2), max_heads=5),
               diagrams.transformer_blocks(TransformerBlock(8, 2, n1=16),
                                           TransformerDecoderBlock(8, 2, n1=16)),
               diagrams.encoder_decoder(Transformer(7, 9, 8, 2, 16, 2, num_decoder_layers=3))]
    assert all(legible(fig) for fig in figures)
