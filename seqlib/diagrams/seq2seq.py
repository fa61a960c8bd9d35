"""Figs. 7.9 and 7.10 of Section 7.4, drawn from the models they show.

- `draw_encoder_decoder(model)`: Fig. 7.9, an encoder-decoder (`seqlib.seq2seq.Seq2Seq`)
  unrolled on a sentence pair. Panel (a) or (b) follows the model: with `feed_code=False`
  the code z is only the decoder's initial state, (a); with `feed_code=True` it also joins
  the input of every decoder step and the output layer, (b). A model that reverses its
  source is drawn reading the source backwards, and one unit box is drawn per layer.
- `draw_attention_encoder_decoder(model)`: Fig. 7.10, the encoder-decoder with attention
  (`seqlib.seq2seq.AttentionSeq2Seq`): one encoder row per direction, the decoder's initial
  state s^<0> = tanh(W_init h_r^<1> + b_init) drawn from the reverse state h_r^<1>, the
  attention of decoder step t with the query z_q = s^<t-1> and the keys and values v^<tau>,
  the score the model uses, and what its output layer reads.
"""

from matplotlib import patheffects

from seqlib.diagrams import arrow, box, canvas, label, time_label
from seqlib.seq2seq import AttentionSeq2Seq, Seq2Seq

FIG_7_9_SOURCE = ("We", "enjoyed", "writing", "this", "book")
FIG_7_9_TARGET = ("Nous", "avons", "aimé", "écrire", "ce", "livre", "<end>")
CODE_COLOUR = "#b45f06"  # the code z and where it goes
UNIT_W, UNIT_H = 0.9, 0.5


def _unit_name(recurrent) -> str:
    """The unit's class name ("RNN", "LSTM", "GRU"), written in the boxes."""
    return type(recurrent).__name__


def _check_words(name: str, words) -> tuple:
    """`words` as a tuple, or a TypeError naming the argument `name`."""
    if isinstance(words, str) or not all(isinstance(w, str) for w in words) or not words:
        raise TypeError(f"{name} must be a non-empty sequence of words (str), got {words!r}")
    return tuple(words)


def draw_encoder_decoder(model, source=FIG_7_9_SOURCE, target=FIG_7_9_TARGET, *, ax=None,
                         title: str | None = None):
    """Fig. 7.9: `model` (a seqlib.seq2seq.Seq2Seq) unrolled on `source` -> `target`.

    Encoder units read the source (backwards if `model.reverse_source`), the code z (the
    encoder's last state) is the decoder's initial state, and the decoder reads <start> and
    then its previous output word. With `model.feed_code`, z also feeds every decoder step
    and every output, panel (b). One row of units per layer. Returns the figure.
    """
    if not isinstance(model, Seq2Seq):
        raise TypeError(f"model must be a seqlib.seq2seq.Seq2Seq, got {type(model).__name__}")
    source, target = _check_words("source", source), _check_words("target", target)
    read = source[::-1] if model.reverse_source else source
    layers, name = model.encoder.recurrent.num_layers, _unit_name(model.encoder.recurrent)
    dx, gap = 1.15, 1.35  # column spacing, and around the code z
    y_in, y_unit, dy = 0.75, 1.85, 0.95  # input words, first layer, between layers
    y_top = y_unit + (layers - 1) * dy  # top layer
    y_out = y_top + 1.0
    x_enc = [0.9 + i * dx for i in range(len(read))]
    x_z = x_enc[-1] + gap
    x_dec = [x_z + gap + j * dx for j in range(len(target))]
    width, height = x_dec[-1] + 0.8, y_out + (0.75 if title else 0.45)
    fig, ax = canvas(width, height, scale=0.62, ax=ax)

    for xs, inputs in [(x_enc, read), (x_dec, ("<start>",) + target[:-1])]:
        for k, (x, word) in enumerate(zip(xs, inputs, strict=True)):
            label(ax, x, y_in, word, fontsize=9)
            arrow(ax, (x, y_in + 0.15), (x, y_unit - UNIT_H / 2))
            for layer in range(layers):
                y = y_unit + layer * dy
                box(ax, x, y, name, width=UNIT_W, height=UNIT_H, fontsize=8)
                if layer:
                    arrow(ax, (x, y - dy + UNIT_H / 2), (x, y - UNIT_H / 2))
                if k:  # the state from the previous step
                    arrow(ax, (x - dx + UNIT_W / 2, y), (x - UNIT_W / 2, y))
    for x, word in zip(x_dec, target, strict=True):
        arrow(ax, (x, y_top + UNIT_H / 2), (x, y_out - 0.15))
        label(ax, x, y_out, word, fontsize=9)

    y_z = (y_unit + y_top) / 2
    box(ax, x_z, y_z, "$z$", kind="state", width=0.55, height=0.5, fontsize=11)
    for layer in range(layers):  # each layer's last state: the code, the decoder's start
        y = y_unit + layer * dy
        arrow(ax, (x_enc[-1] + UNIT_W / 2, y), (x_z - 0.28, y_z), colour=CODE_COLOUR)
        arrow(ax, (x_z + 0.28, y_z), (x_dec[0] - UNIT_W / 2, y), colour=CODE_COLOUR)
    if model.feed_code:  # (b): z joins every step's input and every output
        y_low, y_high = (y_in + y_unit - UNIT_H / 2) / 2 + 0.05, y_top + UNIT_H / 2 + 0.22
        style = dict(colour=CODE_COLOUR, linestyle="--")
        for y in (y_low, y_high):
            ax.plot([x_z, x_dec[-1] + 0.3], [y, y], color=CODE_COLOUR, linestyle="--", lw=1.0)
        ax.plot([x_z, x_z], [y_low, y_high], color=CODE_COLOUR, linestyle="--", lw=1.0)
        for x in x_dec:
            arrow(ax, (x + 0.3, y_low), (x + 0.3, y_unit - UNIT_H / 2), **style, shrink=0)
            arrow(ax, (x + 0.3, y_high), (x + 0.3, y_out - 0.17), **style, shrink=0)

    for xs, text in [(x_enc, "Encoder"), (x_dec, "Decoder")]:
        label(ax, (xs[0] + xs[-1]) / 2, 0.2, text, fontsize=10, weight="bold")
    if title:
        label(ax, width / 2, height - 0.25, title, fontsize=11)
    return fig


def _bridge(ax) -> None:
    """Give the last patch drawn a white outline, so that it passes over the lines it
    crosses."""
    ax.patches[-1].set_path_effects([patheffects.withStroke(linewidth=4, foreground="white"),
                                     patheffects.Normal()])


def draw_attention_encoder_decoder(model, *, ax=None, title: str | None = None):
    """Fig. 7.10: `model` (a seqlib.seq2seq.AttentionSeq2Seq) with one encoder row per
    direction, v^<tau> = [h_f^<tau>; h_r^<tau>], the attention of decoder step t (query
    z_q^<t> = s^<t-1>, keys and values v^<tau>, the model's score), and the decoder from
    <start> to <stop>, whose initial state s^<0> comes from h_r^<1> through the layer
    `model.decoder.initial` and a tanh (the chapter leaves s^<0> open). With
    `model.deep_output` the output y_hat^<t> also reads u^<t> and y_hat^<t-1> (dashed).
    Returns the figure, 8.8 inches wide, its text large enough that the time superscripts
    stay legible at a book's column width."""
    if not isinstance(model, AttentionSeq2Seq):
        raise TypeError(f"model must be a seqlib.seq2seq.AttentionSeq2Seq, got "
                        f"{type(model).__name__}")
    recurrent = model.encoder.recurrent
    directions, name = recurrent.directions, _unit_name(recurrent)
    y_hat, red = r"\hat{y}", "#990000"
    # font sizes: `times` for every symbol with a time superscript, large enough that
    # the subscripts of T_in and T_out within a superscript stay legible; `text` for words
    times, text = 16, 13
    enc_t = ["1", None, r"T_{in}"]  # None: an ellipsis
    dec_t = ["1", None, "t-1", "t", None, r"T_{out}"]
    dec_in = ["<start>", None, time_label(y_hat, "t-2"), time_label(y_hat, "t-1"), None,
              time_label(y_hat, r"T_{out}-1")]
    dec_out = [time_label(y_hat, "1"), None, time_label(y_hat, "t-1"), time_label(y_hat, "t"),
               None, "<stop>"]

    w, h = 0.95, 0.8  # unit boxes
    shift = 0.27 if directions == 2 else 0.0  # the two directions' boxes, staggered

    def xs(first, steps, dx):  # column positions, an ellipsis taking 0.6 of a column
        out, x = [], first
        for k, t in enumerate(steps):
            x += 0 if k == 0 else dx * (0.6 if t is None or steps[k - 1] is None else 1.0)
            out.append(x)
        return out

    x_enc = xs(0.85, enc_t, 1.55)
    x_dec = xs(x_enc[-1] + 2.6, dec_t, 1.45)
    y_in, y_row, dy = 0.8, 2.05, 1.2
    y_rows = [y_row + d * dy for d in range(directions)]
    y_v = y_rows[-1] + 1.1
    y_dec = (y_rows[0] + y_rows[-1]) / 2
    y_out = y_dec + 1.35
    y_att = y_v + 1.15  # centre of the attention box
    att_h = 0.95
    width, height = x_dec[-1] + 0.8, y_att + att_h / 2 + (0.65 if title else 0.1)
    created = ax is None
    fig, ax = canvas(width, height, scale=0.8, ax=ax)
    if created:  # the drawing fills the figure: 0.8 inch per unit
        fig.subplots_adjust(left=0, right=1, bottom=0, top=1)
    gap = 0.27  # from a label's centre to the arrow that leaves or reaches it

    states, offsets = ["h_f", "h_r"], [-shift, shift]
    columns = [(x, t) for x, t in zip(x_enc, enc_t, strict=True) if t is not None]
    for x, t in columns:  # the lines first, so that the states' arrows pass over them
        label(ax, x, y_in, time_label("x", t), fontsize=times)
        label(ax, x, y_v, time_label("v", t), fontsize=times)
        for d, y in enumerate(y_rows):
            x_in = x + offsets[d] + (0.0 if d == 0 else w / 2 - 0.12)  # x^<tau> in
            arrow(ax, (x_in, y_in + gap), (x_in, y - h / 2), shrink=0)
            last = d == directions - 1
            x_v = x + offsets[d] - (0.0 if last else w / 2 - 0.12)  # into v^<tau>
            arrow(ax, (x_v, y + h / 2), (x_v, y_v - gap), shrink=0)
    for d, y in enumerate(y_rows):
        for i, (x, t) in enumerate(zip(x_enc, enc_t, strict=True)):
            x += offsets[d]
            if t is None:
                label(ax, x, y, r"$\cdots$", fontsize=14)
            else:
                box(ax, x, y, f"{name}\n" + time_label(states[d], t), width=w, height=h,
                    fontsize=times)
            if i:  # the forward row runs to the right, the reverse row to the left
                before = x_enc[i - 1] + offsets[d]
                ends = [(before + (0.22 if enc_t[i - 1] is None else w / 2), y),
                        (x - (0.22 if t is None else w / 2), y)]
                arrow(ax, *(ends if d == 0 else ends[::-1]))
                _bridge(ax)

    for j, (x, t) in enumerate(zip(x_dec, dec_t, strict=True)):
        if j:
            start = x_dec[j - 1] + (0.22 if dec_t[j - 1] is None else w / 2)
            arrow(ax, (start, y_dec), (x - (0.22 if t is None else w / 2), y_dec))
        if t is None:
            label(ax, x, y_dec, r"$\cdots$", fontsize=14)
            continue
        box(ax, x, y_dec, f"{name}\n" + time_label("s", t), width=w, height=h,
            fontsize=times)
        label(ax, x, y_in, dec_in[j], fontsize=times if "$" in dec_in[j] else text)
        arrow(ax, (x, y_in + gap), (x, y_dec - h / 2))
        arrow(ax, (x, y_dec + h / 2), (x, y_out - gap))
        label(ax, x, y_out, dec_out[j], fontsize=times if "$" in dec_out[j] else text)
    # s^<0> = tanh(W_init h_r^<1> + b_init): from the reverse state that read the whole
    # sentence, between the two rows, through the layer W_init, b_init in the gap
    x_r1 = x_enc[0] + offsets[-1] - 0.2  # leaves the bottom of h_r^<1> (the last row)
    x_init = x_enc[-1] + offsets[-1] + w / 2 + 0.45  # the tanh layer
    ax.plot([x_r1, x_r1, x_init - 0.3], [y_rows[-1] - h / 2, y_dec, y_dec],
            color=CODE_COLOUR, lw=1.0, zorder=0.9)  # under the boxes and the arrows it crosses
    box(ax, x_init, y_dec, r"$\tanh$", kind="layer", width=0.6, height=0.45, fontsize=text,
        edgecolor=CODE_COLOUR)
    arrow(ax, (x_init + 0.3, y_dec), (x_dec[0] - w / 2, y_dec), time_label("s", "0"),
          text_offset=(0.0, 0.32), fontsize=times, colour=CODE_COLOUR)
    for xs_, words in [(x_enc, "Encoder"), (x_dec, "Decoder")]:
        label(ax, (xs_[0] + xs_[-1]) / 2, 0.2, words, fontsize=text, weight="bold")

    x_left, x_right = x_enc[0] - 0.5, x_dec[3] + 0.1
    score = model.decoder.attention.score
    box(ax, (x_left + x_right) / 2, y_att, f"attention at step $t$, (7.20)-(7.21), {score} "
        "score\nquery " + time_label("z_q", "t") + " = " + time_label("s", "t-1")
        + ", keys and values " + r"$v^{\langle \tau \rangle} = [h_f^{\langle \tau \rangle};"
        r" h_r^{\langle \tau \rangle}]$", kind="attention", width=x_right - x_left,
        height=att_h, fontsize=12)
    bottom = y_att - att_h / 2
    for x, _ in columns:
        arrow(ax, (x, y_v + gap), (x, bottom), colour=red)
    # the query leaves s^<t-1> to the right of the label y_hat^<t-1>, clear of it
    x_q, x_u = x_dec[2] + 0.62, x_dec[3] - 0.3
    arrow(ax, (x_dec[2] + w / 2 - 0.06, y_dec + h / 2), (x_q, bottom), colour=red)
    label(ax, x_q - 0.16, (y_out + bottom) / 2 + 0.25, time_label("z_q", "t"), fontsize=times,
          ha="right", color=red)
    arrow(ax, (x_u, bottom), (x_dec[3] - w / 2 + 0.1, y_dec + h / 2), colour=red)
    label(ax, x_u + 0.04, (y_out + bottom) / 2 + 0.22, time_label("u", "t"), fontsize=times,
          ha="left", color=red)
    if model.deep_output:  # the output also reads u^<t> and y_hat^<t-1>
        x, end = x_dec[3], (x_dec[3] - w / 2 + 0.1, y_dec + h / 2)
        on_u = (x_u + 0.3 * (end[0] - x_u), bottom + 0.3 * (end[1] - bottom))
        arrow(ax, on_u, (x - 0.12, y_out + 0.2), linestyle="--", colour=red, shrink=0)
        arrow(ax, (x + 0.25, y_in + gap), (x + 0.2, y_out - 0.2), linestyle="--",
              connection="arc3,rad=0.25")
    if title:
        label(ax, width / 2, height - 0.3, title, fontsize=13)
    return fig
