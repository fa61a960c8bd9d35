"""The training of every model of the book, `seqlib.train`: one short loop of
`gradient_step`s; the learning-rate schedules and the optimizers it is given."""

import math
import time
from collections.abc import Callable, Iterable

import torch
from torch import nn
from tqdm import tqdm

from seqlib.checks import check_warmup, int_in_range, positive_int


def train(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, object], torch.Tensor],
    batches: Iterable | Callable[[int], object],
    *,
    steps: int,
    optimizer: torch.optim.Optimizer,
    clip: float | None = None,
    schedule: Callable[[int], float] | None = None,
    start: int = 0,
    history: dict | None = None,
    on_step: Callable[[int, dict], bool | None] | None = None,
    progress: bool = True,
    desc: str = "train",
    leave: bool = True,
) -> dict[str, list[float]]:
    """Run optimisation steps start, ..., steps - 1 and return the history of losses.

    - `loss_fn(model, batch)` returns the scalar loss of one batch.
    - `batches` is an iterable of batches (one per step to run) or a function `step -> batch`.
    - `clip`, when given, rescales the gradient so its global 2-norm is at most `clip`
      (gradient clipping, the chapter's remedy for exploding gradients).
    - `schedule`, the book's one learning-rate mechanism: step s runs at schedule(s) times
      the rate each parameter group started with (kept as "initial_lr", the key of torch's
      schedulers), a function of the step alone, so a resumed run needs no scheduler state.
    - `start` and `history` resume a run: the first step to run and the history of the
      steps before it (both from a checkpoint, with the model's and optimizer's states).
    - `on_step(step, history)` is called after every step, for example to write a
      checkpoint; when it returns True, training stops after that step (a time limit).
    - `progress` shows a progress bar (tqdm) labelled `desc`, which stays when training
      ends unless `leave` is False.

    The history has one entry per step: "loss", "grad_norm" (before clipping) and "seconds"
    (wall time since the run started), for learning curves against steps, tokens or time.
    """
    positive_int("steps", steps)
    int_in_range("start", start, 0, steps - 1, expected=f"an int in [0, steps={steps})")
    if clip is not None and not clip > 0:
        raise ValueError(f"clip must be positive or None, got {clip!r}")
    history = {"loss": [], "grad_norm": [], "seconds": []} if history is None else history
    if sorted(history) != ["grad_norm", "loss", "seconds"] \
            or any(len(v) != start for v in history.values()):
        raise ValueError(f"history must hold the lists loss, grad_norm and seconds of the "
                         f"{start} steps before start={start}")
    next_batch = batches if callable(batches) else iter(batches).__next__
    for group in optimizer.param_groups:
        group.setdefault("initial_lr", group["lr"])
    model.train()
    offset = history["seconds"][-1] if start else 0.0
    begin = time.perf_counter()
    bar = tqdm(range(start, steps), desc=desc, disable=not progress, mininterval=1.0,
               initial=start, total=steps, leave=leave)
    for step in bar:
        if schedule is not None:  # this step's rate
            for group in optimizer.param_groups:
                group["lr"] = group["initial_lr"] * schedule(step)
        try:
            batch = next_batch(step) if callable(batches) else next_batch()
        except StopIteration:
            raise ValueError(f"batches ran out after {step - start} of {steps - start} "
                             "steps") from None
        loss, norm = gradient_step(model, loss_fn, batch, optimizer, clip, step)
        history["loss"].append(loss)
        history["grad_norm"].append(norm)
        history["seconds"].append(offset + time.perf_counter() - begin)
        bar.set_postfix(loss=f"{history['loss'][-1]:.3f}", refresh=False)
        if on_step is not None and on_step(step, history):
            break
    model.eval()
    return history


def gradient_step(model: nn.Module, loss_fn: Callable[[nn.Module, object], torch.Tensor],
                  batch, optimizer: torch.optim.Optimizer, clip: float | None = None,
                  step: int = 0) -> tuple[float, float]:
    """One step of training: the loss of a batch, its gradient by backpropagation, the
    gradient clipped to norm `clip` (if given) and the optimizer's update. Returns the loss
    and the gradient's norm before clipping."""
    loss = loss_fn(model, batch)
    if not torch.isfinite(loss):
        raise FloatingPointError(f"loss is {loss.item()} at step {step}")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()  # the gradient of the loss, through time for a recurrent model
    # clip_grad_norm_ returns the norm before clipping; max_norm=inf only measures it.
    norm = nn.utils.clip_grad_norm_(model.parameters(), clip if clip else float("inf"))
    optimizer.step()  # e.g. AdamW's update of every parameter
    return loss.item(), norm.item()


# ---- the learning-rate schedules: the rate of step s as a fraction of the peak ----------

def warmup_linear(step: int, steps: int, warmup: int = 0, decay: bool = False) -> float:
    """A linear warm-up over the first `warmup` steps, then 1, or with `decay` a linear fall
    to 1 / (steps - warmup) at the last step."""
    check_warmup(warmup, positive_int("steps", steps))
    if step < warmup:
        return (step + 1) / warmup
    return (steps - step) / (steps - warmup) if decay else 1.0


def warmup_cosine(step: int, steps: int, warmup: int = 0, floor: float = 0.1) -> float:
    """A linear warm-up over the first `warmup` steps, then a cosine decay from 1 to `floor`
    at step `steps`."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


# ---- the optimizers ---------------------------------------------------------------------

def adam(model: nn.Module, lr: float) -> torch.optim.Adam:
    """Adam at rate lr on the parameters that train (a frozen part's are left out)."""
    return torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)


def adamw(model: nn.Module, lr: float, weight_decay: float = 0.01,
          beta2: float = 0.999) -> torch.optim.AdamW:
    """AdamW at rate lr on every parameter; AdamW's own defaults for the rest."""
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, beta2),
                             weight_decay=weight_decay)
