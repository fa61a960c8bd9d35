"""Figures 7.1-7.5 drawn by seqlib.diagrams.rnn: each draws, returns a figure, and draws
one unit per step, word or layer it is given."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

from seqlib import RNN  # noqa: E402
from seqlib.diagrams import COLOURS, legible  # noqa: E402
from seqlib.diagrams import rnn as diagrams  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def boxes(fig, kind):
    """The boxes of one kind (colour) drawn on every axes of `fig`."""
    colour = COLOURS[kind]
    return [p for ax in fig.axes for p in ax.patches
            if isinstance(p, FancyBboxPatch) and to_hex(p.get_facecolor()) == colour]


def texts(fig):
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts)



def test_tasks_draws_one_unit_per_word():
    sentiment, source = "I like reading this book", "We enjoyed writing this book"
    target, caption = "nous avons aimé écrire ce livre <end>", "Three good friends having fun"
    fig = diagrams.tasks(sentiment, ["happy", "sad", "indifferent"], source, target, caption)
    assert isinstance(fig, Figure) and len(fig.axes) == 4
    words = sum(len(s.split()) for s in (sentiment, source, target, caption))
    assert len(boxes(fig, "unit")) == 5 + words  # (a) draws 5 units and two ellipses
    assert "happy, sad, indifferent" in texts(fig) and "écrire" in texts(fig)
    assert texts(fig).count("encoded\ninput") == len(sentiment.split())  # (b)'s boxes
    panel_a = " ".join(t.get_text() for t in fig.axes[0].texts)
    # (a): the targets the chapter labels, up to its horizon tau
    assert "labels" in panel_a and r"T+\tau" in panel_a and "horizon" in panel_a


def test_tasks_passes_the_code_from_the_encoder_to_the_decoder():
    """Fig. 7.1 (c): one arrow, on the units' line, joins the right edge of the last
    encoder unit to the left edge of the first decoder unit."""
    source, target = "a b c", "x y <end>"
    fig = diagrams.tasks("good", ["happy"], source, target, "one two")
    ax = fig.axes[2]
    units = sorted((p for p in ax.patches if isinstance(p, FancyBboxPatch)
                    and to_hex(p.get_facecolor()) == COLOURS["unit"]), key=lambda p: p.get_x())
    assert len(units) == 6
    last_encoder, first_decoder = units[2], units[3]
    right = last_encoder.get_x() + last_encoder.get_width()
    y = last_encoder.get_y() + last_encoder.get_height() / 2
    joins = [p for p in ax.patches if isinstance(p, FancyArrowPatch)
             and p._posA_posB[0][0] >= right - 0.05
             and p._posA_posB[1][0] <= first_decoder.get_x() + 0.05
             and p._posA_posB[0][1] == p._posA_posB[1][1] == pytest.approx(y)]
    assert len(joins) == 1


def test_paradigms_draws_the_units_inputs_and_outputs_it_is_given():
    patterns = {"one-to-many": ([True, False, False], [True, True, True]),
                "many-to-one": ([True, True, True, True], [False, False, False, True])}
    fig = diagrams.paradigms(patterns)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert len(boxes(fig, "unit")) == 7
    one_to_many, many_to_one = (" ".join(t.get_text() for t in ax.texts) for ax in fig.axes)
    assert one_to_many.count("x^") == 1 and one_to_many.count("hat{y}") == 3
    assert many_to_one.count("x^") == 4 and many_to_one.count("hat{y}") == 1
    with pytest.raises(ValueError, match="differ in length"):
        diagrams.paradigms({"bad": ([True], [True, False])})


@pytest.mark.parametrize("steps", [1, 3, 4])
def test_recursive_and_unfolded_draws_the_unit_then_steps_units(steps):
    fig = diagrams.recursive_and_unfolded(steps)
    assert isinstance(fig, Figure) and len(boxes(fig, "unit")) == 1 + steps
    with pytest.raises(ValueError, match="steps"):
        diagrams.recursive_and_unfolded(0)


def test_unit_reads_its_sizes_and_activation_off_the_model():
    fig = diagrams.unit(RNN(3, 5, 2, nonlinearity="relu"))
    labels = texts(fig)
    for shape in (r"5 \times 5", r"5 \times 3", r"2 \times 5", "$5$", "$2$", "ReLU"):
        assert shape in labels, shape
    assert len(boxes(fig, "gate")) == 5  # W_hh, W_hx, b_h, W_yh, b_y
    assert "T(" not in labels


def test_unit_with_the_chapters_output_feedback_draws_T():
    fig = diagrams.unit(RNN(8, 20, 8, output_feedback=True))
    assert r"T(\cdot)" in texts(fig) and r"20 \times 8" in texts(fig)


@pytest.mark.parametrize("model, error", [
    (RNN(3, 5), ValueError),  # no output layer
    (RNN(3, 5, 2, num_layers=2), ValueError),
    (RNN(3, 5, 3, output_feedback=True, feedback="matrix"), ValueError),
    (object(), TypeError),
])
def test_unit_refuses_what_it_cannot_draw(model, error):
    with pytest.raises(error):
        diagrams.unit(model)


def test_lookahead_draws_one_unit_per_step_and_colours_the_errors():
    sentence = "the mathematical engineering of deep learning".split()
    chapter = "mathematical engineering of engineering learning".split()  # Fig. 7.5
    fig = diagrams.lookahead(sentence, chapter)
    assert isinstance(fig, Figure) and len(boxes(fig, "unit")) == len(sentence) - 1
    colour = {t.get_text(): t.get_color() for ax in fig.axes for t in ax.texts
              if t.get_color() in ("#2e7d32", "#c62828")}
    assert colour == {"mathematical": "#2e7d32", "engineering": "#c62828",
                      "of": "#2e7d32", "learning": "#2e7d32"}  # engineering at t = 2 and 4
    red = [t for ax in fig.axes for t in ax.texts if t.get_color() == "#c62828"]
    assert len(red) == 1  # the one error, at t = 4
    with_probabilities = diagrams.lookahead(sentence, chapter, [0.6, 0.7, 1.0, 0.67, 1.0])
    assert any(t.get_text() == "engineering\n(0.67)"
               for ax in with_probabilities.axes for t in ax.texts)
    with pytest.raises(ValueError, match="one word per step, T = 5"):
        diagrams.lookahead(sentence, chapter[:4])
    with pytest.raises(ValueError, match="one per step, T = 5, got 2"):
        diagrams.lookahead(sentence, chapter, [0.5, 0.5])
    with pytest.raises(ValueError, match="at least 2 words"):
        diagrams.lookahead(["the"], [])


def test_the_figures_fit_the_books_column():
    sentence = "the mathematical engineering of deep learning".split()
    patterns = {"one-to-many": ([True, False, False], [True, True, True]),
                "many-to-many": ([True] * 5, [False] * 2 + [True] * 3),
                "many-to-one": ([True] * 4, [False] * 3 + [True])}
    figures = [diagrams.tasks("I like reading this terribly instructive book", ["happy", "sad"],
                              "We enjoyed writing this book",
                              "nous avons aimé écrire ce livre <end>",
                              "Three good friends having fun"),
               diagrams.paradigms(patterns), diagrams.recursive_and_unfolded(4),
               diagrams.unit(RNN(8, 20, 8, output_feedback=True)),
               diagrams.lookahead(sentence, sentence[1:], [0.5] * 5)]
    assert all(legible(fig) for fig in figures)


def test_label_points_keeps_close_labels_apart():
    """Three words whose dots nearly coincide (page 1's prince, father and queen) get
    labels that do not cover one another; a word per point is required."""
    from seqlib.diagrams.labels import label_points

    fig, ax = plt.subplots(figsize=(4, 3))
    xy = [(0.0, 0.0), (0.01, -0.01), (0.03, 0.0), (1.0, 1.0)]
    ax.scatter(*zip(*xy, strict=True))
    fig.tight_layout()
    labels = label_points(ax, xy, ["prince", "father", "queen", "alone"])
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in labels]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    with pytest.raises(ValueError, match="one word per point"):
        label_points(ax, xy, ["a"])
