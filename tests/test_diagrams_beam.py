"""The beam-search tree: one box per extension the search scored, coloured by what the beam
did with it."""

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.patches import FancyBboxPatch
from test_decoding import END, GO, MISSED

from seqlib.diagrams import COLOURS
from seqlib.diagrams.beam import beam_trace, draw_beam_search

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
