"""Length generalisation (beyond the chapter): reverse a sequence of random symbols.

A task sequence is [x_1, ..., x_n, SEP, x_n, ..., x_1]: n symbols drawn uniformly from
0, ..., symbols - 1, the separator (id `symbols`), then the symbols in reverse order. A
language model (seqlib.lm.RecurrentLM or seqlib.lm.TransformerLM) reads it as a
token stream, tensors (batch, time); it is trained on the n answer tokens only and
evaluated by greedy decoding, at lengths n it was trained on and at longer ones.
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

FIT_KEYS = ("lengths", "batch_size", "steps", "lr", "warmup", "symbols", "seed")


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


def run(name: str, model, config: dict) -> runs.Run:
    """The run of `model` (a model, or a function that builds one after
    seed_everything(config["seed"])) on the task, whose data it draws itself:
    config["steps"] batches of config["batch_size"] task sequences of config["symbols"]
    symbols, each batch of one length n drawn uniformly from config["lengths"] (shortest,
    longest), all from the run's generator, seeded with config["seed"]: AdamW at peak rate
    config["lr"] with warmup_cosine's warm-up of config["warmup"] steps and decay,
    gradients clipped at norm 1."""
    config = check_config(config, FIT_KEYS)
    lengths = config["lengths"]
    if not (isinstance(lengths, tuple) and len(lengths) == 2 and 1 <= lengths[0] <= lengths[1]):
        raise ValueError(f"config['lengths'] must be a pair (shortest, longest), 1 <= "
                         f"shortest <= longest, got {lengths!r}")
    model = runs.built(model, config["seed"])
    return runs.Run(name, model, reversal_loss,
                    partial(_batches, lengths, config["batch_size"], config["symbols"]),
                    partial(adamw, lr=config["lr"]), config["steps"], warmup=config["warmup"],
                    schedule=warmup_cosine, clip=1.0, seed=config["seed"], config=config,
                    module=__name__, desc="reverse")


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
