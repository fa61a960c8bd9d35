"""Length generalisation (beyond the chapter): reverse a sequence of random symbols.

A task sequence is [x_1, ..., x_n, SEP, x_n, ..., x_1]: n symbols drawn uniformly from
0, ..., symbols - 1, the separator (id `symbols`), then the symbols in reverse order. A
language model (seqlib.lm.RecurrentLM or seqlib.lm.TransformerLM) reads it as a
token stream, tensors (batch, time); it is trained on the n answer tokens only and
evaluated by greedy decoding, at lengths n it was trained on and at longer ones.

`PROFILES` (seqlib.pages.config) holds the setups of the page's models, "lstm" and
"transformer" ("model": the arguments of RecurrentLM after the unit and the vocabulary size,
of TransformerLM after the vocabulary size; "data": the task), the same in both profiles.
"""

from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from seqlib.checks import positive_int
from seqlib.experiments import runs
from seqlib.pages import seeds
from seqlib.pages.config import check_config
from seqlib.training import adamw, warmup_cosine

# Training on strings of 1 to 10 symbols of 10, from one generator (seed 1) for every model.
DATA = dict(lengths=(1, 10), symbols=10)
SETUPS = {"lstm": {"data": DATA, "model": dict(embed_size=32, hidden_size=256),
                   "fit": dict(batch_size=32, steps=3000, lr=3e-3, warmup=50, seed=1)},
          "transformer": {"data": DATA,
                          "model": dict(p=64, heads=4, n1=256, num_layers=2, max_len=64),
                          "fit": dict(batch_size=32, steps=3000, lr=2e-3, warmup=50, seed=1)}}
PROFILES = {"book": SETUPS, "full": SETUPS}

# The settings of `run` (its data and fit): those it needs, and the defaults of the others.
DATA_KEYS = ("lengths", "symbols")
FIT_KEYS = ("batch_size", "steps", "lr", "warmup")
FIT_DEFAULTS = dict(clip=1.0, seed=0)


def _check_generator(generator) -> torch.Generator:
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    return generator


def reversal_batch(n: int, batch_size: int, symbols: int,
                   generator: torch.Generator) -> torch.Tensor:
    """`batch_size` task sequences of n symbols each: ids (batch_size, 2 n + 1), the
    symbols, the separator (id `symbols`) and the symbols reversed, drawn on the CPU."""
    for name, value in [("n", n), ("batch_size", batch_size), ("symbols", symbols)]:
        positive_int(name, value)
    if symbols < 2:
        raise ValueError(f"symbols must be at least 2, got {symbols}")
    x = torch.randint(symbols, (batch_size, n), generator=_check_generator(generator))
    sep = torch.full((batch_size, 1), symbols)
    return torch.cat([x, sep, x.flip(1)], dim=1)  # (B, 2n + 1)


def reversal_loss(model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the n answer tokens of `batch` (B, 2 n + 1), each predicted from
    the tokens before it (the logits after the separator and after each answer token but
    the last)."""
    n = (batch.shape[1] - 1) // 2
    logits, _ = model(batch[:, :-1])  # (B, 2n, V)
    return F.cross_entropy(logits[:, n:].reshape(-1, logits.shape[-1]),  # (B n, V)
                           batch[:, n + 1:].reshape(-1))


def run(name: str, model, data: dict, fit: dict) -> runs.Run:
    """The run of `model` (a model, or a function that builds one after
    seed_everything(fit["seed"])) on the task, whose sequences it draws itself from
    data = {"lengths": (shortest, longest), "symbols": how many}: fit["steps"] batches of
    fit["batch_size"] task sequences, each batch of one length n drawn uniformly from
    data["lengths"], all from the run's generator: AdamW at peak rate fit["lr"] with
    warmup_cosine's warm-up of fit["warmup"] steps and decay, gradients clipped at norm
    fit["clip"] (FIT_DEFAULTS for the settings fit leaves out)."""
    data = check_config(data, DATA_KEYS)
    fit = check_config(fit, FIT_KEYS, FIT_DEFAULTS)
    lengths = data["lengths"]
    if not (isinstance(lengths, tuple) and len(lengths) == 2 and 1 <= lengths[0] <= lengths[1]):
        raise ValueError(f"data['lengths'] must be a pair (shortest, longest), 1 <= "
                         f"shortest <= longest, got {lengths!r}")
    model = runs.built(model, fit["seed"])
    return runs.Run(name, model, reversal_loss,
                    partial(_batches, lengths, fit["batch_size"], data["symbols"]),
                    partial(adamw, lr=fit["lr"]), fit, warmup_cosine,
                    data=(lengths, data["symbols"]), module=__name__)


def _batches(lengths: tuple, batch_size: int, symbols: int, generator: torch.Generator):
    """step -> a batch of task sequences of one length, drawn from `generator`."""
    low, high = lengths

    def batch(step):
        n = int(torch.randint(low, high + 1, (), generator=generator))
        return reversal_batch(n, batch_size, symbols, generator)

    return batch


@torch.no_grad()
def greedy_reverse(model: nn.Module, x: torch.Tensor, symbols: int) -> torch.Tensor:
    """The model's answer (B, n) to the symbols x (B, n): after [x, SEP], each step appends
    the most likely next token, n times (the length of the answer is given)."""
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.dtype != torch.long:
        raise ValueError(f"x must be a long tensor (batch, n), got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    B, n = x.shape
    ids = torch.cat([x, torch.full((B, 1), symbols)], dim=1)  # (B, n + 1)
    for _ in range(n):
        logits, _ = model(ids)  # (B, t, V)
        ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ids[:, n + 1:]  # (B, n)


def accuracy_by_length(model: nn.Module, lengths, count: int, symbols: int,
                       seed: int = 0) -> dict:
    """{n: (token accuracy, sequence accuracy)} of greedy_reverse over `count` fresh task
    sequences of each length n (a generator seeded with seed + n): the fraction of answer
    tokens right, and the fraction of answers right in full."""
    positive_int("count", count)
    was_training = model.training
    model.eval()
    result = {}
    for n in lengths:
        batch = reversal_batch(n, count, symbols, seeds.generator(seed + n))
        right = greedy_reverse(model, batch[:, :n], symbols) == batch[:, n + 1:]  # (B, n)
        result[n] = (right.float().mean().item(), right.all(1).float().mean().item())
    model.train(was_training)
    return result
