"""Beam search drawn as a tree (beyond the chapter): every extension that the search scored,
with its probability and what the beam did with it.

`draw_beam_search` draws one source's part of a seqlib.pages.decoding.beam_trace (the search run
step by step) as a tree."""

import math
from collections.abc import Sequence

from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from seqlib.diagrams import COLOURS, MAX_WIDTH, arrow, box, canvas

# What the beam did with an extension -> (box colour kind, edge style)
STATUS_STYLE = {
    "live": ("unit", {"edgecolor": "black"}),
    "finished": ("layer", {"edgecolor": "black", "linewidth": 2.0}),
    "dropped": ("input", {"edgecolor": "0.6", "linestyle": "--"}),
}


def draw_beam_search(steps: Sequence[Sequence[dict]], words: Sequence[str], *, ax=None,
                     title: str | None = None, dx: float = 2.8, dy: float = 0.8):
    """The tree of one source's beam search: `steps` is its part of a `beam_trace` (trace[t][b]
    for every step t), `words` names the token ids. A column per step; each box is a token with
    the probability of the whole prefix ending in it, blue when kept, green when finished by
    <stop>, dashed when dropped. Returns the figure (at most MAX_WIDTH inches wide)."""
    if not steps or not all(isinstance(step, Sequence) for step in steps):
        raise ValueError("steps must be one source's part of a beam_search trace: a list, per "
                         "step, of the extensions scored at that step")
    rows = max(len(step) for step in steps)
    width, height = dx * (len(steps) + 1), dy * (rows + 1)
    fig, ax = canvas(width, height, title=title, ax=ax, scale=min(0.75, MAX_WIDTH / width))
    w_start, w = 1.3, 2.1  # the widths of the <start> box and of the other boxes
    place = {(): (dx * 0.5 + w_start / 2, height / 2)}  # a live prefix -> its box's right edge
    box(ax, dx * 0.5, height / 2, "<start>", kind="state", width=w_start, height=0.5,
        fontsize=9)
    for t, step in enumerate(steps, start=1):
        ordered = sorted(step, key=lambda e: (place[e["prefix"]][1] * -1, e["token"]))
        top = height / 2 + dy * (len(ordered) - 1) / 2
        for i, e in enumerate(ordered):
            x, y = dx * (t + 0.5), top - dy * i
            kind, style = STATUS_STYLE[e["status"]]
            text = f"{words[e['token']]}  {math.exp(e['log_p']):.3g}"
            box(ax, x, y, text, kind=kind, width=w, height=0.5, fontsize=9, **style)
            arrow(ax, place[e["prefix"]], (x - w / 2, y),
                  colour="0.6" if e["status"] == "dropped" else "black", shrink=1.0)
            if e["status"] == "live":
                place[e["prefix"] + (e["token"],)] = (x + w / 2, y)
    handles = [Patch(facecolor=COLOURS[STATUS_STYLE[s][0]], edgecolor=STATUS_STYLE[s][1]
                     ["edgecolor"], linestyle=STATUS_STYLE[s][1].get("linestyle", "-"), label=s)
               for s in ("live", "finished", "dropped")]
    handles.append(Line2D([], [], color="none", label="probability of the prefix"))
    ax.legend(handles=handles, loc="upper left", fontsize=9, frameon=False, ncol=4,
              bbox_to_anchor=(0, 0.02))
    return fig
