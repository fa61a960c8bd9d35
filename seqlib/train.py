"""One short training loop for every model of the book: no Trainer class, just a function."""

import time
from collections.abc import Callable, Iterable

import torch
from torch import nn
from tqdm import tqdm


def train(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, object], torch.Tensor],
    batches: Iterable | Callable[[int], object],
    *,
    steps: int,
    optimizer: torch.optim.Optimizer,
    clip: float | None = None,
    progress: bool = True,
    desc: str = "train",
) -> dict[str, list[float]]:
    """Run `steps` optimisation steps and return the history of losses.

    - `loss_fn(model, batch)` returns the scalar loss of one batch.
    - `batches` is an iterable of batches (at least `steps` of them) or a function
      `step -> batch`.
    - `clip`, when given, rescales the gradient so its global 2-norm is at most `clip`
      (gradient clipping, the chapter's remedy for exploding gradients).

    The history has one entry per step: "loss", "grad_norm" (before clipping) and
    "seconds" (wall time since the start), so learning curves can be drawn against steps,
    tokens seen or time.
    """
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    if clip is not None and not clip > 0:
        raise ValueError(f"clip must be positive or None, got {clip!r}")
    next_batch = batches if callable(batches) else iter(batches).__next__
    history: dict[str, list[float]] = {"loss": [], "grad_norm": [], "seconds": []}
    model.train()
    start = time.perf_counter()
    bar = tqdm(range(steps), desc=desc, disable=not progress, mininterval=1.0)
    for step in bar:
        try:
            batch = next_batch(step) if callable(batches) else next_batch()
        except StopIteration:
            raise ValueError(f"batches ran out after {step} of {steps} steps") from None
        loss = loss_fn(model, batch)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss is {loss.item()} at step {step}")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        # clip_grad_norm_ returns the norm before clipping; max_norm=inf only measures it.
        norm = nn.utils.clip_grad_norm_(model.parameters(), clip if clip else float("inf"))
        optimizer.step()
        history["loss"].append(loss.item())
        history["grad_norm"].append(norm.item())
        history["seconds"].append(time.perf_counter() - start)
        bar.set_postfix(loss=f"{history['loss'][-1]:.3f}", refresh=False)
    model.eval()
    return history
