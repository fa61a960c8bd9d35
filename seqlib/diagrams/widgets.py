"""Interactive explorers for the chapters, built from core ipywidgets (7.x and 8.x).

Each explorer is a thin slider front end over a plain plotting function that the book also
calls to draw the static figure, so the printed page and the interactive cell tell the same
story. ipywidgets is imported inside the explorers, so `import seqlib` stays light.
"""

import matplotlib.pyplot as plt
import torch

from seqlib.bptt import bptt, rnn_with_spectral_radius
from seqlib.checks import positive_int
from seqlib.pages.seeds import generator
from seqlib.rnn import ACTIVATIONS


def adjoint_norms(radius: float, *, T: int = 50, input_scale: float = 1e-12,
                  nonlinearity: str = "tanh", hidden_size: int = 32, input_size: int = 4,
                  output_size: int = 4, batch_size: int = 8, seed: int = 0) -> torch.Tensor:
    """Relative adjoint norms ||zeta^<t>|| / ||zeta^<T>|| of an RNN whose W_hh has the
    spectral radius `radius`, with the loss at the last step only, as in (7.12).

    The RNN is seqlib.bptt.rnn_with_spectral_radius, drawn from a generator seeded with
    `seed` (the same directions for every radius; the biases are zero). The inputs are
    standard normal times `input_scale`: tiny inputs keep tanh in its linear part,
    sigma_dot ~ 1, where the adjoints follow the products of Jacobians (7.11) alone
    (`nonlinearity="identity"` is that linear RNN exactly). Computed in float64 by the
    explicit recursion seqlib.bptt.bptt.

    Returns a float64 tensor of length T whose entry k is the ratio for T - t = k.
    """
    positive_int("T", T)
    if not isinstance(input_scale, (int, float)) or input_scale < 0:
        raise ValueError(f"input_scale must be a number >= 0, got {input_scale!r}")
    if nonlinearity not in ACTIVATIONS:
        raise ValueError(f"nonlinearity must be one of {sorted(ACTIVATIONS)}, got {nonlinearity!r}")
    gen = generator(seed)
    rnn = rnn_with_spectral_radius(radius, input_size, hidden_size, output_size,
                                   nonlinearity=nonlinearity, generator=gen)
    x = input_scale * torch.randn(batch_size, T, input_size, generator=gen, dtype=torch.float64)
    targets = torch.randint(0, output_size, (batch_size, T), generator=gen)
    zeta = bptt(rnn, x, targets, last_only=True).zeta  # (B, T, m)
    norms = zeta.norm(dim=(0, 2))  # (T,): ||zeta^<t>|| over the whole batch, t = 1..T
    return (norms / norms[-1]).flip(0)  # entry k is T - t = k


def plot_adjoint_norms(radii, *, T: int = 50, input_scale: float = 1e-12,
                       nonlinearity: str = "tanh", ax=None, reference: bool = True,
                       title: str | None = None, **kwargs) -> dict[float, torch.Tensor]:
    """Plot ||zeta^<t>|| / ||zeta^<T>|| against T - t on a log scale, one curve per radius.

    With `reference`, a dotted line radius^(T - t) shows the purely geometric behaviour of
    (7.12). Draws on `ax` (a new figure when None); further keyword arguments go to
    `adjoint_norms`. Returns {radius: ratios} as computed by `adjoint_norms`.
    """
    own = ax is None
    if own:
        _, ax = plt.subplots(figsize=(6, 3.5))
    steps = torch.arange(T, dtype=torch.float64)  # T - t = 0, ..., T - 1
    results = {}
    for radius in radii:
        ratios = adjoint_norms(radius, T=T, input_scale=input_scale,
                               nonlinearity=nonlinearity, **kwargs)
        results[radius] = ratios
        (line,) = ax.plot(steps, ratios, label=f"radius {radius:g}")
        if reference:
            ax.plot(steps, radius**steps, ":", color=line.get_color())
    if reference:
        ax.plot([], [], ":", color="gray", label=r"radius$^{T-t}$ (dotted)")
    ax.set_yscale("log")
    ax.set(xlabel="T - t (steps back from the loss)",
           ylabel=r"$\|\zeta^{\langle t\rangle}\| \,/\, \|\zeta^{\langle T\rangle}\|$",
           title=title or f"Adjoint norms, {nonlinearity}, input scale {input_scale:g}")
    ax.legend(fontsize=9)
    if own:  # room for the axis labels inside the figure
        ax.figure.tight_layout()
    return results


def spectral_radius_explorer(T: int = 50, radius: float = 1.0, input_scale: float = 1e-12,
                             nonlinearity: str = "tanh"):
    """Sliders for the spectral radius of W_hh, the length T, the input scale and S_h,
    redrawing `plot_adjoint_norms` (vanishing and exploding gradients, (7.12)).

    Returns an `ipywidgets.VBox` of the controls and an Output holding the figure; its
    attribute `result` holds the ratios last drawn. The figure is written into the Output
    directly (not captured from the display), so the cell's own output stays the widget.
    """
    import ipywidgets as widgets

    controls = dict(
        radius=widgets.FloatSlider(value=radius, min=0.1, max=2.0, step=0.05,
                                   description="radius", continuous_update=False),
        T=widgets.IntSlider(value=T, min=2, max=100, description="T",
                            continuous_update=False),
        input_scale=widgets.FloatLogSlider(value=input_scale, base=10, min=-12, max=1,
                                           description="input scale",
                                           continuous_update=False),
        nonlinearity=widgets.Dropdown(options=sorted(ACTIVATIONS), value=nonlinearity,
                                      description="S_h"),
    )
    output = widgets.Output()
    box = widgets.VBox([*controls.values(), output])

    def redraw(change=None):
        """Recompute the ratios for the current controls and replace the figure."""
        radius = controls["radius"].value
        fig, ax = plt.subplots(figsize=(6, 3.5))
        box.result = plot_adjoint_norms([radius], T=controls["T"].value, ax=ax,
                                        input_scale=controls["input_scale"].value,
                                        nonlinearity=controls["nonlinearity"].value)[radius]
        fig.tight_layout()  # the axis labels inside the figure
        plt.close(fig)  # shown in the Output only, not again by the inline backend
        output.outputs = ()
        output.append_display_data(fig)

    for control in controls.values():
        control.observe(redraw, names="value")
    redraw()
    return box
