"""Calibration: binning, the expected calibration error on cases known exactly, a
calibrated sample, and clear errors."""

import matplotlib.pyplot as plt
import pytest
import torch

from seqlib.experiments.calibration import expected_calibration_error, plot_reliability, reliability


def test_bins_take_their_upper_edge_and_the_first_takes_zero():
    r = reliability(torch.tensor([0.0, 0.1, 0.15, 0.2, 0.25, 1.0], dtype=torch.float64),
                    torch.tensor([1, 0, 1, 1, 0, 1]), bins=5)
    assert r.counts.tolist() == [4, 1, 0, 0, 1]
    assert r.accuracy[0].item() == pytest.approx(3 / 4) and r.accuracy[2].isnan()
    assert r.confidence[0].item() == pytest.approx(0.45 / 4)


def test_the_ece_of_cases_known_exactly():
    # always 90% confident, right 60% of the time: a gap of 0.3 in the one bin used
    confidence = torch.full((10,), 0.9)
    correct = torch.tensor([1] * 6 + [0] * 4)
    assert expected_calibration_error(confidence, correct) == pytest.approx(0.3)
    # two bins, weighted by their counts: 3 of 4 at 0.55 (gap 0.45), 1 of 4 at 0.95 (gap 0.05)
    confidence = torch.tensor([0.55, 0.55, 0.55, 0.95])
    correct = torch.tensor([0, 0, 0, 1])
    assert expected_calibration_error(confidence, correct) == pytest.approx(
        0.75 * 0.55 + 0.25 * 0.05)


def test_a_calibrated_sample_has_a_small_ece():
    gen = torch.Generator().manual_seed(0)
    confidence = torch.rand(200_000, generator=gen, dtype=torch.float64)
    correct = torch.rand(200_000, generator=gen, dtype=torch.float64) < confidence
    assert expected_calibration_error(confidence, correct, bins=15) < 0.005
    assert expected_calibration_error(confidence.sqrt(), correct, bins=15) > 0.1  # overconfident


def test_the_diagram_draws_one_line_per_model_and_the_diagonal():
    r = reliability(torch.tensor([0.3, 0.7, 0.9]), torch.tensor([0, 1, 1]))
    fig = plot_reliability({"a": r, "b": r})
    assert len(fig.axes[0].lines) == 3
    assert "ECE" in fig.axes[0].get_legend().get_texts()[1].get_text()
    assert all(t.get_fontsize() >= 9 for t in fig.axes[0].get_legend().get_texts())
    plt.close(fig)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((torch.tensor([0.5, 1.2]), torch.tensor([1, 0])), r"confidence must lie in \[0, 1\]"),
        ((torch.tensor([0.5]), torch.tensor([1, 0])), "two non-empty"),
        ((torch.tensor([0.5]), torch.tensor([1]), 0), "bins must be a positive int, got 0"),
    ],
)
def test_bad_input_is_named(args, message):
    with pytest.raises(ValueError, match=message):
        reliability(*args)
