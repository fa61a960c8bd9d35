"""Calibration of a classifier's probabilities (beyond the chapter): does a prediction made
with confidence 0.8 come true 80% of the time?

The predictions are sorted into equal-width bins of confidence (the probability given to the
predicted class). In each bin, the accuracy is the fraction that came true and the
confidence its mean confidence; the reliability diagram plots one against the other, and
the expected calibration error (Naeini et al. 2015; Guo et al. 2017) is their gap averaged
over the bins, weighted by how many predictions fall in each:

    ECE = sum_b (n_b / n) |accuracy_b - confidence_b|.
"""

from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch

from seqlib.checks import positive_int


@dataclass
class Reliability:
    """Per bin of confidence: its edges (bins + 1,), how many predictions it holds, their
    mean confidence and their accuracy (NaN for an empty bin)."""

    edges: torch.Tensor
    counts: torch.Tensor
    confidence: torch.Tensor
    accuracy: torch.Tensor

    @property
    def ece(self) -> float:
        """The expected calibration error: the count-weighted mean |accuracy - confidence|."""
        full = self.counts > 0
        gaps = (self.accuracy[full] - self.confidence[full]).abs()
        return float((self.counts[full] * gaps).sum() / self.counts.sum())


def reliability(confidence: torch.Tensor, correct: torch.Tensor, bins: int = 10) -> Reliability:
    """Bin predictions by `confidence` (N,) in [0, 1]; `correct` (N,) says which came true.
    Bin b holds the confidences in (b / bins, (b + 1) / bins], the first also 0."""
    positive_int("bins", bins)
    confidence = torch.as_tensor(confidence, dtype=torch.float64)
    correct = torch.as_tensor(correct)
    if confidence.dim() != 1 or correct.shape != confidence.shape or len(confidence) == 0:
        raise ValueError(f"confidence and correct must be two non-empty (N,) tensors, got "
                         f"shapes {tuple(confidence.shape)} and {tuple(correct.shape)}")
    if confidence.isnan().any() or (confidence < 0).any() or (confidence > 1).any():
        raise ValueError("confidence must lie in [0, 1]")
    edges = torch.linspace(0, 1, bins + 1, dtype=torch.float64)
    which = (torch.ceil(confidence * bins).long() - 1).clamp(0, bins - 1)  # (N,) bin index
    counts = torch.bincount(which, minlength=bins).double()
    sums = torch.zeros(bins, dtype=torch.float64).index_add_(0, which, confidence)
    hits = torch.zeros(bins, dtype=torch.float64).index_add_(0, which, correct.double())
    empty = torch.where(counts > 0, counts, torch.nan)
    return Reliability(edges, counts, sums / empty, hits / empty)


def expected_calibration_error(confidence, correct, bins: int = 10) -> float:
    """ECE of predictions made with `confidence` (N,) of which `correct` (N,) came true."""
    return reliability(confidence, correct, bins).ece


def plot_reliability(curves: dict[str, Reliability], ax=None):
    """Reliability diagrams, accuracy against confidence per bin, one line per model, with
    the diagonal of perfect calibration; the legend gives each model's ECE."""
    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 4.2))
    ax.plot([0, 1], [0, 1], color="0.6", linestyle=":", label="perfectly calibrated")
    for name, r in curves.items():
        full = r.counts > 0
        ax.plot(r.confidence[full], r.accuracy[full], "o-", label=f"{name} (ECE {r.ece:.3f})")
    ax.set_xlabel("confidence (mean per bin)")
    ax.set_ylabel("accuracy (per bin)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=9)
    return ax.figure
