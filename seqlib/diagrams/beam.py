"""Beam search drawn as a tree (beyond the chapter): every extension that the search scored,
with its probability and what the beam did with it.

`TableDecoder` is a decoder written as a table, for worked examples; `beam_trace` runs
seqlib.decoding's beam search step by step (`beam_steps`) and lists, per step and source,
every extension it scored; `draw_beam_search` draws one source's trace as a tree."""

import math
from collections.abc import Sequence

import torch
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from seqlib.checks import check_source, positive_int
from seqlib.decoding import NEG_INF, beam_steps
from seqlib.diagrams import COLOURS, MAX_WIDTH, arrow, box, canvas

# What the beam did with an extension -> (box colour kind, edge style)
STATUS_STYLE = {
    "live": ("unit", {"edgecolor": "black"}),
    "finished": ("layer", {"edgecolor": "black", "linewidth": 2.0}),
    "dropped": ("input", {"edgecolor": "0.6", "linestyle": "--"}),
}


class TableDecoder:
    """A decoder written as a table, for worked examples of decoding: `table` maps a prefix
    (a tuple of token ids, <start> left out) to the probabilities of the next token, a
    sequence of `vocab_size` numbers summing to 1; after a prefix the table lacks, <stop>
    comes with probability 1. It follows the decoding protocol; the source only sets the
    batch size."""

    def __init__(self, table: dict, vocab_size: int, stop_id: int):
        self.tgt_vocab_size = positive_int("vocab_size", vocab_size)
        self.stop_id = stop_id
        self.table = {}
        for prefix, probs in table.items():
            p = torch.as_tensor(probs, dtype=torch.float64)
            if not isinstance(prefix, tuple) or p.shape != (vocab_size,) or (p < 0).any() \
                    or abs(float(p.sum()) - 1) > 1e-9:
                raise ValueError(f"table[{prefix!r}] must be {vocab_size} probabilities summing "
                                 f"to 1 after a tuple prefix, got {probs!r}")
            self.table[prefix] = p

    def probabilities(self, prefix: tuple) -> torch.Tensor:
        """P(next token | prefix), (V,)."""
        if prefix in self.table:
            return self.table[prefix]
        return torch.nn.functional.one_hot(torch.tensor(self.stop_id),
                                           self.tgt_vocab_size).double()

    def start(self, src: torch.Tensor, src_mask: torch.Tensor) -> list:
        return [None] * len(check_source(src, src_mask))  # None: <start> not yet read

    def step(self, tokens: torch.Tensor, state: list):
        prefixes = [() if p is None else p + (y,) for p, y in zip(state, tokens.tolist(),
                                                                    strict=True)]
        return torch.stack([self.probabilities(p) for p in prefixes]).log(), prefixes

    @staticmethod
    def reorder(state: list, index: torch.Tensor) -> list:
        return [state[i] for i in index.tolist()]


def beam_trace(model, src: torch.Tensor, src_mask: torch.Tensor, **options):
    """seqlib.decoding.beam_search(model, src, src_mask, **options) and its trace: per step,
    one list per source of every extension of its live hypotheses by every token (K V of
    them: for small vocabularies), each a dict with the "prefix" (a tuple of ids), the
    "token", its "log_p" (the log-probability of the prefix and the token) and its
    "status": "live" (kept), "finished" (ended by <stop> among the K best) or "dropped".
    Returns (the search's result, the trace)."""
    search, trace = beam_steps(model, src, src_mask, **options), []
    while True:
        try:
            step = next(search)
        except StopIteration as end:
            return end.value, trace
        trace.append([[] if status is None else _extensions(total, prefixes, status)
                      for total, prefixes, status in zip(*step, strict=True)])


def _extensions(total: torch.Tensor, prefixes: list, status: dict) -> list[dict]:
    """Every extension of the live hypotheses (rows of `total` (K, V) above -inf) by every
    token, with its log-probability and what the beam did with it."""
    return [{"prefix": tuple(prefixes[k]), "token": y, "log_p": s,
             "status": status.get((k, y), "dropped")}
            for k, row in enumerate(total.tolist()) if max(row) > NEG_INF
            for y, s in enumerate(row) if s > NEG_INF]


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
