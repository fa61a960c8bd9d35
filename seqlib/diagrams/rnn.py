"""Figures 7.1-7.5 of Sections 7.1-7.2: tasks, paradigms, the unfolded RNN, its unit and
the toy example unrolled on its sentence.

Every drawing is a row of units (blue boxes) joined by their states, inputs below and
outputs above (`unrolled`). Fig. 7.4 reads the sizes and the activation off a `seqlib.RNN`,
so it cannot drift from the model it shows; Fig. 7.5 draws the predictions it is given (the
chapter's, or a trained model's).
"""

import matplotlib.pyplot as plt
import torch

from seqlib.checks import positive_int
from seqlib.diagrams import COLOURS, MAX_WIDTH, arrow, box, canvas, frame, label, op, time_label
from seqlib.rnn import RNN

DOTS = "..."  # a unit of `unrolled` drawn as an ellipsis: the steps in between


def unrolled(ax, units: list, inputs: list | None = None, outputs: list | None = None, *,
             x0: float = 1.0, y: float = 1.5, step: float = 1.4, width: float = 1.0,
             fontsize: float = 9, state_in: bool = False, state_out: bool = False,
             input_colours: list | None = None,
             output_colours: list | None = None) -> list[float]:
    """Units side by side from x = x0, joined left to right by the state.

    `units[i]` is the text of unit i, or DOTS for an ellipsis; `inputs[i]` / `outputs[i]`
    label an arrow into / out of unit i (None: no arrow). `state_in` / `state_out` add a
    dashed state arrow entering the first unit / leaving the last; `input_colours` /
    `output_colours` colour the labels. Returns the x of the units' centres.
    """
    n = len(units)
    inputs, outputs = inputs or [None] * n, outputs or [None] * n
    if not len(inputs) == len(outputs) == n:
        raise ValueError(f"units, inputs and outputs must have the same length, got {n}, "
                         f"{len(inputs)} and {len(outputs)}")
    xs = [x0 + i * step for i in range(n)]
    half = width / 2
    for i, (x, text) in enumerate(zip(xs, units, strict=True)):
        if text == DOTS:
            label(ax, x, y, r"$\cdots$", fontsize=fontsize + 2)
        else:
            box(ax, x, y, text, kind="unit", width=width, height=0.6, fontsize=fontsize)
        if i:
            dashed = DOTS in (text, units[i - 1])
            arrow(ax, (xs[i - 1] + half, y), (x - half, y), linestyle="--" if dashed else "-")
        if inputs[i] is not None:
            arrow(ax, (x, y - 0.95), (x, y - 0.3))
            colour = input_colours[i] if input_colours else "black"
            label(ax, x, y - 1.2, inputs[i], fontsize=fontsize, color=colour)
        if outputs[i] is not None:
            arrow(ax, (x, y + 0.3), (x, y + 0.95))
            colour = output_colours[i] if output_colours else "black"
            label(ax, x, y + 1.2, outputs[i], fontsize=fontsize, color=colour)
    if state_in:
        arrow(ax, (xs[0] - half - 0.7, y), (xs[0] - half, y), linestyle="--")
    if state_out:
        arrow(ax, (xs[-1] + half, y), (xs[-1] + half + 0.7, y), linestyle="--")
    return xs


def _t(name: str, t: str) -> str:
    return time_label(name, t)


def tasks(sentiment: str, classes: list[str], source: str, target: str, caption: str):
    """Fig. 7.1: (a) lookahead prediction up to the horizon tau, (b) sentiment of the
    sentence `sentiment` as a softmax over `classes`, (c) translation of `source` into
    `target` by an encoder and a decoder, (d) captioning of an image by a CNN and a decoder
    writing `caption`.
    Sentences are strings of space-separated words; one unit per word, and in (b) an encoded
    input (the word's vector) below each. Gray inputs are outputs of the step before, fed
    back; in (a) the labels, the values the predictions are compared with, are on top."""
    sentiment, source, target = sentiment.split(), source.split(), target.split()
    caption = caption.split()
    width = 1.4 * (len(source) + len(target)) + 1.4
    heights = (4.3, 3.9, 3.6, 3.2)
    fig, axes = plt.subplots(4, 1, figsize=(MAX_WIDTH, 8.8),
                             gridspec_kw={"height_ratios": heights})
    for ax, height, title in zip(axes, heights, ("(a) lookahead prediction",
                                                 "(b) sentiment analysis",
                                                 "(c) machine translation",
                                                 "(d) image captioning"), strict=True):
        frame(ax, width, height, title, loc="left", fontsize=10)
    gray = "dimgray"

    ax = axes[0]  # (a) warm-up on x^<1..T>, then predictions up to the horizon tau, fed back
    units = ["unit", "unit", DOTS, "unit", "unit", DOTS, "unit"]
    ahead = ("T+1", "T+2", r"T+\tau")  # the steps predicted, as the chapter labels them
    hats = [_t(r"\hat{x}", k) for k in ahead]
    inputs = [_t("x", "1"), _t("x", "2"), None, _t("x", "T"), hats[0], None,
              _t(r"\hat{x}", r"T+\tau-1")]
    outputs = [None] * 3 + hats[:2] + [None, hats[2]]
    xs = unrolled(ax, units, inputs, outputs, y=1.6, fontsize=11,
                  input_colours=[None] * 4 + [gray] * 3)
    label(ax, (xs[0] + xs[3]) / 2, 2.6, "warm-up phase", fontsize=9, style="italic")
    for x, k in zip([xs[3], xs[4], xs[6]], ahead, strict=True):  # the labels they meet
        label(ax, x, 3.65, _t("x", k), fontsize=11)
    for y in (2.8, 3.65):  # the steps between T+2 and T+tau
        label(ax, xs[5], y, r"$\cdots$", fontsize=11)
    label(ax, xs[6] + 0.8, 3.65, "labels: the values that come", fontsize=9, ha="left",
          style="italic")
    label(ax, xs[6] + 0.8, 2.8, r"predictions up to the horizon $\tau$," + "\neach fed back "
          "as the next input", fontsize=9, ha="left", style="italic")

    ax = axes[1]  # (b) many-to-one: each word encoded, only the last state gives the output
    xs = unrolled(ax, ["unit"] * len(sentiment), None, None, y=2.15)
    for x, word in zip(xs, sentiment, strict=True):
        box(ax, x, 1.05, "encoded\ninput", kind="input", width=1.25, height=0.62, fontsize=9)
        arrow(ax, (x, 1.35), (x, 1.85))
        arrow(ax, (x, 0.45), (x, 0.75))
        label(ax, x, 0.2, word, fontsize=9)
    box(ax, xs[-1], 3.3, "softmax", kind="layer", width=1.3, height=0.5, fontsize=9)
    arrow(ax, (xs[-1], 2.45), (xs[-1], 3.05))
    arrow(ax, (xs[-1] + 0.65, 3.3), (xs[-1] + 1.3, 3.3))
    label(ax, xs[-1] + 1.4, 3.3, "sentiment: probabilities of\n" + ", ".join(classes),
          fontsize=9, ha="left")

    ax = axes[2]  # (c) an encoder reads the source, a decoder writes the target
    enc = unrolled(ax, ["unit"] * len(source), source, None, y=1.9)
    dec = unrolled(ax, ["unit"] * len(target), ["<start>"] + target[:-1], target,
                   x0=enc[-1] + 1.4, y=1.9, input_colours=["black"] + [gray] * len(target))
    arrow(ax, (enc[-1] + 0.5, 1.9), (dec[0] - 0.5, 1.9))  # the encoder's last state: the code
    label(ax, (enc[-1] + dec[0]) / 2, 2.3, "$z$", fontsize=10, color=gray)
    for xs, name in ((enc, "encoder"), (dec, "decoder")):
        label(ax, (xs[0] + xs[-1]) / 2, 0.15, name, fontsize=9, style="italic")

    ax = axes[3]  # (d) a CNN codes the image, a decoder writes the caption
    for i in range(3):  # a small picture: a 3 x 3 grid of gray squares
        for j in range(3):
            ax.add_patch(plt.Rectangle((0.3 + 0.3 * i, 1.1 + 0.3 * j), 0.28, 0.28,
                                       facecolor=str(0.45 + 0.15 * ((i + 2 * j) % 3))))
    box(ax, 2.3, 1.55, "CNN", kind="layer", width=0.9, height=0.6)
    arrow(ax, (1.25, 1.55), (1.85, 1.55))
    xs = unrolled(ax, ["unit"] * len(caption), ["<start>"] + caption[:-1], caption, x0=4.0,
                  y=1.55, input_colours=["black"] + [gray] * len(caption))
    arrow(ax, (2.75, 1.55), (xs[0] - 0.5, 1.55))
    fig.tight_layout()
    return fig


def paradigms(patterns: dict[str, tuple[list[bool], list[bool]]]):
    """Fig. 7.2: one panel per input-output paradigm. `patterns` maps a panel's title to
    (has_input, has_output), one boolean per unit: which steps read an input x^<t> and
    which write an output y_hat^<t>."""
    sizes = [len(i) for i, _ in patterns.values()]
    width = 0.62 * (sum(sizes) + 0.4 * len(sizes)) + 0.4  # about 0.6 inch per unit
    fig, axes = plt.subplots(1, len(patterns), figsize=(min(width, MAX_WIDTH), 3.0),
                             gridspec_kw={"width_ratios": sizes})
    axes = [axes] if len(patterns) == 1 else list(axes)
    for ax, (title, (has_in, has_out)) in zip(axes, patterns.items(), strict=True):
        if len(has_in) != len(has_out):
            raise ValueError(f"{title}: has_input and has_output differ in length, "
                             f"{len(has_in)} and {len(has_out)}")
        frame(ax, 1.0 * len(has_in) + 0.2, 3.6)
        ax.set_title(title, fontsize=10)
        inputs = [_t("x", t) if a else None for t, a in enumerate(has_in, start=1)]
        outputs = [_t(r"\hat{y}", t) if a else None for t, a in enumerate(has_out, start=1)]
        unrolled(ax, [""] * len(has_in), inputs, outputs, x0=0.6, y=1.8, step=1.0, width=0.6,
                 fontsize=11)
    fig.tight_layout()
    return fig


def recursive_and_unfolded(steps: int = 3):
    """Fig. 7.3: the RNN as a recursive graph (a unit whose state loops back into it) and
    the same graph unfolded over `steps` consecutive times t - 1, t, t + 1, ..."""
    positive_int("steps", steps)
    times = ["t"] if steps == 1 else [f"t{k:+d}" if k else "t"
                                      for k in range(-(steps // 2), steps - steps // 2)]
    width = 5.2 + 1.6 * steps
    fig, ax = canvas(width, 3.6, scale=min(0.85, MAX_WIDTH / width))
    x, y = 1.2, 1.8  # the recursive graph
    box(ax, x, y, _t("h", "t"), kind="unit", width=1.0, height=0.6)
    arrow(ax, (x, y - 0.95), (x, y - 0.3))
    label(ax, x, y - 1.2, _t("x", "t"))
    arrow(ax, (x, y + 0.3), (x, y + 0.95))
    label(ax, x, y + 1.2, _t(r"\hat{y}", "t"))
    arrow(ax, (x + 0.5, y + 0.12), (x + 0.5, y - 0.12), connection="arc3,rad=-2.2")
    label(ax, x + 1.3, y, "state", fontsize=9, color="gray")
    label(ax, 3.4, y, "unfold\n" + r"$\Longrightarrow$", fontsize=9)
    unrolled(ax, [_t("h", t) for t in times], [_t("x", t) for t in times],
             [_t(r"\hat{y}", t) for t in times], x0=5.2, y=y, step=1.6,
             state_in=True, state_out=True)
    return fig


def _shape(p: torch.Tensor) -> str:
    return r" \times ".join(str(s) for s in p.shape)


def unit(model: RNN):
    """Fig. 7.4: the unit of (7.2) with its matrices and biases (yellow), + and x
    operations, and activations (gray), read off `model` (a one-layer, one-direction
    seqlib.RNN with an output layer): the labels carry its sizes and its S_h. With the
    chapter's output feedback (7.3), y_hat^<t-1> enters through T and joins x^<t> before
    W_hx."""
    if not isinstance(model, RNN):
        raise TypeError(f"model must be a seqlib.RNN, got {type(model).__name__}")
    if model.num_layers != 1 or model.bidirectional or model.output_size is None:
        raise ValueError("unit draws one unit with an output layer: a one-layer, "
                         "unidirectional seqlib.RNN with output_size set, got "
                         f"num_layers={model.num_layers}, bidirectional={model.bidirectional}, "
                         f"output_size={model.output_size}")
    if model.output_feedback and model.feedback != "input":
        raise ValueError("unit draws the chapter's forms (7.2) and (7.3); "
                         f"got feedback={model.feedback!r}")
    cell, feedback = model.cell, model.output_feedback
    y0 = 0.9 if feedback else 0.0  # room below for T(y_hat^<t-1>)
    yh, yx, yo = 2.5 + y0, 1.4 + y0, 3.7 + y0  # the state path, input product, output path
    fig, ax = canvas(11.2, yo + 2.3, scale=0.75)
    bottom, top = yx - 0.6, yo + 1.35  # the unit: a blue box around its computation
    box(ax, 5.6, (bottom + top) / 2, "", kind="unit", width=8.4, height=top - bottom, zorder=0)

    def matrix(x, y, name, p):
        box(ax, x, y, rf"${name}$" + "\n" + rf"${_shape(p)}$", kind="gate", width=1.3,
            height=0.75, fontsize=9)

    def function(x, y, text, width):
        box(ax, x, y, text, kind="state", width=width, height=0.6, fontsize=9)

    label(ax, 0.5, yh, _t("h", "t-1"), fontsize=11)  # h^<t-1> through W_hh
    arrow(ax, (0.95, yh), (2.22, yh))
    op(ax, 2.4, yh, r"$\times$")
    matrix(2.4, yh + 1.25, "W_{hh}", cell.W_hh)
    arrow(ax, (2.4, yh + 0.87), (2.4, yh + 0.18))
    op(ax, 4.2, yx, r"$\times$")  # x^<t> through W_hx
    matrix(2.6, yx, "W_{hx}", cell.W_hx)
    arrow(ax, (3.25, yx), (4.02, yx))
    if feedback:  # (7.3): x^<t> + T(y_hat^<t-1>)
        op(ax, 4.2, yx - 1.0, "+")
        arrow(ax, (4.2, yx - 0.82), (4.2, yx - 0.18))
        label(ax, 4.2, 0.15, _t("x", "t"), fontsize=11)
        arrow(ax, (4.2, 0.42), (4.2, yx - 1.18))
        function(5.6, yx - 1.0, r"$T(\cdot)$", 0.9)
        arrow(ax, (5.15, yx - 1.0), (4.38, yx - 1.0))
        label(ax, 7.3, yx - 1.0, _t(r"\hat{y}", "t-1"), fontsize=11)
        arrow(ax, (6.85, yx - 1.0), (6.05, yx - 1.0))
    else:
        label(ax, 4.2, 0.15, _t("x", "t"), fontsize=11)
        arrow(ax, (4.2, 0.42), (4.2, yx - 0.18))
    op(ax, 4.2, yh, "+")
    arrow(ax, (2.58, yh), (4.02, yh))
    arrow(ax, (4.2, yx + 0.18), (4.2, yh - 0.18))
    op(ax, 5.2, yh, "+")
    arrow(ax, (4.38, yh), (5.02, yh))
    box(ax, 5.2, yh + 1.25, rf"$b_h$ (${cell.b_h.numel()}$)", kind="gate", width=1.1,
        height=0.5, fontsize=9)
    arrow(ax, (5.2, yh + 1.0), (5.2, yh + 0.18))
    s_h = {"tanh": r"\tanh", "relu": r"\mathrm{ReLU}"}[cell.nonlinearity]
    function(6.55, yh, rf"$S_h = {s_h}$", 1.4)
    arrow(ax, (5.38, yh), (5.85, yh))
    arrow(ax, (7.25, yh), (10.3, yh))
    label(ax, 10.75, yh, _t("h", "t"), fontsize=11)
    ax.plot([7.9], [yh], "o", color="black", markersize=3)  # the state also goes up
    op(ax, 7.9, yo, r"$\times$")  # the output layer: W_yh h^<t> + b_y, then S_y
    arrow(ax, (7.9, yh), (7.9, yo - 0.18))
    matrix(9.1, yo, "W_{yh}", model.W_yh)
    arrow(ax, (8.45, yo), (8.08, yo))
    op(ax, 7.9, yo + 0.9, "+")
    arrow(ax, (7.9, yo + 0.18), (7.9, yo + 0.72))
    box(ax, 9.1, yo + 0.9, rf"$b_y$ (${model.b_y.numel()}$)", kind="gate", width=1.1,
        height=0.5, fontsize=9)
    arrow(ax, (8.55, yo + 0.9), (8.08, yo + 0.9))
    function(6.4, yo + 0.9, r"$S_y$ = softmax", 1.7)
    arrow(ax, (7.72, yo + 0.9), (7.25, yo + 0.9))
    arrow(ax, (6.4, yo + 1.2), (6.4, yo + 1.75))
    label(ax, 6.4, yo + 2.0, _t(r"\hat{y}", "t"), fontsize=11)
    return fig


def lookahead(sentence: list[str], predicted: list[str], probabilities=None):
    """Fig. 7.5: an RNN unrolled on `sentence` for lookahead prediction: at step t the input
    x^<t> is word t; above the unit, the predicted word Y_hat^<t> (green when it is the
    target, red when not), with its probability when `probabilities` gives one per step;
    above it the target y^<t> = x^<t+1>. `predicted` holds one word per step, T = len(sentence)
    - 1 of them: the chapter's schematic, or a trained model's argmax words."""
    if len(sentence) < 2 or not all(isinstance(w, str) for w in sentence):
        raise ValueError(f"sentence must hold at least 2 words, got {sentence!r}")
    T = len(sentence) - 1
    if len(predicted) != T or not all(isinstance(w, str) for w in predicted):
        raise ValueError(f"predicted must hold one word per step, T = {T} words for a sentence "
                         f"of {T + 1}, got {predicted!r}")
    if probabilities is not None and len(probabilities) != T:
        raise ValueError(f"probabilities must hold one per step, T = {T}, got "
                         f"{len(probabilities)}")
    step, x0 = 2.0, 3.4
    colours = ["#2e7d32" if word == target else "#c62828"
               for word, target in zip(predicted, sentence[1:], strict=True)]
    outputs = list(predicted) if probabilities is None else [
        f"{word}\n({float(b):.2f})" for word, b in zip(predicted, probabilities, strict=True)]
    width = x0 + step * (T - 1) + 1.2
    fig, ax = canvas(width, 4.6, scale=min(0.85, MAX_WIDTH / width))
    xs = unrolled(ax, [_t("h", t) for t in range(1, T + 1)], sentence[:-1], outputs, x0=x0,
                  y=1.6, step=step, width=1.1, fontsize=10, output_colours=colours)
    for x_t, target in zip(xs, sentence[1:], strict=True):
        label(ax, x_t, 4.05, target, fontsize=10, color="dimgray")
    prediction = r"prediction $\hat{Y}^{\langle t \rangle}$"
    rows = [(0.4, r"input $x^{\langle t \rangle}$"), (1.6, "unit"),
            (2.8, prediction if probabilities is None else prediction + "\n(probability)"),
            (4.05, r"target $y^{\langle t \rangle}$")]
    for y, text in rows:
        label(ax, 0.1, y, text, fontsize=10, ha="left")
    return fig


__all__ = ["DOTS", "COLOURS", "frame", "lookahead", "paradigms", "recursive_and_unfolded",
           "tasks", "unit", "unrolled"]
