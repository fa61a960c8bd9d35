"""A run's recipe in four lines, read off its record (seqlib.experiments.runs.Run): what it
trains, for how many steps of how many examples, on which loss, with which optimizer,
learning-rate schedule and clipping. The training pages print it beside the code that makes
the run, so the reader sees the recipe whatever machinery trains it.

A tool of the book's pages: the model cache's key does not depend on this module.
"""

from functools import partial

from seqlib.experiments.runs import Run
from seqlib.utils import count_parameters


def _called(function) -> str:
    """`training.adam(lr=0.001)` for partial(seqlib.training.adam, lr=1e-3): a function's
    or an object's name after the last part of its module's, where a reader finds it."""
    if isinstance(function, partial):
        settings = ", ".join(f"{k}={v!r}" for k, v in function.keywords.items())
        return f"{_called(function.func)}({settings})"
    named = function if hasattr(function, "__name__") else type(function)
    return f"{named.__module__.rsplit('.', 1)[-1]}.{named.__name__}"


def recipe(run: Run) -> str:
    """Four lines: the model, its parameters, the steps and the batch (x the context of a
    language model); the loss; the optimizer and the clipping; the rate's schedule."""
    if not isinstance(run, Run):
        raise TypeError(f"run must be a seqlib.experiments.runs.Run, got {type(run).__name__}")
    batch, context = run.fit.get("batch_size"), run.fit.get("context")
    steps = f"{run.steps:,} steps" + (f" of batch {batch:,}" if batch else "") \
        + (f" x {context:,}" if batch and context else "")
    if run.schedule is None:
        schedule = "constant"
    else:
        warmup = f"{run.warmup:,} steps of warm-up" if run.warmup else "no warm-up"
        schedule = f"{_called(run.schedule)} with {warmup}"
    clip = "no clipping" if run.clip is None else f"gradients clipped at norm {run.clip:g}"
    return "\n".join([f"{type(run.model).__name__}, {count_parameters(run.model):,} "
                      f"parameters, {steps}", f"loss {_called(run.loss)}",
                      f"{_called(run.optimizer)}, {clip}", f"rate: {schedule}"])


__all__ = ["recipe"]
