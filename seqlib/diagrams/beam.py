"""Beam search drawn as a tree (beyond the chapter): every extension that the search scored,
from a `trace` of seqlib.decoding.beam_search, with its probability and what the beam did
with it."""

import math
from collections.abc import Sequence

from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from seqlib.diagrams import COLOURS, arrow, box, canvas

# What the beam did with an extension -> (box colour kind, edge style)
STATUS_STYLE = {
    "live": ("unit", {"edgecolor": "black"}),
    "finished": ("layer", {"edgecolor": "black", "linewidth": 2.0}),
    "dropped": ("input", {"edgecolor": "0.6", "linestyle": "--"}),
}


def draw_beam_search(steps: Sequence[Sequence[dict]], words: Sequence[str], *, ax=None,
                     title: str | None = None, dx: float = 2.4, dy: float = 0.8):
    """The tree of one source's beam search: `steps` is its part of a trace (trace[t][b] for
    every step t), `words` names the token ids. A column per step; each box is a token with
    the probability of the whole prefix ending in it, blue when kept, green when finished by
    <stop>, dashed when dropped. Returns the figure."""
    if not steps or not all(isinstance(step, Sequence) for step in steps):
        raise ValueError("steps must be one source's part of a beam_search trace: a list, per "
                         "step, of the extensions scored at that step")
    rows = max(len(step) for step in steps)
    width, height = dx * (len(steps) + 1), dy * (rows + 1)
    fig, ax = canvas(width, height, title=title, ax=ax, scale=0.75)
    place = {(): (dx * 0.5, height / 2)}
    box(ax, *place[()], "<start>", kind="state", width=1.2, height=0.5, fontsize=8)
    for t, step in enumerate(steps, start=1):
        ordered = sorted(step, key=lambda e: (place[e["prefix"]][1] * -1, e["token"]))
        top = height / 2 + dy * (len(ordered) - 1) / 2
        for i, e in enumerate(ordered):
            x, y = dx * (t + 0.5), top - dy * i
            kind, style = STATUS_STYLE[e["status"]]
            text = f"{words[e['token']]}  {math.exp(e['log_p']):.3g}"
            box(ax, x, y, text, kind=kind, width=1.6, height=0.5, fontsize=8, **style)
            arrow(ax, (place[e["prefix"]][0] + 0.6, place[e["prefix"]][1]), (x - 0.8, y),
                  colour="0.6" if e["status"] == "dropped" else "black", shrink=1.0)
            if e["status"] == "live":
                place[e["prefix"] + (e["token"],)] = (x + 0.2, y)
    handles = [Patch(facecolor=COLOURS[STATUS_STYLE[s][0]], edgecolor=STATUS_STYLE[s][1]
                     ["edgecolor"], linestyle=STATUS_STYLE[s][1].get("linestyle", "-"), label=s)
               for s in ("live", "finished", "dropped")]
    handles.append(Line2D([], [], color="none", label="probability of the prefix"))
    ax.legend(handles=handles, loc="lower left", fontsize=8, frameon=False, ncol=4,
              bbox_to_anchor=(0, -0.02))
    return fig
