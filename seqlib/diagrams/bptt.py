"""Fig. 7.6: the flow of backpropagation through time.

The forward pass runs left to right through the states h^<1>, ..., h^<T>, each computed
with the same shared parameter W; the loss C compares the outputs y_hat^<t> with the
targets y^<t>; the backward pass runs right to left through the adjoints
zeta^<T>, ..., zeta^<1> of (7.6), and every adjoint contributes to the gradient g_W (7.10).
"""

from matplotlib.lines import Line2D

from seqlib.checks import int_in_range
from seqlib.diagrams import arrow, box, canvas, label, time_label

FORWARD, BACKWARD, SHARED = "black", "#c0392b", "#38761d"


def _columns(T):
    """The time labels drawn: every step up to 5 of them, else 1, 2, ..., T-1, T (None is
    the gap)."""
    if T is None:
        return ["1", "2", None, "T-1", "T"]
    int_in_range("T", T, 1, expected="a positive int or None (symbolic)")
    if T <= 5:
        return [str(t) for t in range(1, T + 1)]
    return ["1", "2", None, str(T - 1), str(T)]


def bptt_flow(T: int | None = None):
    """Draw Fig. 7.6 for a sequence of length T (symbolic 1, 2, ..., T-1, T when None):
    the shared W feeding every state h^<t> (forward), the loss C of y_hat and y, the adjoints
    zeta^<t> (backward) and their collection into the gradient g_W. Returns the figure."""
    columns = _columns(T)
    dx, x_first = 1.7, 2.6
    xs = [x_first + i * dx for i in range(len(columns))]
    x_loss = xs[-1] + 3.0
    y_bus, y_h, y_x, y_zeta, y_grad = 4.6, 3.3, 2.45, 1.55, 0.6
    fig, ax = canvas(x_loss + 1.2, 5.4, scale=0.65)

    box(ax, 0.9, y_bus, "$W$", kind="layer", width=0.8, height=0.5, fontsize=12)
    label(ax, 0.9, y_bus + 0.5, "shared parameter", fontsize=9)
    box(ax, 0.9, y_grad, "$g_W$", kind="layer", width=0.8, height=0.5, fontsize=12)
    label(ax, 0.9, y_grad + 0.5, "gradient", fontsize=9)
    drops = [x for x, t in zip(xs, columns, strict=True) if t is not None]
    ax.plot([1.3, drops[-1] + 0.3], [y_bus, y_bus], color=SHARED, lw=1.2)  # W's bus
    ax.plot([drops[-1], 1.3], [y_grad, y_grad], color=BACKWARD, lw=1.2)  # into g_W
    arrow(ax, (1.5, y_grad), (1.3, y_grad), colour=BACKWARD, shrink=0)

    for i, (x, t) in enumerate(zip(xs, columns, strict=True)):
        if t is None:  # the gap between t = 2 and t = T-1
            label(ax, x, y_h, r"$\cdots$", fontsize=14)
            label(ax, x, y_zeta, r"$\cdots$", fontsize=14)
        else:
            box(ax, x, y_h, time_label("h", t), width=0.9, height=0.5)
            box(ax, x, y_zeta, time_label(r"\zeta", t), kind="state", width=0.9, height=0.5)
            box(ax, x, y_x, time_label("x", t), kind="input", width=0.85, height=0.38,
                fontsize=9)
            arrow(ax, (x, y_x + 0.19), (x, y_h - 0.25))  # x^<t> into h^<t>
            arrow(ax, (x + 0.3, y_bus), (x + 0.3, y_h + 0.25), colour=SHARED, shrink=0)
            arrow(ax, (x - 0.3, y_h + 0.25), (x - 0.3, y_h + 0.6))  # y_hat^<t> out
            label(ax, x - 0.4, y_h + 0.8, time_label(r"\hat{y}", t), fontsize=10)
            ax.plot([x, x], [y_zeta - 0.25, y_grad], color=BACKWARD, lw=1.2)  # to g_W
        if i > 0:  # forward h^<t-1> -> h^<t>, backward zeta^<t> -> zeta^<t-1>
            left = xs[i - 1] + (0.45 if columns[i - 1] else 0.3)
            right = x - (0.45 if t else 0.3)
            arrow(ax, (left, y_h), (right, y_h))
            arrow(ax, (right, y_zeta), (left, y_zeta), colour=BACKWARD)

    last = columns[-1]
    loss = "\n".join(["Loss $C$"] + [f"{time_label(v, '1')}, $\\dots$, {time_label(v, last)}"
                                    for v in ("y", r"\hat{y}")])
    box(ax, x_loss, (y_h + y_zeta) / 2, loss, kind="output", width=1.8, height=1.5,
        fontsize=10)
    arrow(ax, (xs[-1] + 0.45, y_h), (x_loss - 0.9, y_h))  # the outputs reach the loss
    arrow(ax, (x_loss - 0.9, y_zeta), (xs[-1] + 0.45, y_zeta), colour=BACKWARD)
    label(ax, (xs[-1] + x_loss) / 2 - 0.35, y_zeta + 0.42,
          r"$\Sigma_{\tau}\, \dot{C}_\tau / T$", fontsize=13, color=BACKWARD)

    handles = [Line2D([], [], color=c, label=text) for c, text in
               ((FORWARD, "forward pass"), (BACKWARD, "backward pass"),
                (SHARED, "shared parameter"))]
    ax.legend(handles=handles, loc="lower right", fontsize=9, frameon=False)
    return fig
