"""Language modelling on one long text (pages 06, 12, 19 and 21): the stream of ids split
into training and validation, read by truncated backpropagation through time.

The text is cut into chunks of `context` steps read as `batch_size` parallel streams; the
state is carried from one chunk to the next (so the forward pass remembers beyond the
chunk) but detached (so the backward pass stops at the chunk boundary), and the loss is the
cross-entropy averaged over all predicted characters, in nats per character. Any model
that reads a stream, forward(ids (B, T), state) -> (logits (B, T, V), state), trains and
evaluates this way: seqlib.lm.RecurrentLM, seqlib.lm.TransformerLM (which carries no
state) and the window model of seqlib.experiments.window. `run(name, model, data, fit)` is
the training run of such a model, which several pages share.
"""

from collections.abc import Callable, Iterable
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from seqlib.checks import check_ids, positive_int
from seqlib.experiments import runs
from seqlib.lm import select_state
from seqlib.pages.config import check_config
from seqlib.training import adamw, warmup_cosine


def detach_state(state):
    """The state cut from the graph of the chunk that produced it (truncated BPTT).

    Works for None, a tensor (RNN, GRU) or a tuple of tensors ((h, c) of the LSTM)."""
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return state.detach()
    if isinstance(state, tuple):
        return tuple(s.detach() for s in state)
    raise TypeError(f"state must be None, a tensor or a tuple of tensors, "
                    f"got {type(state).__name__}")


def split_corpus(ids: torch.Tensor, train_fraction: float = 0.9):
    """(train, validation): the first `train_fraction` of the 1-D id stream, then the rest."""
    check_ids(ids, nonempty=True)
    if ids.dim() != 1:
        raise ValueError(f"ids must be a 1-D stream of token ids, got shape {tuple(ids.shape)}")
    if isinstance(train_fraction, bool) or not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must lie strictly between 0 and 1, "
                         f"got {train_fraction!r}")
    n = int(len(ids) * train_fraction)
    if n < 2 or len(ids) - n < 2:
        raise ValueError(f"train_fraction={train_fraction} of {len(ids)} ids leaves a part "
                         "with fewer than 2 ids (at least one (input, target) pair each)")
    return ids[:n], ids[n:]


def check_stream(ids, batch_size, context, name="ids") -> None:
    """Raise a clear error unless `ids` is a 1-D id stream long enough for batch_size
    streams read in chunks of `context`."""
    check_ids(ids, name=name, nonempty=True)
    if ids.dim() != 1:
        raise ValueError(f"{name} must be a 1-D stream of token ids, got shape "
                         f"{tuple(ids.shape)}")
    positive_int("batch_size", batch_size)
    positive_int("context", context)
    if len(ids) - 1 < batch_size:
        raise ValueError(f"{name} has {len(ids) - 1} (input, target) pairs, fewer than "
                         f"batch_size={batch_size} streams")


def contiguous_batches(ids: torch.Tensor, batch_size: int, context: int):
    """Endless chunks (x, y), each (batch_size, context), for truncated BPTT.

    The pairs (ids[j], ids[j+1]) are read as batch_size parallel streams, stream b
    starting at pair b N / batch_size of the N pairs, and each stream runs on
    contiguously, wrapping around from the end of the text to its start. So row b of
    chunk i+1 continues row b of chunk i, and the state carried from one chunk to the
    next belongs to the same stream; every target is the true next character.
    """
    check_stream(ids, batch_size, context)
    inputs, targets = ids[:-1], ids[1:]
    N = len(inputs)
    device = ids.device  # chunks are gathered where the ids are: no copy per step
    starts = torch.arange(batch_size, device=device) * N // batch_size  # (B,) first pairs
    steps = torch.arange(context, device=device)  # (T,)
    position = 0
    while True:
        index = (starts[:, None] + position + steps) % N  # (B, T)
        yield inputs[index], targets[index]
        position = (position + context) % N


class CarriedStateLoss:
    """A `loss_fn(model, (x, y))` for seqlib.train that carries the state.

    Each call runs the model on chunk x from the state left by the previous call, then
    detaches the new state (truncated BPTT); the loss is the mean cross-entropy of the
    chunk in nats per character. Use a fresh one for each training run.
    """

    def __init__(self):
        self.state = None

    def __call__(self, model: nn.Module, batch: tuple) -> torch.Tensor:
        x, y = batch
        logits, state = model(x, self.state)  # (B, T, V)
        self.state = detach_state(state)
        return F.cross_entropy(logits.flatten(0, 1), y.flatten())


# The settings of `run` (its fit): those it needs, and the defaults of the others.
FIT_KEYS = ("steps", "batch_size", "context", "lr", "warmup")
FIT_DEFAULTS = dict(beta2=0.999, weight_decay=0.01, clip=1.0, seed=0)


def run(name: str, model: nn.Module, data: torch.Tensor, fit: dict, *,
        module: str | None = None, on_step: Callable | None = None,
        finish: Callable | None = None) -> runs.Run:
    """The run of a language model (seqlib.lm.RecurrentLM, TransformerLM, ...) on the 1-D
    id stream `data`: fit["steps"] chunks of fit["batch_size"] x fit["context"] read on
    contiguously (`contiguous_batches`) with the state carried (`CarriedStateLoss`),
    `adamw` at peak rate fit["lr"] with fit["beta2"] and fit["weight_decay"], a warm-up of
    fit["warmup"] steps then a cosine decay to a tenth (`warmup_cosine`), gradients
    clipped at norm fit["clip"] (FIT_DEFAULTS for the settings fit leaves out). Pages that
    train the same model alike share the run; `module`, `on_step` and `finish` are those
    of runs.Run."""
    fit = check_config(fit, FIT_KEYS, FIT_DEFAULTS)
    check_stream(data, fit["batch_size"], fit["context"], name="data")
    ids = data.to(next(model.parameters()).device)
    return runs.Run(name, model, CarriedStateLoss(),
                    partial(_stream, ids, fit["batch_size"], fit["context"]),
                    partial(adamw, lr=fit["lr"], weight_decay=fit["weight_decay"],
                            beta2=fit["beta2"]),
                    fit, warmup_cosine, data=(data,), module=module, on_step=on_step,
                    finish=finish)


def _stream(ids: torch.Tensor, batch_size: int, context: int, generator) -> Iterable:
    return contiguous_batches(ids, batch_size, context)  # no random draws


@torch.no_grad()
def evaluate(model: nn.Module, ids: torch.Tensor, batch_size: int, context: int, *,
             carry_state: bool = True) -> float:
    """Mean cross-entropy, in nats per character, of every prediction of the 1-D stream.

    The N pairs (ids[j], ids[j+1]) are cut into batch_size streams of L = N // batch_size
    consecutive pairs, read in chunks of `context` steps with the state carried; the last
    N - batch_size L pairs continue the last stream. Each pair is counted exactly once.
    With carry_state=False every chunk starts from the initial state, so no prediction sees
    more than `context` characters: the view of a model without state (TransformerLM,
    whose chunks must fit its max_len).
    """
    check_stream(ids, batch_size, context)
    if not isinstance(carry_state, bool):
        raise TypeError(f"carry_state must be a bool, got {carry_state!r}")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    inputs, targets = ids[:-1].to(device), ids[1:].to(device)
    N = len(inputs)
    L = N // batch_size
    rows_x = inputs[: batch_size * L].view(batch_size, L)  # (B, L): stream b is row b
    rows_y = targets[: batch_size * L].view(batch_size, L)
    total, state = 0.0, None
    for i in range(0, L, context):
        state = state if carry_state else None
        logits, state = model(rows_x[:, i:i + context], state)  # (B, T, V)
        total += F.cross_entropy(logits.flatten(0, 1), rows_y[:, i:i + context].flatten(),
                                 reduction="sum").item()
    if batch_size * L < N:  # the tail continues the last stream
        state = select_state(state, slice(batch_size - 1, batch_size))
        for i in range(batch_size * L, N, context):
            state = state if carry_state else None
            logits, state = model(inputs[None, i:i + context], state)  # (1, T, V)
            total += F.cross_entropy(logits[0], targets[i:i + context], reduction="sum").item()
    model.train(was_training)
    return total / N
