"""The beam-search tree: one box per extension the search scored, coloured by what the beam
did with it."""

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.patches import FancyBboxPatch
from pages.test_decoding import END, GO, MISSED

from seqlib.diagrams import COLOURS, legible
from seqlib.diagrams.beam import draw_beam_search
from seqlib.pages.decoding import beam_trace

WORDS = ["<start>", "<stop>", "x", "y", "z"]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("beam_size", [1, 2, 3])
def test_one_box_per_extension_coloured_by_status(beam_size):
    src, mask = torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.bool)
    _, trace = beam_trace(MISSED, src, mask, start_id=GO, stop_id=END, max_len=4,
                          beam_size=beam_size, length_penalty=0)
    steps = [step[0] for step in trace]
    fig = draw_beam_search(steps, WORDS)
    boxes = [p for p in fig.axes[0].patches if isinstance(p, FancyBboxPatch)]
    extensions = [e for step in steps for e in step]
    assert len(boxes) == 1 + len(extensions)  # and <start>
    finished = [p for p in boxes if matplotlib.colors.same_color(p.get_facecolor(),
                                                                 COLOURS["layer"])]
    assert len(finished) == sum(e["status"] == "finished" for e in extensions) >= beam_size
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert ("<stop>  0.24" in texts) == (beam_size == 3)  # only a beam of 3 reaches z <stop>


def test_a_trace_of_all_sources_is_refused_with_a_hint():
    with pytest.raises(ValueError, match="one source's part of a beam_search trace"):
        draw_beam_search([], WORDS)


def test_trees_fit_the_column_and_each_box_holds_its_text():
    """Alone, and two trees stacked in rows on one figure, as the page draws them."""
    src, mask = torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.bool)
    traces = {k: [step[0] for step in beam_trace(MISSED, src, mask, start_id=GO, stop_id=END,
                                                 max_len=4, beam_size=k,
                                                 length_penalty=0)[1]] for k in (2, 3)}
    stacked, axes = plt.subplots(2, 1, figsize=(8, 8.4))
    for ax, k in zip(axes, (2, 3), strict=True):
        draw_beam_search(traces[k], WORDS, ax=ax, title=f"beam of {k}")
    stacked.tight_layout()
    for fig in (draw_beam_search(traces[3], WORDS), stacked):
        assert legible(fig)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            boxes = [p.get_window_extent(renderer) for p in ax.patches
                     if isinstance(p, FancyBboxPatch)]
            for text in ax.texts:
                extent = text.get_window_extent(renderer)
                holder = [b for b in boxes if b.contains(*extent.get_points().mean(0))]
                assert len(holder) == 1 and holder[0].x0 < extent.x0 < extent.x1 < holder[0].x1
