"""Architecture diagrams of the chapter's figures, drawn by code with matplotlib.

The figures of Chapter 7 that show architectures (units, unrolled networks, blocks) are
drawn here rather than kept as image files, so a drawing is regenerated with the book and,
where it can be, read off the model object it shows (its layers, directions, sublayers).
This module holds the few shapes every drawing is made of; the drawings themselves live in
the submodules named after the sections: `rnn` (Figs. 7.1-7.5), `bptt` (7.6), `gated`
(7.7-7.8), `seq2seq` (7.9-7.10) and `transformer` (7.12-7.13, 7.15-7.17).

Coordinates are data units of an axes with equal aspect and no frame (`canvas`); labels
are matplotlib mathtext in the chapter's symbols, for example r"$h^{\\langle t \\rangle}$".
The book shows a figure in a column about 780 px wide, so a figure is at most MAX_WIDTH
inches wide and its text at least MIN_FONTSIZE points: about 9 px or more on the page.
"""

import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

MAX_WIDTH = 9.0  # inches: the widest figure the book's column shows at full size
MIN_FONTSIZE = 9  # points: the smallest text of a figure


def legible(fig) -> bool:
    """Whether `fig` reads at the book's column width: at most MAX_WIDTH inches wide and no
    text (of its axes, their titles and legends) under MIN_FONTSIZE points."""
    texts = [t for ax in fig.axes for t in [*ax.texts, ax.title] if t.get_text()]
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    texts += [t for legend in legends for t in legend.get_texts()]
    return (fig.get_figwidth() <= MAX_WIDTH
            and min(t.get_fontsize() for t in texts) >= MIN_FONTSIZE)


def texts_outside(fig, *, tolerance: float = 1.0) -> list[str]:
    """The texts of `fig` that do not lie wholly inside the figure once it is drawn: a title,
    tick label, axis label, legend entry or annotation cut at an edge, or beyond it. Each is
    described as "'text' (kind): n px out at the left" (or right, bottom, top); none: [].

    The figure is drawn (its layout engine, tight_layout for example, runs as it would for
    display) on a renderer of its own, which records each text drawn: only what is drawn
    counts (not the labels of ticks outside the axes' limits, not an axes turned off).
    `tolerance` is in pixels at the figure's dpi."""
    from matplotlib.backends.backend_agg import RendererAgg

    renderer = RendererAgg(int(fig.bbox.width), int(fig.bbox.height), fig.dpi)
    drawn = {}

    def recording(method):
        def draw(*args, mtext=None, **kwargs):
            if mtext is not None:
                drawn[id(mtext)] = mtext
            return method(*args, mtext=mtext, **kwargs)
        return draw

    renderer.draw_text = recording(renderer.draw_text)
    renderer.draw_tex = recording(renderer.draw_tex)
    fig.draw(renderer)
    kinds = {}
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes)]:
        if legend is not None:
            kinds.update((id(t), "legend") for t in [*legend.get_texts(), legend.get_title()])
    for ax in fig.axes:
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            kinds.update((id(t), f"{name} tick label")
                         for t in axis.get_ticklabels(which="both"))
            kinds[id(axis.label)] = f"{name}-axis label"
        kinds[id(ax.title)] = "title"
    width, height = fig.bbox.width, fig.bbox.height
    outside = []
    for text in drawn.values():
        extent = text.get_window_extent(renderer)
        out = {"left": -extent.x0, "right": extent.x1 - width,
               "bottom": -extent.y0, "top": extent.y1 - height}
        side, far = max(out.items(), key=lambda item: item[1])
        if far > tolerance:
            kind = kinds.get(id(text), "title" if text in fig.texts else "text")
            outside.append(f"{text.get_text()!r} ({kind}): {far:.0f} px out at the {side}")
    return outside


# One colour per kind of element, as in the chapter's figures: units blue, internal gates
# yellow, internal states gray (Fig. 7.8), operations white circles.
COLOURS = {
    "unit": "#cfe2f3",
    "gate": "#fff2b3",
    "state": "#e0e0e0",
    "input": "#ffffff",
    "output": "#ffffff",
    "layer": "#d9ead3",
    "attention": "#f4cccc",
    "norm": "#ead1f5",
}


def frame(ax, width: float, height: float, title: str | None = None, **title_style):
    """Set up `ax` as a frameless drawing area of `width` x `height` data units with equal
    aspect (and a title, styled by `title_style`); returns (figure, ax)."""
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title, **title_style)
    return ax.figure, ax


def canvas(width: float, height: float, *, scale: float = 0.9, title: str | None = None,
           ax=None):
    """A figure and an axes of `width` x `height` data units, equal aspect, no frame; or,
    given `ax`, that axes set up the same way (`frame`)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(max(2.0, width * scale), max(1.5, height * scale)))
    return frame(ax, width, height, title)


def box(ax, x: float, y: float, text: str = "", *, kind: str = "unit", width: float = 1.0,
        height: float = 0.6, fontsize: float = 10, **style):
    """A rounded box centred at (x, y) holding `text`; returns the patch. `kind` picks the
    colour (COLOURS); `style` overrides patch properties (edgecolor, linestyle, ...)."""
    if kind not in COLOURS:
        raise ValueError(f"kind must be one of {sorted(COLOURS)}, got {kind!r}")
    patch = FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                           boxstyle="round,pad=0.02,rounding_size=0.08",
                           facecolor=COLOURS[kind], edgecolor=style.pop("edgecolor", "black"),
                           linewidth=style.pop("linewidth", 1.0), **style)
    ax.add_patch(patch)
    if text:
        ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)
    return patch


def op(ax, x: float, y: float, symbol: str = "+", *, radius: float = 0.18,
       fontsize: float = 10):
    """A small circle centred at (x, y) holding an operation: "+", r"$\\times$", r"$\\odot$"."""
    ax.add_patch(Circle((x, y), radius, facecolor="white", edgecolor="black", linewidth=1.0))
    ax.text(x, y, symbol, ha="center", va="center", fontsize=fontsize)


def arrow(ax, start: tuple, end: tuple, text: str = "", *, colour: str = "black",
          style: str = "-|>", linestyle: str = "-", connection: str = "arc3",
          text_offset: tuple = (0.0, 0.0), fontsize: float = 9, shrink: float = 2.0):
    """An arrow from `start` to `end` (points (x, y)), labelled with `text` at its middle
    (shifted by `text_offset`). `connection` is a matplotlib connectionstyle, for example
    "arc3,rad=0.3" for a curved arrow or "angle,angleA=0,angleB=90" for an elbow."""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=10,
                                 color=colour, linestyle=linestyle, linewidth=1.0,
                                 connectionstyle=connection, shrinkA=shrink, shrinkB=shrink))
    if text:
        mx = (start[0] + end[0]) / 2 + text_offset[0]
        my = (start[1] + end[1]) / 2 + text_offset[1]
        ax.text(mx, my, text, ha="center", va="center", fontsize=fontsize,
                bbox=dict(facecolor="white", edgecolor="none", pad=0.5, alpha=0.8))


def label(ax, x: float, y: float, text: str, *, fontsize: float = 10, **kwargs):
    """Plain text centred at (x, y)."""
    ax.text(x, y, text, ha=kwargs.pop("ha", "center"), va=kwargs.pop("va", "center"),
            fontsize=fontsize, **kwargs)


def time_label(name: str, t: str) -> str:
    """The chapter's time superscript as mathtext: time_label("h", "t-1") is
    $h^{\\langle t-1 \\rangle}$; `name` may itself be mathtext without dollars ("\\hat{y}")."""
    return rf"${name}^{{\langle {t} \rangle}}$"
