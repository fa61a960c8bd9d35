"""Checkers for the exercises of the page on length generalisation."""

import torch
from torch import nn

from seqlib.exercises.toolkit import (
    expect,
    expect_tensor,
    passed,
    require_callable,
    run_attempt,
    seeded,
)
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
        what = f"reverse(model, x of shape {(6, n)})"
        got = run_attempt(reverse, reading, x, symbols, what=what)
        expect_tensor(what, got, (6, n), why="one answer token per symbol")
        expect(sum(reading.reads) <= 2 * n + 1,
               f"for n = {n} the model read {sum(reading.reads)} tokens in calls of "
               f"{reading.reads}, but [x, SEP] and the answer are {2 * n + 1}: carry the state "
               f"instead of reading the prefix again")
        wrong = ((got != expected).any(0).nonzero().flatten() + 1).tolist()  # from 1
        expect(not wrong, f"for n = {n} the answer differs from the greedy one at answer "
                          f"positions {wrong}: after [x, SEP], feed back each most likely "
                          f"token with the state")
    passed("the answers agree with greedy decoding, each token read once, for n = 1, 4, 9")
