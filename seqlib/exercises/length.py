"""Checkers for the exercises of the page on length generalisation."""

import torch
from torch import nn

from seqlib.exercises.toolkit import ExerciseError, expect, passed, require_callable, seeded
from seqlib.experiments.length import greedy_reverse, reversal_batch
from seqlib.lm import RecurrentLM


class _Reading(nn.Module):
    """The model, counting the tokens each call reads."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model, self.reads = model, []

    def forward(self, ids, state=None):
        self.reads.append(ids.shape[1])
        return self.model(ids, state)


def check_stateful_reverse(reverse) -> None:
    """`reverse(model, x, symbols)`: the greedy answer (B, n) of a RecurrentLM `model` to
    the symbols x (B, n), as seqlib.experiments.length.greedy_reverse, but reading each token once:
    [x, SEP] in one call, then one call per answer token with the state carried, (7.2)."""
    require_callable(reverse, "reverse(model, x, symbols) -> answer", name="reverse")
    symbols = 5
    for n, seed in [(1, 0), (4, 1), (9, 2)]:
        with seeded(seed):
            model = RecurrentLM("lstm", symbols + 1, 8, 16).eval()
        x = reversal_batch(n, 6, symbols, torch.Generator().manual_seed(seed))[:, :n]
        expected = greedy_reverse(model, x, symbols)
        reading = _Reading(model)
        with torch.no_grad():
            got = reverse(reading, x, symbols)
        expect(isinstance(got, torch.Tensor), f"reverse must return a tensor, got "
               f"{type(got).__name__}")
        expect(tuple(got.shape) == (6, n), f"reverse(model, x of shape {(6, n)}) has shape "
               f"{tuple(got.shape)}, expected {(6, n)}: one answer token per symbol")
        if sum(reading.reads) > 2 * n + 1:
            raise ExerciseError(f"for n = {n} the model read {sum(reading.reads)} tokens in "
                                f"calls of {reading.reads}, but [x, SEP] and the answer are "
                                f"{2 * n + 1}: carry the state instead of reading the "
                                f"prefix again")
        wrong = (got != expected).any(0).nonzero()
        if len(wrong):
            raise ExerciseError(f"for n = {n} the answer differs from the greedy one first "
                                f"at answer position {int(wrong[0]) + 1}: after [x, SEP], "
                                f"feed back each most likely token with the state")
    passed("the answers agree with greedy decoding, each token read once, for n = 1, 4, 9")
