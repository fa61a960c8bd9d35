"""Figures 7.7 and 7.8 of Section 7.3: recurrent networks reversed and stacked, and the
LSTM and GRU units.

`draw_recurrent` reads the number of layers and of directions off a seqlib `RNN`, `LSTM`
or `GRU` and draws it unrolled in time, one row of units per layer and direction (Fig.
7.7: a 1-layer bidirectional model gives panel (a), a stacked one panel (b)). `draw_unit`
draws the inside of an `LSTMCell` or a `GRUCell` from its gate blocks (Fig. 7.8): internal
gates yellow, internal states gray, operations in circles; for the GRU it reads where
the reset gate acts, before the product (the chapter's form) or after it
(`reset_after=True`, PyTorch's).
"""

from seqlib.checks import positive_int
from seqlib.diagrams import MAX_WIDTH, arrow, box, canvas, label, op, time_label
from seqlib.gated import GRUCell, LSTMCell
from seqlib.rnn import Recurrent

REVERSE = "#b45f06"  # the arrows of the reverse direction
SIG, TANH = r"$S_{\mathrm{Sig}}(\cdot)$", r"$S_{\mathrm{Tanh}}(\cdot)$"


def _line(ax, *points, colour="black"):
    """A polyline without arrow head through `points` (x, y)."""
    xs, ys = zip(*points, strict=True)
    ax.plot(xs, ys, color=colour, linewidth=1.0, solid_capstyle="round")


def _dot(ax, x, y):
    """A junction where a line splits."""
    ax.plot([x], [y], "o", color="black", markersize=3)


def _fill(fig, title):
    """Let the drawing of a figure of its own use the whole figure, less its title."""
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=0.92 if title else 0.99)


# Fig. 7.7 -----------------------------------------------------------------------------

def state_label(t: str, direction: int | None, layer: int | None) -> str:
    """The chapter's name of a state: h^<t>, h_f^<t>, h_r^<t>, h^<t>_[l], h^<t>_f[l]."""
    sub = "" if direction is None else "fr"[direction]
    if layer is not None:
        sub += f"[{layer}]"
    return time_label("h", t) if not sub else rf"$h^{{\langle {t} \rangle}}_{{{sub}}}$"


def draw_recurrent(model: Recurrent, steps: int = 3, *, ax=None, title: str | None = None):
    """Fig. 7.7: `model`, a seqlib RNN, LSTM or GRU, unrolled over `steps` time steps.

    One row of units per layer and direction: the forward rows pass their state to the
    right, h_f^<t-1> -> h_f^<t>, the reverse rows to the left, h_r^<t+1> -> h_r^<t>, from
    zero initial states (7.14); layer l + 1 reads the states of layer l at the same time
    (7.15), both directions of them when the layer is bidirectional; the output y_hat^<t>
    reads the top layer. For an LSTM the arrows along time carry the pair (c, h), and
    only h goes up. Returns the figure (drawn on `ax` if given)."""
    if not isinstance(model, Recurrent):
        raise TypeError(f"model must be a seqlib RNN, LSTM or GRU, got {type(model).__name__}")
    positive_int("steps", steps)
    L, D = model.num_layers, model.directions
    dx, rise, gap = 2.0, 0.9, 1.2  # column width, reverse row above forward, layer gap
    shift = 0.45 if D == 2 else 0.0  # forward units left of the column, reverse right
    w, hgt = 0.9, 0.5
    # room for the row names (about 1.2 inches), kept where many steps narrow to MAX_WIDTH
    left = max(2.2, 0.85 + 0.4 * steps)
    layer_height = (D - 1) * rise + gap
    width = left + dx * steps + 0.9
    height = 0.9 + L * layer_height + 1.0

    def where(t, layer, d):  # t = 1..steps, layer = 1..L, d = 0 forward, 1 reverse
        return (left + dx * (t - 0.5) + (2 * d - 1) * shift,
                1.5 + (layer - 1) * layer_height + d * rise)

    own = ax is None
    fig, ax = canvas(width, height, scale=min(0.9, MAX_WIDTH / width), title=title, ax=ax)
    if own:
        _fill(fig, title)
    y_in, y_out = 0.35, 1.5 + (L - 1) * layer_height + (D - 1) * rise + 1.0
    many_layers, two_ways = L > 1, D == 2
    for t in range(1, steps + 1):
        x = left + dx * (t - 0.5)
        label(ax, x, y_in, time_label("x", t), fontsize=10)
        label(ax, x, y_out + 0.1, time_label(r"\hat{y}", t), fontsize=10)
        for layer in range(1, L + 1):
            for d in range(D):
                ux, uy = where(t, layer, d)
                text = state_label(t, d if two_ways else None, layer if many_layers else None)
                box(ax, ux, uy, text, kind="unit", width=w, height=hgt, fontsize=10)
                sources = ([(x, y_in + 0.22)] if layer == 1 else
                           [(sx, sy + hgt / 2) for sx, sy in
                            (where(t, layer - 1, e) for e in range(D))])
                for source in sources:  # x^<t>, or the states of the layer below
                    arrow(ax, source, (ux, uy - hgt / 2), colour="0.35")
                if layer == L:
                    arrow(ax, (ux, uy + hgt / 2), (x, y_out - 0.15), colour="0.35")
                colour = REVERSE if d else "black"
                if d == 0 and t < steps:  # h_f^<t> -> h_f^<t+1>
                    nx = where(t + 1, layer, d)[0]
                    arrow(ax, (ux + w / 2, uy), (nx - w / 2, uy), colour=colour)
                if d == 1 and t > 1:  # h_r^<t> -> h_r^<t-1>
                    px = where(t - 1, layer, d)[0]
                    arrow(ax, (ux - w / 2, uy), (px + w / 2, uy), colour=colour)
    for layer in range(1, L + 1):  # the row names, and the zero initial states
        for d in range(D):
            uy = where(1, layer, d)[1]
            colour = REVERSE if d else "black"
            name = ([f"layer {layer}"] if many_layers else []) + (
                [("forward", "reverse")[d]] if two_ways else [])
            if name:
                label(ax, 0.1, uy, ", ".join(name), ha="left", fontsize=10, color=colour)
            if d == 0:  # h^<0> enters the first unit from the left
                end = where(1, layer, 0)[0] - w / 2
                start, t0 = end - 0.55, "0"
            else:  # h_r^<T+1> enters the last unit from the right
                end = where(steps, layer, 1)[0] + w / 2
                start, t0 = end + 0.55, str(steps + 1)
            arrow(ax, (start, uy), (end, uy), linestyle="--", colour=colour)
            text = state_label(t0, d if two_ways else None, layer if many_layers else None)
            # h_r^<T+1> = 0 ends at the right edge: it stays inside however narrow the units
            x, ha = (start, "center") if d == 0 else (width - 0.05, "right")
            label(ax, x, uy + 0.38, text[:-1] + " = 0$", ha=ha, fontsize=10, color=colour)
    return fig


# Fig. 7.8 -----------------------------------------------------------------------------

def _group(ax, x, y, name: str, activation: str, kind: str):
    """A group of m~ neurons: its symbol over its activation, in a box of colour `kind`."""
    box(ax, x, y, "", kind=kind, width=1.15, height=0.85)
    label(ax, x, y + 0.17, name, fontsize=11)
    label(ax, x, y - 0.2, activation, fontsize=10)


def _lstm(ax, cell: LSTMCell):
    """The LSTM unit of (7.16)-(7.17) on a 10 x 6.4 canvas."""
    top, bus, gy = 5.4, 0.9, 2.6  # the cell-state line, the (h, x) line, the gates' row
    names = {"f": r"$g_f^{\langle t \rangle}$", "i": r"$g_i^{\langle t \rangle}$",
             "o": r"$g_o^{\langle t \rangle}$", "c~": r"$\tilde{c}^{\langle t \rangle}$"}
    xs = {"f": 2.3, "i": 3.7, "c~": 5.0, "o": 6.6}
    for s in cell.blocks:  # one box per block of W_hh, W_hx, b_h, as the cell holds them
        internal = s == "c~"
        _group(ax, xs[s], gy, names[s], TANH if internal else SIG,
               "state" if internal else "gate")
    # the (h^<t-1>, x^<t>) line feeding every block
    label(ax, 0.15, bus, time_label("h", "t-1"), ha="left")
    _line(ax, (1.0, bus), (xs["o"], bus))
    label(ax, 1.5, 0.1, time_label("x", "t"))
    arrow(ax, (1.5, 0.3), (1.5, bus), shrink=0)
    _dot(ax, 1.5, bus)
    for x in xs.values():
        arrow(ax, (x, bus), (x, gy - 0.425), shrink=0)
    # the cell state: c^<t> = g_f * c^<t-1> + g_i * c~^<t>
    label(ax, 0.15, top, time_label("c", "t-1"), ha="left")
    xf, xi, xo = xs["f"], xs["c~"], 8.2
    arrow(ax, (1.0, top), (xf - 0.18, top), shrink=0)
    op(ax, xf, top, r"$\odot$")
    arrow(ax, (xf, gy + 0.425), (xf, top - 0.18), shrink=0)
    arrow(ax, (xf + 0.18, top), (xi - 0.18, top), shrink=0)
    op(ax, xi, top, "+")
    op(ax, xi, 3.9, r"$\odot$")
    arrow(ax, (xi, gy + 0.425), (xi, 3.9 - 0.18), shrink=0)
    _line(ax, (xs["i"], gy + 0.425), (xs["i"], 3.9))
    arrow(ax, (xs["i"], 3.9), (xi - 0.18, 3.9), shrink=0)
    arrow(ax, (xi, 3.9 + 0.18), (xi, top - 0.18), shrink=0)
    arrow(ax, (xi + 0.18, top), (9.3, top), shrink=0)
    label(ax, 9.35, top, time_label("c", "t"), ha="left")
    # the hidden state: h^<t> = g_o * S_Tanh(c^<t>)
    _dot(ax, xo, top)
    box(ax, xo, 4.45, TANH, kind="input", width=1.2, height=0.45, fontsize=10)
    arrow(ax, (xo, top), (xo, 4.45 + 0.225), shrink=0)
    op(ax, xo, 3.3, r"$\odot$")
    arrow(ax, (xo, 4.45 - 0.225), (xo, 3.3 + 0.18), shrink=0)
    _line(ax, (xs["o"], gy + 0.425), (xs["o"], 3.3))
    arrow(ax, (xs["o"], 3.3), (xo - 0.18, 3.3), shrink=0)
    _line(ax, (xo, 3.3 - 0.18), (xo, 1.6))
    arrow(ax, (xo, 1.6), (9.3, 1.6), shrink=0)
    label(ax, 9.35, 1.6, time_label("h", "t"), ha="left")
    _output_branch(ax, xo, 2.8)


def _output_branch(ax, x, y):
    """The copy of h^<t> that goes to the output layer (not drawn, as in the chapter)."""
    _dot(ax, x, y)
    arrow(ax, (x, y), (9.3, y), shrink=0)
    label(ax, 9.35, y, time_label("h", "t"), ha="left")
    label(ax, 9.35, y - 0.4, r"to $\hat{y}^{\langle t \rangle}$", ha="left", fontsize=10)


def _hop(ax, x, y):
    """A gap in a horizontal line at (x, y), where a vertical line passes over it
    without joining it (junctions have a dot)."""
    ax.plot([x - 0.08, x + 0.08], [y, y], color="white", linewidth=4, zorder=1.5,
            solid_capstyle="butt")


def _gru(ax, cell: GRUCell):
    """The GRU unit of (7.18)-(7.19) on a 10 x 6.4 canvas. The reset gate multiplies
    h^<t-1> alone, on its way into h~^<t>: before the product W_h~h (g_r * h^<t-1>) (the
    chapter's form), or after W_h~h h^<t-1> + b_hn (`reset_after`, PyTorch's); x^<t>
    reaches h~^<t> on a line of its own."""
    top, bus, gy, wire = 5.4, 0.9, 2.6, 0.5  # h^<t-1> line, (h, x) line, blocks, x alone
    names = {"r": r"$g_r^{\langle t \rangle}$", "u": r"$g_u^{\langle t \rangle}$",
             "h~": r"$\tilde{h}^{\langle t \rangle}$"}
    xs = {"u": 2.3, "r": 3.9, "h~": 7.6}
    for s in cell.blocks:  # one box per block of W_hh, W_hx, b_h, as the cell holds them
        internal = s == "h~"
        _group(ax, xs[s], gy, names[s], TANH if internal else SIG,
               "state" if internal else "gate")
    # h^<t-1> along the top, and down to the line that feeds the two gates with x^<t>
    label(ax, 0.15, top, time_label("h", "t-1"), ha="left")
    _line(ax, (1.0, top), (1.0, bus), (xs["r"], bus))
    _dot(ax, 1.0, top)
    label(ax, 1.5, 0.1, time_label("x", "t"))
    arrow(ax, (1.5, 0.3), (1.5, bus), shrink=0)
    _dot(ax, 1.5, bus)
    for s in ("u", "r"):
        arrow(ax, (xs[s], bus), (xs[s], gy - 0.425), shrink=0)
    # x^<t> alone into the internal hidden state h~^<t>
    _dot(ax, 1.5, wire)
    _line(ax, (1.5, wire), (xs["h~"], wire))
    arrow(ax, (xs["h~"], wire), (xs["h~"], gy - 0.425), shrink=0)
    # h^<t> = (1 - g_u) * h^<t-1> + g_u * h~^<t>: g_u to both products
    xu, xk, xa = xs["u"], 6.6, xs["h~"]  # the gate, the keeping product, the sum
    _line(ax, (xu, gy + 0.425), (xu, 3.6))
    arrow(ax, (xu, 3.6), (xa - 0.18, 3.6), shrink=0)
    op(ax, xa, 3.6, r"$\odot$")
    arrow(ax, (xa, gy + 0.425), (xa, 3.6 - 0.18), shrink=0)
    _dot(ax, xk, 3.6)
    op(ax, xk, 4.45, r"$1-$", radius=0.24, fontsize=10)
    arrow(ax, (xk, 3.6), (xk, 4.45 - 0.24), shrink=0)
    arrow(ax, (xk, 4.45 + 0.24), (xk, top - 0.18), shrink=0)
    op(ax, xk, top, r"$\odot$")
    arrow(ax, (1.0, top), (xk - 0.18, top), shrink=0)
    op(ax, xa, top, "+")
    arrow(ax, (xk + 0.18, top), (xa - 0.18, top), shrink=0)
    arrow(ax, (xa, 3.6 + 0.18), (xa, top - 0.18), shrink=0)
    arrow(ax, (xa + 0.18, top), (9.3, top), shrink=0)
    label(ax, 9.35, top, time_label("h", "t"), ha="left")
    _line(ax, (8.5, top), (8.5, 4.3))
    _output_branch(ax, 8.5, 4.3)
    _dot(ax, 8.5, top)
    # the reset gate: g_r times h^<t-1> alone, taken from the top line, into h~^<t>
    xr = 5.4
    _dot(ax, xr, top)
    _hop(ax, xr, 3.6)  # over the line of g_u, not joined to it
    if cell.reset_after:  # g_r * (W_h~h h^<t-1> + b_hn): after the product
        box(ax, xr, 4.45, r"$W_{\tilde{h}h}\,\cdot + b_{hn}$", kind="input", width=1.6,
            height=0.45, fontsize=10)
        arrow(ax, (xr, top), (xr, 4.45 + 0.225), shrink=0)
        arrow(ax, (xr, 4.45 - 0.225), (xr, gy + 0.18), shrink=0)
    else:  # W_h~h (g_r * h^<t-1>): before the product, inside h~^<t>
        arrow(ax, (xr, top), (xr, gy + 0.18), shrink=0)
    ax.patches[-1].set_zorder(2)  # over the gap
    op(ax, xr, gy, r"$\odot$")
    arrow(ax, (xs["r"] + 0.575, gy), (xr - 0.18, gy), shrink=0)
    arrow(ax, (xr + 0.18, gy), (xs["h~"] - 0.575, gy), shrink=0)


def draw_unit(cell, *, ax=None, title: str | None = None):
    """Fig. 7.8: the inside of an `LSTMCell` (a) or a `GRUCell` (b), one box per block of
    its W_hh, W_hx and b_h: internal gates yellow, internal states gray, the operations
    (the product, the sum, 1 - .) in circles. The output y_hat^<t> is not drawn, as in the
    chapter. Returns the figure (drawn on `ax` if given)."""
    if not isinstance(cell, LSTMCell | GRUCell):
        raise TypeError(f"cell must be an LSTMCell or a GRUCell, got {type(cell).__name__}")
    own = ax is None
    fig, ax = canvas(10.0, 6.2, title=title, ax=ax)
    if own:
        _fill(fig, title)
    (_lstm if isinstance(cell, LSTMCell) else _gru)(ax, cell)
    return fig

