"""The book's recurring plots: learning curves."""

import matplotlib.pyplot as plt
import torch


def plot_losses(histories: dict[str, list[float]], *, xlabel: str = "step",
                ylabel: str = "loss", title: str = "Training loss", smooth: int = 1,
                figsize=(6, 3.5), log_y: bool = False):
    """One learning curve per entry of `histories` (label -> losses), optionally smoothed
    by a running mean over `smooth` steps."""
    if smooth < 1:
        raise ValueError(f"smooth must be >= 1, got {smooth}")
    fig, ax = plt.subplots(figsize=figsize)
    for label, losses in histories.items():
        y = torch.tensor(losses, dtype=torch.float64)
        if smooth > 1 and len(y) >= smooth:
            y = y.unfold(0, smooth, 1).mean(1)
        ax.plot(range(len(losses) - len(y) + 1, len(losses) + 1), y, label=label)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    if log_y:
        ax.set_yscale("log")
    if len(histories) > 1:
        ax.legend()
    fig.tight_layout()
    return fig, ax
