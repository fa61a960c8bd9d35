"""Checkers for the exercises of the page on character-level language models."""

import math

import torch

from seqlib.decoding import filter_logits
from seqlib.exercises.toolkit import (
    close,
    expect,
    expect_tensor,
    passed,
    require_callable,
    run_attempt,
)


def _cases() -> list:
    """(description, logits, p) on which to compare: a hand-made distribution where the
    nucleus is easy to work out, random logits of a batch, a batch with two leading
    dimensions, and the extremes (a p so small that only the top token is kept, p = 1)."""
    generator = torch.Generator().manual_seed(606)
    probabilities = torch.tensor([[0.05, 0.5, 0.15, 0.3]], dtype=torch.float64)
    cases = [("probabilities (0.05, 0.5, 0.15, 0.3)", probabilities.log(), 0.7)]
    random = torch.randn(4, 12, generator=generator, dtype=torch.float64) * 2  # (B, V)
    cases += [("random logits (4, 12)", random, p) for p in (0.5, 0.9)]
    cases.append(("random logits (2, 3, 9)",
                  torch.randn(2, 3, 9, generator=generator, dtype=torch.float64) * 2, 0.8))
    cases += [("random logits (4, 12)", random, 0.01), ("random logits (4, 12)", random, 1.0)]
    return cases


def _kept(logits: torch.Tensor) -> torch.Tensor:
    return logits > -math.inf


def _check_kept(what: str, keep: torch.Tensor, keep_ref: torch.Tensor) -> None:
    """The tokens kept are the nucleus's, or an ExerciseError naming a row that differs, its
    tokens and how."""
    if torch.equal(keep, keep_ref):
        return
    n, n_ref = keep.sum(-1), keep_ref.sum(-1)  # tokens kept per row
    row = tuple(int(i) for i in (n != n_ref).nonzero()[0]) if (n != n_ref).any() \
        else tuple(int(i) for i in (keep != keep_ref).any(-1).nonzero()[0])
    fewer, more = bool((n < n_ref).any()), bool((n > n_ref).any())
    wrong = (f"{what}: row {row} keeps {int(n[row])} token(s), expected {int(n_ref[row])}, "
             f"positions {keep[row].nonzero().flatten().tolist()} instead of "
             f"{keep_ref[row].nonzero().flatten().tolist()}")
    expect(not (fewer and not more), f"{wrong}: kept fewer tokens than the nucleus: keep the "
                                     "token that takes the running total past top_p as well; "
                                     "a row always keeps its top token")
    expect(not (more and not fewer), f"{wrong}: kept more tokens than the nucleus: stop at the "
                                     "first token with which the running total reaches top_p")
    expect(not torch.equal(n, n_ref), f"{wrong}: the right number of tokens, but not the most "
                                      "probable ones: rank the tokens by probability, then set "
                                      "-inf at their original positions")
    expect(torch.equal(keep, keep_ref), wrong)


def check_top_p(attempt) -> None:
    """Check `attempt(logits, top_p) -> logits`, nucleus (top-p) filtering: for logits
    (..., V) and 0 < top_p <= 1, the same logits with every token outside the nucleus set to
    -inf. The nucleus of a row is its most probable tokens, taken in order of probability
    until their total probability reaches top_p; so it always holds at least the most
    probable token, and the token that takes the total past top_p is kept. Compared with
    seqlib.decoding.filter_logits(logits, top_p=top_p)."""
    require_callable(attempt, "top_p_filter(logits, top_p) -> logits")
    for description, logits, p in _cases():
        what = f"{description}, top_p = {p}"
        before = logits.clone()
        got = run_attempt(attempt, logits, p, what=what)
        expected = filter_logits(logits, top_p=p)
        expect(torch.equal(logits, before), f"{what}: your function changed its input logits "
                                            "in place; return a new tensor")
        expect_tensor(f"{what}: the result", got, logits.shape, why="the shape of the logits")
        got = got.detach().double()
        keep, keep_ref = _kept(got), _kept(expected)
        dropped = keep_ref.logical_not()
        large = bool(dropped.any()) and bool((got[dropped] < -1e4).all()) \
            and not bool((got[dropped] == -math.inf).all())  # instead of -inf
        expect(not large, f"{what}: set the tokens outside the nucleus to -inf (float('-inf')), "
                          "not to a large negative number")
        _check_kept(what, keep, keep_ref)
        expect(close(got[keep], expected[keep_ref], atol=1e-12, rtol=0),
               f"{what}: the right tokens are kept, but their logits changed; return the kept "
               "logits unchanged (sampling renormalises them)")
        expect(bool((got[~keep] == -math.inf).all()),
               f"{what}: the filtered-out tokens should be -inf")
    passed("nucleus (top-p) filtering equals seqlib.decoding.filter_logits on 6 cases, "
           "batched and unbatched, from top_p = 0.01 to 1")
