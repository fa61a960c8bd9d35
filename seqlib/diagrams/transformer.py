"""The architecture figures of Section 7.5: self-attention (Fig. 7.12), multi-head
self-attention (Fig. 7.13), the transformer block and decoder block (Fig. 7.15), the
encoder-decoder transformer (Fig. 7.16) and autoregressive decoding (Fig. 7.17).

Where a figure shows a model, it is read off the model object: the heads of a
`MultiHeadAttention`, the steps of a `TransformerBlock` or `TransformerDecoderBlock` in the
order their forward runs them (post- or pre-norm), the blocks of a `Transformer`. Patches
that stand for a model's parts carry a gid ("head", "sublayer", "norm", "residual",
"encoder block", "decoder block", "decoder step"), so a test can count them.
"""

import math

import matplotlib.pyplot as plt

from seqlib.checks import positive_int
from seqlib.diagrams import MAX_WIDTH, arrow, box, canvas, frame, label, op, time_label

LEARNED = "#1f5fbf"  # the learned matrices W_q, W_k, W_v of (7.24) (blue in Fig. 7.12)
NON_CAUSAL = "#c0392b"  # what the non-causal form adds (red in Fig. 7.12)


def _tagged(ax, gid: str) -> None:
    """Give the last patch drawn on `ax` the gid `gid`."""
    ax.patches[-1].set_gid(gid)


def _matrix(ax, x: float, y: float, text: str, colour: str = LEARNED, width: float = 0.62):
    """A small box holding a learned matrix, drawn in `colour`."""
    box(ax, x, y, kind="input", width=width, height=0.42, edgecolor=colour)
    label(ax, x, y, text, fontsize=9, color=colour)


# ------------------------------------------------------------------------------ Fig. 7.12

def self_attention_flow(*, learned: bool = True, non_causal: bool = True):
    """Fig. 7.12: how u^<t> is formed by self-attention. In black, the simple causal form
    (7.23): u^<t> = sum_{tau <= t} alpha^t_tau x^<tau>; in blue (`learned`), the matrices
    W_q, W_k, W_v of (7.24); in red (`non_causal`), the times after t that the non-causal
    form adds. Returns the figure."""
    names = ["1", "2", None, r"\tau", None, "t"] + (["t+1", None, "T"] if non_causal else [])
    centres, x = [], 2.0
    for name in names:
        step = 0.7 if name is None else (2.8 if name == "t" and learned else 1.9)
        centres.append(x + (step / 2 if name != "t" or not learned else 0.95))
        x += step
    width, height = x + 0.3, 7.6
    fig, ax = canvas(width, height, scale=min(0.62, MAX_WIDTH / width))
    y_in, y_w, y_q, y_a, y_mul, y_sum, y_out = 0.5, 1.55, 2.3, 3.05, 4.25, 5.55, 6.55
    t_x = centres[names.index("t")]
    q_from = (t_x + 1.15, y_w + 0.21) if learned else (t_x + 0.3, y_in + 0.28)
    q_xs = [c - 0.22 for c, n in zip(centres, names, strict=True) if n is not None]
    # the query line: W_q x^<t> (or x^<t> itself) reaches the weight of every key
    ax.plot([q_from[0], q_from[0]], [q_from[1], y_q], color="black", linewidth=1.0)
    ax.plot([q_xs[0], q_from[0]], [y_q, y_q], color="black", linewidth=1.0)
    if non_causal:
        ax.plot([q_from[0], q_xs[-1]], [y_q, y_q], color=NON_CAUSAL, linewidth=1.0)
    if learned:  # the query W_q x^<t>, from the input x^<t>
        _matrix(ax, t_x + 1.15, y_w, "$W_q$")
        ax.plot([t_x + 0.55, t_x + 1.15], [y_in, y_in], color="black", linewidth=1.0)
        arrow(ax, (t_x + 1.15, y_in), (t_x + 1.15, y_w - 0.21))
    for name, c in zip(names, centres, strict=True):
        if name is None:
            for y in (y_in, y_a, y_mul):
                label(ax, c, y, r"$\cdots$", fontsize=12)
            continue
        colour = NON_CAUSAL if non_causal and c > t_x else "black"
        key_x, value_x, alpha_x = c - 0.62, c + 0.4, c - 0.4
        box(ax, c, y_in, time_label("x", name), kind="input", width=1.1, height=0.55,
            edgecolor=colour)
        if learned:
            _matrix(ax, key_x, y_w, "$W_k$", width=0.56)
            _matrix(ax, value_x, y_w, "$W_v$", width=0.56)
            arrow(ax, (key_x, y_in + 0.28), (key_x, y_w - 0.21), colour=colour)
            arrow(ax, (value_x, y_in + 0.28), (value_x, y_w - 0.21), colour=colour)
        arrow(ax, (key_x, (y_w + 0.21) if learned else (y_in + 0.28)), (key_x, y_a - 0.27),
              colour=colour)  # the key
        arrow(ax, (alpha_x + 0.18, y_q), (alpha_x + 0.18, y_a - 0.27), colour=colour,
              shrink=0)  # the query
        box(ax, alpha_x, y_a, rf"$\alpha^{{\langle t \rangle}}_{{{name}}}$", kind="attention",
            width=0.9, height=0.52, edgecolor=colour)
        op(ax, c, y_mul, r"$\times$")
        arrow(ax, (alpha_x, y_a + 0.26), (c - 0.13, y_mul - 0.13), colour=colour)
        arrow(ax, (value_x, (y_w + 0.21) if learned else (y_in + 0.28)),
              (c + 0.13, y_mul - 0.13), colour=colour)  # the value
        arrow(ax, (c, y_mul + 0.18), (t_x, y_sum - 0.18), colour=colour)
    op(ax, t_x, y_sum, "+")
    box(ax, t_x, y_out, time_label("u", "t"), kind="output", width=1.1, height=0.55)
    arrow(ax, (t_x, y_sum + 0.18), (t_x, y_out - 0.28))
    for y, text in [(y_in, "input"), (y_a, "attention\nweights"), (y_out, "output")]:
        label(ax, 0.9, y, text, fontsize=9)
    label(ax, 0.9, y_q, "query", fontsize=9)
    notes = [("black: simple causal self-attention, (7.23)", "black")]
    if learned:
        notes.append(("blue: learned $W_q$, $W_k$, $W_v$, (7.24)", LEARNED))
    if non_causal:
        notes.append((r"red: the non-causal form adds $\tau > t$", NON_CAUSAL))
    for k, (text, colour) in enumerate(notes):
        label(ax, width - 0.2, height - 0.3 - 0.42 * k, text, fontsize=9, color=colour,
              ha="right")
    return fig


# ------------------------------------------------------------------------------ Fig. 7.13

def multi_head_attention(mha, *, max_heads: int = 4):
    """Fig. 7.13: multi-head self-attention (7.25)-(7.26), drawn from a
    seqlib.self_attention.MultiHeadAttention: one column per head h = 1, ..., H with its
    W^h_q, W^h_k, W^h_v, its outputs u^{h,<t>}, and W^h_c into the sum that gives u^<t>.
    With more than `max_heads` heads, the middle ones are shown as dots."""
    from seqlib.self_attention import MultiHeadAttention

    if not isinstance(mha, MultiHeadAttention):
        raise TypeError(f"mha must be a seqlib MultiHeadAttention, got {type(mha).__name__}")
    H = mha.heads
    shown = list(range(1, H + 1)) if H <= max_heads else [1, 2, None, H]
    column = 2.9
    width, height = 1.0 + column * len(shown), 7.0
    fig, ax = canvas(width, height, scale=min(0.7, MAX_WIDTH / width))
    centre = width / 2
    y_in, y_head, y_u, y_sum, y_out = 0.55, 2.45, 3.95, 5.35, 6.35
    inputs = (r"$x^{\langle 1 \rangle}\ \ x^{\langle 2 \rangle}\ \cdots\ x^{\langle t \rangle}"
              r"\ \cdots\ x^{\langle T \rangle}$")
    outputs = inputs.replace("x^", "u^")
    box(ax, centre, y_in, inputs, kind="input", width=min(width - 0.6, 5.2), height=0.6)
    for k, h in enumerate(shown):
        c = 0.5 + column * (k + 0.5)
        if h is None:
            label(ax, c, y_head, r"$\cdots$", fontsize=14)
            label(ax, c, y_u, r"$\cdots$", fontsize=14)
            continue
        start = (centre + (c - centre) * 0.25, y_in + 0.3)
        arrow(ax, start, (c, y_head - 0.4), colour=LEARNED)
        label(ax, (start[0] + c) / 2, (y_in + y_head) / 2 - 0.05,
              rf"$W^{{{h}}}_q,\ W^{{{h}}}_k,\ W^{{{h}}}_v$", fontsize=9, color=LEARNED,
              bbox=dict(facecolor="white", edgecolor="none", pad=0.5))
        box(ax, c, y_head, f"head {h}", kind="attention", width=2.2, height=0.8)
        _tagged(ax, "head")
        head_out = rf"$u^{{{h},\langle 1 \rangle}}\ \cdots\ u^{{{h},\langle T \rangle}}$"
        box(ax, c, y_u, head_out, kind="state", width=2.2, height=0.6)
        arrow(ax, (c, y_head + 0.4), (c, y_u - 0.3))
        arrow(ax, (c, y_u + 0.3), (centre, y_sum - 0.18), colour=LEARNED)
        label(ax, (c + centre) / 2 + (0.3 if c == centre else 0.0),
              (y_u + y_sum) / 2 + 0.1, rf"$W^{{{h}}}_c$", fontsize=9, color=LEARNED,
              bbox=dict(facecolor="white", edgecolor="none", pad=0.5))
    op(ax, centre, y_sum, "+")
    box(ax, centre, y_out, outputs, kind="output", width=min(width - 0.6, 5.2), height=0.6)
    arrow(ax, (centre, y_sum + 0.18), (centre, y_out - 0.3))
    label(ax, centre + 0.4, y_sum + 0.1,
          r"$u^{\langle t \rangle} = \sum_h W^h_c\, u^{h,\langle t \rangle}$, (7.26)",
          fontsize=9, ha="left")
    return fig


# ------------------------------------------------------------------------------ Fig. 7.15

def _kind(name: str) -> str:
    return "layer" if name.startswith("feed") else "attention"


def _title(name: str) -> str:
    return name[0].upper() + name[1:]


def _draw_block(ax, block, title: str) -> None:
    """One block on `ax`, bottom to top in the order of block.sublayers(): each sublayer,
    its residual connection (+) and its LayerNorm, after it (post-norm, the chapter's
    (7.31)) or before it (pre-norm). A cross-attention sublayer gets the code z."""
    sublayers = block.sublayers()
    per = 2.8
    height, width = 1.9 + per * len(sublayers), 6.2
    frame(ax, width, height, title)
    x, y = 2.95, 0.35
    pre = block.norm_first
    name_in = r"$a_{\mathrm{in}}^{\langle 1 \rangle} \cdots a_{\mathrm{in}}^{\langle T \rangle}$"
    name_out = r"$a_{\mathrm{out}}^{\langle 1 \rangle} \cdots a_{\mathrm{out}}^{\langle T \rangle}$"
    box(ax, x, y, name_in, kind="input", width=2.4, height=0.5)
    y += 0.25
    for k, (name, _, _) in enumerate(sublayers):
        start = y  # where the residual connection leaves
        y_first, y_plus, y_second = y + 0.65, y + 1.45, y + 2.2
        if pre:
            box(ax, x, y_first, "LayerNorm", kind="norm", width=3.0, height=0.5)
            _tagged(ax, "norm")
            box(ax, x, y_plus - 0.05, _title(name), kind=_kind(name), width=3.6, height=0.5,
                fontsize=9)
            _tagged(ax, "sublayer")
            arrow(ax, (x, y), (x, y_first - 0.25))
            arrow(ax, (x, y_first + 0.25), (x, y_plus - 0.3))
            op(ax, x, y_second, "+")
            _tagged(ax, "residual")
            arrow(ax, (x, y_plus + 0.2), (x, y_second - 0.18))
            top = y_second + 0.18
        else:
            box(ax, x, y_first, _title(name), kind=_kind(name), width=3.6, height=0.5,
                fontsize=9)
            _tagged(ax, "sublayer")
            op(ax, x, y_plus, "+")
            _tagged(ax, "residual")
            box(ax, x, y_second, "LayerNorm", kind="norm", width=3.0, height=0.5)
            _tagged(ax, "norm")
            arrow(ax, (x, y), (x, y_first - 0.25))
            arrow(ax, (x, y_first + 0.25), (x, y_plus - 0.18),
                  rf"$u_{{[{2 * k + 1}]}}$", text_offset=(0.4, 0.0), fontsize=9)
            arrow(ax, (x, y_plus + 0.18), (x, y_second - 0.25))
            top = y_second + 0.25
        # the residual connection, around the sublayer (and the LayerNorm before it)
        y_join, x_skip = (y_second if pre else y_plus), x - 2.15
        ax.plot([x, x_skip, x_skip], [start + 0.1, start + 0.1, y_join], color="black",
                linewidth=1.0)
        arrow(ax, (x_skip, y_join), (x - 0.18, y_join), shrink=0)
        if "cross" in name:
            cross_y = y_plus - 0.05 if pre else y_first
            arrow(ax, (width - 0.25, cross_y), (x + 1.82, cross_y), "$z$",
                  text_offset=(0.0, 0.22), fontsize=10)
        y = top + 0.45
        if k < len(sublayers) - 1:
            arrow(ax, (x, top), (x, y), "" if pre else rf"$u_{{[{2 * k + 2}]}}$",
                  text_offset=(0.4, 0.0), fontsize=9)
    box(ax, x, height - 0.35, name_out, kind="output", width=2.4, height=0.5)
    arrow(ax, (x, top), (x, height - 0.6))


def transformer_blocks(encoder_block, decoder_block):
    """Fig. 7.15: (a) a transformer block, (b) a transformer decoder block, each drawn from
    its object (seqlib.TransformerBlock, seqlib.TransformerDecoderBlock): its sublayers in
    the order forward runs them, each with its residual connection and LayerNorm (post-norm
    as (7.31), or pre-norm). Returns the figure."""
    from seqlib.transformer import TransformerBlock, TransformerDecoderBlock

    if not isinstance(encoder_block, TransformerBlock):
        raise TypeError(f"encoder_block must be a TransformerBlock, got "
                        f"{type(encoder_block).__name__}")
    if not isinstance(decoder_block, TransformerDecoderBlock):
        raise TypeError(f"decoder_block must be a TransformerDecoderBlock, got "
                        f"{type(decoder_block).__name__}")
    rows = max(len(encoder_block.sublayers()), len(decoder_block.sublayers()))
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 0.62 * (1.9 + 2.8 * rows) + 0.9))
    for ax, block, tag, name in [(axes[0], encoder_block, "a", "transformer block"),
                                 (axes[1], decoder_block, "b", "transformer decoder block")]:
        norm = "pre-norm" if block.norm_first else "post-norm"
        _draw_block(ax, block, f"({tag}) {name}, {norm}")
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------ Fig. 7.16

def _stack(ax, x: float, y: float, n: int, name: str, gid: str, max_blocks: int) -> float:
    """n blocks stacked upwards from y at x (the middle ones as dots past max_blocks);
    returns the y just above the top block."""
    shown = list(range(1, n + 1)) if n <= max_blocks else [1, None, n]
    for k, ell in enumerate(shown):
        if ell is None:
            label(ax, x, y + 0.35, r"$\vdots$", fontsize=14)
            y += 0.7
            continue
        if k:
            arrow(ax, (x, y - 0.2), (x, y))
        box(ax, x, y + 0.3, f"{name} {ell}", kind="unit", width=3.2, height=0.6)
        _tagged(ax, gid)
        y += 0.8
    return y


def _stack_height(n: int, max_blocks: int) -> float:
    return 0.8 * n if n <= max_blocks else 0.8 * 2 + 0.7


def encoder_decoder(model, *, max_blocks: int = 3):
    """Fig. 7.16: the encoder-decoder transformer, drawn from a seqlib.Transformer: the
    positional embedding and the stack of transformer blocks of the encoder, whose output
    is the code z; the decoder's positional embedding and stack of decoder blocks, each fed
    z; the output layer; and the loop of autoregressive decoding. Stacks of more than
    `max_blocks` blocks show the middle ones as dots. Returns the figure."""
    from seqlib.transformer import Transformer

    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a seqlib Transformer, got {type(model).__name__}")
    n_enc, n_dec = len(model.encoder), len(model.decoder)
    y0 = 2.9  # the bottom of both stacks
    top = y0 + max(_stack_height(n_enc, max_blocks), _stack_height(n_dec, max_blocks))
    height, width = top + 2.0, 12.0
    fig, ax = canvas(width, height, scale=0.68)
    xe, xd = 2.4, 7.6
    for x, name, tilde, part in [(xe, "x", r"\tilde{x}", f"Encoder: {n_enc} transformer blocks"),
                                 (xd, "y", r"\tilde{y}", f"Decoder: {n_dec} decoder blocks")]:
        label(ax, x, 0.25, part, fontsize=9, color="0.3")
        seq = rf"${name}^{{\langle 1 \rangle}} \cdots {name}^{{\langle T \rangle}}$"
        box(ax, x, 0.95, seq, kind="input", width=2.2, height=0.5)
        arrow(ax, (x, 1.2), (x, 1.65))
        box(ax, x, 1.95, "Positional Embedding", kind="layer", width=3.2, height=0.6)
        arrow(ax, (x, 2.25), (x, y0), rf"${tilde}^{{\langle 1 \rangle}} \cdots {tilde}"
              r"^{\langle T \rangle}$", text_offset=(1.05, 0.0), fontsize=9)
    top_e = _stack(ax, xe, y0, n_enc, "Transformer Block", "encoder block", max_blocks)
    top_d = _stack(ax, xd, y0, n_dec, "Decoder Block", "decoder block", max_blocks)
    # the code z: out of the encoder, into every decoder block
    z_y = top_e + 0.55
    arrow(ax, (xe, top_e - 0.2), (xe, z_y - 0.25))
    box(ax, xe, z_y, r"code $z^{\langle 1 \rangle} \cdots z^{\langle T \rangle}$",
        kind="state", width=2.4, height=0.5)
    bus_x = (xe + xd) / 2
    ax.plot([xe + 1.2, bus_x], [z_y, z_y], color="black", linewidth=1.0)
    decoder_ys = [p.get_y() + p.get_height() / 2 for p in ax.patches
                  if p.get_gid() == "decoder block"]
    ax.plot([bus_x, bus_x], [z_y, min(decoder_ys)], color="black", linewidth=1.0)
    for y_block in decoder_ys:
        arrow(ax, (bus_x, y_block), (xd - 1.62, y_block), shrink=0)
    # the output layer and the autoregressive loop
    y_out = top_d + 0.35
    arrow(ax, (xd, top_d - 0.2), (xd, y_out - 0.3))
    box(ax, xd, y_out, r"output layer, $S_{\mathrm{softmax}}$", kind="layer", width=3.2,
        height=0.6)
    y_hat = y_out + 0.95
    arrow(ax, (xd, y_out + 0.3), (xd, y_hat - 0.25))
    box(ax, xd, y_hat, r"$\hat{y}^{\langle 1 \rangle} \cdots \hat{y}^{\langle T \rangle}$",
        kind="output", width=2.2, height=0.5)
    arrow(ax, (xd + 1.1, y_hat), (xd + 1.1, 0.95), "", linestyle="--",
          connection="arc3,rad=-0.45")
    label(ax, width - 0.05, (y_hat + 0.95) / 2, "autoregressive\nfeedback", fontsize=9,
          ha="right")
    return fig


# ------------------------------------------------------------------------------ Fig. 7.17

def autoregressive_decoding(source: list, steps: list, *, per_row: int = 4):
    """Fig. 7.17: the encoder runs once on the source tokens and gives the code z; the
    decoder then runs once per output token, (7.34): call t reads z and the tokens so far
    (<start> and the outputs of calls 1, ..., t - 1, listed under it) and gives the next
    token (above it). `source`: the source tokens (strs); `steps`: one (decoder input
    tokens, output token) pair per decoder call, in order, for example from a greedy
    decoding. The calls run left to right in rows of at most `per_row` (rows of about equal
    length, one under the other), z reaching every row, so the figure stays at most
    MAX_WIDTH inches wide. Returns the figure."""
    if not source or not all(isinstance(w, str) for w in source):
        raise ValueError(f"source must be a non-empty list of tokens (strs), got {source!r}")
    if not steps or not all(isinstance(s, tuple) and len(s) == 2 for s in steps):
        raise ValueError(f"steps must be a non-empty list of (input tokens, output token) "
                         f"pairs, got {steps!r}")
    positive_int("per_row", per_row)
    n, col, line, x0 = len(steps), 2.0, 0.3, 4.2
    n_rows = math.ceil(n / per_row)
    in_row = math.ceil(n / n_rows)  # rows of about equal length
    rows = [steps[k:k + in_row] for k in range(0, n, in_row)]
    # per row, bottom to top: the call numbers, the input tokens, the boxes, the outputs, z
    depths = [max(len(inputs) for inputs, _ in row) for row in rows]
    depths[0] = max(depths[0], len(source))  # the encoder, in the first row
    heights = [3.2 + line * depth for depth in depths]
    bases = [sum(heights[r + 1:]) for r in range(len(rows))]  # the first row on top
    width, height = x0 + col * (in_row - 0.5) + 0.2, sum(heights)
    fig, ax = canvas(width, height, scale=min(0.78, MAX_WIDTH / width))
    y_boxes = [base + 0.75 + line * depth + 0.45 for base, depth in zip(bases, depths,
                                                                         strict=True)]

    def tokens(x, y_box, words):
        """The tokens one under the other below a box at x, and an arrow into it."""
        for j, word in enumerate(words):
            label(ax, x, y_box - 0.72 - line * j, word, fontsize=9)
        arrow(ax, (x, y_box - 0.57), (x, y_box - 0.3))

    y_box = y_boxes[0]
    box(ax, 1.5, y_box, "Transformer\nEncoder", kind="unit", width=2.3, height=0.8,
        fontsize=9)
    tokens(1.5, y_box, source)
    y_z = y_box + 1.55
    ax.plot([1.5, 1.5, x0 + col * (len(rows[0]) - 1) - 0.45], [y_box + 0.4, y_z, y_z],
            color="black", linewidth=1.0)
    label(ax, 1.75, y_z - 0.28, "$z$", fontsize=11)
    x_bus = (1.5 + 2.3 / 2 + x0 - 1.7 / 2) / 2  # z down to the other rows, left of them
    for r, (row, base, y_box) in enumerate(zip(rows, bases, y_boxes, strict=True)):
        y_out, y_row = y_box + 0.95, y_box + 1.55
        if r:
            ax.plot([x_bus, x_bus, x0 + col * (len(row) - 1) - 0.45], [y_z, y_row, y_row],
                    color="black", linewidth=1.0)
        for i, (inputs, output) in enumerate(row):
            x = x0 + col * i
            box(ax, x, y_box, "Transformer\nDecoder", kind="unit", width=1.7, height=0.8,
                fontsize=9)
            _tagged(ax, "decoder step")
            tokens(x, y_box, inputs)
            arrow(ax, (x - 0.45, y_row), (x - 0.45, y_box + 0.4), shrink=0)
            arrow(ax, (x + 0.35, y_box + 0.4), (x + 0.35, y_out - 0.18))
            label(ax, x + 0.35, y_out, output, fontsize=10, fontweight="bold")
            label(ax, x, base + 0.25, f"call {r * in_row + i + 1}", fontsize=9, color="0.35")
    return fig
